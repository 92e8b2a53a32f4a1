//! Registries (#59): the CNCF registry (distribution v3.1.2) on
//! 127.0.0.1, open, with HTTP Basic (htpasswd) and with Bearer tokens from
//! a token service that signs JWTs; skopeo puts the test images there.
//! `mkfs IMAGE docker://…` must build exactly the image `mkfs IMAGE
//! oci:…` builds from the same layout (by tag and by digest); `convert`
//! writes what containerd's converter writes (media types, diff_ids,
//! `os.features`, containerd's UUID rule) to a layout and to the
//! registry; credentials are taken from `--authfile` and refused ones
//! reported, never printed; a read-only user's push moves no tag. The
//! hostile answers of a fake registry (`hostile.rs`) are refused by name;
//! access (`access.rs`), pushes that go wrong (`push.rs`) and lazy mounts
//! (`lazy.rs`) have modules of their own.
//! Skipped, with the reason, without the registry, skopeo or python3.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ferrofs_testkit::registry::{registry_bin_dir, Access, CncfRegistry};

mod access;
mod hostile;
mod lazy;
mod push;

const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

/// Writes an OCI layout at `DIR` with image `v1`: two gzip layers (the
/// second deletes a file with a whiteout and adds one), Docker-style
/// history, a config with diff_ids.
const MAKE_LAYOUT: &str = r#"
import gzip, hashlib, io, json, os, sys, tarfile
out = sys.argv[1]
os.makedirs(out + "/blobs/sha256", exist_ok=True)
def blob(data):
    d = hashlib.sha256(data).hexdigest()
    open(out + "/blobs/sha256/" + d, "wb").write(data)
    return "sha256:" + d, len(data)
def layer(entries):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, data, mode in entries:
            i = tarfile.TarInfo(name); i.type = kind; i.mode = mode; i.mtime = 1700000000
            i.uid = 1000 if name.endswith("owned") else 0
            if kind == tarfile.SYMTYPE: i.linkname = data.decode(); data = b""
            i.size = len(data)
            t.addfile(i, io.BytesIO(data) if data else None)
    tar = raw.getvalue()
    return tar, gzip.compress(tar, mtime=0)
big = b"".join(b"line %d of a text file\n" % i for i in range(20000))
l1, z1 = layer([("etc/", tarfile.DIRTYPE, b"", 0o755), ("etc/hostname", tarfile.REGTYPE, b"box\n", 0o644),
    ("usr/", tarfile.DIRTYPE, b"", 0o755), ("usr/big.txt", tarfile.REGTYPE, big, 0o644),
    ("usr/owned", tarfile.REGTYPE, b"mine\n", 0o600), ("usr/link", tarfile.SYMTYPE, b"big.txt", 0o777),
    ("gone", tarfile.REGTYPE, b"bye\n", 0o644)])
l2, z2 = layer([(".wh.gone", tarfile.REGTYPE, b"", 0o644), ("etc/new", tarfile.REGTYPE, b"new\n", 0o644)])
layers = []
for tar, z in ((l1, z1), (l2, z2)):
    d, n = blob(z)
    layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": n,
                   "annotations": {"test.kept": "yes"}})
config = {"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/usr/bin"], "Image": "sha256:dummy"},
          "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(l).hexdigest() for l in (l1, l2)]},
          "history": [{"created_by": "one"}, {"created_by": "two"}]}
cd, cn = blob(json.dumps(config).encode())
manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cn},
            "layers": layers}
md, mn = blob(json.dumps(manifest).encode())
json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
           "digest": md, "size": mn, "annotations": {"org.opencontainers.image.ref.name": "v1"}}]},
          open(out + "/index.json", "w"))
open(out + "/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
print(md)
"#;

/// Why these tests cannot run here.
fn skip_reason() -> Option<String> {
    if registry_bin_dir().is_none() {
        return Some("the CNCF registry is not installed (upstream-tools --registry)".into());
    }
    for tool in ["skopeo", "python3", "openssl"] {
        if !Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(format!("{tool} is not installed"));
        }
    }
    None
}

macro_rules! skip_unless_ready {
    () => {
        if let Some(why) = $crate::skip_reason() {
            println!("skipped: {why}");
            return;
        }
    };
}
pub(crate) use skip_unless_ready;

