//! Images built by `ferrofs mkfs`, checked against the source tree with the kernel's EROFS
//! driver (a loop mount) as the oracle, read back by every other reader, and rebuilt for
//! determinism. (mkfs's failure behaviour: `failures.rs`.)
//!
//! The source is the testkit's corner-case tree plus `prefixed/` (xattrs under the long
//! prefixes the `--xattr-prefix` case declares, see [`tree::add_prefixed_xattrs`]). For every option
//! set in [`case_defs`]:
//! 1. `ferrofs mkfs [OPTS] IMAGE SRC` exits 0;
//! 2. the kernel mounts the image and `compare_trees(SRC, MOUNT)` is clean, strictly, relaxed
//!    only in exactly what the option changes; that change is then checked on every entry
//!    (all mtimes `T.0` for `-T`, every owner 0 for `--all-root`, no xattr anywhere for
//!    `-x -1`, exactly the excluded entries absent, every inode extended, chunk-based or not
//!    inline, as the raw inode at the kernel's `st_ino` (= nid) says, ...);
//! 3. `fsck.erofs` 1.5 (Debian; only images it can know: 4096-byte blocks, no long xattr
//!    prefixes) and 1.8.6 exit 0 (1.8.6's "invalid sb_extslots 0" on every 1024-byte-block
//!    image, mkfs.erofs's own included, is let through);
//! 4. `dump.erofs` 1.8.6 reads it (superblock and statistics: every inode), and it, `blkid`
//!    and the raw superblock report the block size, inode count, times, label and uuid the
//!    image should have;
//! 5. `ferrofs fsck` exits 0 and `ferrofs extract` gives a tree strictly identical to the
//!    kernel mount (`mkfs_images_match_kernel`);
//! 6. building again from the same tree, and from a copy whose every entry was created (and
//!    whose xattrs were set) in the reverse order, on tmpfs (so its directories list in a
//!    different order, its inode numbers differ), gives byte-identical images
//!    (`mkfs_images_are_deterministic`).
//!
//! The kernel test needs root (loop mounts); otherwise it prints `skipped: REASON`. Missing
//! reference tools are failures. Environment:
//! - `FERROFS_TEST_CASES=b512,chunk`: only cases whose name contains one of these;
//! - `FERROFS_TEST_KEEP=1`: keep everything under `target/tmp/mkfs_images/run-PID/` (also kept
//!   when a case fails; otherwise removed when the test process exits).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use ferrofs_testkit::compare::{self, show_path, CompareOptions, Difference};
use ferrofs_testkit::corpus;
use ferrofs_testkit::process::{run_with_timeout, Outcome};
use ferrofs_testkit::{can_mount, tools, xattr, LoopMount};

use crate::FERROFS;
use ferrofs_testkit::work_dir;

mod kernel;
mod superblock;
mod tree;

use kernel::check_kernel_vs_source;
use superblock::{check_reference_tools, check_superblock, read_sb};
use tree::{add_prefixed_xattrs, make_reverse_copy};

/// Worker threads (the machine has 2 cores).
const WORKERS: usize = 2;
/// Time limit for one command.
const LIMIT: Duration = Duration::from_secs(120);

const T: i64 = 1_650_000_000;
const LABEL: &str = "mylabel";
const UUID: &str = "11111111-2222-3333-4444-555555555555";
/// Excluded with `--exclude-path`: a directory with a 38-level subtree below it.
const EXCLUDE_PATH: &str = "deep/d01/d02";
/// Excluded with `--exclude-regex`: 600 entries of the big directory (one of them a
/// directory with a file inside), one name of a 3-name hardlink group and one name of a
/// hardlinked fifo.
const EXCLUDE_REGEX: &str = "^bigdir/e0[0-5][0-9][0-9]-|^links/b/h2$|^special/fifo_link$";
/// The long xattr prefixes of the `--xattr-prefix` case (and of [`add_prefixed_xattrs`]).
const PREFIXES: [&str; 2] = ["trusted.overlay.", "user.long.prefix."];

/// What an option set demands of the image, beyond matching the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Plain,
    BlockSize(u32),
    Chunked(u64),
    NoInline,
    Extended,
    FixedTime(i64),
    BuildTime(i64),
    AllRoot,
    Offsets(u32, u32),
    Force(u32, u32),
    Prefixes,
    NoXattrs,
    Excludes,
    LabelUuid,
    /// Built with `SOURCE_DATE_EPOCH` set to this: newer mtimes are clamped to it.
    Clamp(i64),
    /// `--ignore-mtime`: every mtime is the build time.
    IgnoreMtime,
}

