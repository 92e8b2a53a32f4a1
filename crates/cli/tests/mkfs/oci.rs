//! `ferrofs mkfs IMAGE oci:DIR:REF`: an OCI image layout made by umoci with
//! three layers (a base tree; umoci's diff of deletions, a file replaced
//! by a directory and a directory by a file, modified files; a hand-made
//! layer with an opaque directory, whiteouts and hard links, one to a
//! lower layer's file) is built
//! into an image that, mounted by the kernel, equals `umoci unpack`'s
//! rootfs; the same layout with zstd and with plain tar layers, and
//! behind an image index, gives the same tree; fsck.erofs 1.9.4 accepts
//! the images. A corrupt blob, a missing blob, an unknown ref, an image
//! index without linux/amd64, a config whose diff_id does not match a
//! layer's tar stream and an unknown layer media type fail with an
//! error naming them, and leave no image behind.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::mount::{can_mount, LoopDev, LoopMount};
use ferrofs_testkit::tools;

use crate::FERROFS;
use ferrofs_testkit::process::sh;

/// Makes the layout `L` (tags `base` and `v2`) in the current directory
/// and `umoci unpack`s `v2` into `X`.
const MAKE: &str = r#"
umoci init --layout L
umoci new --image L:base
umoci unpack --image L:base B >/dev/null
R=B/rootfs
mkdir -p $R/etc $R/usr/bin $R/var/lib/app $R/opaque/sub $R/gone/deep $R/swap/was-dir
echo hello > $R/etc/hosts
for i in $(seq 3000); do echo "line $i"; done > $R/usr/bin/tool
chmod 4755 $R/usr/bin/tool
ln $R/usr/bin/tool $R/usr/bin/tool-link
ln -s ../usr/bin/tool $R/etc/tool-sym
echo old > $R/opaque/a; echo old > $R/opaque/sub/b
echo x > $R/gone/deep/f; echo y > $R/delme; echo kept > $R/keep
echo file > $R/swap/was-file; echo z > $R/swap/was-dir/inner
setfattr -n user.note -v base $R/etc/hosts
chown 1000:1001 $R/var/lib/app; chmod 1777 $R/var/lib/app
mkfifo $R/var/fifo
touch -h -d @1600000000 $R/etc/tool-sym
umoci repack --image L:base B
umoci unpack --image L:base C >/dev/null
R=C/rootfs
rm -rf $R/gone $R/delme
rm $R/swap/was-file; mkdir $R/swap/was-file; echo now-dir > $R/swap/was-file/f
rm -rf $R/swap/was-dir; echo now-file > $R/swap/was-dir
echo changed >> $R/etc/hosts; chmod 600 $R/etc/hosts
setfattr -n user.note -v v2 $R/etc/hosts
umoci repack --image L:v2 C
python3 - <<'PY'
import io, tarfile
def add(t, name, kind=tarfile.REGTYPE, data=b"", **kw):
    i = tarfile.TarInfo(name); i.type = kind; i.mtime = 1700000000
    i.mode = kw.get("mode", 0o644); i.size = len(data)
    i.linkname = kw.get("link", "")
    t.addfile(i, io.BytesIO(data) if data else None)
with tarfile.open("layer3.tar", "w", format=tarfile.PAX_FORMAT) as t:
    add(t, "opaque/", tarfile.DIRTYPE, mode=0o750)
    add(t, "opaque/c", data=b"new\n")
    add(t, "opaque/.wh..wh..opq")
    add(t, "opaque/d", tarfile.LNKTYPE, link="opaque/c")
    add(t, "etc/.wh.tool-sym")
    add(t, "usr/bin/tool-link2", tarfile.LNKTYPE, link="usr/bin/tool")
    add(t, "keep", data=b"rewritten\n", mode=0o640)
PY
umoci raw add-layer --image L:v2 layer3.tar
umoci unpack --image L:v2 X >/dev/null
"#;

/// `python3 - SRC DST TAG MODE`: copies the layout SRC to DST with the
/// layers of TAG's manifest recompressed (`zstd`, `tar`) or given an
/// unknown media type (`badtype`), or with a wrong diff_id for the
/// second layer in the config (`diffid`), or with only an image index named
/// `multi` pointing at TAG's manifest (`index`, `index-arm`: see below).
const REWRITE: &str = r#"
import gzip, hashlib, json, os, shutil, subprocess, sys
src, dst, tag, mode = sys.argv[1:5]
shutil.copytree(src, dst)
def put(data):
    h = hashlib.sha256(data).hexdigest()
    with open(f"{dst}/blobs/sha256/{h}", "wb") as f:
        f.write(data)
    return "sha256:" + h, len(data)
