//! composefs images by mkcomposefs 1.0.8 (#37): `ferrofs mount --basedir`
//! shows what the kernel's overlay mount of the image over its object
//! store shows (entries, metadata, xattrs, contents) and the source tree
//! where overlayfs does not rewrite it; `--verify-objects` refuses an
//! object whose fs-verity digest differs; `dump` reports the format
//! version, each file's object and digest as composefs-info and fsverity
//! see them. Without root, /dev/fuse or the upstream tools: `skipped: ...`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::compare::{compare_trees, CompareOptions};
use ferrofs_testkit::fuse::FuseMount;
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::tools::next_tool;
use ferrofs_testkit::{corpus, work_dir};

use crate::FERROFS;

/// mkcomposefs 1.0.8, or why the test cannot run.
fn mkcomposefs(fuse: bool) -> Result<PathBuf, String> {
    if !ferrofs_testkit::is_root() {
        return Err("not root".into());
    }
    if fuse && !Path::new("/dev/fuse").exists() {
        return Err("/dev/fuse is absent".into());
    }
    can_mount()?;
    next_tool("mkcomposefs")
        .ok_or_else(|| "no mkcomposefs (run ../shared/tools/upstream-tools --next)".into())
}

/// `mkcomposefs ARGS SRC IMG` with the store `objs`.
fn build(mk: &Path, src: &Path, img: &Path, objs: &Path, args: &[&str]) {
    let o = Command::new(mk)
        .args(args)
        .arg(format!("--digest-store={}", objs.display()))
        .arg(src)
        .arg(img)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "mkcomposefs: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What composefs rewrites: a whiteout (stored escaped, shown as a
/// regular file with overlay xattrs), an overlay xattr of the source
/// (stored escaped, shown as it was), and files inlined or stored as
/// objects.
fn add_overlay_cases(dir: &Path) {
    let d = dir.join("cfs");
    fs::create_dir_all(&d).unwrap();
    let wh = d.join("gone");
    run(Command::new("mknod").arg(&wh).args(["c", "0", "0"]));
    fs::write(d.join("esc"), b"escaped xattr\n").unwrap();
    run(Command::new("setfattr")
        .args(["-n", "trusted.overlay.opaque", "-v", "y"])
        .arg(d.join("esc")));
    fs::write(d.join("big"), corpus::random_bytes(3 << 20, 7)).unwrap();
    fs::write(d.join("tiny"), b"x").unwrap();
}

#[test]
fn basedir_mount_matches_the_overlay_mount() {
    let mk = match mkcomposefs(true) {
        Ok(m) => m,
        Err(why) => return println!("skipped: {why}"),
    };
    let w = work_dir!("composefs_basedir");
    let (src, objs, img) = (w.join("src"), w.join("objs"), w.join("cfs.img"));
    corpus::make_corner_tree(&src).unwrap();
    add_overlay_cases(&src);
    build(&mk, &src, &img, &objs, &[]);

    let erofs = LoopMount::new(&img, &[]).unwrap();
    let kernel = LoopMount::composefs(erofs.path(), &objs).unwrap();
    let fuse = FuseMount::new(
        Path::new(FERROFS),
        img.as_os_str(),
        &w.join("mnt"),
        &["--basedir", objs.to_str().unwrap()],
    );
    let diffs = compare_trees(kernel.path(), &fuse.dir, &CompareOptions::strict());
    assert!(diffs.is_empty(), "FUSE vs overlay mount: {diffs:#?}");
    // Where overlayfs shows the source as it was, so does the FUSE mount
    // (the whiteout's directory is rewritten; mkcomposefs 1.0.8 stores
    // hard links of a directory source as separate inodes).
    let opts = CompareOptions {
        ignore_paths: vec![PathBuf::from("cfs")],
        compare_hardlinks: false,
        ..CompareOptions::strict()
    };
    let diffs = compare_trees(&src, &fuse.dir, &opts);
    assert!(diffs.is_empty(), "FUSE vs source: {diffs:#?}");
    // A metacopy file's blocks are its object's, as overlayfs says.
    let big = |root: &Path| fs::metadata(root.join("cfs/big")).unwrap().blocks();
    assert_eq!(big(&fuse.dir), big(kernel.path()));
    assert!(big(&fuse.dir) >= (3 << 20) / 512);
    // The whiteouts composefs adds under the root are hidden, as there.
    assert!(fs::symlink_metadata(fuse.dir.join("00")).is_err());
    fuse.unmount();
    kernel.unmount().unwrap();
    erofs.unmount().unwrap();
}

#[test]
fn verify_objects_refuses_a_changed_object() {
    let mk = match mkcomposefs(true) {
        Ok(m) => m,
        Err(why) => return println!("skipped: {why}"),
    };
    let w = work_dir!("composefs_verify");
    let (src, objs, img) = (w.join("src"), w.join("objs"), w.join("cfs.img"));
    fs::create_dir_all(&src).unwrap();
    let big = corpus::random_bytes(1 << 20, 11);
    fs::write(src.join("big"), &big).unwrap();
    let good = corpus::random_bytes(100_000, 13);
    fs::write(src.join("good"), &good).unwrap();
    build(&mk, &src, &img, &objs, &[]);
    // The object of `big`, by the path dump reports for it.
    let v: serde_json::Value = serde_json::from_str(&run(Command::new(FERROFS)
        .args(["dump", "--json", "--path", "/big"])
        .arg(&img)))
    .unwrap();
    let object = objs.join(v["composefs"]["object"].as_str().unwrap());
    let mut bytes = fs::read(&object).unwrap();
    bytes[500_000] ^= 1;
    fs::write(&object, &bytes).unwrap();

    let mnt = w.join("mnt");
    let plain = FuseMount::new(
        Path::new(FERROFS),
        img.as_os_str(),
        &mnt,
        &["--basedir", objs.to_str().unwrap()],
    );
    assert_eq!(fs::read(plain.dir.join("big")).unwrap(), bytes);
    plain.unmount();
    let checked = FuseMount::new(
        Path::new(FERROFS),
        img.as_os_str(),
        &mnt,
        &["--basedir", objs.to_str().unwrap(), "--verify-objects"],
    );
    assert!(fs::read(checked.dir.join("good")).unwrap() == good);
    let e = fs::read(checked.dir.join("big")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(5), "{e}");
    checked.unmount();
}

#[test]
fn dump_shows_version_objects_and_digests() {
    let mk = match mkcomposefs(false) {
        Ok(m) => m,
        Err(why) => return println!("skipped: {why}"),
    };
    let (Some(info), Some(fsverity)) = (next_tool("composefs-info"), next_tool("fsverity")) else {
        return println!(
            "skipped: no composefs-info or fsverity (run ../shared/tools/upstream-tools --next)"
        );
    };
    let w = work_dir!("composefs_dump");
    let (src, objs) = (w.join("src"), w.join("objs"));
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/data"), corpus::random_bytes(200_000, 3)).unwrap();
    for version in ["0", "1"] {
        let img = w.join(format!("v{version}.img"));
        build(
            &mk,
            &src,
            &img,
            &objs,
            &[&format!("--min-version={version}")],
        );
        let sb: serde_json::Value = serde_json::from_str(&run(Command::new(FERROFS)
            .args(["dump", "--json"])
            .arg(&img)))
        .unwrap();
        assert_eq!(
            sb["superblock"]["composefs"]["format_version"].to_string(),
            version
        );
        let file: serde_json::Value = serde_json::from_str(&run(Command::new(FERROFS)
            .args(["dump", "--json", "--path", "/d/data"])
            .arg(&img)))
        .unwrap();
        let object = file["composefs"]["object"].as_str().unwrap().to_string();
        let listed = run(Command::new(&info).arg("objects").arg(&img));
        assert_eq!(listed.trim(), object);
        let digest = run(Command::new(&fsverity)
            .arg("digest")
            .arg(objs.join(&object)));
        let digest = digest.split_whitespace().next().unwrap();
        assert_eq!(file["composefs"]["digest"].as_str().unwrap(), digest);
    }
    // An image that is not composefs's says so.
    let plain = w.join("plain.img");
    run(Command::new(FERROFS)
        .args(["mkfs", "--quiet"])
        .arg(&plain)
        .arg(&src));
    let sb: serde_json::Value = serde_json::from_str(&run(Command::new(FERROFS)
        .args(["dump", "--json"])
        .arg(&plain)))
    .unwrap();
    assert!(sb["superblock"]["composefs"].is_null());
}
