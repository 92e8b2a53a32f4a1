//! `ferrofs mount docker://…` of an EROFS-native image: served through
//! FUSE from the registry without downloading it, equal to the kernel's
//! overlayfs mount of the same layer images; with `convert --verity` every
//! block is checked, so a byte changed in the registry's storage makes a
//! read of that file fail (EIO) while the rest reads; without trees the
//! layers are downloaded whole first (or read unchecked with
//! `--insecure-lazy`). Needs root, FUSE, loop mounts and overlayfs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::compare::{compare_trees, CompareOptions};
use ferrofs_testkit::fuse::FuseMount;
use ferrofs_testkit::registry::{registry_bin_dir, Access, CncfRegistry};
use ferrofs_testkit::LoopMount;

use super::{make_layout, ok, s, skip_reason, skopeo_push, FERROFS};

fn lazy_skip_reason() -> Option<String> {
    if let Some(why) = skip_reason() {
        return Some(why);
    }
    if let Err(why) = ferrofs_testkit::can_mount() {
        return Some(why);
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse".into());
    }
    None
}

/// The blob file of `digest` in the registry's filesystem storage.
fn stored_blob(root: &Path, digest: &str) -> PathBuf {
    let hex = digest.trim_start_matches("sha256:");
    root.join("registry-data/docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data")
}

/// The layers of the image at `oci:DIR:REF`, bottom first.
fn layers_of(dir: &Path, reference: &str) -> Vec<serde_json::Value> {
    let idx: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("index.json")).unwrap()).unwrap();
    let m = idx["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == reference)
        .unwrap();
    let blob = |d: &str| {
        fs::read(
            dir.join("blobs/sha256")
                .join(d.trim_start_matches("sha256:")),
        )
        .unwrap()
    };
    let man: serde_json::Value =
        serde_json::from_slice(&blob(m["digest"].as_str().unwrap())).unwrap();
    man["layers"].as_array().unwrap().clone()
}

#[test]
fn lazy_mounts_equal_the_kernels_overlay_and_refuse_changed_blocks() {
    if let Some(why) = lazy_skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let work = ferrofs_testkit::work_dir!("registry_lazy");
    let layout = work.join("L");
    make_layout(&layout);
    let reg = CncfRegistry::start(&registry_bin_dir().unwrap(), &work, Access::Open);
    skopeo_push(&layout, &reg, "lazy/app", None);
    let src = format!("docker://{}/lazy/app:v1", reg.addr);
    let verified = format!("docker://{}/lazy/app:verity", reg.addr);
    let plain = format!("docker://{}/lazy/app:plain", reg.addr);
    ok(&["convert", &src, &verified, "--verity"]);
    ok(&["convert", &src, &plain]);
    // The same layers in a layout, for the kernel's overlay.
    let out = work.join("OUT");
    ok(&[
        "convert",
        &format!("oci:{}:v1", layout.display()),
        &format!("oci:{}:v1", out.display()),
        "--verity",
    ]);
    let layers = layers_of(&out, "v1");
    let mounts: Vec<LoopMount> = layers
        .iter()
        .map(|l| {
            let p = out
                .join("blobs/sha256")
                .join(l["digest"].as_str().unwrap().trim_start_matches("sha256:"));
            LoopMount::new(&p, &[]).unwrap()
        })
        .collect();
    let lower: Vec<String> = mounts.iter().rev().map(|m| s(m.path())).collect();
    let ovl = work.join("ovl");
    fs::create_dir_all(&ovl).unwrap();
    let st = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o"])
        .arg(format!("ro,lowerdir={}", lower.join(":")))
        .arg(&ovl)
        .status()
        .unwrap();
    assert!(st.success(), "overlay mount");
    let mut failures = Vec::new();
    let cmp = CompareOptions {
        compare_dir_nlink: false,
        ..CompareOptions::strict()
    };
    for (i, (image, extra, what)) in [
        (&verified, vec![], "verified"),
        (&plain, vec![], "plain, downloaded whole"),
        (&plain, vec!["--insecure-lazy"], "plain, --insecure-lazy"),
    ]
    .into_iter()
    .enumerate()
    {
        let cache = work.join(format!("cache-{i}"));
        let mut args = vec!["--cache-dir", cache.to_str().unwrap()];
        args.extend(extra);
        let m = FuseMount::new(Path::new(FERROFS), image.as_ref(), &work.join("mnt"), &args);
        for d in compare_trees(&ovl, &m.dir, &cmp) {
            failures.push(format!("{what}: {d}"));
        }
        m.unmount();
    }
    // A merged-image directory others can write is refused (what is
    // found there is trusted as built here).
    let shared = work.join("shared-cache");
    fs::create_dir_all(shared.join("merged")).unwrap();
    Command::new("chmod")
        .arg("777")
        .arg(shared.join("merged"))
        .status()
        .unwrap();
    let e = super::err(&["ls", "--cache-dir", &s(&shared), &verified, "/"]);
    if !e.contains("only it can write") {
        failures.push(format!("a world-writable merged directory: {e}"));
    }
    // The other readers take the reference too.
    if ok(&["cat", &verified, "/etc/hostname"]) != "box\n" {
        failures.push("cat docker://… read wrong bytes".into());
    }
    ok(&["fsck", &verified]);
    // One byte of a file's data changed in the registry's storage: that
    // file cannot be read, the others can.
    let bottom = layers.first().unwrap()["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let stored = stored_blob(&work, &bottom);
    let mut bytes = fs::read(&stored).unwrap();
    let needle = b"line 10000 of a text file";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("big.txt's data in the layer");
    bytes[at] ^= 0x20;
    fs::write(&stored, &bytes).unwrap();
    let cache = work.join("cache-tampered");
    let m = FuseMount::new(
        Path::new(FERROFS),
        verified.as_ref(),
        &work.join("mnt"),
        &["--cache-dir", cache.to_str().unwrap()],
    );
    match fs::read(m.dir.join("usr/big.txt")) {
        Ok(_) => failures.push("a changed block was served".into()),
        Err(e) if e.raw_os_error() == Some(5) => {} // EIO
        Err(e) => failures.push(format!("reading the changed file: {e}, expected EIO")),
    }
    if fs::read(m.dir.join("etc/hostname")).ok().as_deref() != Some(b"box\n") {
        failures.push("an unchanged file did not read".into());
    }
    m.unmount();
    let out = Command::new(FERROFS)
        .args(["fsck", &verified])
        .output()
        .unwrap();
    let e =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(1) || !e.contains("does not match the verity hash tree") {
        failures.push(format!("fsck of the changed image: {:?}: {e}", out.status));
    }
    let _ = Command::new("umount").arg(&ovl).status();
    drop(mounts);
    ferrofs_testkit::tmp::finish(&work, &failures);
}
