//! extract: write an image's tree into a directory with contents, modes,
//! owners (as root), times with nanoseconds, xattrs, hard links, symlinks,
//! devices and fifos. Every name is checked so nothing lands outside the
//! target, and nothing existing is ever followed or overwritten.
//!
//! Three passes: the walk makes the directories and hands every other
//! entry, in batches, to threads that create it (empty files, links,
//! devices) and plan its data while the walk goes on (`tree.rs`,
//! `create.rs`); the data pass ([`ferrofs::bulk`]) reads each stored
//! cluster once, in physical order on all cores, and writes its pieces
//! into the files; then the files' and directories' metadata is set, so
//! times come after contents.
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

mod create;
mod data;
mod meta;
mod tree;

pub use create::raise_open_file_limit;
use create::{fd_budget, reserve_descriptors, Create, Created, Entry, Pending, Regular};
use meta::{set_metadata, MetaOut};
use rustix::fs::{AtFlags, FileType as RxType, Mode, Timespec, Timestamps, CWD};
use thiserror::Error;
use tree::{Feed, Walker, BATCH};

use crate::fsck::Checker;
use crate::walk::{walk_from, Visit};

/// Why an extraction failed.
#[derive(Debug, Error)]
pub enum ExtractError {
    #[error("{0}: target directory is not empty")]
    NotEmpty(PathBuf),
    /// Damage fsck reports (the same checks, run as the tree is walked):
    /// nothing is extracted from an image the kernel would serve wrongly.
    #[error("{path}: damaged image: {message}")]
    Damaged { path: String, message: String },
    #[error("{path}: refusing entry name {name:?} (it would escape the target)")]
    BadName { path: String, name: String },
    #[error("{0}: not a directory (extract takes a directory of the image)")]
    NotADirectory(String),
    /// The directory to extract was not found (the error names it).
    #[error(transparent)]
    Lookup(ferrofs::Error),
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
    /// The directory of the image to extract (symlinks followed), whose
    /// contents and metadata the target receives; empty: the root.
    pub path: Vec<u8>,
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
            path: Vec::new(),
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

struct Extractor<'a> {
    image: &'a Image,
    target: PathBuf,
    opts: Options,
    summary: Summary,
    /// Directories whose metadata is applied at the end, deepest last.
    dirs: Vec<(PathBuf, Inode)>,
    /// Regular files with data, by plan id (their metadata comes after
    /// the data pass).
    files: Vec<Regular>,
    /// Regular files without data, in walk order.
    empty: Vec<Regular>,
    plan: ReadPlan,
}

fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

