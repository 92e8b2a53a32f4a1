//! Advisory locks on image files. A tool that changes an image in place
//! (`mkfs --incremental`, a hot-range record) holds an exclusive `flock`
//! on it for the whole change; readers take a shared one, so they wait for
//! a change to finish instead of seeing a half-appended image. Locks are
//! released when the file is closed (or its process dies), so a killed
//! writer never leaves a stale lock. [`holder`] names the process that holds
//! a lock, from `/proc/locks`.

use std::fmt;
use std::fs::File;
use std::os::unix::fs::MetadataExt;

/// The process that holds a lock on a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// Its process id.
    pub pid: u32,
    /// Its command line (arguments joined by spaces; empty when it cannot
    /// be read).
    pub command: String,
    /// It holds the lock exclusively (it is writing).
    pub exclusive: bool,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "process {}", self.pid)?;
        if !self.command.is_empty() {
            write!(f, " ({})", self.command)?;
        }
        Ok(())
    }
}

/// Why an exclusive lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another open file holds a lock on it.
    #[error("in use by {}", holder.as_ref().map_or_else(|| "another process".to_string(), Holder::to_string))]
    Busy {
        /// Who, when `/proc/locks` says.
        holder: Option<Holder>,
    },
    /// The lock call failed.
    #[error("cannot lock it: {0}")]
    Io(#[from] std::io::Error),
}

/// Takes an exclusive lock on `file` without waiting.
pub fn try_exclusive(file: &File) -> Result<(), LockError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(LockError::Busy {
            holder: holder(file),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(LockError::Io(e)),
    }
}

/// Takes a shared lock on `file`, waiting while a writer holds it;
/// `waiting` is called once, with the writer, before the wait. A file
/// system that does not do locks is read without one.
pub fn shared_waiting(file: &File, waiting: impl FnOnce(Option<Holder>)) -> std::io::Result<()> {
    match file.try_lock_shared() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => {
            waiting(holder(file));
            file.lock_shared()
        }
        Err(std::fs::TryLockError::Error(e)) if unsupported(&e) => Ok(()),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

fn unsupported(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::Unsupported) || e.raw_os_error() == Some(38)
}

/// The process (other than this one) that holds a lock on `file`, a
/// writer before a reader, when `/proc/locks` lists one.
pub fn holder(file: &File) -> Option<Holder> {
    let meta = file.metadata().ok()?;
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    let me = std::process::id();
    let mut found: Vec<Holder> = table
        .lines()
        .filter_map(|l| parse_line(l, meta.dev(), meta.ino()))
        .filter(|&(pid, _)| pid != me)
        .map(|(pid, exclusive)| Holder {
            pid,
            command: command_of(pid),
            exclusive,
        })
        .collect();
    found.sort_by_key(|h| !h.exclusive);
    found.into_iter().next()
}

/// One line of `/proc/locks` (`1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0
/// EOF`): its pid and whether it is a write lock, when it is about the file
/// with device `dev` and inode `ino`.
fn parse_line(line: &str, dev: u64, ino: u64) -> Option<(u32, bool)> {
    let mut f = line.split_whitespace().skip(1);
    let class = f.next()?;
    // Blocked waiters are listed as "-> FLOCK ...": not holders.
    if class == "->" {
        return None;
    }
    let _advisory = f.next()?;
    let kind = f.next()?;
    let pid: u32 = f.next()?.parse().ok()?;
    let mut id = f.next()?.split(':');
    let major = u64::from_str_radix(id.next()?, 16).ok()?;
    let minor = u64::from_str_radix(id.next()?, 16).ok()?;
    let inode: u64 = id.next()?.parse().ok()?;
    (major == dev_major(dev) && minor == dev_minor(dev) && inode == ino)
        .then_some((pid, kind == "WRITE"))
}

/// glibc's encoding of a `dev_t`.
fn dev_major(dev: u64) -> u64 {
    ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)
}

fn dev_minor(dev: u64) -> u64 {
    (dev & 0xff) | ((dev >> 12) & !0xff)
}

fn command_of(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_locks_lines_are_matched_by_device_and_inode() {
        // Device 253:1 (fd:01), inode 1234.
        let dev = (253 << 8) | 1;
        let w = "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF";
        assert_eq!(parse_line(w, dev, 1234), Some((4242, true)));
        let r = "2: FLOCK  ADVISORY  READ 77 fd:01:1234 0 EOF";
        assert_eq!(parse_line(r, dev, 1234), Some((77, false)));
        assert_eq!(parse_line(w, dev, 1235), None);
        assert_eq!(parse_line(w, (8 << 8) | 1, 1234), None);
        let waiter = "1: -> FLOCK  ADVISORY  WRITE 99 fd:01:1234 0 EOF";
        assert_eq!(parse_line(waiter, dev, 1234), None);
        assert_eq!(parse_line("garbage", dev, 1234), None);
    }

    #[test]
    fn a_second_open_file_sees_the_lock_and_its_holder_is_this_process_only_once_dropped() {
        let dir = std::env::temp_dir().join(format!("ferrofs-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("img");
        std::fs::write(&path, b"x").unwrap();
        let a = File::open(&path).unwrap();
        let b = File::open(&path).unwrap();
        try_exclusive(&a).unwrap();
        // Locks of this process are not named as another's.
        assert!(matches!(
            try_exclusive(&b),
            Err(LockError::Busy { holder: None })
        ));
        assert!(b.try_lock_shared().is_err());
        drop(a);
        shared_waiting(&b, |_| panic!("nothing holds it now")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
