//! The creation pass of an extraction: the entries the walk hands over
//! (`tree.rs`) are made on several threads (regular files with their data
//! planned, symlinks and devices with their metadata), and the files'
//! descriptors are kept for the data and metadata passes.

// The parent's types and helpers (this pass is one of its stages).
#[allow(clippy::wildcard_imports)]
use super::*;

/// What an entry of the walk becomes.
pub(super) enum Pending {
    File,
    Symlink(Vec<u8>),
    Special(RxType),
}

/// An entry queued by the walk for the creation pass.
pub(super) struct Entry {
    pub(super) rel: Vec<u8>,
    pub(super) path: PathBuf,
    pub(super) inode: Inode,
    pub(super) what: Pending,
}

/// What one thread of the creation pass made, in walk order, and the
/// error it stopped at.
#[derive(Default)]
pub(super) struct Created {
    /// Regular files, with their data's part of the plan (none: empty).
    pub(super) files: Vec<(Regular, Option<ferrofs::bulk::Prepared>)>,
    pub(super) symlinks: u64,
    pub(super) special: u64,
    pub(super) meta: MetaOut,
    pub(super) error: Option<ExtractError>,
}

/// What the creation pass's threads share.
pub(super) struct Create<'a> {
    pub(super) image: &'a Image,
    pub(super) opts: &'a Options,
    pub(super) target: &'a Path,
    pub(super) plan: &'a ReadPlan,
    pub(super) fds_left: &'a AtomicUsize,
}

impl Create<'_> {
    /// Creates a run of entries; stops at the first error.
    pub(super) fn run(&self, part: &[Entry]) -> Created {
        let mut c = Created::default();
        for e in part {
            if let Err(err) = self.one(e, &mut c) {
                c.error = Some(err);
                break;
            }
        }
        c
    }

    fn one(&self, e: &Entry, c: &mut Created) -> Result<(), ExtractError> {
        let path = &e.path;
        match &e.what {
            Pending::File => {
                let img_err = |source| ExtractError::Image {
                    path: String::from_utf8_lossy(&e.rel).into_owned(),
                    source,
                };
                // The map first: a damaged file fails before it is created.
                let prepared = if e.inode.size() > 0 {
                    let file = self.image.raw().open(e.inode.clone()).map_err(img_err)?;
                    Some(self.plan.prepare(&file).map_err(img_err)?)
                } else {
                    None
                };
                let out = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .mode(0o600)
                    .open(path)
                    .map_err(io_err(path))?;
                if prepared.as_ref().is_some_and(|p| p.sparse()) {
                    out.set_len(e.inode.size()).map_err(io_err(path))?;
                }
                let keep = self
                    .fds_left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok();
                let regular = Regular {
                    rel: e.rel.clone(),
                    path: path.clone(),
                    inode: e.inode.clone(),
                    file: keep.then_some(out),
                };
                c.files.push((regular, prepared));
                return Ok(());
            }
            Pending::Symlink(target) => {
                symlink(OsStr::from_bytes(target), path).map_err(io_err(path))?;
                c.symlinks += 1;
            }
            Pending::Special(kind) => {
                let dev = rustix::fs::makedev(e.inode.rdev().0, e.inode.rdev().1);
                rustix::fs::mknodat(CWD, path, *kind, Mode::from_raw_mode(0o600), dev)
                    .map_err(rx_err(path))?;
                c.special += 1;
            }
        }
        // Symlinks and special files have no data: their metadata now.
        let (image, opts, target) = (self.image, self.opts, self.target);
        set_metadata(image, opts, target, path, &e.inode, None, &mut c.meta)
    }
}

/// A regular file created by the walk, written by the data pass.
pub(super) struct Regular {
    /// Path in the image (`a/b`, no leading slash).
    pub(super) rel: Vec<u8>,
    /// Where it was created.
    pub(super) path: PathBuf,
    pub(super) inode: Inode,
    /// The descriptor the walk created it with, kept while descriptors
    /// last (else it is opened again by path, never following a link).
    pub(super) file: Option<fs::File>,
}

/// Descriptors of created files that may be kept open at once: the
/// process's limit less a reserve for everything else.
pub(super) fn fd_budget() -> usize {
    let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let soft = lim.current.unwrap_or(1 << 20).min(1 << 20);
    usize::try_from(soft.saturating_sub(256)).unwrap_or(0)
}

/// Grows this process's descriptor table to hold `n` more descriptors at
/// once, before the creation threads start. Linux grows the table by
/// doubling, and in a process with several threads each growth waits for
/// an RCU grace period (10-25 ms here): kept descriptors would otherwise
/// cost a dozen of those waits. A hint only: failure changes nothing.
pub(super) fn reserve_descriptors(target: &Path, n: usize) {
    let Ok(dir) = fs::File::open(target) else {
        return;
    };
    let want = i32::try_from(n.saturating_add(64)).unwrap_or(i32::MAX);
    // The lowest free descriptor at or above `want`; closed when dropped.
    drop(rustix::io::fcntl_dupfd_cloexec(&dir, want));
}

/// Raises this process's soft limit of open files to its hard limit (at
/// most 2^20), so an extraction can keep every file it creates open until
/// its data and metadata are written. For programs (the CLI) to call once.
pub fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    let want = lim.maximum.unwrap_or(1 << 20).min(1 << 20);
    if lim.current.is_some_and(|c| c < want) {
        lim.current = Some(want);
        let _ = setrlimit(Resource::Nofile, lim);
    }
}
