//! `ferrofs export`: the corner tree's image, built with several option
//! sets, exported as a PAX tar is the archive GNU tar writes of the
//! kernel's mount of it (`--format=pax --sort=name --numeric-owner
//! --xattrs --xattrs-include='*'
//! --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime`),
//! byte for byte, for the whole image and for a subtree, when files with
//! holes go out whole (`--no-sparse`, GNU tar without `--sparse`). By
//! default they are sparse members, byte for byte GNU tar `--sparse`'s
//! archive of the source tree (its process id in the member names set
//! to ours, 0); `tar --xattrs -xpf` of either equals the mount, metadata
//! included, and restores the holes. Needs root and loop mounts.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};

use ferrofs_testkit::compare::{compare_trees, CompareOptions};
use ferrofs_testkit::{corpus, work_dir, LoopMount};

const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

fn s(v: &str) -> OsString {
    OsString::from(v)
}

fn p(v: &Path) -> OsString {
    v.as_os_str().to_owned()
}

/// `ferrofs export ARGS`, which must succeed.
fn export(args: &[OsString]) -> Output {
    let out = Command::new(FERROFS)
        .arg("export")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "export {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn gnu_tar(dir: &Path, out: &Path) {
    gnu_tar_with(dir, out, &[]);
}

fn gnu_tar_with(dir: &Path, out: &Path, extra: &[&str]) {
    let st = Command::new("tar")
        .args(extra)
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
        export(&[s("--no-sparse"), s("-o"), p(&ours), p(&img)]);
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
        let out = export(&[s("--no-sparse"), p(&img), p(&Path::new("/").join(&sub))]);
        if out.stdout != fs::read(&gnu_sub).unwrap() {
            failures.push(format!(
                "{name}: export of /{} differs",
                sub.to_string_lossy()
            ));
        }
        // With sparse members (the default): the sparse directory is GNU
        // tar --sparse's archive of the source's.
        let sparse = work.join(format!("{name}.sparse.tar"));
        let out = export(&[s("--json"), s("-o"), p(&sparse), p(&img)]);
        let stats: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
        if stats["sparse_files"].as_u64().unwrap_or(0) < 3 {
            failures.push(format!("{name}: too few sparse members: {stats}"));
        }
        let gnu_sparse = work.join(format!("{name}.sparse.gnu.tar"));
        gnu_tar_with(&tree.join("sparse"), &gnu_sparse, &["--sparse"]);
        let out = export(&[p(&img), s("/sparse")]);
        if out.stdout != pid_zero(&fs::read(&gnu_sparse).unwrap()) {
            failures.push(format!(
                "{name}: export of /sparse differs from GNU tar --sparse of the source"
            ));
        }
        // Extracted by GNU tar as root, whole and sparse: the mount,
        // metadata included; the sparse one keeps its holes.
        for (what, tar) in [("whole", &ours), ("sparse", &sparse)] {
            let x = work.join(format!("{name}.{what}.x"));
            fs::create_dir_all(&x).unwrap();
            extract_and_compare(&m, tar, &x, &format!("{name} {what}"), &mut failures);
            let holey = fs::metadata(x.join("sparse/tail_only")).unwrap();
            let sparse_on_disk = holey.blocks() * 512 < holey.len();
            if sparse_on_disk != (what == "sparse") {
                failures.push(format!(
                    "{name} {what}: sparse/tail_only extracted with {} blocks of 512",
                    holey.blocks()
                ));
            }
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// GNU tar's archive with its process id in `GNUSparseFile.PID` member
/// names replaced by 0, the header checksums made again.
fn pid_zero(tar: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(tar.len());
    let mut at = 0;
    while at + 512 <= tar.len() {
        let mut h = tar[at..at + 512].to_vec();
        at += 512;
        if h.iter().all(|&b| b == 0) {
            out.extend_from_slice(&h);
            continue;
        }
        let size = std::str::from_utf8(&h[124..135])
            .ok()
            .and_then(|s| u64::from_str_radix(s.trim_matches(|c| c == ' ' || c == '\0'), 8).ok())
            .unwrap_or(0) as usize;
        let name = &h[..100];
        let key = b"GNUSparseFile.";
        if let Some(i) = name.windows(key.len()).position(|w| w == key) {
            let digits = name[i + key.len()..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            let mut new = name[..i + key.len()].to_vec();
            new.push(b'0');
            new.extend_from_slice(&name[i + key.len() + digits..]);
            new.resize(100, 0);
            h[..100].copy_from_slice(&new);
            h[148..156].copy_from_slice(b"        ");
            let sum: u32 = h.iter().map(|&c| u32::from(c)).sum();
            h[148..156].copy_from_slice(&format!("{sum:06o}\0 ").as_bytes()[..8]);
        }
        out.extend_from_slice(&h);
        let body = size.div_ceil(512) * 512;
        out.extend_from_slice(&tar[at..(at + body).min(tar.len())]);
        at += body;
    }
    out.extend_from_slice(&tar[at.min(tar.len())..]);
    out
}

fn extract_and_compare(
    m: &LoopMount,
    tar: &Path,
    x: &Path,
    name: &str,
    failures: &mut Vec<String>,
) {
    {
        let st = Command::new("tar")
            .args(["--xattrs", "--xattrs-include=*", "--numeric-owner", "-xpf"])
            .arg(tar)
            .arg("-C")
            .arg(x)
            .status()
            .unwrap();
        assert!(st.success());
        let cmp = CompareOptions {
            compare_dir_nlink: false,
            // GNU tar extracts no sockets (none are archived).
            ignore_paths: vec![],
            ..CompareOptions::strict()
        };
        for d in compare_trees(m.path(), x, &cmp) {
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
}
