//! The `ferrofs` binary against images built by the reference `mkfs.erofs` (Debian's 1.5 and
//! upstream 1.8.6) from the testkit's corner-case tree, with the kernel's EROFS driver (a loop
//! mount) as the oracle.
//!
//! For every option in [`tools::option_matrix`] and every mkfs version that supports it:
//! - `harness_kernel_matches_source`: the kernel mount must match the source tree (validates
//!   the harness and records what mkfs itself loses; see [`kernel_vs_source`]), and the
//!   reference `fsck.erofs` must accept the image;
//! - `ferrofs_matches_kernel`: (b) `ferrofs fsck IMAGE` exits 0; (c) `ferrofs extract IMAGE OUT`
//!   gives a tree identical to the kernel mount, strictly (contents, modes, owners, mtimes with
//!   nanoseconds, xattrs, hardlinks, devices); (d) `ferrofs cat IMAGE /PATH` prints the kernel's
//!   bytes for every regular file (all but 50 of the 3,000-entry directory's files, which are
//!   sampled).
//!
//! Needs root (loop mounts, devices, owners); otherwise each test prints `skipped: REASON`.
//! Missing reference tools (Debian's erofs-utils, the upstream tools) are failures.
//! Environment:
//! - `FERROFS_TEST_ONLY_HARNESS=1`: run only the harness test;
//! - `FERROFS_TEST_CASES=lz4,zstd_C64k`: only cases whose name contains one of these;
//! - `FERROFS_TEST_KEEP=1`: keep the trees, images and extracted trees under
//!   `target/tmp/upstream_images/run-PID/` (they are also kept when a case fails; otherwise
//!   removed when the test process exits).
//!
//! Every failure of every image is collected and reported together at the end.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use ferrofs_testkit::compare::{self, show_path, CompareOptions};
use ferrofs_testkit::corpus::{self, CornerOptions};
use ferrofs_testkit::process::run_with_timeout;
use ferrofs_testkit::tools::{self, Flavor, Mkfs};
use ferrofs_testkit::{can_mount, LoopMount};

use crate::FERROFS;
use ferrofs_testkit::work_dir;
/// Worker threads per test (the machine has 2 cores).
const WORKERS: usize = 2;
/// How many files of the 3,000-entry directory `cat` checks.
const BIG_DIR_SAMPLE: usize = 50;
/// Time limit for one `ferrofs` run.
const LIMIT: Duration = Duration::from_secs(300);

struct Case {
    name: &'static str,
    opts: Vec<&'static str>,
    mkfs: Mkfs,
    src: PathBuf,
    image: PathBuf,
    /// mkfs's wall time, or why it failed.
    build: Result<Duration, String>,
}

impl Case {
    fn label(&self) -> String {
        format!(
            "{} [{}] (mkfs.erofs {})",
            self.name,
            self.opts.join(" "),
            self.mkfs.version
        )
    }

    fn slug(&self) -> String {
        format!("{}-{}", self.name, self.mkfs.flavor.label())
    }
}

struct Setup {
    work: PathBuf,
    cases: Vec<Case>,
}

/// Builds the trees and every image once per test process; `Err` = reason to skip.
fn setup() -> Result<&'static Setup, String> {
    static SETUP: OnceLock<Result<Setup, String>> = OnceLock::new();
    SETUP
        .get_or_init(build_setup)
        .as_ref()
        .map_err(Clone::clone)
}