/// Makes the layout at `dir`; returns its manifest digest.
fn make_layout(dir: &Path) -> String {
    let out = Command::new("python3")
        .args(["-c", MAKE_LAYOUT])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `skopeo copy oci:LAYOUT:v1 docker://ADDR/REPO:v1` (as `user`).
fn skopeo_push(layout: &Path, reg: &CncfRegistry, repo: &str, user: Option<(&str, &str)>) {
    let mut cmd = Command::new("skopeo");
    cmd.args(["copy", "--dest-tls-verify=false"]);
    if let Some((u, p)) = user {
        cmd.arg(format!("--dest-creds={u}:{p}"));
    }
    let out = cmd
        .arg(format!("oci:{}:v1", layout.display()))
        .arg(format!("docker://{}/{repo}:v1", reg.addr))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "skopeo: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ferrofs(args: &[&str]) -> Output {
    let out = Command::new(FERROFS)
        .args(args)
        .env_remove("REGISTRY_AUTH_FILE")
        .env("HOME", "/nonexistent-home")
        .env_remove("DOCKER_CONFIG")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    out
}

fn ok(args: &[&str]) -> String {
    let out = ferrofs(args);
    assert!(
        out.status.success(),
        "ferrofs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn err(args: &[&str]) -> String {
    let out = ferrofs(args);
    assert!(!out.status.success(), "ferrofs {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Files left in `dir` whose names start with `.ferrofs-`.
fn leftovers(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".ferrofs-")
        })
        .collect()
}

#[test]
fn mkfs_from_a_registry_equals_mkfs_from_the_layout() {
    skip_unless_ready!();
    let work = ferrofs_testkit::work_dir!("registry_pull");
    let layout = work.join("L");
    let digest = make_layout(&layout);
    let reg = CncfRegistry::start(&registry_bin_dir().unwrap(), &work, Access::Open);
    skopeo_push(&layout, &reg, "team/app", None);
    let opts = ["-zlz4hc", "-T", "1700000000", "-Eztailpacking"];
    let want = work.join("from-layout.img");
    let mut a: Vec<String> = vec![
        "mkfs".into(),
        s(&want),
        format!("oci:{}:v1", layout.display()),
    ];
    a.extend(opts.iter().map(|o| o.to_string()));
    ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    // skopeo copies the manifest as it is: the same digest in the registry.
    for (name, reference) in [
        ("by-tag.img", format!("docker://{}/team/app:v1", reg.addr)),
        (
            "by-digest.img",
            format!("docker://{}/team/app@{digest}", reg.addr),
        ),
    ] {
        let img = work.join(name);
        let mut a: Vec<String> = vec!["mkfs".into(), s(&img), reference.clone()];
        a.extend(opts.iter().map(|o| o.to_string()));
        ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            fs::read(&img).unwrap(),
            fs::read(&want).unwrap(),
            "{reference}: not the image the layout gives"
        );
    }
    assert!(leftovers(&work).is_empty(), "{:?}", leftovers(&work));
    // A digest the registry does not have, a tag it does not have.
    let bad = format!("docker://{}/team/app@sha256:{}", reg.addr, "0".repeat(64));
    let e = err(&["mkfs", &s(&work.join("x.img")), &bad]);
    assert!(
        e.contains("no such manifest") && e.contains("team/app"),
        "{e}"
    );
    let e = err(&[
        "mkfs",
        &s(&work.join("x.img")),
        &format!("docker://{}/team/app:nope", reg.addr),
    ]);
    assert!(e.contains("team/app:nope") && e.contains("404"), "{e}");
    assert!(!work.join("x.img").exists());
    assert!(leftovers(&work).is_empty(), "{:?}", leftovers(&work));
    ferrofs_testkit::tmp::finish(&work, &Vec::<String>::new());
}

