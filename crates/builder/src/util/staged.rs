//! Files written under a temporary name beside their target
//! (`.NAME.ferrofs-PID.tmp`) and renamed onto it only when complete: the
//! image, its blob and its block list. Their process holds a lock on them,
//! so a later build of the same target can remove those a killed build
//! left.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::error::{BuildError, Result};

/// A file written under a temporary name beside its target
/// (`.NAME.ferrofs-PID.tmp`) and renamed onto it by [`Staged::commit`];
/// removed if it is never committed (an error, an interrupt). Its process
/// holds a lock on it, so that a later build of the same target can tell
/// the temporary files of killed builds (unlocked, their process gone),
/// and removes them.
pub(crate) struct Staged<'p> {
    pub(crate) file: File,
    tmp: PathBuf,
    pub(crate) target: &'p Path,
    done: bool,
}

impl<'p> Staged<'p> {
    pub(crate) fn new(target: &'p Path) -> Result<Self> {
        let name = target.file_name().ok_or_else(|| {
            BuildError::Option(format!("{} is not a file path", target.display()))
        })?;
        let tmp = temp_beside(target, name);
        // Errors name the image, not the temporary file the user never
        // asked for.
        let fail = BuildError::output(target);
        if target.is_dir() {
            return Err(fail(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "it is a directory",
            )));
        }
        let file = fs::OpenOptions::new()
            .write(true)
            .read(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => fail(std::io::Error::new(
                    e.kind(),
                    format!("directory {} does not exist", dir_of(target).display()),
                )),
                _ => fail(e),
            })?;
        // Marks it as live (see remove_dead_temps); a file system without
        // locks just keeps killed builds' files.
        let _ = file.try_lock();
        Ok(Self {
            file,
            tmp,
            target,
            done: false,
        })
    }

    pub(crate) fn err(&self) -> impl FnOnce(std::io::Error) -> BuildError + '_ {
        BuildError::output(self.target)
    }

    /// Makes the bytes durable.
    pub(crate) fn sync(&self) -> Result<()> {
        self.file.sync_all().map_err(self.err())
    }

    /// Puts the (synced) file in place.
    pub(crate) fn commit(&mut self) -> Result<()> {
        fs::rename(&self.tmp, self.target).map_err(self.err())?;
        self.done = true;
        if let Ok(d) = File::open(dir_of(self.target)) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_file(&self.tmp);
        }
        // Released by name, not left to the close: a child another
        // thread was starting at the time holds a copy of the descriptor
        // (until its exec closes it), and with it the lock, which would
        // refuse the next writer of this file.
        let _ = self.file.unlock();
    }
}

/// The temporary name (`.NAME.ferrofs-PID.tmp`) a file written for
/// `target` (whose file name is `name`) has until it is complete; the
/// temporary files killed builds left for it are removed first.
pub(crate) fn temp_beside(target: &Path, name: &std::ffi::OsStr) -> PathBuf {
    let prefix = format!(".{}.ferrofs-", name.to_string_lossy());
    remove_dead_temps(dir_of(target), &prefix);
    dir_of(target).join(format!("{prefix}{}.tmp", std::process::id()))
}

/// Removes the temporary files (`PREFIX` PID `.tmp`) of builds of the
/// same target that were killed: their process is gone and nothing holds
/// their lock. Best effort: what cannot be checked or removed stays.
fn remove_dead_temps(dir: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id();
    for e in entries.flatten() {
        let name = e.file_name();
        if !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|n| n.strip_suffix(".tmp"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let path = e.path();
        let Ok(f) = fs::OpenOptions::new().write(true).open(&path) else {
            continue;
        };
        // A live build holds its file's lock from the moment it makes it,
        // so a free lock means its owner is gone, unless the file is that
        // new (made, not yet locked) and its process still runs.
        if f.try_lock().is_err() {
            continue;
        }
        let Ok(meta) = f.metadata() else { continue };
        let fresh = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_none_or(|age| age < LOCK_GRACE);
        if meta.is_file() && !(fresh && runs(pid)) {
            let _ = fs::remove_file(&path);
        }
    }
}

/// How long a new temporary file may be seen without its lock: longer
/// than any gap between making it and locking it. Past that, a free lock
/// means a killed build even if its process number is in use again.
const LOCK_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether process `pid` runs: it exists and is not a zombie, one killed
/// but not yet waited for by its parent, whose files are all closed.
fn runs(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        // Gone, or no /proc to ask: without /proc a process counts as
        // running (the age above still lets its file go).
        return !Path::new("/proc/self").exists();
    };
    // "PID (COMMAND) STATE ...": the command may hold parentheses and
    // spaces, so the state follows the last ')'.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X' | 'x'))
}

/// The directory `path` is in (`.` for a bare file name): where files
/// written for `path` are staged and scratch files go.
pub(crate) fn dir_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}
