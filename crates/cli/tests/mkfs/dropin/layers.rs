//! The command lines containerd's EROFS differ and snapshotter run, each
//! against mkfs.erofs 1.9.4 through the kernel: `-Enoinline_data` (regular
//! files only lose their inline tails) and the Commit fallback's directory
//! build of an overlay upper directory (`mkfs.erofs --quiet
//! -Enoinline_data OUT UPPERDIR`), whose whiteouts must stay hidden when
//! the image is stacked under overlayfs.

use std::fs;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::{corpus, tools, work_dir};

use super::run;
use crate::{dropin_link, FERROFS};

/// `ferrofs dump --json --path P IMG`'s layout and type.
fn layout(img: &Path, rel: &str) -> (String, String) {
    let out = Command::new(FERROFS)
        .args(["dump", "--json", "--path", &format!("/{rel}")])
        .arg(img)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let s = |k: &str| v[k].as_str().unwrap_or("?").to_string();
    (s("layout"), s("type"))
}

/// Every path under `root` (relative, directories included).
fn paths(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(root).unwrap().display().to_string());
            if p.symlink_metadata().unwrap().is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `-Enoinline_data` as mkfs.erofs 1.9.4 means it: no regular file keeps
/// an inline tail, but every directory and symlink upstream inlines is
/// inline here too (before, each took a block of its own). Both images
/// show the same tree through the kernel.
#[test]
fn noinline_data_leaves_directories_and_symlinks_inline() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let Some(up) = tools::mkfs_next() else {
        println!("skipped: mkfs.erofs 1.9.4 not found");
        return;
    };
    let work = work_dir!("dropin_noinline");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    let link = dropin_link(&work);
    let (ours, theirs) = (work.join("ours.img"), work.join("theirs.img"));
    let flags = ["--quiet", "-Enoinline_data", "-T1700000000", "--all-time"];
    run(Command::new(&link).args(flags).arg(&ours).arg(&src)).expect("drop-in");
    run(Command::new(&up.path).args(flags).arg(&theirs).arg(&src)).expect("mkfs.erofs 1.9.4");
    let mut failures = Vec::new();
    let (a, b) = (
        LoopMount::new(&theirs, &[]).unwrap(),
        LoopMount::new(&ours, &[]).unwrap(),
    );
    for d in compare::compare_trees(a.path(), b.path(), &CompareOptions::strict()) {
        failures.push(format!("upstream vs ours: {d}"));
    }
    let (mut dirs, mut links) = (0, 0);
    // One `dump` process per path and image: on two threads.
    let rels = paths(a.path());
    let found = std::sync::Mutex::new(vec![Default::default(); rels.len()]);
    ferrofs_testkit::tmp::parallel(rels.len(), 2, |i| {
        let got = (layout(&ours, &rels[i]), layout(&theirs, &rels[i]));
        found.lock().unwrap()[i] = got;
    });
    let found: Vec<((String, String), (String, String))> = found.into_inner().unwrap();
    for (rel, (o, t)) in rels.iter().zip(found) {
        match o.1.as_str() {
            "file" if o.0 == "flat_inline" => failures.push(format!("{rel}: inline tail")),
            "dir" | "symlink" if t.0 == "flat_inline" => {
                if o.0 != "flat_inline" {
                    failures.push(format!("{rel}: {} (upstream inlines it)", o.0));
                }
                if o.1 == "dir" {
                    dirs += 1;
                } else {
                    links += 1;
                }
            }
            _ => {}
        }
    }
    // What the check covered: the corner tree has both kinds inline.
    assert!(
        dirs > 3 && links > 3,
        "{dirs} directories, {links} symlinks"
    );
    let size = |p: &Path| fs::metadata(p).unwrap().len() as f64;
    let ratio = size(&ours) / size(&theirs);
    if ratio > 1.01 {
        failures.push(format!("image bytes {ratio:.3}x upstream's"));
    }
    drop((a, b));
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// containerd's Commit fallback builds an overlay upper directory: a
/// deleted file is a whiteout (a character device 0:0) there. Stacked
/// over the lower layer, the image must hide it (overlayfs since Linux 6.7
/// lists a whiteout of a directory without an origin xattr as a
/// `c?????????` entry); so its directory gets the empty
/// `trusted.overlay.origin` mkfs.erofs 1.9.4 gives it (a directory without
/// whiteouts keeps the origin it had). Upstream's image and ours show the
/// same tree, on their own and stacked.
#[test]
fn upper_dir_whiteouts_stay_hidden_under_overlayfs() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let Some(up) = tools::mkfs_next() else {
        println!("skipped: mkfs.erofs 1.9.4 not found");
        return;
    };
    let work = work_dir!("dropin_upper_whiteouts");
    let (lower, upper) = (work.join("lower"), work.join("upper"));
    for d in ["a", "b/c", "e"] {
        fs::create_dir_all(lower.join(d)).unwrap();
    }
    for f in ["a/keep", "a/gone", "b/c/gone", "b/x", "e/f"] {
        fs::write(lower.join(f), format!("{f}\n")).unwrap();
    }
    for d in ["a", "b/c", "e"] {
        fs::create_dir_all(upper.join(d)).unwrap();
    }
    fs::write(upper.join("a/new"), "new\n").unwrap();
    let sh = |cmd: &str| {
        let ok = Command::new("sh").args(["-c", cmd]).status().unwrap();
        assert!(ok.success(), "{cmd}");
    };
    let u = upper.display();
    sh(&format!(
        "mknod {u}/a/gone c 0 0 && mknod {u}/b/c/gone c 0 0 && \
         setfattr -n trusted.overlay.origin -v 0sAPsdAAGtrw== {u}/e"
    ));
    let link = dropin_link(&work);
    let img = |n: &str| work.join(n);
    run(Command::new(FERROFS)
        .args(["mkfs", "--quiet"])
        .arg(img("lower.img"))
        .arg(&lower))
    .expect("lower layer");
    let flags = ["--quiet", "-Enoinline_data"];
    run(Command::new(&link)
        .args(flags)
        .arg(img("ours.img"))
        .arg(&upper))
    .expect("drop-in");
    run(Command::new(&up.path)
        .args(flags)
        .arg(img("theirs.img"))
        .arg(&upper))
    .expect("mkfs.erofs 1.9.4");
    let mut failures = Vec::new();
    // Without -T, mkfs.erofs 1.9.4 drops the nanoseconds of every mtime.
    let cmp = CompareOptions {
        compare_nsec: false,
        ..CompareOptions::strict()
    };
    let low = LoopMount::new(&img("lower.img"), &[]).unwrap();
    let (t, o) = (
        LoopMount::new(&img("theirs.img"), &[]).unwrap(),
        LoopMount::new(&img("ours.img"), &[]).unwrap(),
    );
    for d in compare::compare_trees(t.path(), o.path(), &cmp) {
        failures.push(format!("upper, upstream vs ours: {d}"));
    }
    // The markers themselves: an empty origin on the directories that
    // hold whiteouts, e's own kept, none elsewhere.
    let kept = vec![0x00, 0xfb, 0x1d, 0x00, 0x01, 0xad, 0xaf];
    for (dir, want) in [
        ("a", Some(vec![])),
        ("b/c", Some(vec![])),
        ("e", Some(kept)),
        ("b", None),
    ] {
        let got = xattr_of(&o.path().join(dir), "trusted.overlay.origin");
        if got != want {
            failures.push(format!("{dir}: trusted.overlay.origin {got:?}"));
        }
    }
    let (st, so) = (
        LoopMount::overlay(&[t.path(), low.path()]).unwrap(),
        LoopMount::overlay(&[o.path(), low.path()]).unwrap(),
    );
    for d in compare::compare_trees(st.path(), so.path(), &cmp) {
        failures.push(format!("stacked, upstream vs ours: {d}"));
    }
    let listed = paths(so.path());
    let want = ["a", "a/keep", "a/new", "b", "b/c", "b/x", "e", "e/f"];
    if listed != want {
        failures.push(format!("stacked tree lists {listed:?}, want {want:?}"));
    }
    drop((st, so, t, o, low));
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// The value of xattr `name` of `path` (not following a symlink), if set.
fn xattr_of(path: &Path, name: &str) -> Option<Vec<u8>> {
    let out = Command::new("getfattr")
        .args(["--absolute-names", "-e", "hex", "-n", name])
        .arg(path)
        .output()
        .unwrap();
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.starts_with(name))?;
    match line.split_once('=') {
        None => Some(Vec::new()),
        Some((_, hex)) => {
            let hex = hex.trim().trim_start_matches("0x");
            Some(
                (0..hex.len() / 2)
                    .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                    .collect(),
            )
        }
    }
}
