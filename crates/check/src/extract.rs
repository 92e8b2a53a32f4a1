//! extract: write an image's tree into a directory with contents, modes,
//! owners (as root), times with nanoseconds, xattrs, hard links, symlinks,
//! devices and fifos. Every name is checked so nothing lands outside the
//! target, and nothing existing is ever followed or overwritten.
//!
//! Three passes: the walk creates the tree (directories, empty files,
//! links, devices) and plans every file's data; the data pass
//! ([`ferrofs::bulk`]) reads each stored cluster once, in physical order
//! on all cores, and writes its pieces into the files; then the files'
//! and directories' metadata is set, so times come after contents.
//!
//! An xattr or owner the target refuses (Linux allows no `user.*` xattrs
//! on a symlink; a filesystem holds only so many xattr bytes per inode;
//! an unprivileged or id-mapped chown) does not stop the extraction: it is
//! recorded in [`Summary::not_restored`] (path, what, reason) and the next
//! one is tried. Restoring either is optional ([`Options`]).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ferrofs::bulk::{Delivery, FileId, ReadPlan, RunOptions};
use ferrofs::format::inode::FileType;
use ferrofs::format::Nid;
use ferrofs::{raw::Inode, Image};
use rustix::fs::{AtFlags, FileType as RxType, Mode, Timespec, Timestamps, CWD};
use thiserror::Error;

use crate::walk::{walk, Visit};

/// Why an extraction failed.
#[derive(Debug, Error)]
pub enum ExtractError {
    #[error("{0}: target directory is not empty")]
    NotEmpty(PathBuf),
    #[error("{path}: refusing entry name {name:?} (it would escape the target)")]
    BadName { path: String, name: String },
    #[error("{path}: {source}")]
    Image {
        path: String,
        #[source]
        source: ferrofs::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("interrupted: {files_done} of {files} files with data complete, {bytes} bytes written; the target holds a partial tree")]
    Interrupted {
        /// Files whose every byte was written.
        files_done: u64,
        /// Files with data in the image (as far as the walk got).
        files: u64,
        /// Bytes of file data written.
        bytes: u64,
    },
}

/// What was written.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub dirs: u64,
    pub files: u64,
    pub symlinks: u64,
    pub hardlinks: u64,
    pub special: u64,
    pub bytes: u64,
    /// Distinct compressed pclusters the files' data lies in.
    pub pclusters: u64,
    /// Compressed pclusters decoded (each at most once).
    pub pclusters_decoded: u64,
    /// Bytes those decodes produced.
    pub bytes_decoded: u64,
    /// Compressed pclusters found decoded in the image's cache (by an
    /// earlier read, like the long xattr prefixes at open).
    pub pclusters_cached: u64,
    /// Extended attributes set.
    pub xattrs: u64,
    /// What the target refused, in extraction order.
    pub not_restored: Vec<NotRestored>,
}

/// An xattr or owner that could not be set on an extracted entry.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NotRestored {
    /// The entry's path in the image (`/dir/name`).
    pub path: String,
    /// What was not set.
    pub what: Attribute,
    /// Why, as the target's filesystem said it.
    pub reason: String,
}

/// The attribute of a [`NotRestored`].
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Attribute {
    /// An extended attribute, by full name (lossy UTF-8).
    Xattr(String),
    /// The owner and group.
    Owner { uid: u32, gid: u32 },
}

impl std::fmt::Display for Attribute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Attribute::Xattr(name) => write!(f, "xattr {name}"),
            Attribute::Owner { uid, gid } => write!(f, "owner {uid}:{gid}"),
        }
    }
}

