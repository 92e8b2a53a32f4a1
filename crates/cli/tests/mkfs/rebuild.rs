//! Rebuild mode: `ferrofs mkfs OUT L1.img L2.img L3.img` merges EROFS
//! images as overlayfs layers. Three layers (ferrofs's default build with
//! a sparse file and hard links; mkfs.erofs 1.9.4's with whiteouts, an
//! opaque directory, a directory replacing a file and the reverse; ferrofs
//! with lz4hc) are merged:
//! - files stay on the layers (inline tails copied into blocks of the
//!   new image), but for compressed and wholly inline ones, copied;
//! - with `--ovlfs-strip=1`, mounted by the kernel with `-o device=` for
//!   each layer, the image equals the kernel's overlayfs mount of the three
//!   layer mounts (contents and metadata);
//! - by default (whiteouts kept), overlayfs over its mount equals that
//!   too, and `ferrofs extract --device` and `ferrofs mount --device`
//!   (FUSE) give what the kernel shows;
//! - with `--clean=data` (through the mkfs.erofs drop-in, recompressed
//!   with lz4hc) the image mounts alone and equals the default one;
//! - fsck.erofs 1.9.4 (with `--device`) and `ferrofs fsck` accept them;
//! - the layers mkfs.erofs 1.9.4 can merge itself (uncompressed, no
//!   inline tails) give the tree its own rebuild gives;
//! - tar index layers (`mkfs.erofs --tar=i`, data in the archives, 512-byte
//!   blocks) merge into an image whose devices are the archives, equal to
//!   mkfs.erofs 1.9.4's merge and to overlayfs over the layers.
//!
//! Bad inputs fail with errors naming them and leave no image: a file
//! that is not an image, a directory among images, `--clean=rvsp`, a
//! layer of another block size, a truncated layer, a layer whose
//! directory names its parent; reading without the devices says which
//! device is missing, and `ferrofs mount` refuses to start.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::compare::{compare_trees, CompareOptions};
use ferrofs_testkit::fuse::FuseMount;
use ferrofs_testkit::mount::{can_mount, LoopDev, LoopMount};
use ferrofs_testkit::tools;
use ferrofs_testkit::verify::run_ok as run;

use super::FERROFS;

/// Writes the three layer trees `l1`, `l2`, `l3` in the current directory.
const LAYERS: &str = r#"
mkdir -p l1/etc l1/usr/bin l1/var/lib/app l1/opaque/sub l1/gone/deep l1/swap/was-dir
echo hello > l1/etc/hosts
for i in $(seq 3000); do echo "line $i"; done > l1/usr/bin/tool
chmod 4755 l1/usr/bin/tool
ln l1/usr/bin/tool l1/usr/bin/tool-link
ln -s ../usr/bin/tool l1/etc/tool-sym
echo old > l1/opaque/a; echo old > l1/opaque/sub/b
echo x > l1/gone/deep/f; echo y > l1/delme; echo kept > l1/keep
echo file > l1/swap/was-file; echo z > l1/swap/was-dir/inner
head -c 1048676 /dev/urandom > l1/big
head -c 8192 /dev/urandom > l1/aligned
truncate -s 3M l1/sparse; echo middle | dd of=l1/sparse bs=1 seek=1500000 conv=notrunc status=none
: > l1/empty
setfattr -n user.note -v base l1/etc/hosts
chown 1000:1001 l1/var/lib/app; chmod 1777 l1/var/lib/app
mkfifo l1/var/fifo
mkdir -p l2/opaque l2/swap/was-file l2/etc l2/newdir
mknod l2/gone c 0 0; mknod l2/delme c 0 0; mknod l2/nothing-here c 0 0
setfattr -n trusted.overlay.opaque -v y l2/opaque
echo new > l2/opaque/c
echo now-dir > l2/swap/was-file/f; echo now-file > l2/swap/was-dir
echo changed > l2/etc/hosts; chmod 600 l2/etc/hosts
setfattr -n user.note -v v2 l2/etc/hosts
head -c 100000 /dev/urandom > l2/newdir/x
mkdir -p l3/etc l3/usr/bin l3/opaque
echo rewritten > l3/keep; chmod 640 l3/keep
mknod l3/etc/tool-sym c 0 0
for i in $(seq 5000); do echo "new $i"; done > l3/usr/bin/new-tool
echo d > l3/opaque/d
for l in l1 l2 l3; do find $l -exec touch -h -d @1700000000 {} +; done
touch -d @1700000123 l3
"#;

