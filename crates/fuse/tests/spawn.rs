//! The library's mount call in-process: `spawn` serves an image on threads
//! of the test, equal to the kernel's loop mount of it, and
//! `Mounted::unmount` takes it away; a busy or missing mount point is the
//! matching `MountError`, before anything is mounted.

use std::fs;
use std::path::{Path, PathBuf};

use ferrofs_fuse::{spawn, MountError, MountOptions};
use ferrofs_testkit::fuse::mounted;
use ferrofs_testkit::tools::workspace_root;
use ferrofs_testkit::{compare_trees, CompareOptions, LoopMount};

fn work(test: &str) -> PathBuf {
    ferrofs_testkit::tmp::fresh_run_dir(&Path::new(env!("CARGO_TARGET_TMPDIR")).join(test))
}

fn open(image: &Path) -> ferrofs::Image {
    ferrofs::Image::open_path(image).unwrap()
}

#[test]
fn spawned_mounts_match_the_kernel_and_unmount() {
    if let Err(why) = ferrofs_testkit::can_mount() {
        println!("skipped: {why}");
        return;
    }
    if !Path::new("/dev/fuse").exists() {
        println!("skipped: /dev/fuse is absent");
        return;
    }
    let w = work("fuse_spawn");
    for name in ["lz4hc-big.erofs", "chunked.erofs", "v19/kitchen-sink.erofs"] {
        let img = workspace_root().join("testdata").join(name);
        let kernel = LoopMount::new(&img, &[]).unwrap();
        let dir = w.join(name.replace('/', "-"));
        fs::create_dir_all(&dir).unwrap();
        let opts = MountOptions {
            threads: 2,
            ..Default::default()
        };
        let m = spawn(open(&img), &dir, &opts).unwrap();
        assert!(m.is_mounted() && mounted(&dir), "{name}: not mounted");
        let diffs = compare_trees(kernel.path(), m.dir(), &CompareOptions::strict());
        assert!(
            diffs.is_empty(),
            "{name}: {}",
            diffs
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
        // A second mount on the same place is refused, naming it.
        match spawn(open(&img), &dir, &opts) {
            Err(MountError::AlreadyMounted(p)) => assert_eq!(p, dir),
            Err(e) => panic!("{name}: second mount: {e}"),
            Ok(_) => panic!("{name}: a second mount on {} succeeded", dir.display()),
        }
        m.unmount().unwrap();
        assert!(!mounted(&dir), "{name}: still mounted after unmount()");
        kernel.unmount().unwrap();
    }
}

#[test]
fn a_missing_mount_point_is_refused() {
    let img = workspace_root().join("testdata/lz4.erofs");
    let dir = work("fuse_spawn_missing").join("no-such-dir");
    let e = spawn(open(&img), &dir, &MountOptions::default())
        .err()
        .expect("mounting on a missing directory");
    assert!(
        matches!(&e, MountError::NotADirectory(p) if *p == dir),
        "{e}"
    );
    assert!(e.to_string().contains("does not exist"), "{e}");
}
