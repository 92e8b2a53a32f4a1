//! `ferrofs extract --path P`: one directory of an image, its contents and
//! its own metadata, as the kernel's mount shows that directory; a path
//! that is missing or not a directory fails and makes no target.

use std::fs;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::compare::{compare_trees, CompareOptions};
use ferrofs_testkit::mount::LoopMount;

use super::{corner_image, FERROFS};

fn extract(img: &Path, out: &Path, path: &str) -> std::process::Output {
    Command::new(FERROFS)
        .args(["extract", "--path", path])
        .arg(img)
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn a_directory_extracts_as_the_kernel_mount_shows_it() {
    // Fragments: the files of a directory share packed pclusters with
    // files outside it.
    let Some((img, w)) = corner_image(
        "extract_path",
        &["-zlz4hc", "-C65536", "-Efragments,dedupe"],
        ("to-links", "links"),
    ) else {
        return;
    };
    let m = LoopMount::new(&img, &[]).expect("mount");
    let opts = CompareOptions {
        compare_owner: ferrofs_testkit::is_root(),
        ..CompareOptions::strict()
    };
    let mut failures = Vec::new();
    // A symlink to a directory is followed, as `cp -a DIR/.` follows it.
    for (path, shown) in [
        ("files", "files"),
        ("links", "links"),
        ("names", "names"),
        ("/files/text/", "files/text"),
        ("to-links", "links"),
    ] {
        let out = w.join(format!("out-{}", path.replace('/', "_")));
        let o = extract(&img, &out, path);
        if !o.status.success() {
            failures.push(format!(
                "--path {path}: {}",
                String::from_utf8_lossy(&o.stderr)
            ));
            continue;
        }
        for d in compare_trees(&m.path().join(shown), &out, &opts) {
            failures.push(format!("--path {path}: {d:?}"));
        }
    }
    // Missing, or not a directory: exit 2, the error names it, no target.
    for (path, want) in [
        ("nope", "nope: no such file or directory"),
        ("links/a/h1", "/links/a/h1: not a directory"),
    ] {
        let out = w.join("refused");
        let o = extract(&img, &out, path);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{path}: {e}");
        assert!(e.contains(want), "{path}: {e}");
        assert!(!out.exists(), "{path}: a target was made");
    }
    m.unmount().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    fs::remove_dir_all(&w).ok();
}