/// `mkfs` runs of the binary under test (`ferrofs mkfs ARGS`).
fn mkfs(args: &[&str], paths: &[&Path]) -> Result<Vec<u8>, String> {
    run(Command::new(FERROFS).arg("mkfs").args(args).args(paths))
}

fn devices_args(layers: &[&Path]) -> Vec<String> {
    layers
        .iter()
        .map(|l| format!("--device={}", l.display()))
        .collect()
}

/// Every difference between `a` and `b`, prefixed with `what`.
fn diff(what: &str, a: &Path, b: &Path, opts: &CompareOptions, out: &mut Vec<String>) {
    for d in compare_trees(a, b, opts) {
        out.push(format!("{what}: {d}"));
    }
}

/// The kernel's mount of `img` with `layers` as its devices.
fn mount_with(img: &Path, loops: &[LoopDev]) -> std::io::Result<LoopMount> {
    let opts: Vec<String> = loops.iter().map(|d| format!("device={}", d.0)).collect();
    let refs: Vec<&str> = opts.iter().map(String::as_str).collect();
    LoopMount::new(img, &refs)
}

/// The work directory with the layer trees, mkfs.erofs and fsck.erofs
/// 1.9.x; `None` (with the reason printed) when the kernel, root or the
/// tools are missing.
fn setup(name: &str) -> Option<(PathBuf, tools::Mkfs, tools::Fsck)> {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return None;
    }
    let (Some(up), Some(fsck)) = (tools::mkfs_next(), tools::fsck_next()) else {
        println!("skipped: mkfs.erofs/fsck.erofs 1.9.x not found");
        return None;
    };
    let work = ferrofs_testkit::work_dir!(name);
    run(Command::new("bash")
        .args(["-e", "-c", LAYERS])
        .current_dir(&work))
    .expect("layer trees");
    Some((work, up, fsck))
}

/// Strict, but for the link count of directories (overlayfs gives a
/// merged one 1).
fn relaxed() -> CompareOptions {
    CompareOptions {
        compare_dir_nlink: false,
        ..CompareOptions::strict()
    }
}

/// Strict, but for the root's mode, owner and mtime (mkfs.erofs gives a
/// merged root mode 0777 and the build time).
fn root_aside() -> CompareOptions {
    CompareOptions {
        skip_root_mode_owner: true,
        skip_root_mtime: true,
        ..CompareOptions::strict()
    }
}

/// Merges `layers` into WORK/ours.img and, with mkfs.erofs 1.9.x, into
/// WORK/theirs.img; records where the kernel's mounts of the two (with
/// `loops` as devices) differ, the root aside. Returns the mount of ours.
fn same_as_upstream(
    up: &tools::Mkfs,
    work: &Path,
    layers: &[&Path],
    loops: &[LoopDev],
    f: &mut Vec<String>,
) -> LoopMount {
    let (ours, theirs) = (work.join("ours.img"), work.join("theirs.img"));
    mkfs(&["--quiet"], &[&[ours.as_path()], layers].concat()).expect("merge");
    run(Command::new(&up.path).arg("-d0").arg(&theirs).args(layers))
        .expect("mkfs.erofs 1.9.x merge");
    let a = mount_with(&theirs, loops).expect("mount mkfs.erofs's");
    let b = mount_with(&ours, loops).expect("mount ours");
    diff(
        "ours vs mkfs.erofs 1.9.x's",
        a.path(),
        b.path(),
        &root_aside(),
        f,
    );
    b
}

/// Records where the kernel's mount of `img` (with `loops` as devices)
/// differs from `expected`, an overlayfs mount of its layers.
fn equals_overlay(expected: &Path, img: &Path, loops: &[LoopDev], f: &mut Vec<String>) {
    let m = mount_with(img, loops).expect("mount");
    let what = format!("{} vs overlayfs", img.display());
    diff(&what, expected, m.path(), &relaxed(), f);
}