/// Extraction options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Restore owners (needs root; default: when running as root).
    pub owners: bool,
    /// Create device nodes (needs root).
    pub devices: bool,
    /// Restore extended attributes.
    pub xattrs: bool,
    /// Threads reading, decoding and writing file data (default: every
    /// core). The result is the same for any number.
    pub jobs: usize,
    /// Most bytes of file data in memory at once (default 256 MiB).
    pub memory: u64,
    /// Set (by a signal handler) to stop: the extraction ends with
    /// [`ExtractError::Interrupted`], saying what it finished.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for Options {
    fn default() -> Self {
        let root = rustix::process::geteuid().is_root();
        let run = RunOptions::default();
        Self {
            owners: root,
            devices: root,
            xattrs: true,
            jobs: run.jobs,
            memory: run.memory,
            cancel: None,
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ExtractError + '_ {
    move |source| ExtractError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn rx_err(path: &Path) -> impl FnOnce(rustix::io::Errno) -> ExtractError + '_ {
    move |e| ExtractError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// What an entry of the walk becomes.
enum Pending {
    File,
    Symlink(Vec<u8>),
    Special(RxType),
}

/// An entry queued by the walk for the creation pass.
struct Entry {
    rel: Vec<u8>,
    path: PathBuf,
    inode: Inode,
    what: Pending,
}

/// What one thread of the creation pass made, in walk order, and the
/// error it stopped at.
#[derive(Default)]
struct Created {
    /// Regular files, with their data's part of the plan (none: empty).
    files: Vec<(Regular, Option<ferrofs::bulk::Prepared>)>,
    symlinks: u64,
    special: u64,
    meta: MetaOut,
    error: Option<ExtractError>,
}

/// What the creation pass's threads share.
struct Create<'a> {
    image: &'a Image,
    opts: &'a Options,
    target: &'a Path,
    plan: &'a ReadPlan,
    fds_left: &'a AtomicUsize,
}

impl Create<'_> {
    /// Creates a run of entries; stops at the first error.
    fn run(&self, part: &[Entry]) -> Created {
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
struct Regular {
    /// Path in the image (`a/b`, no leading slash).
    rel: Vec<u8>,
    /// Where it was created.
    path: PathBuf,
    inode: Inode,
    /// The descriptor the walk created it with, kept while descriptors
    /// last (else it is opened again by path, never following a link).
    file: Option<fs::File>,
}

struct Extractor<'a> {
    image: &'a Image,
    target: PathBuf,
    opts: Options,
    summary: Summary,
    first_path: HashMap<Nid, PathBuf>,
    /// Directories whose metadata is applied at the end, deepest last.
    dirs: Vec<(PathBuf, Inode)>,
    /// Regular files with data, by plan id (their metadata comes after
    /// the data pass).
    files: Vec<Regular>,
    /// Regular files without data, in walk order.
    empty: Vec<Regular>,
    /// Entries the walk queued for the creation pass.
    pending: Vec<Entry>,
    /// Hard links (to the first path, at this path), made last.
    links: Vec<(PathBuf, PathBuf)>,
    plan: ReadPlan,
    /// Descriptors of created files that may still be kept open.
    fds_left: usize,
    error: Option<ExtractError>,
}

fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

impl Extractor<'_> {
    fn out_path(&self, rel: &[u8]) -> PathBuf {
        self.target.join(OsStr::from_bytes(rel))
    }

    /// One entry of the walk: directories are made now (parents come
    /// first), hard links to a file seen before are noted, everything else
    /// is queued for the parallel creation pass.
    fn entry(&mut self, rel: &[u8], name: &[u8], inode: &Inode) -> Result<(), ExtractError> {
        if !valid_name(name) {
            return Err(ExtractError::BadName {
                path: String::from_utf8_lossy(rel).into_owned(),
                name: String::from_utf8_lossy(name).into_owned(),
            });
        }
        let path = self.out_path(rel);
        if !inode.is_dir() && inode.nlink() > 1 {
            if let Some(first) = self.first_path.get(&inode.nid()) {
                self.links.push((first.clone(), path));
                return Ok(());
            }
            self.first_path.insert(inode.nid(), path.clone());
        }
        let img_err = |source| ExtractError::Image {
            path: String::from_utf8_lossy(rel).into_owned(),
            source,
        };
        let what = match inode.file_type() {
            FileType::Directory => {
                fs::create_dir(&path).map_err(io_err(&path))?;
                rustix::fs::chmod(&path, Mode::from_raw_mode(0o700)).map_err(rx_err(&path))?;
                self.summary.dirs += 1;
                self.dirs.push((path, inode.clone()));
                return Ok(());
            }
            FileType::Regular => Pending::File,
            FileType::Symlink => {
                Pending::Symlink(self.image.raw().read_link(inode).map_err(img_err)?)
            }
            FileType::CharDevice | FileType::BlockDevice | FileType::Fifo | FileType::Socket => {
                let kind = match inode.file_type() {
                    FileType::CharDevice => RxType::CharacterDevice,
                    FileType::BlockDevice => RxType::BlockDevice,
                    FileType::Fifo => RxType::Fifo,
                    _ => RxType::Socket,
                };
                let is_dev = matches!(kind, RxType::CharacterDevice | RxType::BlockDevice);
                if is_dev && !self.opts.devices {
                    return Ok(());
                }
                Pending::Special(kind)
            }
        };
        self.pending.push(Entry {
            rel: rel.to_vec(),
            path,
            inode: inode.clone(),
            what,
        });
        Ok(())
    }

    /// Creates the queued entries on the data pass's threads, in runs of
    /// the walk order: regular files (their data mapped and planned),
    /// symlinks and special files with their metadata; then the hard links.
    /// The first error in walk order wins, whatever the thread count.
    fn create_entries(&mut self) -> Result<(), ExtractError> {
        let pending = std::mem::take(&mut self.pending);
        let files = pending
            .iter()
            .filter(|e| matches!(e.what, Pending::File))
            .count();
        reserve_descriptors(&self.target, files.min(self.fds_left));
        let jobs = self.opts.jobs.clamp(1, 256);
        let chunk = pending.len().div_ceil(jobs).max(1);
        let fds_left = AtomicUsize::new(self.fds_left);
        let ctx = Create {
            image: self.image,
            opts: &self.opts,
            target: &self.target,
            plan: &self.plan,
            fds_left: &fds_left,
        };
        let results: Vec<Created> = std::thread::scope(|s| {
            let handles: Vec<_> = pending
                .chunks(chunk)
                .map(|part| {
                    let ctx = &ctx;
                    s.spawn(move || ctx.run(part))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| Created {
                        error: Some(ExtractError::Io {
                            path: self.target.clone(),
                            source: io::Error::other("internal: a creating thread panicked"),
                        }),
                        ..Created::default()
                    })
                })
                .collect()
        });
        self.fds_left = fds_left.into_inner();
        for c in results {
            self.summary.symlinks += c.symlinks;
            self.summary.special += c.special;
            self.summary.xattrs += c.meta.xattrs;
            self.summary.not_restored.extend(c.meta.not_restored);
            for (regular, prepared) in c.files {
                self.summary.files += 1;
                match prepared {
                    Some(p) => {
                        let added = self.plan.commit(p).map_err(|source| ExtractError::Image {
                            path: show(&regular.rel),
                            source,
                        })?;
                        debug_assert_eq!(added.id.index(), self.files.len());
                        self.files.push(regular);
                    }
                    None => self.empty.push(regular),
                }
            }
            if let Some(e) = c.error {
                return Err(e);
            }
        }
        for (first, path) in std::mem::take(&mut self.links) {
            fs::hard_link(&first, &path).map_err(io_err(&path))?;
            self.summary.hardlinks += 1;
        }
        Ok(())
    }

    /// Sets an entry's metadata (by path) and records what the target
    /// refused.
    fn metadata(&mut self, path: &Path, inode: &Inode) -> Result<(), ExtractError> {
        let mut out = MetaOut::default();
        let r = set_metadata(
            self.image,
            &self.opts,
            &self.target,
            path,
            inode,
            None,
            &mut out,
        );
        self.summary.xattrs += out.xattrs;
        self.summary.not_restored.extend(out.not_restored);
        r
    }

    /// The regular files' metadata, through their descriptors, on the data
    /// pass's threads; what the target refused is recorded in file order
    /// whatever the thread count, and the first error in that order wins.
    fn files_metadata(&mut self, files: Vec<Regular>) -> Result<(), ExtractError> {
        let jobs = self.opts.jobs.clamp(1, 256);
        let chunk = files.len().div_ceil(jobs).max(1);
        let (image, opts, target) = (self.image, &self.opts, &self.target);
        let results: Vec<(MetaOut, Result<(), ExtractError>)> = std::thread::scope(|s| {
            let handles: Vec<_> = files
                .chunks(chunk)
                .map(|part| {
                    s.spawn(move || {
                        let mut out = MetaOut::default();
                        for f in part {
                            let r = set_metadata(
                                image,
                                opts,
                                target,
                                &f.path,
                                &f.inode,
                                f.file.as_ref(),
                                &mut out,
                            );
                            if r.is_err() {
                                return (out, r);
                            }
                        }
                        (out, Ok(()))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        (
                            MetaOut::default(),
                            Err(ExtractError::Io {
                                path: target.to_path_buf(),
                                source: io::Error::other("internal: a metadata thread panicked"),
                            }),
                        )
                    })
                })
                .collect()
        });
        for (out, r) in results {
            self.summary.xattrs += out.xattrs;
            self.summary.not_restored.extend(out.not_restored);
            r?;
        }
        Ok(())
    }

    /// The data pass: every planned byte into its file.
    fn write_data(&mut self, progress: Option<&(dyn Fn(u64) + Sync)>) -> Result<(), ExtractError> {
        let jobs = self.opts.jobs.max(1);
        let outputs: Vec<Mutex<Outputs>> = (0..jobs).map(|_| Mutex::default()).collect();
        let left: Vec<AtomicU64> = self
            .files
            .iter()
            .map(|f| AtomicU64::new(f.inode.size()))
            .collect();
        let written = AtomicU64::new(0);
        let files = &self.files;
        let sink = |d: Delivery<'_>| -> Result<(), ExtractError> {
            match d {
                Delivery::Bytes {
                    file,
                    offset,
                    data,
                    worker,
                } => {
                    let f = files.get(file.index()).ok_or_else(|| internal(file))?;
                    if let Some(out) = &f.file {
                        out.write_all_at(data, offset).map_err(io_err(&f.path))?;
                    } else {
                        let slot = outputs.get(worker).ok_or_else(|| internal(file))?;
                        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
                        let out = slot.open(file, &f.path)?;
                        out.write_all_at(data, offset).map_err(io_err(&f.path))?;
                    }
                    let n = data.len() as u64;
                    if let Some(l) = left.get(file.index()) {
                        l.fetch_sub(n.min(l.load(Ordering::Relaxed)), Ordering::Relaxed);
                    }
                    let total = written.fetch_add(n, Ordering::Relaxed) + n;
                    if let Some(p) = progress {
                        p(total);
                    }
                    Ok(())
                }
                Delivery::Failed { file, error, .. } => {
                    let path = file
                        .and_then(|f| files.get(f.index()))
                        .map_or_else(|| "<packed inode>".into(), |f| show(&f.rel));
                    Err(ExtractError::Image {
                        path,
                        source: error.clone_lossy(),
                    })
                }
            }
        };
        let run = RunOptions {
            jobs,
            memory: self.opts.memory,
            cancel: self.opts.cancel.clone(),
        };
        let stats = self.plan.run(&run, &sink)?;
        drop(outputs);
        self.summary.bytes = written.load(Ordering::Relaxed);
        self.summary.pclusters = self.plan.pclusters() as u64;
        self.summary.pclusters_decoded = stats.pclusters_decoded;
        self.summary.bytes_decoded = stats.bytes_decoded;
        self.summary.pclusters_cached = stats.pclusters_cached;
        if stats.interrupted {
            let done = left
                .iter()
                .filter(|l| l.load(Ordering::Relaxed) == 0)
                .count();
            return Err(ExtractError::Interrupted {
                files_done: done as u64,
                files: self.files.len() as u64,
                bytes: self.summary.bytes,
            });
        }
        Ok(())
    }
}

