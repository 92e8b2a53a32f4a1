//! `ferrofs export`: the corner tree's image, built with several option
//! sets, exported as a PAX tar is the archive GNU tar writes of the
//! kernel's mount of it (`--format=pax --sort=name --numeric-owner
//! --xattrs --xattrs-include='*'
//! --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime`),
//! byte for byte, for the whole image and for a subtree; `tar --xattrs
//! -xpf` of it equals the mount, metadata included. Needs root and loop
//! mounts.

use std::fs;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::compare::{compare_trees, CompareOptions};
use ferrofs_testkit::{corpus, work_dir, LoopMount};

const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

fn gnu_tar(dir: &Path, out: &Path) {
    let st = Command::new("tar")
        .args([
            "--sort=name",
            "--format=pax",
            "--numeric-owner",
            "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
            "--xattrs",
            "--xattrs-include=*",
            "-cf",
        ])
        .arg(out)
        .arg("-C")
        .arg(dir)
        .arg(".")
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    // 1: some files differ (a socket ignored), still an archive.
    assert!(
        st.code() == Some(0) || st.code() == Some(1),
        "GNU tar: {st}"
    );
}

#[test]
fn exports_are_gnu_tars_archive_of_the_mount() {
    if let Err(why) = ferrofs_testkit::can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("export");
    let tree = work.join("tree");
    corpus::make_corner_tree(&tree).unwrap();
    let mut failures = Vec::new();
    for (name, opts) in [
        ("plain", vec![]),
        ("lz4hc", vec!["-zlz4hc", "-C65536", "-Eztailpacking"]),
        ("dense", vec!["--preset", "dense"]),
    ] {
        let img = work.join(format!("{name}.img"));
        let st = Command::new(FERROFS)
            .args(["mkfs", "--quiet"])
            .args(&opts)
            .arg(&img)
            .arg(&tree)
            .status()
            .unwrap();
        assert!(st.success());
        let m = LoopMount::new(&img, &[]).unwrap();
        let gnu = work.join(format!("{name}.gnu.tar"));
        gnu_tar(m.path(), &gnu);
        let ours = work.join(format!("{name}.tar"));
        let out = Command::new(FERROFS)
            .args(["export", "-o"])
            .arg(&ours)
            .arg(&img)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if fs::read(&ours).unwrap() != fs::read(&gnu).unwrap() {
            failures.push(format!(
                "{name}: export differs from GNU tar's archive of the mount"
            ));
        }
        // A subtree, to standard output.
        let sub = fs::read_dir(m.path())
            .unwrap()
            .flatten()
            .find(|e| e.file_type().unwrap().is_dir())
            .unwrap()
            .file_name();
        let gnu_sub = work.join(format!("{name}.sub.gnu.tar"));
        gnu_tar(&m.path().join(&sub), &gnu_sub);
        let out = Command::new(FERROFS)
            .arg("export")
            .arg(&img)
            .arg(Path::new("/").join(&sub))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if out.stdout != fs::read(&gnu_sub).unwrap() {
            failures.push(format!(
                "{name}: export of /{} differs",
                sub.to_string_lossy()
            ));
        }
        // Extracted by GNU tar as root: the mount, metadata included.
        let x = work.join(format!("{name}.x"));
        fs::create_dir_all(&x).unwrap();
        let st = Command::new("tar")
            .args(["--xattrs", "--xattrs-include=*", "--numeric-owner", "-xpf"])
            .arg(&ours)
            .arg("-C")
            .arg(&x)
            .status()
            .unwrap();
        assert!(st.success());
        let cmp = CompareOptions {
            compare_dir_nlink: false,
            // GNU tar extracts no sockets (none are archived).
            ignore_paths: vec![],
            ..CompareOptions::strict()
        };
        for d in compare_trees(m.path(), &x, &cmp) {
            let d = d.to_string();
            // GNU tar archives no sockets, and hard-linked fifos (as it
            // does devices) whole under each name: they extract as
            // separate inodes.
            let gnu_choice = d.contains("socket")
                || (d.contains("/special/fifo")
                    && (d.contains("nlink") || d.contains("hardlink group")));
            if !gnu_choice {
                failures.push(format!("{name}: extracted: {d}"));
            }
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}