#[test]
fn layers_merge_as_overlayfs_stacks_them() {
    let Some((work, up, fsck)) = setup("rebuild_layers") else {
        return;
    };
    let p = |n: &str| work.join(n);
    let (l1, l2, l3) = (p("l1.img"), p("l2.img"), p("l3.img"));
    mkfs(&["--quiet"], &[&l1, &p("l1")]).expect("layer 1");
    run(Command::new(&up.path)
        .args(["-Enoinline_data", "-d0"])
        .arg(&l2)
        .arg(p("l2")))
    .expect("layer 2 (mkfs.erofs 1.9.4)");
    mkfs(&["--quiet", "-zlz4hc"], &[&l3, &p("l3")]).expect("layer 3");
    let layers = [l1.as_path(), l2.as_path(), l3.as_path()];
    let (merged, stripped) = (p("merged.img"), p("stripped.img"));
    let out = mkfs(&["--json"], &[&merged, &l1, &l2, &l3]).expect("merge");
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    // Layer 1's aligned, sparse (chunk-based, with holes), big and tool
    // (their inline tails copied to blocks of their own), layer 2's
    // etc/hosts, swap/was-dir, swap/was-file/f, newdir/x and opaque/c stay
    // on the layers; layer 3's new-tool (compressed), keep and opaque/d
    // (all inline) are copied.
    let l = &v["layers"];
    assert_eq!(l["indexed_files"].as_u64(), Some(9), "{v}");
    assert_eq!(l["tails"].as_u64(), Some(2), "{v}");
    assert_eq!(l["copied_files"].as_u64(), Some(3), "{v}");
    let why =
        serde_json::json!([{"why": "all inline", "files": 2}, {"why": "compressed", "files": 1}]);
    assert_eq!(l["copied_why"], why, "{v}");
    mkfs(&["--quiet", "--ovlfs-strip=1"], &[&stripped, &l1, &l2, &l3]).expect("merge, stripped");
    // The drop-in's --clean=data, recompressed.
    let link = work.join("mkfs.erofs");
    std::os::unix::fs::symlink(FERROFS, &link).unwrap();
    let clean = p("clean.img");
    run(Command::new(&link)
        .args(["--clean=data", "-zlz4hc", "--quiet"])
        .arg(&clean)
        .args(layers))
    .expect("drop-in --clean=data");

    let mut f = Vec::new();
    let loops: Vec<LoopDev> = layers.iter().map(|l| LoopDev::new(l).unwrap()).collect();
    // Copies: mount would reuse the loop devices above for the same files,
    // and a device an erofs mount holds cannot be another's extra device.
    let mounts: Vec<LoopMount> = layers
        .iter()
        .map(|l| {
            let copy = l.with_extension("ovl");
            fs::copy(l, &copy).unwrap();
            LoopMount::new(&copy, &[]).unwrap()
        })
        .collect();
    let ovl = LoopMount::overlay(&[mounts[2].path(), mounts[1].path(), mounts[0].path()])
        .expect("overlayfs of the layers");
    let relaxed = relaxed();
    equals_overlay(ovl.path(), &stripped, &loops, &mut f);
    let m = mount_with(&merged, &loops).expect("mount merged");
    let empty = p("empty");
    fs::create_dir(&empty).unwrap();
    let m_ovl = LoopMount::overlay(&[m.path(), &empty]).expect("overlayfs of merged");
    diff(
        "overlayfs of merged vs of the layers",
        ovl.path(),
        m_ovl.path(),
        &relaxed,
        &mut f,
    );
    drop(m_ovl);
    let strict = CompareOptions::strict();
    let c = LoopMount::new(&clean, &[]).expect("mount clean");
    diff(
        "--clean=data vs merged",
        m.path(),
        c.path(),
        &strict,
        &mut f,
    );
    // The whiteouts are there, the layers' hidden files are not.
    for (path, present) in [
        ("gone", true),
        ("delme", true),
        ("opaque/a", false),
        ("opaque/d", true),
    ] {
        if m.path().join(path).symlink_metadata().is_ok() != present {
            f.push(format!("merged: {path} should be there: {present}"));
        }
    }
    let devs = devices_args(&layers);
    let x = p("x");
    match run(Command::new(FERROFS)
        .arg("extract")
        .args(&devs)
        .arg(&merged)
        .arg(&x))
    {
        Ok(_) => diff("extract --device vs kernel", m.path(), &x, &strict, &mut f),
        Err(e) => f.push(format!("extract: {e}")),
    }
    {
        let refs: Vec<&str> = devs.iter().map(String::as_str).collect();
        let fuse = FuseMount::new(Path::new(FERROFS), merged.as_os_str(), &p("fuse"), &refs);
        diff(
            "FUSE --device vs kernel",
            m.path(),
            &fuse.dir,
            &strict,
            &mut f,
        );
        fuse.unmount();
    }
    for img in [&merged, &stripped] {
        if let Err(e) = run(Command::new(FERROFS).arg("fsck").args(&devs).arg(img)) {
            f.push(format!("ferrofs fsck {}: {e}", img.display()));
        }
        if let Err(e) = run(Command::new(&fsck.path).args(&devs).arg(img)) {
            f.push(format!(
                "fsck.erofs {} {}: {e}",
                fsck.version,
                img.display()
            ));
        }
    }
    if let Err(e) = run(Command::new(&fsck.path).arg(&clean)) {
        f.push(format!("fsck.erofs {} clean: {e}", fsck.version));
    }
    drop((c, m, ovl, mounts));

    // What mkfs.erofs 1.9.4 merges itself: its layers without inline tails.
    let l1u = p("l1u.img");
    run(Command::new(&up.path)
        .args(["-Enoinline_data", "-d0"])
        .arg(&l1u)
        .arg(p("l1")))
    .expect("layer 1 (mkfs.erofs)");
    let loops2 = [LoopDev::new(&l1u).unwrap(), LoopDev::new(&l2).unwrap()];
    let b = same_as_upstream(&up, &work, &[&l1u, &l2], &loops2, &mut f);
    let st = fs::metadata(b.path().join("big")).unwrap();
    if st.len() != 1048676 {
        f.push(format!("big: {} bytes", st.len()));
    }
    drop((b, loops2, loops));
    assert!(f.is_empty(), "{}", f.join("\n"));
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

#[test]
fn bad_layers_are_named() {
    let work = ferrofs_testkit::work_dir!("rebuild_bad");
    let p = |n: &str| work.join(n);
    fs::create_dir_all(p("t/d")).unwrap();
    fs::write(p("t/d/f"), b"data\n".repeat(2000)).unwrap();
    fs::write(p("notes.txt"), b"not an image\n".repeat(200)).unwrap();
    let (l1, l2) = (p("l1.img"), p("l2.img"));
    mkfs(&["--quiet"], &[&l1, &p("t")]).expect("layer");
    mkfs(&["--quiet", "-Enoinline_data"], &[&l2, &p("t")]).expect("layer");
    let out = p("out.img");
    let fails = |args: &[&str], paths: &[&Path], want: &[&str]| {
        let e = mkfs(args, paths).expect_err("must fail");
        for w in want {
            assert!(e.contains(w), "{args:?} {paths:?}: {e:?} lacks {w:?}");
        }
        assert!(!out.exists(), "{args:?}: an image was left behind");
    };
    fails(
        &[],
        &[&out, &l1, &p("notes.txt")],
        &["notes.txt", "not an EROFS image"],
    );
    fails(
        &[],
        &[&out, &p("t"), &l1],
        &["more than one SOURCE", "rebuild"],
    );
    fails(&["--clean=rvsp"], &[&out, &l1], &["--clean=rvsp", "not"]);
    let small = p("small.img");
    mkfs(&["--quiet", "-b", "1024"], &[&small, &p("t")]).expect("1 KiB layer");
    fails(
        &[],
        &[&out, &l1, &small],
        &["small.img", "block size is 1024"],
    );

    // A truncated layer, and one whose directory names its parent (a loop).
    let cut = p("cut.img");
    let bytes = fs::read(&l1).unwrap();
    fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    fails(&[], &[&out, &l2, &cut], &["cut.img"]);
    fs::create_dir_all(p("lt/a/b/c")).unwrap();
    let looped = p("loop.img");
    mkfs(&["--quiet"], &[&looped, &p("lt")]).expect("layer");
    let dump = |path: &str| -> serde_json::Value {
        let o = run(Command::new(FERROFS)
            .args(["dump", "--json", "--path", path])
            .arg(&looped))
        .unwrap();
        serde_json::from_slice(&o).unwrap()
    };
    // The third entry of /a/b (after . and ..) is c: make it /a.
    let at = dump("/a/b")["extents"][0]["map"]["pos"].as_u64().unwrap() + 24;
    let nid = dump("/a")["nid"].as_u64().unwrap();
    let mut img = fs::read(&looped).unwrap();
    img[at as usize..at as usize + 8].copy_from_slice(&nid.to_le_bytes());
    fs::write(&looped, img).unwrap();
    fails(
        &[],
        &[&out, &looped],
        &["loop.img", "/a/b/c", "named twice"],
    );

    // Data on devices that are not given.
    let merged = p("merged.img");
    mkfs(&["--quiet"], &[&merged, &l1, &l2]).expect("merge");
    let cat = |devs: &[&Path]| {
        run(Command::new(FERROFS)
            .arg("cat")
            .args(devices_args(devs))
            .arg(&merged)
            .arg("/d/f"))
    };
    assert_eq!(
        cat(&[&l1, &l2]).expect("cat with devices"),
        b"data\n".repeat(2000)
    );
    let e = cat(&[]).expect_err("cat without devices");
    assert!(
        e.contains("extra device 2") && e.contains("--device"),
        "{e}"
    );
    let e = cat(&[&l1]).expect_err("cat with one device");
    assert!(e.contains("2 extra devices but 1 were given"), "{e}");
    fs::create_dir_all(p("mnt")).unwrap();
    let e = run(Command::new(FERROFS)
        .arg("mount")
        .arg(&merged)
        .arg(p("mnt")))
    .expect_err("mount without devices");
    assert!(
        e.contains("2 extra devices") && e.contains("--device"),
        "{e}"
    );
    // fsck lists the problem on standard output, and fails.
    let o = Command::new(FERROFS)
        .arg("fsck")
        .arg(&merged)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "fsck without devices passed");
    assert!(e.contains("/d/f") && e.contains("--device"), "{e}");
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// Layers in mkfs.erofs 1.9.4's tar index mode (`--tar=i`: 512-byte
/// blocks, file data left in the tar archive, the layer's one extra
/// device), containerd's layers: the merge indexes the archives
/// themselves, its devices are the two tars, and it equals both
/// mkfs.erofs 1.9.4's own merge and overlayfs over the layers.
#[test]
fn tar_index_layers_keep_their_archives() {
    let Some((work, up, fsck)) = setup("rebuild_tar_index") else {
        return;
    };
    let p = |n: &str| work.join(n);
    let mut tars = Vec::new();
    let mut layers = Vec::new();
    for l in ["l1", "l2"] {
        let tar = p(&format!("{l}.tar"));
        run(Command::new("tar")
            .arg("-C")
            .arg(p(l))
            .args(["--xattrs", "--xattrs-include=*", "-cf"])
            .arg(&tar)
            .arg("."))
        .expect("tar");
        let img = p(&format!("{l}.img"));
        run(Command::new(&up.path)
            .args(["--tar=i", "-d0"])
            .arg(&img)
            .arg(&tar))
        .expect("mkfs.erofs --tar=i");
        tars.push(tar);
        layers.push(img);
    }
    let mut f = Vec::new();
    let tar_refs: Vec<&Path> = tars.iter().map(PathBuf::as_path).collect();
    let loops: Vec<LoopDev> = tars.iter().map(|t| LoopDev::new(t).unwrap()).collect();
    let a = same_as_upstream(&up, &work, &[&layers[0], &layers[1]], &loops, &mut f);
    for img in [p("ours.img"), p("theirs.img")] {
        let devs = devices_args(&tar_refs);
        if let Err(e) = run(Command::new(&fsck.path).args(devs).arg(&img)) {
            f.push(format!("fsck.erofs {}: {e}", img.display()));
        }
    }
    if let Err(e) = run(Command::new(FERROFS)
        .arg("fsck")
        .args(devices_args(&tar_refs))
        .arg(p("ours.img")))
    {
        f.push(format!("ferrofs fsck: {e}"));
    }
    // Each layer on a copy of its archive (a device in use by one mount
    // cannot serve another), under overlayfs, with the whiteouts left out.
    let stripped = p("stripped.img");
    mkfs(
        &["--quiet", "--ovlfs-strip=1"],
        &[&stripped, &layers[0], &layers[1]],
    )
    .expect("strip");
    let copies: Vec<LoopDev> = tars
        .iter()
        .map(|t| {
            let c = t.with_extension("copy");
            fs::copy(t, &c).unwrap();
            LoopDev::new(&c).unwrap()
        })
        .collect();
    let m1 = mount_with(&layers[0], &copies[..1]).expect("mount layer 1");
    let m2 = mount_with(&layers[1], &copies[1..]).expect("mount layer 2");
    let ovl = LoopMount::overlay(&[m2.path(), m1.path()]).expect("overlayfs");
    equals_overlay(ovl.path(), &stripped, &loops, &mut f);
    drop((ovl, m2, m1, a, copies, loops));
    assert!(f.is_empty(), "{}", f.join("\n"));
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}