fn case_defs() -> Vec<(&'static str, Vec<&'static str>, Expect)> {
    use Expect::*;
    vec![
        ("default", vec![], Plain),
        ("b1024", vec!["-b", "1024"], BlockSize(1024)),
        ("b512", vec!["-b", "512"], BlockSize(512)),
        ("chunk8k", vec!["--chunksize", "8192"], Chunked(8192)),
        ("noinline", vec!["-E", "noinline_data"], NoInline),
        ("extended", vec!["-E", "force-inode-extended"], Extended),
        ("fixed_time", vec!["-T", "1650000000"], FixedTime(T)),
        (
            "mkfs_time",
            vec!["-T", "1650000000", "--mkfs-time"],
            BuildTime(T),
        ),
        ("all_root", vec!["--all-root"], AllRoot),
        (
            "id_offsets",
            vec!["--uid-offset", "7", "--gid-offset", "9"],
            Offsets(7, 9),
        ),
        (
            "force_ids",
            vec!["--force-uid", "123", "--force-gid", "456"],
            Force(123, 456),
        ),
        (
            "xattr_prefixes",
            vec!["--xattr-prefix", PREFIXES[0], "--xattr-prefix", PREFIXES[1]],
            Prefixes,
        ),
        ("no_xattrs", vec!["-x", "-1"], NoXattrs),
        (
            "excludes",
            vec![
                "--exclude-path",
                EXCLUDE_PATH,
                "--exclude-regex",
                EXCLUDE_REGEX,
            ],
            Excludes,
        ),
        ("label_uuid", vec!["-L", LABEL, "-U", UUID], LabelUuid),
        // Beyond the required sets: the remaining block size and time options.
        ("b2048", vec!["-b", "2048"], BlockSize(2048)),
        ("source_date_epoch", vec![], Clamp(T)),
        ("ignore_mtime", vec!["--ignore-mtime"], IgnoreMtime),
    ]
}

struct Case {
    name: &'static str,
    opts: Vec<&'static str>,
    expect: Expect,
    /// Built from the tree.
    image: PathBuf,
    /// Built from the tree again.
    again: PathBuf,
    /// Built from the reverse-order copy.
    rev: PathBuf,
    /// mkfs's outcome for `image`, `again`, `rev` (wall time, or why it failed).
    builds: [Result<Duration, String>; 3],
}

impl Case {
    fn label(&self) -> String {
        match self.sde() {
            Some(t) => format!(
                "{} [SOURCE_DATE_EPOCH={t} {}]",
                self.name,
                self.opts.join(" ")
            )
            .replace(" ]", "]"),
            None => format!("{} [{}]", self.name, self.opts.join(" ")),
        }
    }

    fn sde(&self) -> Option<i64> {
        match self.expect {
            Expect::Clamp(t) => Some(t),
            _ => None,
        }
    }
}

struct Setup {
    work: PathBuf,
    tree: PathBuf,
    /// The reverse-order copy, or why it could not be made faithfully.
    rev_tree: Result<PathBuf, String>,
    cases: Vec<Case>,
}

/// Builds the trees and every image once per test process.
fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(build_setup)
}