#[test]
fn convert_writes_what_containerd_writes() {
    skip_unless_ready!();
    let work = ferrofs_testkit::work_dir!("registry_convert_layout");
    let layout = work.join("L");
    make_layout(&layout);
    let out = work.join("OUT");
    let j = ok(&[
        "convert",
        &format!("oci:{}:v1", layout.display()),
        &format!("oci:{}", out.display()),
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(j["layers"], 2);
    let blob = |d: &str| {
        fs::read(
            out.join("blobs/sha256")
                .join(d.trim_start_matches("sha256:")),
        )
        .unwrap()
    };
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("index.json")).unwrap()).unwrap();
    let entry = &index["manifests"][0];
    assert_eq!(
        entry["annotations"]["org.opencontainers.image.ref.name"],
        "v1"
    );
    let m: serde_json::Value =
        serde_json::from_slice(&blob(entry["digest"].as_str().unwrap())).unwrap();
    assert_eq!(m["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    let cfg: serde_json::Value =
        serde_json::from_slice(&blob(m["config"]["digest"].as_str().unwrap())).unwrap();
    assert_eq!(cfg["os.features"], serde_json::json!(["erofs"]));
    assert!(
        cfg["config"].get("Image").is_none(),
        "the v1 dummy Image id stays: {cfg}"
    );
    assert_eq!(cfg["config"]["Env"][0], "PATH=/usr/bin");
    let src_cfg: serde_json::Value = {
        let idx: serde_json::Value =
            serde_json::from_slice(&fs::read(layout.join("index.json")).unwrap()).unwrap();
        let sm: serde_json::Value = serde_json::from_slice(
            &fs::read(
                layout.join("blobs/sha256").join(
                    idx["manifests"][0]["digest"]
                        .as_str()
                        .unwrap()
                        .trim_start_matches("sha256:"),
                ),
            )
            .unwrap(),
        )
        .unwrap();
        serde_json::from_slice(
            &fs::read(
                layout.join("blobs/sha256").join(
                    sm["config"]["digest"]
                        .as_str()
                        .unwrap()
                        .trim_start_matches("sha256:"),
                ),
            )
            .unwrap(),
        )
        .unwrap()
    };
    for (i, l) in m["layers"].as_array().unwrap().iter().enumerate() {
        assert_eq!(l["mediaType"], "application/vnd.erofs.layer.v1");
        assert_eq!(l["annotations"]["test.kept"], "yes");
        let digest = l["digest"].as_str().unwrap();
        // Raw: the diff_id is the blob's digest.
        assert_eq!(cfg["rootfs"]["diff_ids"][i], digest);
        let img = out
            .join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:"));
        // containerd's UUID: SHA-1 name-based of erofs:blobs/<source diff_id>.
        let source_id = src_cfg["rootfs"]["diff_ids"][i].as_str().unwrap();
        let py = format!(
            "import uuid; print(uuid.uuid5(uuid.NAMESPACE_URL, 'erofs:blobs/{source_id}'))"
        );
        let uuid = String::from_utf8(
            Command::new("python3")
                .args(["-c", &py])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let dump = ok(&["dump", &s(&img), "--json"]);
        assert!(
            dump.contains(uuid.trim()),
            "layer {i}: no UUID {uuid} in {dump}"
        );
        ok(&["fsck", &s(&img)]);
        // Whiteouts became overlayfs ones (--aufs).
        if i == 1 {
            let ls = ok(&["ls", "-l", &s(&img), "/"]);
            assert!(
                ls.lines()
                    .any(|l| l.starts_with('c') && l.ends_with(" gone")),
                "{ls}"
            );
        }
    }
    // zstd: one zstd stream per layer; the diff_id is the EROFS image's.
    let outz = work.join("OUTZ");
    ok(&[
        "convert",
        &format!("oci:{}:v1", layout.display()),
        &format!("oci:{}:z", outz.display()),
        "--erofs",
        "zstd",
        "-zlz4",
    ]);
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(outz.join("index.json")).unwrap()).unwrap();
    let blobz = |d: &str| {
        fs::read(
            outz.join("blobs/sha256")
                .join(d.trim_start_matches("sha256:")),
        )
        .unwrap()
    };
    let m: serde_json::Value =
        serde_json::from_slice(&blobz(index["manifests"][0]["digest"].as_str().unwrap())).unwrap();
    let cfg: serde_json::Value =
        serde_json::from_slice(&blobz(m["config"]["digest"].as_str().unwrap())).unwrap();
    for (i, l) in m["layers"].as_array().unwrap().iter().enumerate() {
        assert_eq!(l["mediaType"], "application/vnd.erofs.layer.v1+zstd");
        let z = work.join(format!("layer{i}.zst"));
        fs::write(&z, blobz(l["digest"].as_str().unwrap())).unwrap();
        let raw = work.join(format!("layer{i}.erofs"));
        let st = Command::new("python3")
            .args(["-c", "import sys,subprocess; sys.exit(subprocess.call(['zstd','-q','-d','-f',sys.argv[1],'-o',sys.argv[2]]))"])
            .arg(&z)
            .arg(&raw)
            .stderr(std::process::Stdio::null())
            .status();
        if st.is_ok_and(|s| s.success()) {
            let got = sha256_file(&raw);
            assert_eq!(cfg["rootfs"]["diff_ids"][i], got);
            ok(&["fsck", &s(&raw)]);
        } else {
            println!("zstd(1) not installed: the zstd layers' contents not checked");
        }
    }
    ferrofs_testkit::tmp::finish(&work, &Vec::<String>::new());
}

/// The sha256 of `data`, hex (through sha256sum).
fn sha256_hex(data: &[u8]) -> String {
    use std::io::Write as _;
    let mut c = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(data).unwrap();
    let out = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

fn sha256_file(p: &Path) -> String {
    let out = Command::new("sha256sum").arg(p).output().unwrap();
    format!(
        "sha256:{}",
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap()
    )
}