/// What setting one entry's metadata did besides succeeding.
#[derive(Default)]
struct MetaOut {
    xattrs: u64,
    not_restored: Vec<NotRestored>,
}

/// Records an attribute the target refused for the entry at `path`.
fn refused(out: &mut MetaOut, target: &Path, path: &Path, what: Attribute, e: rustix::io::Errno) {
    let rel = path.strip_prefix(target).unwrap_or(path);
    out.not_restored.push(NotRestored {
        path: format!("/{}", rel.display()),
        what,
        reason: io::Error::from(e).to_string(),
    });
}

/// Sets owner, xattrs, mode and times of the entry at `path`, through its
/// open descriptor `fd` when there is one (a regular file the walk
/// created), else by path without following a symlink.
fn set_metadata(
    image: &Image,
    opts: &Options,
    target: &Path,
    path: &Path,
    inode: &Inode,
    fd: Option<&fs::File>,
    out: &mut MetaOut,
) -> Result<(), ExtractError> {
    let is_link = inode.is_symlink();
    // Order matters: chown clears security.capability and setuid bits,
    // so owners first, then xattrs, then the mode, then times.
    if opts.owners {
        let (uid, gid) = (
            Some(rustix::fs::Uid::from_raw(inode.uid())),
            Some(rustix::fs::Gid::from_raw(inode.gid())),
        );
        let r = match fd {
            Some(fd) => rustix::fs::fchown(fd, uid, gid),
            None => rustix::fs::chownat(CWD, path, uid, gid, AtFlags::SYMLINK_NOFOLLOW),
        };
        if let Err(e) = r {
            let what = Attribute::Owner {
                uid: inode.uid(),
                gid: inode.gid(),
            };
            refused(out, target, path, what, e);
        }
    }
    if opts.xattrs {
        let xs = image
            .raw()
            .xattrs(inode)
            .map_err(|source| ExtractError::Image {
                path: path.display().to_string(),
                source,
            })?;
        for x in xs {
            let flags = rustix::fs::XattrFlags::empty();
            let r = match fd {
                Some(fd) => rustix::fs::fsetxattr(fd, x.name.as_slice(), &x.value, flags),
                None => rustix::fs::lsetxattr(path, x.name.as_slice(), &x.value, flags),
            };
            match r {
                Ok(()) => out.xattrs += 1,
                Err(e) => {
                    let name = String::from_utf8_lossy(&x.name).into_owned();
                    refused(out, target, path, Attribute::Xattr(name), e);
                }
            }
        }
    }
    if !is_link {
        // After chown, which clears setuid/setgid.
        let mode = Mode::from_raw_mode(u32::from(inode.permissions()));
        match fd {
            Some(fd) => rustix::fs::fchmod(fd, mode),
            None => rustix::fs::chmod(path, mode),
        }
        .map_err(rx_err(path))?;
    }
    let t = Timespec {
        tv_sec: inode.mtime(),
        tv_nsec: i64::from(inode.mtime_nsec()).min(999_999_999) as _,
    };
    let times = Timestamps {
        last_access: t,
        last_modification: t,
    };
    match fd {
        Some(fd) => rustix::fs::futimens(fd, &times),
        None => rustix::fs::utimensat(CWD, path, &times, AtFlags::SYMLINK_NOFOLLOW),
    }
    .map_err(rx_err(path))?;
    Ok(())
}