def get(d):
    return open(f"{dst}/blobs/sha256/{d.split(':')[1]}", "rb").read()
idx = json.load(open(f"{dst}/index.json"))
named = lambda t: [m for m in idx["manifests"]
                   if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == t][0]
desc = named(tag)
if mode.startswith("index"):
    # An image index with TAG's manifest for linux/amd64 (or, for
    # `index-arm`, linux/arm) and base's for linux/arm64, as the only entry.
    arch = "arm" if mode == "index-arm" else "amd64"
    base = dict(named("base"), platform={"os": "linux", "architecture": "arm64"})
    mine = dict(desc, platform={"os": "linux", "architecture": arch})
    for m in (base, mine):
        m.pop("annotations")
    sub = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
           "manifests": [base, mine]}
    d, n = put(json.dumps(sub).encode())
    idx["manifests"] = [{"mediaType": sub["mediaType"], "digest": d, "size": n,
                         "annotations": {"org.opencontainers.image.ref.name": "multi"}}]
    json.dump(idx, open(f"{dst}/index.json", "w"))
    sys.exit(0)
man = json.loads(get(desc["digest"]))
if mode == "diffid":
    cfg = json.loads(get(man["config"]["digest"]))
    cfg["rootfs"]["diff_ids"][1] = "sha256:" + "0" * 64
    man["config"]["digest"], man["config"]["size"] = put(json.dumps(cfg).encode())
    mode = "keep"
for l in ([] if mode == "keep" else man["layers"]):
    raw = gzip.decompress(get(l["digest"]))
    base = "application/vnd.oci.image.layer.v1.tar"
    if mode == "zstd":
        data = subprocess.run(["zstd", "-q", "-c"], input=raw, capture_output=True, check=True).stdout
        l["mediaType"] = base + "+zstd"
    elif mode == "tar":
        data, l["mediaType"] = raw, base
    else:
        data, l["mediaType"] = get(l["digest"]), base + "+lz4"
    l["digest"], l["size"] = put(data)
desc["digest"], desc["size"] = put(json.dumps(man).encode())
json.dump(idx, open(f"{dst}/index.json", "w"))
"#;

fn have_umoci() -> bool {
    Command::new("umoci").arg("--version").output().is_ok()
}

/// Why the tests that build layouts and mount images cannot run here.
fn skip_reason() -> Option<String> {
    if !have_umoci() {
        return Some("umoci is not installed".into());
    }
    can_mount().err()
}

/// `ferrofs mkfs --layer-images WORK/layers WORK/merged.img oci:WORK/L:v2`.
fn layer_images(work: &Path) -> std::process::Output {
    Command::new(FERROFS)
        .args(["mkfs", "--quiet", "--layer-images"])
        .arg(work.join("layers"))
        .arg(work.join("merged.img"))
        .arg(format!("oci:{}:v2", work.join("L").display()))
        .output()
        .unwrap()
}

/// The layout (and umoci's unpacked rootfs) in a fresh directory.
fn make_layout(name: &str) -> Result<PathBuf, String> {
    make_layout_with(name, MAKE)
}

/// The layout `script` makes (MAKE or a variant) in a fresh directory.
fn make_layout_with(name: &str, script: &str) -> Result<PathBuf, String> {
    let work = ferrofs_testkit::work_dir!(name);
    sh(&format!("cd {} && {script}", work.display()))?;
    fs::write(work.join("rewrite.py"), REWRITE).map_err(|e| e.to_string())?;
    Ok(work)
}

fn rewrite(work: &Path, dst: &str, mode: &str) -> Result<(), String> {
    sh(&format!(
        "cd {} && python3 rewrite.py L {dst} v2 {mode}",
        work.display()
    ))
    .map(|_| ())
}

