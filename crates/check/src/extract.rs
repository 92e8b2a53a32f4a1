//! extract: write an image's tree into a directory with contents, modes,
//! owners (as root), times with nanoseconds, xattrs, hard links, symlinks,
//! devices and fifos. Every name is checked so nothing lands outside the
//! target, and nothing existing is ever followed or overwritten.
//!
//! An xattr or owner the target refuses (Linux allows no `user.*` xattrs
//! on a symlink; a filesystem holds only so many xattr bytes per inode;
//! an unprivileged or id-mapped chown) does not stop the extraction: it is
//! recorded in [`Summary::not_restored`] (path, what, reason) and the next
//! one is tried. Restoring either is optional ([`Options`]).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, OpenOptionsExt};
use std::path::{Path, PathBuf};

use ferrofs::format::inode::FileType;
use ferrofs::format::Nid;
use ferrofs::map::ExtentKind;
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
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Restore owners (needs root; default: when running as root).
    pub owners: bool,
    /// Create device nodes (needs root).
    pub devices: bool,
    /// Restore extended attributes.
    pub xattrs: bool,
}

impl Default for Options {
    fn default() -> Self {
        let root = rustix::process::geteuid().is_root();
        Self {
            owners: root,
            devices: root,
            xattrs: true,
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
    first_path: HashMap<Nid, PathBuf>,
    /// Directories whose metadata is applied at the end, deepest last.
    dirs: Vec<(PathBuf, Inode)>,
    error: Option<ExtractError>,
    progress: Option<&'a dyn Fn(u64)>,
    buf: Vec<u8>,
    sparse_pending: bool,
}

fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

impl Extractor<'_> {
    fn out_path(&self, rel: &[u8]) -> PathBuf {
        self.target.join(OsStr::from_bytes(rel))
    }

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
                fs::hard_link(first, &path).map_err(io_err(&path))?;
                self.summary.hardlinks += 1;
                return Ok(());
            }
            self.first_path.insert(inode.nid(), path.clone());
        }
        let img_err = |source| ExtractError::Image {
            path: String::from_utf8_lossy(rel).into_owned(),
            source,
        };
        match inode.file_type() {
            FileType::Directory => {
                fs::create_dir(&path).map_err(io_err(&path))?;
                rustix::fs::chmod(&path, Mode::from_raw_mode(0o700)).map_err(rx_err(&path))?;
                self.summary.dirs += 1;
                self.dirs.push((path, inode.clone()));
                return Ok(());
            }
            FileType::Regular => {
                self.write_file(&path, inode).map_err(|e| match e {
                    WriteError::Image(source) => img_err(source),
                    WriteError::Io(source) => ExtractError::Io {
                        path: path.clone(),
                        source,
                    },
                })?;
                self.summary.files += 1;
            }
            FileType::Symlink => {
                let target = self.image.raw().read_link(inode).map_err(img_err)?;
                symlink(OsStr::from_bytes(&target), &path).map_err(io_err(&path))?;
                self.summary.symlinks += 1;
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
                let dev = rustix::fs::makedev(inode.rdev().0, inode.rdev().1);
                rustix::fs::mknodat(CWD, &path, kind, Mode::from_raw_mode(0o600), dev)
                    .map_err(rx_err(&path))?;
                self.summary.special += 1;
            }
        }
        self.metadata(&path, inode)
    }

    fn write_file(&mut self, path: &Path, inode: &Inode) -> Result<(), WriteError> {
        let file = self
            .image
            .raw()
            .open(inode.clone())
            .map_err(WriteError::Image)?;
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(path)
            .map_err(WriteError::Io)?;
        // One buffer for the whole extraction, grown only when needed.
        let mut buf = std::mem::take(&mut self.buf);
        let want = (inode.size().min(1 << 20)) as usize;
        if buf.len() < want {
            buf.resize(want, 0);
        }
        let res = self.copy_extents(&file, &out, &mut buf);
        self.buf = buf;
        res?;
        if self.sparse_pending {
            out.set_len(inode.size()).map_err(WriteError::Io)?;
        }
        out.flush().map_err(WriteError::Io)?;
        Ok(())
    }

    fn copy_extents(
        &mut self,
        file: &ferrofs::raw::InodeFile,
        out: &fs::File,
        buf: &mut [u8],
    ) -> Result<(), WriteError> {
        self.sparse_pending = false;
        let mut sparse = false;
        for ext in file.extents() {
            let ext = ext.map_err(WriteError::Image)?;
            if ext.kind == ExtentKind::Hole {
                sparse = true;
                continue;
            }
            let mut pos = ext.logical;
            while pos < ext.end() {
                let n = (ext.end() - pos).min(buf.len() as u64) as usize;
                file.read_at(&mut buf[..n], pos)
                    .map_err(WriteError::Image)?;
                std::os::unix::fs::FileExt::write_all_at(out, &buf[..n], pos)
                    .map_err(WriteError::Io)?;
                pos += n as u64;
                self.summary.bytes += n as u64;
            }
            if let Some(p) = self.progress {
                p(self.summary.bytes);
            }
        }
        self.sparse_pending = sparse;
        Ok(())
    }

    /// Records an attribute the target refused for the entry at `path`.
    fn not_restored(&mut self, path: &Path, what: Attribute, e: rustix::io::Errno) {
        let rel = path.strip_prefix(&self.target).unwrap_or(path);
        self.summary.not_restored.push(NotRestored {
            path: format!("/{}", rel.display()),
            what,
            reason: io::Error::from(e).to_string(),
        });
    }

    fn metadata(&mut self, path: &Path, inode: &Inode) -> Result<(), ExtractError> {
        let is_link = inode.is_symlink();
        // Order matters: chown clears security.capability and setuid bits,
        // so owners first, then xattrs, then the mode, then times.
        if self.opts.owners {
            if let Err(e) = rustix::fs::chownat(
                CWD,
                path,
                Some(rustix::fs::Uid::from_raw(inode.uid())),
                Some(rustix::fs::Gid::from_raw(inode.gid())),
                AtFlags::SYMLINK_NOFOLLOW,
            ) {
                let what = Attribute::Owner {
                    uid: inode.uid(),
                    gid: inode.gid(),
                };
                self.not_restored(path, what, e);
            }
        }
        if self.opts.xattrs {
            let xs = self
                .image
                .raw()
                .xattrs(inode)
                .map_err(|source| ExtractError::Image {
                    path: path.display().to_string(),
                    source,
                })?;
            for x in xs {
                match rustix::fs::lsetxattr(
                    path,
                    x.name.as_slice(),
                    &x.value,
                    rustix::fs::XattrFlags::empty(),
                ) {
                    Ok(()) => self.summary.xattrs += 1,
                    Err(e) => {
                        let name = String::from_utf8_lossy(&x.name).into_owned();
                        self.not_restored(path, Attribute::Xattr(name), e);
                    }
                }
            }
        }
        if !is_link {
            // After chown, which clears setuid/setgid.
            rustix::fs::chmod(path, Mode::from_raw_mode(u32::from(inode.permissions())))
                .map_err(rx_err(path))?;
        }
        let t = Timespec {
            tv_sec: inode.mtime(),
            tv_nsec: i64::from(inode.mtime_nsec()).min(999_999_999) as _,
        };
        rustix::fs::utimensat(
            CWD,
            path,
            &Timestamps {
                last_access: t,
                last_modification: t,
            },
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(rx_err(path))?;
        Ok(())
    }
}

enum WriteError {
    Image(ferrofs::Error),
    Io(io::Error),
}

/// Extracts the whole image into `target`, which must be empty or absent.
pub fn extract(
    image: &Image,
    target: &Path,
    opts: Options,
    progress: Option<&dyn Fn(u64)>,
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
    let mut x = Extractor {
        image,
        target: target.to_path_buf(),
        opts,
        summary: Summary::default(),
        first_path: HashMap::new(),
        dirs: vec![(target.to_path_buf(), root)],
        error: None,
        progress,
        buf: Vec::new(),
        sparse_pending: false,
    };
    walk(image, |v| {
        if x.error.is_some() {
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
    // Directory metadata last, deepest first, so writing entries does not
    // disturb times and read-only modes do not block creation.
    let dirs = std::mem::take(&mut x.dirs);
    for (path, inode) in dirs.iter().rev() {
        x.metadata(path, inode)?;
    }
    Ok(x.summary)
}
