//! The kernel as the oracle: our image loop-mounted as EROFS under a
//! read-only overlayfs with the object store as its data-only layer
//! (`lowerdir=IMAGE::STORE`, `metacopy=on,redirect_dir=on`, what
//! mount.composefs asks) shows the source tree file by file: types, modes,
//! owners, mtimes, contents, symlink targets, device numbers and xattrs
//! (`trusted.overlay.*` ones unescaped again); its whiteouts hide the
//! files of a layer below it in a nested overlayfs. fsck.erofs 1.9.4 and
//! `composefs-info ls/dump` accept the image. `ferrofs mount --basedir`
//! of the image shows what the overlay mount shows.

use std::fs;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::{can_mount, compare_trees, make_corner_tree, CompareOptions, LoopMount};

use super::{corner_with_store, dropin, refs, run, work};

#[test]
fn overlay_mount_shows_the_source_tree() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let w = work("mount");
    let (src, img, store) = corner_with_store(w.path());
    let m = LoopMount::new(&img, &[]).expect("the kernel mounts the image");
    let ov = LoopMount::composefs(m.path(), &store).expect("overlay mount");
    let opts = CompareOptions {
        // composefs stores every hard link as an inode of its own, and
        // overlayfs reports its own directory link counts.
        compare_hardlinks: false,
        compare_dir_nlink: false,
        ..CompareOptions::strict()
    };
    let diffs = compare_trees(&src, ov.path(), &opts);
    let shown: Vec<String> = diffs.iter().take(30).map(ToString::to_string).collect();
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        shown.join("\n")
    );
    // Without overlayfs: `ferrofs mount --basedir` of our image shows
    // what the kernel's overlay mount shows, field for field.
    if Path::new("/dev/fuse").exists() {
        let fuse = ferrofs_testkit::fuse::FuseMount::new(
            Path::new(env!("CARGO_BIN_EXE_ferrofs")),
            img.as_os_str(),
            &w.path().join("fuse"),
            &["--basedir", store.to_str().expect("a UTF-8 path")],
        );
        let diffs = compare_trees(ov.path(), &fuse.dir, &CompareOptions::strict());
        assert!(diffs.is_empty(), "FUSE vs overlay: {diffs:#?}");
        fuse.unmount();
    } else {
        println!("FUSE part skipped: /dev/fuse is absent");
    }
}

#[test]
fn fsck_erofs_and_composefs_info_accept_our_images() {
    let Some(refs) = refs() else { return };
    let Some(fsck) = ferrofs_testkit::tools::fsck_next() else {
        println!("skipped: fsck.erofs 1.9.x not found");
        return;
    };
    let w = work("accept");
    let src = w.path().join("tree");
    make_corner_tree(&src).unwrap();
    let bin = dropin(w.path());
    let img = w.path().join("ours.cfs");
    let img_s = img.display().to_string();
    run(&bin, &[&src.display().to_string(), &img_s], None).unwrap();
    fsck.run(&[img_s.as_str()])
        .expect("fsck.erofs accepts the image");
    for cmd in ["ls", "dump", "objects", "missing-objects"] {
        let mut args = vec![cmd, img_s.as_str()];
        let base = w.path().join("empty-store");
        std::fs::create_dir_all(&base).unwrap();
        let basedir = format!("--basedir={}", base.display());
        if cmd == "missing-objects" {
            args.insert(0, &basedir);
        }
        let out =
            run(&refs.info, &args, None).unwrap_or_else(|e| panic!("composefs-info {cmd}: {e}"));
        assert!(!out.is_empty(), "composefs-info {cmd} printed nothing");
    }
}

/// Whiteouts (character devices 0/0 in the source) work as composefs
/// means them: the composefs mount, used as the upper of two lower layers
/// of another overlayfs, hides the entries they name in the layer below,
/// and leaves the rest of their directory visible.
#[test]
fn whiteouts_hide_files_of_a_lower_layer() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let w = work("whiteout-mount");
    let (src, low) = (w.path().join("tree"), w.path().join("low"));
    fs::create_dir_all(src.join("d")).unwrap();
    fs::create_dir_all(low.join("d")).unwrap();
    for p in ["gone", "d/gone"] {
        let st = Command::new("mknod")
            .arg(src.join(p))
            .args(["c", "0", "0"])
            .status()
            .unwrap();
        assert!(st.success());
        fs::write(low.join(p), b"hidden").unwrap();
    }
    fs::write(src.join("d/f"), b"from the image\n").unwrap();
    fs::write(low.join("d/keep"), b"from below").unwrap();
    let (img, store) = (w.path().join("ours.cfs"), w.path().join("store"));
    let sa = format!("--digest-store={}", store.display());
    let args = [sa, src.display().to_string(), img.display().to_string()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&dropin(w.path()), &args, None).unwrap();
    let m = LoopMount::new(&img, &[]).expect("the kernel mounts the image");
    let cfs = LoopMount::composefs(m.path(), &store).expect("composefs mount");
    let top = LoopMount::overlay(&[cfs.path(), &low]).expect("outer overlay");
    let names = |d: &Path| {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(top.path()), ["d"]);
    assert_eq!(names(&top.path().join("d")), ["f", "keep"]);
    assert_eq!(
        fs::read(top.path().join("d/f")).unwrap(),
        b"from the image\n"
    );
    drop(top);
    drop(cfs);
}