#[test]
fn oci_layout_equals_umoci_unpack() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let work = make_layout("mkfs_oci").expect("making the layout with umoci");
    rewrite(&work, "Lzstd", "zstd").expect("zstd layout");
    rewrite(&work, "Ltar", "tar").expect("plain layout");
    rewrite(&work, "Lindex", "index").expect("image index layout");
    let expected = work.join("X/rootfs");
    let fsck = tools::fsck_next();
    let mut failures = Vec::new();
    let cases: [(&str, &str, &[&str]); 5] = [
        ("gzip", "L:v2", &[]),
        ("zstd", "Lzstd:v2", &[]),
        ("tar", "Ltar:v2", &[]),
        // The image index's linux/amd64 manifest (the only entry: no ref).
        ("index", "Lindex", &[]),
        ("gzip-lz4hc", "L:v2", &["-zlz4hc", "-Efragments,dedupe"]),
    ];
    for (name, layout, extra) in cases {
        let img = work.join(format!("{name}.img"));
        let src = format!("oci:{}", work.join(layout).display());
        let out = Command::new(FERROFS)
            .args(["mkfs", "--quiet"])
            .args(extra)
            .arg(&img)
            .arg(&src)
            .output()
            .unwrap();
        if !out.status.success() {
            failures.push(format!(
                "{name}: mkfs failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        }
        let m = LoopMount::new(&img, &[]).expect("mount");
        // umoci gives the rootfs directory itself mode 0755 root:root and
        // the time it unpacked at; the layers have no entry for it.
        let opts = CompareOptions {
            skip_root_mtime: true,
            skip_root_mode_owner: true,
            ..CompareOptions::strict()
        };
        let diffs = compare::compare_trees(&expected, m.path(), &opts);
        m.unmount().expect("unmount");
        if !diffs.is_empty() {
            failures.push(format!(
                "{name}: {} differences: {:?}",
                diffs.len(),
                &diffs[..diffs.len().min(8)]
            ));
        }
        match &fsck {
            Some(f) => {
                if let Err(e) = f.run(&[img.as_os_str()]) {
                    failures.push(format!("{name}: {} rejects the image: {e}", f.describe()));
                }
            }
            None => println!("fsck.erofs 1.9.4 not found: not run"),
        }
    }
    // Sanity: the tree really has what the layers did.
    assert!(expected.join("swap/was-file/f").is_file());
    assert!(expected.join("opaque/c").is_file() && !expected.join("opaque/a").exists());
    assert!(!expected.join("gone").exists() && !expected.join("etc/tool-sym").exists());
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Runs mkfs on `src`, expecting failure with all of `needles` in its
/// message and no image written.
fn fails(work: &Path, src: &str, needles: &[&str]) -> Option<String> {
    let img = work.join("bad.img");
    let out = Command::new(FERROFS)
        .args(["mkfs", "--quiet"])
        .arg(&img)
        .arg(src)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        return Some(format!("{src}: mkfs succeeded"));
    }
    if img.exists() {
        return Some(format!("{src}: an image was left behind"));
    }
    if err.contains("panicked") || !needles.iter().all(|n| err.contains(n)) {
        return Some(format!("{src}: error {err:?} lacks {needles:?}"));
    }
    None
}

#[test]
fn oci_layout_errors_name_the_cause() {
    if !have_umoci() {
        println!("skipped: umoci is not installed");
        return;
    }
    if !ferrofs_testkit::is_root() {
        // umoci unpacks (and the layout's tree is made) with owners.
        println!("skipped: not root");
        return;
    }
    let work = make_layout("mkfs_oci_errors").expect("making the layout with umoci");
    let l = work.join("L");
    let lay = |d: &str, r: &str| format!("oci:{}{r}", work.join(d).display());
    let mut failures = Vec::new();
    // Two manifests and no ref: the refs are listed.
    failures.extend(fails(&work, &lay("L", ""), &["2 manifests", "base", "v2"]));
    failures.extend(fails(
        &work,
        &lay("L", ":nope"),
        &["no manifest named \"nope\"", "base, v2"],
    ));
    failures.extend(fails(
        &work,
        &format!("oci:{}", work.join("X").display()),
        &["not an OCI image layout"],
    ));
    rewrite(&work, "Larm", "index-arm").unwrap();
    failures.extend(fails(
        &work,
        &lay("Larm", ":multi"),
        &["0 linux/amd64 manifests", "linux/arm64, linux/arm"],
    ));
    rewrite(&work, "Ldiffid", "diffid").unwrap();
    failures.extend(fails(
        &work,
        &lay("Ldiffid", ":v2"),
        &["layer 2 of 3", "the config's diff_id is sha256:0000"],
    ));
    rewrite(&work, "Lbad", "badtype").unwrap();
    failures.extend(fails(
        &work,
        &lay("Lbad", ":v2"),
        &["unsupported media type", "tar+lz4"],
    ));
    // The layers of v2, bottom first.
    let manifest = |dir: &Path| -> Vec<String> {
        let out = sh(&format!(
            "cd {} && python3 -c 'import json; i=json.load(open(\"index.json\")); \
             d=[m for m in i[\"manifests\"] if m[\"annotations\"][\"org.opencontainers.image.ref.name\"]==\"v2\"][0][\"digest\"]; \
             m=json.load(open(\"blobs/sha256/\"+d[7:])); print(\" \".join(l[\"digest\"][7:] for l in m[\"layers\"]))'",
            dir.display()
        ))
        .unwrap();
        out.split_whitespace().map(String::from).collect()
    };
    let layers = manifest(&l);
    assert_eq!(layers.len(), 3, "{layers:?}");
    for (mode, dir) in [
        ("corrupt", "Lcorrupt"),
        ("missing", "Lmissing"),
        ("corrupt-tar", "Lcorrupttar"),
    ] {
        let d = work.join(dir);
        if mode == "corrupt-tar" {
            rewrite(&work, dir, "tar").unwrap();
        } else {
            sh(&format!("cp -a {} {}", l.display(), d.display())).unwrap();
        }
        let hex = &manifest(&d)[1];
        let blob = d.join("blobs/sha256").join(hex);
        let needle = match mode {
            "missing" => {
                fs::remove_file(&blob).unwrap();
                "is missing"
            }
            _ => {
                // One byte changed in the middle of the second layer.
                let mut b = fs::read(&blob).unwrap();
                let mid = b.len() / 2;
                b[mid] ^= 0x40;
                fs::write(&blob, b).unwrap();
                "does not match its digest"
            }
        };
        failures.extend(fails(
            &work,
            &lay(dir, ":v2"),
            &[needle, hex.as_str(), "layer 2 of 3"],
        ));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `--layer-images DIR`: each layer of the image an EROFS image of its
/// own (whiteouts as overlayfs ones), IMAGE their merge whose data stays
/// in them: mounted by the kernel with the layer images as devices, it
/// equals `umoci unpack`'s rootfs and the image `oci:` alone builds (a
/// directory a layer has no entry for keeps the metadata of the layers
/// below), and fsck.erofs 1.9.4 accepts it and the layers. A hard
/// link to a lower layer's file (which no layer image of its own can
/// hold) fails naming it, leaving no merged image.
#[test]
fn oci_layer_images_merge_to_umoci_unpack() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    // Without layer 3's hard link to layer 1's file.
    let link = "    add(t, \"usr/bin/tool-link2\", tarfile.LNKTYPE, link=\"usr/bin/tool\")\n";
    assert!(MAKE.contains(link));
    let work = make_layout_with("mkfs_oci_layers", &MAKE.replace(link, "")).expect("layout");
    let (img, dir) = (work.join("merged.img"), work.join("layers"));
    let out = layer_images(&work);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let layers: Vec<PathBuf> = (1..=3)
        .map(|i| dir.join(format!("layer-{i}.img")))
        .collect();
    let loops: Vec<LoopDev> = layers.iter().map(|l| LoopDev::new(l).unwrap()).collect();
    let opts: Vec<String> = loops.iter().map(|d| format!("device={}", d.0)).collect();
    let refs: Vec<&str> = opts.iter().map(String::as_str).collect();
    let m = LoopMount::new(&img, &refs).expect("mount");
    let opts = CompareOptions {
        skip_root_mtime: true,
        skip_root_mode_owner: true,
        ..CompareOptions::strict()
    };
    let mut diffs = compare::compare_trees(&work.join("X/rootfs"), m.path(), &opts);
    // And it is what `oci:` alone builds, root included.
    let plain = work.join("plain.img");
    let st = Command::new(FERROFS)
        .args(["mkfs", "--quiet"])
        .arg(&plain)
        .arg(format!("oci:{}:v2", work.join("L").display()))
        .status()
        .unwrap();
    assert!(st.success());
    let p = LoopMount::new(&plain, &[]).expect("mount plain");
    diffs.extend(compare::compare_trees(
        p.path(),
        m.path(),
        &CompareOptions::strict(),
    ));
    assert!(diffs.is_empty(), "{diffs:#?}");
    drop((m, p, loops));
    if let Some(f) = tools::fsck_next() {
        let mut args: Vec<std::ffi::OsString> = layers
            .iter()
            .map(|l| format!("--device={}", l.display()).into())
            .collect();
        args.push(img.clone().into());
        f.run(&args).expect("fsck.erofs accepts the merged image");
        for l in &layers {
            f.run(&[l]).expect("fsck.erofs accepts a layer image");
        }
    }
    // The layout with the hard link across layers.
    let work = make_layout("mkfs_oci_layers_link").expect("layout");
    let img = work.join("merged.img");
    let out = layer_images(&work);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("usr/bin/tool-link2"),
        "{e}"
    );
    assert!(!img.exists());
}