fn build_setup() -> Setup {
    let t0 = Instant::now();
    let work = work_dir!("mkfs_images");
    let tree = work.join("tree");
    corpus::make_corner_tree(&tree).expect("make the corner tree");
    add_prefixed_xattrs(&tree).expect("add the long-prefix xattrs");
    let rev_tree = make_reverse_copy(&tree, &work);
    let filter: Option<Vec<String>> = std::env::var("FERROFS_TEST_CASES").ok().map(|s| {
        s.split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect()
    });
    let mut cases = Vec::new();
    for (name, opts, expect) in case_defs() {
        if let Some(f) = &filter {
            if !f.iter().any(|p| name.contains(p.as_str())) {
                continue;
            }
        }
        let img = |suffix: &str| work.join("images").join(format!("{name}{suffix}.img"));
        cases.push(Case {
            name,
            opts,
            expect,
            image: img(""),
            again: img("-again"),
            rev: img("-rev"),
            builds: [
                Err("not built".into()),
                Err("not built".into()),
                Err("not built".into()),
            ],
        });
    }
    let jobs: Vec<(usize, usize)> = (0..cases.len())
        .flat_map(|c| (0..3).map(move |k| (c, k)))
        .collect();
    let results: Vec<Mutex<Option<Result<Duration, String>>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    ferrofs_testkit::tmp::parallel(jobs.len(), WORKERS, |j| {
        let (c, k) = jobs[j];
        let case = &cases[c];
        let (src, out) = match k {
            0 => (tree.as_path(), &case.image),
            1 => (tree.as_path(), &case.again),
            _ => match &rev_tree {
                Ok(r) => (r.as_path(), &case.rev),
                Err(e) => {
                    *results[j].lock().unwrap() = Some(Err(format!("no reverse copy: {e}")));
                    return;
                }
            },
        };
        let r = mkfs_env(&case.opts, case.sde(), out, src).and_then(|o| {
            if o.success() {
                Ok(o.elapsed)
            } else {
                Err(format!(
                    "ferrofs mkfs {} {} {}: {}: {}",
                    case.opts.join(" "),
                    out.display(),
                    src.display(),
                    o.describe_status(),
                    o.stderr_tail(2000)
                ))
            }
        });
        *results[j].lock().unwrap() = Some(r);
    });
    for (&(c, k), r) in jobs.iter().zip(results) {
        cases[c].builds[k] = r.into_inner().unwrap().unwrap();
    }
    eprintln!(
        "setup: corner tree, reverse copy and {} images in {:.1?}",
        3 * cases.len(),
        t0.elapsed()
    );
    Setup {
        work,
        tree,
        rev_tree,
        cases,
    }
}

/// `[SOURCE_DATE_EPOCH=SDE] ferrofs mkfs OPTS OUT SRC`.
fn mkfs_env(opts: &[&str], sde: Option<i64>, out: &Path, src: &Path) -> Result<Outcome, String> {
    let mut cmd = Command::new(FERROFS);
    cmd.arg("mkfs").args(opts).arg(out).arg(src);
    match sde {
        Some(t) => cmd.env("SOURCE_DATE_EPOCH", t.to_string()),
        None => cmd.env_remove("SOURCE_DATE_EPOCH"),
    };
    run_with_timeout(&mut cmd, LIMIT).map_err(|e| format!("cannot run {FERROFS}: {e}"))
}