impl Extractor<'_> {
    /// Takes in what the creation threads made, in walk order: the files'
    /// plans are committed (ids follow the walk) and the first error in
    /// walk order wins, whatever the thread count; then the hard links.
    fn created(
        &mut self,
        results: Vec<Created>,
        links: Vec<(PathBuf, PathBuf)>,
    ) -> Result<(), ExtractError> {
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
        for (first, path) in links {
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
    /// pass's threads, each descriptor closed there once used; what the
    /// target refused is recorded in file order whatever the thread count,
    /// and the first error in that order wins.
    fn files_metadata(&mut self, mut files: Vec<Regular>) -> Result<(), ExtractError> {
        let jobs = self.opts.jobs.clamp(1, 256);
        let chunk = files.len().div_ceil(jobs).max(1);
        let mut parts = Vec::with_capacity(jobs);
        while files.len() > chunk {
            let rest = files.split_off(chunk);
            parts.push(std::mem::replace(&mut files, rest));
        }
        parts.push(files);
        let (image, opts, target) = (self.image, &self.opts, &self.target);
        let results: Vec<(MetaOut, Result<(), ExtractError>)> = std::thread::scope(|s| {
            let handles: Vec<_> = parts
                .into_iter()
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

/// The directory `path` names (the root when empty) and the nid its `..`
/// names (the root's is itself).
fn top(image: &Image, path: &[u8]) -> Result<(Inode, Nid), ExtractError> {
    let err = |source| ExtractError::Image {
        path: show(b""),
        source,
    };
    let raw = image.raw();
    let dir = raw.lookup_path(path, true).map_err(ExtractError::Lookup)?;
    if !dir.is_dir() {
        return Err(ExtractError::NotADirectory(show(path)));
    }
    if path.is_empty() {
        let nid = dir.nid();
        return Ok((dir, nid));
    }
    let parent = raw
        .read_dir(&dir)
        .map_err(err)?
        .iter()
        .find(|e| e.name == b"..")
        .map_or(dir.nid(), |e| e.nid);
    Ok((dir, parent))
}

impl ExtractError {
    /// The error with its image paths named from the image's root, for an
    /// extraction of the directory `top` (whose walk saw paths below it).
    fn under(self, top: &[u8]) -> Self {
        if top.is_empty() {
            return self;
        }
        let top = String::from_utf8_lossy(top);
        let top = top.trim_matches('/');
        let full = |p: String| {
            let rest = p.trim_start_matches('/');
            if rest.starts_with('<') {
                // `<packed inode>`, `<metabox>`: not paths.
                p
            } else if rest.is_empty() {
                format!("/{top}")
            } else {
                format!("/{top}/{rest}")
            }
        };
        match self {
            ExtractError::Damaged { path, message } => ExtractError::Damaged {
                path: full(path),
                message,
            },
            ExtractError::BadName { path, name } => ExtractError::BadName {
                path: full(path),
                name,
            },
            ExtractError::Image { path, source } => ExtractError::Image {
                path: full(path),
                source,
            },
            e => e,
        }
    }
}

/// Extracts the image (or the directory [`Options::path`] names: its
/// contents and metadata) into `target`, which must be empty or absent.
/// `progress(bytes)` is called as file data is written (from several
/// threads).
pub fn extract(
    image: &Image,
    target: &Path,
    opts: Options,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> Result<Summary, ExtractError> {
    let top = opts.path.clone();
    extract_tree(image, target, opts, progress).map_err(|e| e.under(&top))
}

fn extract_tree(
    image: &Image,
    target: &Path,
    opts: Options,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> Result<Summary, ExtractError> {
    // The directory asked for first: a wrong path makes no target.
    let (root, parent) = top(image, &opts.path)?;
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
    let whole = opts.path.is_empty();
    let cancel = opts.cancel.clone();
    // 1. The tree, and the plan of every file's data; every directory and
    // inode checked as fsck checks it before anything is made of it. The
    // walk makes directories as it meets them and hands the other entries,
    // in batches, to creation threads running beside it.
    let plan = ReadPlan::new(image);
    let fds = fd_budget();
    // The descriptor table grown once, before any thread starts, for as
    // many files as the image says it has inodes (a hint, and no more
    // than its primary device's 32-byte inode slots).
    let slots = image.source_len() / 32;
    let inodes = usize::try_from(image.superblock().inos.min(slots)).unwrap_or(usize::MAX);
    reserve_descriptors(target, inodes.min(fds));
    let fds_left = AtomicUsize::new(fds);
    let mut w = Walker::new(image, target, opts.devices, root.clone());
    let mut checker = Checker::for_extract(image);
    let damaged = |c: &Checker<'_>| {
        c.first_problem().map(|p| ExtractError::Damaged {
            path: p.path.clone(),
            message: p.message.clone(),
        })
    };
    let ctx = Create {
        image,
        opts: &opts,
        target,
        plan: &plan,
        fds_left: &fds_left,
    };
    let results = std::thread::scope(|s| {
        let mut feed = Feed::start(s, &ctx, opts.jobs.clamp(1, 256));
        walk_from(image, root, parent, |v| {
            if w.error.is_some() {
                return;
            }
            if cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
                w.error = Some(ExtractError::Interrupted {
                    files_done: 0,
                    files: 0,
                    bytes: 0,
                });
                return;
            }
            match v {
                Visit::Error { path, error, .. } => {
                    w.error = Some(ExtractError::Image {
                        path: show(path),
                        source: error,
                    });
                }
                v => {
                    checker.visit(&v);
                    if let Some(e) = damaged(&checker) {
                        w.error = Some(e);
                    } else if let Visit::Entry { path, entry, inode } = v {
                        if let Err(e) = w.entry(path, &entry.name, inode) {
                            w.error = Some(e);
                        } else if w.pending.len() >= BATCH {
                            feed.send(std::mem::take(&mut w.pending));
                        }
                    }
                }
            }
        });
        if w.error.is_none() {
            feed.send(std::mem::take(&mut w.pending));
        }
        feed.finish(target)
    });
    if let Some(e) = w.error.take() {
        return Err(e);
    }
    // The metabox whole, and every pcluster of the packed inode in the
    // data pass (used by a file or not), as fsck reads them.
    checker.check_metabox();
    if let Some(e) = damaged(&checker) {
        return Err(e);
    }
    let mut x = Extractor {
        image,
        target: target.to_path_buf(),
        opts,
        summary: Summary {
            dirs: w.dirs_made,
            ..Summary::default()
        },
        dirs: w.dirs,
        files: Vec::new(),
        empty: Vec::new(),
        plan,
    };
    if whole {
        x.plan
            .add_packed_inode()
            .map_err(|source| ExtractError::Image {
                path: "<packed inode>".into(),
                source,
            })?;
    }
    x.created(results, w.links)?;
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
