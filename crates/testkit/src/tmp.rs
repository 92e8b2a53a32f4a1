//! A self-cleaning temporary directory (no external crate needed).

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{SystemTime, UNIX_EPOCH};

static COUNTER: AtomicU64 = AtomicU64::new(0);

static AT_EXIT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

extern "C" fn remove_registered() {
    if let Ok(paths) = AT_EXIT.lock() {
        for p in paths.iter() {
            let _ = remove_tree(p);
        }
    }
}

/// Removes `path` (with [`remove_tree`]) when the process exits normally, e.g. when a test
/// binary has run all its tests (statics are never dropped, so this is the only hook).
pub fn remove_at_exit(path: &Path) {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: remove_registered is a plain extern "C" fn with no arguments; if
        // registration fails the paths are simply left behind.
        unsafe {
            libc::atexit(remove_registered);
        }
    });
    if let Ok(mut v) = AT_EXIT.lock() {
        v.push(path.to_path_buf());
    }
}

/// Cancels [`remove_at_exit`] for `path` (e.g. to keep it for a post-mortem after a failure).
pub fn keep_at_exit(path: &Path) {
    if let Ok(mut v) = AT_EXIT.lock() {
        v.retain(|p| p != path);
    }
}

/// A directory that is removed, with everything in it, when dropped (unless [`TempDir::keep`]
/// was called).
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
    keep: bool,
}

impl TempDir {
    /// Creates a new, empty directory `PREFIX.PID.N.NANOS` under [`std::env::temp_dir`].
    pub fn new(prefix: &str) -> io::Result<TempDir> {
        TempDir::new_in(&std::env::temp_dir(), prefix)
    }

    /// Creates a new, empty directory `PREFIX.PID.N.NANOS` under `base` (created if absent).
    pub fn new_in(base: &Path, prefix: &str) -> io::Result<TempDir> {
        fs::create_dir_all(base)?;
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let path = base.join(format!("{prefix}.{}.{n}.{nanos}", std::process::id()));
            match fs::create_dir(&path) {
                Ok(()) => return Ok(TempDir { path, keep: false }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Leaves the directory in place when dropped (for post-mortem inspection).
    pub fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = remove_tree(&self.path);
        }
    }
}

/// Removes `path` and everything below it; directories without write or search permission
/// (possible when not running as root) are opened up first. Missing paths are fine.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(m) if !m.is_dir() => return fs::remove_file(path),
        Ok(_) => {}
    }
    if fs::remove_dir_all(path).is_ok() {
        return Ok(());
    }
    // Open up every directory (explicit stack, no recursion) and try again.
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o700));
        if let Ok(rd) = fs::read_dir(&dir) {
            for entry in rd.flatten() {
                if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    stack.push(entry.path());
                }
            }
        }
    }
    fs::remove_dir_all(path)
}

/// Whether `FERROFS_TEST_KEEP` asks to keep test work directories.
pub fn keep_requested() -> bool {
    std::env::var_os("FERROFS_TEST_KEEP").is_some_and(|v| !v.is_empty() && v != "0")
}

/// A fresh `BASE/run-PID` (so concurrent test processes do not clash), after
/// removing the leftovers of processes that are gone. It is removed when the
/// process exits unless `FERROFS_TEST_KEEP` is set (tests that fail call
/// [`keep_at_exit`] to keep it for inspection). `images/` is created inside.
pub fn fresh_run_dir(base: &Path) -> PathBuf {
    std::fs::create_dir_all(base).expect("create the test base directory");
    if let Ok(entries) = std::fs::read_dir(base) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let pid = name.to_str().and_then(|n| n.strip_prefix("run-"));
            if pid.is_some_and(|pid| !Path::new("/proc").join(pid).exists()) {
                let _ = remove_tree(&entry.path());
            }
        }
    }
    let work = base.join(format!("run-{}", std::process::id()));
    remove_tree(&work).expect("clean the work directory");
    std::fs::create_dir_all(work.join("images")).expect("create the work directory");
    if !keep_requested() {
        remove_at_exit(&work);
    }
    work
}