fn ferrofs(args: &[&std::ffi::OsStr]) -> Result<Outcome, String> {
    run_with_timeout(Command::new(FERROFS).args(args), LIMIT)
        .map_err(|e| format!("cannot run {FERROFS}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// 1-5: the kernel, the reference tools and ferrofs read what mkfs wrote.
// ---------------------------------------------------------------------------------------------

#[test]
fn mkfs_images_match_kernel() {
    if let Err(reason) = can_mount() {
        return println!("skipped: {reason}");
    }
    // Missing reference tools fail the test rather than skip parts of it.
    assert!(
        tools::fsck_debian().is_some(),
        "Debian's fsck.erofs 1.5 is missing: apt-get install erofs-utils"
    );
    assert!(
        tools::fsck_upstream().is_some() && tools::dump_upstream().is_some(),
        "upstream fsck.erofs/dump.erofs are missing: run ../shared/tools/upstream-tools or set UPSTREAM_TOOLS_BIN"
    );
    let setup = setup();
    let labels = setup.cases.iter().map(|c| c.label()).collect();
    let results =
        ferrofs_testkit::tmp::check_cases("kernel", labels, |i| check_case(setup, &setup.cases[i]));
    ferrofs_testkit::tmp::report_cases(
        &setup.work,
        "mkfs images (kernel mount vs source, reference fsck/dump, ferrofs fsck/extract)",
        results,
    );
}

/// Everything of the tree at `root` (the root itself as the empty path first), lstat'ed.
fn walk(root: &Path) -> Result<Vec<(PathBuf, fs::Metadata)>, String> {
    let mut v = vec![(
        PathBuf::new(),
        fs::symlink_metadata(root).map_err(|e| format!("lstat {}: {e}", root.display()))?,
    )];
    v.extend(compare::list_tree(root).map_err(|e| format!("walk {}: {e}", root.display()))?);
    Ok(v)
}

/// Checks 2-5 of one case (1 is its build).
fn check_case(setup: &Setup, case: &Case) -> Vec<String> {
    let mut f = Vec::new();
    if let Err(e) = &case.builds[0] {
        return vec![format!("mkfs failed: {e}")];
    }
    let img = match fs::read(&case.image) {
        Ok(b) => b,
        Err(e) => return vec![format!("cannot read the image: {e}")],
    };
    let sb = match read_sb(&img) {
        Ok(sb) => sb,
        Err(e) => return vec![format!("superblock: {e}")],
    };
    let want_bs = match case.expect {
        Expect::BlockSize(b) => b,
        _ => 4096,
    };
    let bs = 1u64 << sb.blkszbits.min(63);
    if bs != u64::from(want_bs) {
        f.push(format!("superblock: block size {bs}, expected {want_bs}"));
    }
    if img.len() as u64 != u64::from(sb.blocks) * bs {
        f.push(format!(
            "image is {} bytes, the superblock says {} blocks of {bs}",
            img.len(),
            sb.blocks
        ));
    }
    check_superblock(setup, case, &img, &sb, &mut f);
    check_reference_tools(case, &sb, want_bs, &mut f);

    let mnt = match LoopMount::new(&case.image, &[]) {
        Ok(m) => m,
        Err(e) => {
            f.push(format!("kernel mount failed: {e}"));
            return f;
        }
    };
    check_kernel_vs_source(setup, case, mnt.path(), &img, &sb, &mut f);
    check_ferrofs(setup, case, mnt.path(), &mut f);
    drop(mnt);
    f
}

/// 5: `ferrofs fsck` accepts the image; `ferrofs extract` reproduces the kernel's view.
fn check_ferrofs(setup: &Setup, case: &Case, mnt: &Path, f: &mut Vec<String>) {
    match ferrofs(&["fsck".as_ref(), case.image.as_os_str()]) {
        Err(e) => f.push(e),
        Ok(o) if !o.success() => f.push(format!(
            "ferrofs fsck: {}: {}",
            o.describe_status(),
            o.stderr_tail(2000)
        )),
        Ok(_) => {}
    }
    let out = setup.work.join("extract").join(case.name);
    let _ = ferrofs_testkit::tmp::remove_tree(&out);
    fs::create_dir_all(out.parent().unwrap()).unwrap();
    let mut extracted = true;
    match ferrofs(&["extract".as_ref(), case.image.as_os_str(), out.as_os_str()]) {
        Err(e) => {
            f.push(e);
            extracted = false;
        }
        Ok(o) if !o.success() => {
            f.push(format!(
                "ferrofs extract: {}: {}",
                o.describe_status(),
                o.stderr_tail(2000)
            ));
            extracted = out.exists();
        }
        Ok(_) => {}
    }
    if extracted {
        for d in compare::compare_trees(mnt, &out, &CompareOptions::strict()) {
            f.push(format!("extract vs kernel: {d}"));
        }
    }
    if !ferrofs_testkit::tmp::keep_requested() {
        let _ = ferrofs_testkit::tmp::remove_tree(&out);
    }
}

// ---------------------------------------------------------------------------------------------
// 6: determinism.
// ---------------------------------------------------------------------------------------------

#[test]
fn mkfs_images_are_deterministic() {
    let setup = setup();
    let mut results = Vec::new();
    for case in &setup.cases {
        let mut f = Vec::new();
        if let Err(e) = &setup.rev_tree {
            f.push(format!("reverse-order copy: {e}"));
        }
        let names = [
            "first build",
            "second build",
            "build from the reverse-order copy",
        ];
        for (k, b) in case.builds.iter().enumerate() {
            if let Err(e) = b {
                f.push(format!("{}: {e}", names[k]));
            }
        }
        if f.is_empty() {
            match fs::read(&case.image) {
                Err(e) => f.push(format!("cannot read {}: {e}", case.image.display())),
                Ok(first) => {
                    for (k, other) in [(1, &case.again), (2, &case.rev)] {
                        match fs::read(other) {
                            Err(e) => f.push(format!("cannot read {}: {e}", other.display())),
                            Ok(b) if b != first => {
                                let at = first
                                    .iter()
                                    .zip(&b)
                                    .position(|(x, y)| x != y)
                                    .unwrap_or(first.len().min(b.len()));
                                f.push(format!(
                                    "{} differs from the first: {} vs {} bytes, first \
                                     difference at offset {at} ({} vs {})",
                                    names[k],
                                    b.len(),
                                    first.len(),
                                    other.display(),
                                    case.image.display()
                                ));
                            }
                            Ok(_) => {}
                        }
                    }
                }
            }
        }
        results.push((case.label(), f));
    }
    ferrofs_testkit::tmp::report_cases(
        &setup.work,
        &format!(
            "determinism (same tree twice, and {} vs its reverse-order copy)",
            setup.tree.display()
        ),
        results,
    );
}
