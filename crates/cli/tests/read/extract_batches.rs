//! `ferrofs extract` creates entries on threads fed by the walk in batches
//! while the walk goes on. A tree of many batches, of every entry kind
//! (nested directories, files of many sizes, empty files, symlinks, fifos,
//! hard links across directories, varied modes and times), compressed
//! with fragments and dedupe, comes out equal to its source, and the
//! `--json` report is the same for 1, 2 and 5 threads.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::compare::{compare_trees, CompareOptions};
use ferrofs_testkit::work_dir;

use crate::FERROFS;

/// Directories, and entries in each: far more than one batch (128).
const DIRS: usize = 24;
const PER_DIR: usize = 40;

fn source(root: &Path) {
    for d in 0..DIRS {
        let dir = root.join(format!("d{d:02}")).join(format!("sub{}", d % 3));
        fs::create_dir_all(&dir).unwrap();
        for i in 0..PER_DIR {
            let p = dir.join(format!("e{i:03}"));
            match i % 8 {
                0 => fs::write(&p, b"").unwrap(),
                1 => std::os::unix::fs::symlink(format!("../target-{d}-{i}"), &p).unwrap(),
                2 => rustix::fs::mknodat(
                    rustix::fs::CWD,
                    &p,
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(0o640),
                    0,
                )
                .unwrap(),
                3 if d > 0 => {
                    // A hard link to a file of the previous directory.
                    let prev = root
                        .join(format!("d{:02}", d - 1))
                        .join(format!("sub{}", (d - 1) % 3))
                        .join(format!("e{:03}", i + 1));
                    fs::hard_link(prev, &p).unwrap();
                }
                _ => {
                    // Sizes from a few bytes to a few pclusters, text that
                    // repeats across files (dedupe, shared fragments).
                    let len = (d * 7919 + i * 104_729) % 200_000 + 1;
                    let line = format!("dir {} line of text {}\n", d % 5, i % 11);
                    let body: Vec<u8> = line.bytes().cycle().take(len).collect();
                    fs::write(&p, body).unwrap();
                    let mode = [0o644, 0o600, 0o755, 0o444][i % 4];
                    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
                }
            }
            if i % 8 != 1 {
                let t = rustix::fs::Timespec {
                    tv_sec: 1_600_000_000 + (d * PER_DIR + i) as i64,
                    tv_nsec: (i * 1_000_003 % 1_000_000_000) as _,
                };
                let times = rustix::fs::Timestamps {
                    last_access: t,
                    last_modification: t,
                };
                rustix::fs::utimensat(
                    rustix::fs::CWD,
                    &p,
                    &times,
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .unwrap();
            }
        }
    }
}

#[test]
fn a_tree_of_many_batches_extracts_the_same_on_any_thread_count() {
    let work = work_dir!("extract_batches");
    let src = work.join("src");
    source(&src);
    let img = work.join("img.erofs");
    let o = Command::new(FERROFS)
        .args(["mkfs", "-zlz4hc", "-C65536", "-Efragments,dedupe"])
        .arg(&img)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "mkfs: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let root = rustix::process::geteuid().is_root();
    let opts = CompareOptions {
        compare_owner: root,
        skip_root_mtime: true,
        skip_root_mode_owner: true,
        ..CompareOptions::strict()
    };
    let mut reports = Vec::new();
    for jobs in ["1", "2", "5"] {
        let out = work.join(format!("out-j{jobs}"));
        let o = Command::new(FERROFS)
            .args(["extract", "--json", "-j", jobs])
            .arg(&img)
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "extract -j{jobs}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let diffs = compare_trees(&src, &out, &opts);
        assert!(
            diffs.is_empty(),
            "extract -j{jobs} differs from the source: {}",
            diffs
                .iter()
                .take(5)
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let files = v["files"].as_u64().unwrap_or(0);
        assert!(files > 4 * 128, "{files} files: not several batches");
        reports.push((jobs, v));
    }
    for (jobs, v) in &reports[1..] {
        assert_eq!(
            v, &reports[0].1,
            "the report of -j{jobs} differs from -j1's"
        );
    }
    let _ = fs::remove_dir_all(&work);
}
