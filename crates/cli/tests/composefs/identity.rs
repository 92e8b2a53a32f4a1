//! Byte identity with mkcomposefs 1.0.8 for directory input: the testkit
//! corner-case tree under every option and both format versions, a tree
//! of composefs's own edge cases (symlinks that would cross a block, inline
//! sizes, chunk counts, multi-block directories, more than 128 shared
//! xattrs on one inode, escaped overlay xattrs, an SELinux label on the
//! root), and trees with whiteouts.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use ferrofs_testkit::{is_root, make_corner_tree, xattr};

use super::{compare_build, refs, work};

/// Option sets each tree is built with.
const OPTION_SETS: &[&[&str]] = &[
    &[],
    &["--use-epoch"],
    &["--skip-xattrs"],
    &["--user-xattrs"],
    &["--skip-devices"],
    &["--max-version=0"],
    &["--min-version=1"],
    &["--min-version=0", "--max-version=1", "--threads=1"],
];

fn check_all(name: &str, src: &Path) {
    let Some(refs) = refs() else { return };
    let w = work(name);
    let mut failures = Vec::new();
    for opts in OPTION_SETS {
        if let Some(d) = compare_build(&refs, w.path(), &src.display().to_string(), opts) {
            failures.push(d);
        }
    }
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
}

#[test]
fn corner_tree_is_byte_identical() {
    let w = work("corner-src");
    let src = w.path().join("tree");
    make_corner_tree(&src).unwrap();
    check_all("corner", &src);
}

/// Symlinks of every length around the block-crossing edges, files at the
/// inline and chunk edges, big directories, xattr sharing edges.
fn make_edges(src: &Path) {
    fs::create_dir_all(src.join("links")).unwrap();
    for len in (1..4096)
        .step_by(97)
        .chain([2047, 2048, 3000, 4000, 4064, 4095])
    {
        let target = "t".repeat(len);
        symlink(&target, src.join(format!("links/l{len:04}"))).unwrap();
    }
    fs::create_dir_all(src.join("files")).unwrap();
    for size in [0u64, 1, 63, 64, 65, 4095, 4096, 4097, 70000] {
        fs::write(
            src.join(format!("files/f{size}")),
            vec![b'x'; size as usize],
        )
        .unwrap();
    }
    // Sparse: a digest reads every byte, so huge sizes are left to the
    // dump tests (which give sizes without data).
    let f = fs::File::create(src.join("files/sparse")).unwrap();
    f.set_len(40 << 20).unwrap();
    let many = src.join("many");
    fs::create_dir_all(&many).unwrap();
    for i in 0..700 {
        let name = format!("{i:04}-{}", "n".repeat(i % 200));
        fs::write(many.join(name), b"").unwrap();
    }
    fs::write(many.join("z".repeat(255)), b"long").unwrap();
    let shared = src.join("shared");
    fs::create_dir_all(&shared).unwrap();
    for f in ["a", "b"] {
        let p = shared.join(f);
        fs::write(&p, b"").unwrap();
        for i in 0..140 {
            xattr::set(&p, format!("user.s{i:03}"), format!("v{i}").as_bytes()).unwrap();
        }
    }
    let ov = src.join("overlay");
    fs::write(&ov, b"escaped").unwrap();
    for (k, v) in [
        ("trusted.overlay.opaque", &b"y"[..]),
        ("trusted.overlay.overlay.x", b"1"),
        ("trusted.overlay.redirect", b"/elsewhere"),
        ("user.overlay.origin", b"o"),
        ("trusted.other", b"t"),
    ] {
        xattr::set(&ov, k, v).unwrap();
    }
    xattr::set(src, "security.selinux", b"system_u:object_r:root_t:s0").unwrap();
    fs::set_permissions(src.join("files/f1"), fs::Permissions::from_mode(0o4755)).unwrap();
}

#[test]
fn composefs_edge_cases_are_byte_identical() {
    if !is_root() {
        println!("skipped: needs root (trusted.* xattrs)");
        return;
    }
    let w = work("edges-src");
    let src = w.path().join("tree");
    make_edges(&src);
    check_all("edges", &src);
}

/// Whiteouts (character devices 0/0) at the root, in a directory and
/// beside a `trusted.overlay.*` xattr; a root entry named like a store
/// directory (`ab`), which the root whiteouts skip.
fn make_whiteouts(src: &Path) {
    fs::create_dir_all(src.join("dir/sub")).unwrap();
    for p in ["gone", "dir/gone", "dir/sub/gone2"] {
        mknod_whiteout(&src.join(p));
    }
    fs::write(src.join("ab"), b"taken name").unwrap();
    fs::create_dir(src.join("0f")).unwrap();
    xattr::set(src.join("dir"), "trusted.overlay.opaque", b"y").unwrap();
    xattr::set(src.join("dir/gone"), "trusted.kept", b"1").unwrap();
}

fn mknod_whiteout(p: &Path) {
    let st = std::process::Command::new("mknod")
        .arg(p)
        .args(["c", "0", "0"])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn whiteouts_are_byte_identical_in_both_versions() {
    if !is_root() {
        println!("skipped: needs root (mknod)");
        return;
    }
    let w = work("whiteouts-src");
    let src = w.path().join("tree");
    make_whiteouts(&src);
    check_all("whiteouts", &src);
}