fn build_setup() -> Result<Setup, String> {
    can_mount()?;
    // Missing reference tools fail the tests rather than skip them: a matrix that silently
    // shrinks would hide regressions.
    let mkfs = tools::all_mkfs();
    assert!(
        tools::mkfs_debian().is_some(),
        "Debian's mkfs.erofs 1.5 is missing: apt-get install erofs-utils"
    );
    assert!(
        tools::mkfs_upstream().is_some(),
        "upstream mkfs.erofs is missing: run ../shared/tools/upstream-tools or set UPSTREAM_TOOLS_BIN"
    );
    let t0 = Instant::now();
    let work = work_dir!("upstream_images");
    let tree = work.join("tree");
    corpus::make_corner_tree(&tree).expect("make the corner tree");
    let tree254 = work.join("tree254");
    if mkfs.iter().any(|m| m.flavor == Flavor::Debian) {
        let opts = CornerOptions {
            max_name_len: 254,
            ..CornerOptions::default()
        };
        corpus::make_corner_tree_with(&tree254, &opts).expect("make the 254 tree");
    }
    // mkfs.erofs 1.9.4's fragments + dedupe takes minutes over `sparse/holes_10m`: those
    // images are built from a tree without it (see `CornerOptions::holes_10m`).
    let tree_no_holes = work.join("tree-no-holes");
    let slow_in_next = |opts: &[&str]| {
        let has = |what: &str| opts.iter().any(|o| o.starts_with("-E") && o.contains(what));
        has("fragments") && has("dedupe")
    };
    let filter: Option<Vec<String>> = std::env::var("FERROFS_TEST_CASES").ok().map(|s| {
        s.split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect()
    });
    let mut cases = Vec::new();
    for (name, opts, needs_upstream) in tools::option_matrix() {
        if let Some(f) = &filter {
            if !f.iter().any(|p| name.contains(p.as_str())) {
                continue;
            }
        }
        for m in &mkfs {
            if needs_upstream && m.flavor != Flavor::Upstream {
                continue;
            }
            let src = if m.flavor == Flavor::Debian {
                tree254.clone()
            } else {
                tree.clone()
            };
            let image = work
                .join("images")
                .join(format!("{name}-{}.img", m.flavor.label()));
            cases.push(Case {
                name,
                opts: opts.clone(),
                mkfs: m.clone(),
                src,
                image,
                build: Err("not built".into()),
            });
        }
    }
    // The 2025 format features, from the newest mkfs.erofs only.
    let next = tools::mkfs_next().expect(
        "mkfs.erofs 1.9.x is missing: run ../shared/tools/upstream-tools --next or set UPSTREAM_NEXT_BIN",
    );
    for (name, opts) in tools::option_matrix_next() {
        if let Some(f) = &filter {
            if !f.iter().any(|p| name.contains(p.as_str())) {
                continue;
            }
        }
        let image = work
            .join("images")
            .join(format!("{name}-{}.img", next.flavor.label()));
        let src = if slow_in_next(&opts) {
            if !tree_no_holes.exists() {
                let no_holes = CornerOptions {
                    holes_10m: false,
                    ..CornerOptions::default()
                };
                corpus::make_corner_tree_with(&tree_no_holes, &no_holes)
                    .expect("make the tree without holes_10m");
            }
            tree_no_holes.clone()
        } else {
            tree.clone()
        };
        cases.push(Case {
            name,
            opts,
            mkfs: next.clone(),
            src,
            image,
            build: Err("not built".into()),
        });
    }
    let results: Vec<Mutex<Option<Result<Duration, String>>>> =
        cases.iter().map(|_| Mutex::new(None)).collect();
    ferrofs_testkit::tmp::parallel(cases.len(), WORKERS, |i| {
        let c = &cases[i];
        let t = Instant::now();
        let r = tools::build_image(&c.mkfs, &c.opts, &c.src, &c.image)
            .map(|()| t.elapsed())
            .map_err(|e| e.to_string());
        *results[i].lock().unwrap() = Some(r);
    });
    for (c, r) in cases.iter_mut().zip(results) {
        c.build = r.into_inner().unwrap().unwrap();
    }
    eprintln!(
        "setup: corner trees and {} images in {:.1?} (mkfs: {})",
        cases.len(),
        t0.elapsed(),
        mkfs.iter()
            .map(|m| m.describe())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(Setup { work, cases })
}

/// For every case: check the build, mount the image, run `check(case, mountpoint)`; returns
/// each case's failures (empty when it passed), in case order.
fn for_each_case(
    setup: &Setup,
    what: &str,
    check: impl Fn(&Case, &Path) -> Vec<String> + Sync,
) -> Vec<(String, Vec<String>)> {
    let labels = setup.cases.iter().map(|c| c.label()).collect();
    ferrofs_testkit::tmp::check_cases(what, labels, |i| {
        let case = &setup.cases[i];
        match &case.build {
            Err(e) => vec![format!("mkfs failed: {e}")],
            Ok(_) => match LoopMount::new(&case.image, &[]) {
                Err(e) => vec![format!("kernel mount failed: {e}")],
                Ok(mnt) => check(case, mnt.path()),
            },
        }
    })
}

/// What the kernel mount may legitimately differ in from the source tree, per case: only what
/// mkfs (or the on-disk format) itself drops.
fn kernel_vs_source(case: &Case) -> CompareOptions {
    let mut o = CompareOptions::strict();
    if case.opts.contains(&"--ignore-mtime") {
        // mkfs stores the build time instead of per-file mtimes.
        o.compare_mtime = false;
    }
    let bit48 = ["-E48bit", "-Edot-omitted", "-m"]
        .iter()
        .any(|p| case.opts.iter().any(|o| o.starts_with(p)));
    if case.mkfs.flavor == Flavor::Next && bit48 {
        // mkfs.erofs 1.9.x in 48-bit mode keeps every inode compact: it drops
        // the nanoseconds and wraps mtimes outside [epoch, epoch + 2^32)
        // (the format notes, 48-bit timestamps). ferrofs is still compared
        // strictly with the kernel's view of these images.
        o.compare_mtime = false;
    }
    o
}

#[test]
fn harness_kernel_matches_source() {
    let setup = match setup() {
        Ok(s) => s,
        Err(reason) => return println!("skipped: {reason}"),
    };
    let results = for_each_case(setup, "harness", |case, mnt| {
        let mut failures: Vec<String> =
            compare::compare_trees(&case.src, mnt, &kernel_vs_source(case))
                .iter()
                .map(|d| format!("kernel vs source: {d}"))
                .collect();
        // The reference fsck (upstream when available, it knows every feature) must agree.
        // Except with 1024-byte blocks: fsck.erofs 1.8.6 rejects those valid images ("invalid
        // sb_extslots 0 (more than a fs block)": it checks 1024 + sb_size against the block
        // size, forgetting the superblock then sits in block 1); the kernel mounts them.
        let fsck = if case.mkfs.flavor == Flavor::Next {
            tools::fsck_next()
        } else {
            tools::fsck_upstream().or_else(tools::fsck_debian)
        };
        if let Some(fsck) = fsck.filter(|_| !case.opts.contains(&"-b1024")) {
            if let Err(e) = fsck.run(&[case.image.as_os_str()]) {
                failures.push(format!("reference {e}"));
            }
        }
        failures
    });
    ferrofs_testkit::tmp::report_cases(
        &setup.work,
        "harness (kernel mount vs source tree)",
        results,
    );
}

/// A negative control: the comparison must notice that the two source trees differ (their
/// longest names are 255 vs 254 bytes long), or the passes above mean nothing.
#[test]
fn harness_compare_notices_differences() {
    let setup = match setup() {
        Ok(s) => s,
        Err(reason) => return println!("skipped: {reason}"),
    };
    let (a, b) = (setup.work.join("tree"), setup.work.join("tree254"));
    if !b.exists() {
        return println!("skipped: no Debian mkfs.erofs, so no 254-byte tree");
    }
    let d = compare::compare_trees(&a, &b, &CompareOptions::strict());
    let presence = d.iter().filter(|d| d.what == "presence").count();
    // Three names of 255 bytes (two files, one directory) vs their 254-byte versions.
    assert_eq!(presence, 6, "unexpected differences: {d:#?}");
    assert_eq!(d.len(), 6, "unexpected differences: {d:#?}");
}

#[test]
fn ferrofs_matches_kernel() {
    if std::env::var_os("FERROFS_TEST_ONLY_HARNESS").is_some_and(|v| !v.is_empty() && v != "0") {
        return println!("skipped: FERROFS_TEST_ONLY_HARNESS is set");
    }
    let setup = match setup() {
        Ok(s) => s,
        Err(reason) => return println!("skipped: {reason}"),
    };
    let keep = std::env::var_os("FERROFS_TEST_KEEP").is_some();
    let results = for_each_case(setup, "ferrofs", |case, mnt| {
        let mut failures = Vec::new();
        check_fsck(case, &mut failures);
        let out = setup.work.join("extract").join(case.slug());
        check_extract(case, mnt, &out, &mut failures);
        if !keep {
            let _ = ferrofs_testkit::tmp::remove_tree(&out);
        }
        check_cat(case, mnt, &mut failures);
        failures
    });
    ferrofs_testkit::tmp::report_cases(
        &setup.work,
        "ferrofs (fsck, extract, cat vs kernel mount)",
        results,
    );
}

fn ferrofs(args: &[&std::ffi::OsStr]) -> Result<ferrofs_testkit::process::Outcome, String> {
    run_with_timeout(Command::new(FERROFS).args(args), LIMIT)
        .map_err(|e| format!("cannot run {FERROFS}: {e}"))
}

/// (b) `ferrofs fsck IMAGE` accepts the image.
fn check_fsck(case: &Case, failures: &mut Vec<String>) {
    match ferrofs(&["fsck".as_ref(), case.image.as_os_str()]) {
        Err(e) => failures.push(e),
        Ok(o) if !o.success() => failures.push(format!(
            "ferrofs fsck: {}: {}",
            o.describe_status(),
            o.stderr_tail(2000)
        )),
        Ok(_) => {}
    }
}

/// (c) `ferrofs extract IMAGE OUT` reproduces the kernel's view exactly.
fn check_extract(case: &Case, mnt: &Path, out: &Path, failures: &mut Vec<String>) {
    let _ = ferrofs_testkit::tmp::remove_tree(out);
    fs::create_dir_all(out.parent().unwrap()).unwrap();
    match ferrofs(&["extract".as_ref(), case.image.as_os_str(), out.as_os_str()]) {
        Err(e) => return failures.push(e),
        Ok(o) if !o.success() => {
            failures.push(format!(
                "ferrofs extract: {}: {}",
                o.describe_status(),
                o.stderr_tail(2000)
            ));
            if !out.exists() {
                return;
            }
        }
        Ok(_) => {}
    }
    for d in compare::compare_trees(mnt, out, &CompareOptions::strict()) {
        failures.push(format!("extract vs kernel: {d}"));
    }
}

/// (d) `ferrofs cat IMAGE /PATH` prints the kernel's bytes, for every regular file (a sample
/// of the big directory's).
fn check_cat(case: &Case, mnt: &Path, failures: &mut Vec<String>) {
    let entries = match compare::list_tree(mnt) {
        Ok(e) => e,
        Err(e) => return failures.push(format!("cannot walk the kernel mount: {e}")),
    };
    let big = Path::new(corpus::BIG_DIR);
    let mut files: Vec<PathBuf> = Vec::new();
    let mut big_files: Vec<PathBuf> = Vec::new();
    for (rel, meta) in entries {
        if !meta.is_file() {
            continue;
        }
        if rel.parent() == Some(big) {
            big_files.push(rel);
        } else {
            files.push(rel);
        }
    }
    let step = (big_files.len() / BIG_DIR_SAMPLE).max(1);
    files.extend(big_files.into_iter().step_by(step).take(BIG_DIR_SAMPLE));
    let mut errors = 0;
    for rel in files {
        let mut arg = b"/".to_vec();
        arg.extend_from_slice(rel.as_os_str().as_bytes());
        let arg = std::ffi::OsStr::from_bytes(&arg);
        let expected = match fs::read(mnt.join(&rel)) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!(
                    "cat {}: the kernel cannot read it: {e}",
                    show_path(&rel)
                ));
                continue;
            }
        };
        let failure = match ferrofs(&["cat".as_ref(), case.image.as_os_str(), arg]) {
            Err(e) => Some(e),
            Ok(o) if !o.success() => {
                Some(format!("{}: {}", o.describe_status(), o.stderr_tail(500)))
            }
            Ok(o) if o.stdout != expected => {
                let at = o
                    .stdout
                    .iter()
                    .zip(&expected)
                    .position(|(a, b)| a != b)
                    .unwrap_or(o.stdout.len().min(expected.len()));
                Some(format!(
                    "{} bytes, expected {}; first difference at offset {at}",
                    o.stdout.len(),
                    expected.len()
                ))
            }
            Ok(_) => None,
        };
        if let Some(f) = failure {
            failures.push(format!("cat {}: {f}", show_path(&rel)));
            errors += 1;
            if errors >= 200 {
                failures.push("cat: stopped after 200 failures".into());
                return;
            }
        }
    }
}