/// A fresh work directory for the calling test: `NAME/run-PID` under the
/// test crate's `CARGO_TARGET_TMPDIR` (see [`fresh_run_dir`]; the macro
/// reads that variable where it is expanded, in the test crate).
#[macro_export]
macro_rules! work_dir {
    ($name:expr) => {
        $crate::tmp::fresh_run_dir(&::std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join($name))
    };
}

/// Runs `f(0..n)` on `workers` threads, each taking the next index.
pub fn parallel(n: usize, workers: usize, f: impl Fn(usize) + Sync) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..workers.min(n.max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    break;
                }
                f(i);
            });
        }
    });
}

/// The end of a test that collected `failures`: removes `work` if there
/// are none, else panics listing them (`work` is then left in place).
pub fn finish(work: &Path, failures: &[String]) {
    if failures.is_empty() {
        let _ = remove_tree(work);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs the checks `f(0..n)` on two threads, each returning its failures;
/// panics listing them all (with `work`, kept for inspection) if there
/// are any, else removes `work`.
pub fn parallel_checks(work: &Path, n: usize, f: impl Fn(usize) -> Vec<String> + Sync) {
    let failures = std::sync::Mutex::new(Vec::new());
    parallel(n, 2, |i| {
        let got = f(i);
        failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(got);
    });
    let failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    if failures.is_empty() {
        let _ = remove_tree(work);
    }
    assert!(
        failures.is_empty(),
        "{} failures (work in {}):\n{}",
        failures.len(),
        work.display(),
        failures.join("\n")
    );
}

/// Runs `check(i)` for every case `i` (labelled `labels[i]`) on two
/// threads, saying on stderr how each ended and how long it took
/// (prefixed `what`); returns `(label, failures)` in case order, for
/// [`report_cases`].
pub fn check_cases(
    what: &str,
    labels: Vec<String>,
    check: impl Fn(usize) -> Vec<String> + Sync,
) -> Vec<(String, Vec<String>)> {
    let results: Vec<std::sync::Mutex<Vec<String>>> = labels
        .iter()
        .map(|_| std::sync::Mutex::new(Vec::new()))
        .collect();
    parallel(labels.len(), 2, |i| {
        let t = std::time::Instant::now();
        let failures = check(i);
        let outcome = if failures.is_empty() {
            "ok".to_string()
        } else {
            format!("FAILED ({} failures)", failures.len())
        };
        eprintln!("{what}: {} {outcome} in {:.1?}", labels[i], t.elapsed());
        *results[i].lock().unwrap_or_else(|e| e.into_inner()) = failures;
    });
    labels
        .into_iter()
        .zip(results)
        .map(|(l, r)| (l, r.into_inner().unwrap_or_else(|e| e.into_inner())))
        .collect()
}

/// Panics with every failure of every case (`(case label, failures)`),
/// at most 40 shown a case, if there are any, keeping `work` for
/// inspection; otherwise says on stderr that all cases of `what` passed.
pub fn report_cases(work: &Path, what: &str, results: Vec<(String, Vec<String>)>) {
    const SHOW: usize = 40;
    let failed: Vec<_> = results.iter().filter(|(_, f)| !f.is_empty()).collect();
    if failed.is_empty() {
        eprintln!("{what}: all {} cases passed", results.len());
        return;
    }
    keep_at_exit(work);
    let mut msg = format!(
        "{what}: {} of {} cases failed (trees and images kept in {})\n",
        failed.len(),
        results.len(),
        work.display()
    );
    for (label, failures) in failed {
        msg.push_str(&format!("\n== {label}: {} failures\n", failures.len()));
        for f in failures.iter().take(SHOW) {
            msg.push_str(&format!("  {f}\n"));
        }
        if failures.len() > SHOW {
            msg.push_str(&format!("  ... and {} more\n", failures.len() - SHOW));
        }
    }
    panic!("{msg}");
}