/// Descriptors of created files that may be kept open at once: the
/// process's limit less a reserve for everything else.
fn fd_budget() -> usize {
    let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let soft = lim.current.unwrap_or(1 << 20).min(1 << 20);
    usize::try_from(soft.saturating_sub(256)).unwrap_or(0)
}

/// Grows this process's descriptor table to hold `n` more descriptors at
/// once, before the creation threads start. Linux grows the table by
/// doubling, and in a process with several threads each growth waits for
/// an RCU grace period (10-25 ms here): kept descriptors would otherwise
/// cost a dozen of those waits. A hint only: failure changes nothing.
fn reserve_descriptors(target: &Path, n: usize) {
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

fn internal(file: FileId) -> ExtractError {
    ExtractError::Io {
        path: PathBuf::from(format!("<file {}>", file.index())),
        source: io::Error::other("internal: a piece for a file the plan does not have"),
    }
}

/// `/a/b` for the image path `a/b`.
fn show(rel: &[u8]) -> String {
    format!("/{}", String::from_utf8_lossy(rel))
}

/// Output files a worker holds open, the most recent last: a run of one
/// file's clusters is written through one descriptor.
#[derive(Default)]
struct Outputs {
    open: Vec<(FileId, fs::File)>,
}

/// Output files one worker keeps open.
const OPEN_OUTPUTS: usize = 16;

impl Outputs {
    fn open(&mut self, id: FileId, path: &Path) -> Result<&fs::File, ExtractError> {
        if let Some(i) = self.open.iter().position(|(f, _)| *f == id) {
            let e = self.open.remove(i);
            self.open.push(e);
        } else {
            // Created by the walk: opened again for writing, never
            // following a link put in its place.
            let f = fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
                .map_err(io_err(path))?;
            if self.open.len() >= OPEN_OUTPUTS {
                self.open.remove(0);
            }
            self.open.push((id, f));
        }
        match self.open.last() {
            Some((_, f)) => Ok(f),
            None => Err(internal(id)),
        }
    }
}

/// Extracts the whole image into `target`, which must be empty or absent.
/// `progress(bytes)` is called as file data is written (from several
/// threads).
pub fn extract(
    image: &Image,
    target: &Path,
    opts: Options,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> Result<Summary, ExtractError> {
    match fs::read_dir(target) {
        Ok(mut it) => {
            if it.next().is_some() {
                return Err(ExtractError::NotEmpty(target.to_path_buf()));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(target).map_err(io_err(target))?;
        }
        Err(e) => return Err(io_err(target)(e)),
    }
    let root = image.raw().root().map_err(|source| ExtractError::Image {
        path: "/".into(),
        source,
    })?;
    let cancel = opts.cancel.clone();
    let mut x = Extractor {
        image,
        target: target.to_path_buf(),
        opts,
        summary: Summary::default(),
        first_path: HashMap::new(),
        dirs: vec![(target.to_path_buf(), root)],
        files: Vec::new(),
        empty: Vec::new(),
        pending: Vec::new(),
        links: Vec::new(),
        plan: ReadPlan::new(image),
        fds_left: fd_budget(),
        error: None,
    };
    // 1. The tree, and the plan of every file's data.
    walk(image, |v| {
        if x.error.is_some() {
            return;
        }
        if cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            x.error = Some(ExtractError::Interrupted {
                files_done: 0,
                files: x.files.len() as u64,
                bytes: 0,
            });
            return;
        }
        match v {
            Visit::Dir { .. } => {}
            Visit::Entry { path, entry, inode } => {
                if let Err(e) = x.entry(path, &entry.name, inode) {
                    x.error = Some(e);
                }
            }
            Visit::Error { path, error, .. } => {
                x.error = Some(ExtractError::Image {
                    path: String::from_utf8_lossy(path).into_owned(),
                    source: error,
                });
            }
        }
    });
    if let Some(e) = x.error.take() {
        return Err(e);
    }
    x.create_entries()?;
    // 2. The data, each stored cluster read once, in physical order.
    x.write_data(progress)?;
    // 3. Files' metadata after their contents; directories' last, deepest
    // first, so writing entries does not disturb times and read-only modes
    // do not block creation.
    let mut files = std::mem::take(&mut x.empty);
    files.append(&mut x.files);
    x.files_metadata(files)?;
    let dirs = std::mem::take(&mut x.dirs);
    for (path, inode) in dirs.iter().rev() {
        x.metadata(path, inode)?;
    }
    Ok(x.summary)
}
