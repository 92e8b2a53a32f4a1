//! A streaming writer, shaped like `tar::Builder`: entries appended one by
//! one, in any order (a file before its directory is fine: the directory
//! is made, then takes the metadata its own entry gives), then
//! [`ImageWriter::finish`] runs the same pipeline as `ferrofs mkfs`.
//! File data from a reader is spooled to an unlinked file beside the
//! output (or in the temporary directory), so memory stays bounded;
//! data from a path stays where it is until the image is written.
//!
//! An image written from the entries of a directory tree, as
//! `std::fs` reports them, is the image [`crate::build`] makes of that
//! tree with the same options, byte for byte.
//!
//! ```
//! use ferrofs_builder::writer::{EntryMeta, ImageWriter};
//! use ferrofs_builder::{BuildOptions, CompressOptions, Compressor};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::env::temp_dir().join(format!("ferrofs-writer-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let mut opts = BuildOptions::default();
//! opts.compress = Some(CompressOptions::new(Compressor::parse("lz4hc")?, 65536));
//! let mut w = ImageWriter::create(dir.join("app.erofs"), opts)?;
//! let text = b"#!/bin/sh\necho hello\n";
//! w.append_dir("/", &EntryMeta::new(0o755))?;
//! w.append_file("bin/hello", &EntryMeta::new(0o755).mtime(1_700_000_000, 5), text.len() as u64, &text[..])?;
//! w.append_symlink("usr/bin/hi", &EntryMeta::new(0o777), "../../bin/hello")?;
//! w.append_dir("bin", &EntryMeta::new(0o755).owner(0, 0).xattr("user.note", "tools"))?;
//! let summary = w.finish()?;
//! // /, bin, bin/hello, usr and usr/bin (both made for the link), usr/bin/hi
//! assert_eq!(summary.inodes, 6);
//!
//! let image = ferrofs::Image::open_path(dir.join("app.erofs"))?;
//! assert_eq!(image.read("/bin/hello")?, text);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{BuildError, Result};
use crate::options::BuildOptions;
use crate::summary::Summary;
use crate::tree::content::{Content, Segment};
use crate::tree::{Inode, InodeId, Kind, Tree};

/// The metadata of an entry: permission bits (with setuid, setgid,
/// sticky), owner, modification time and extended attributes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EntryMeta {
    /// Permission bits (`0o7777` at most; the file type comes from the
    /// call).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Seconds since the epoch (negative before it).
    pub mtime: i64,
    /// Nanoseconds (below 1,000,000,000).
    pub mtime_nsec: u32,
    /// Extended attributes (full names, `user.note`).
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl EntryMeta {
    /// Permission bits `mode`, owned by root, mtime 0, no xattrs.
    pub fn new(mode: u32) -> Self {
        EntryMeta {
            mode,
            ..Default::default()
        }
    }

    /// With this owner.
    pub fn owner(mut self, uid: u32, gid: u32) -> Self {
        (self.uid, self.gid) = (uid, gid);
        self
    }

    /// With this modification time.
    pub fn mtime(mut self, secs: i64, nsec: u32) -> Self {
        (self.mtime, self.mtime_nsec) = (secs, nsec);
        self
    }

    /// With one more extended attribute.
    pub fn xattr(mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Self {
        self.xattrs
            .push((name.as_ref().to_vec(), value.as_ref().to_vec()));
        self
    }

    /// What a file's `lstat` says (mode, owner, mtime); no xattrs.
    pub fn from_metadata(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        EntryMeta {
            mode: m.mode() & 0o7777,
            uid: m.uid(),
            gid: m.gid(),
            mtime: m.mtime(),
            mtime_nsec: u32::try_from(m.mtime_nsec().clamp(0, 999_999_999)).unwrap_or(0),
            xattrs: Vec::new(),
        }
    }
}

/// A device node's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// A character device.
    Char,
    /// A block device.
    Block,
}

/// Where the image goes.
enum Out {
    Path(PathBuf),
    Writer(Box<dyn WriteSeek>),
}

/// A `Write + Seek` the image is copied into (a writer may move to
/// another thread).
trait WriteSeek: Write + Seek + Send {}
impl<T: Write + Seek + Send> WriteSeek for T {}

/// Builds an image from appended entries (see the module docs).
pub struct ImageWriter {
    tree: Tree,
    /// Inodes by path (`a/b`; the root is empty).
    paths: HashMap<Vec<u8>, InodeId>,
    /// Directories made for an entry below them, not appended yet.
    implicit: std::collections::HashSet<InodeId>,
    spool: Option<Arc<File>>,
    spool_len: u64,
    spool_dir: PathBuf,
    opts: BuildOptions,
    out: Out,
}

impl ImageWriter {
    /// A writer of the image at `path` (replaced atomically when
    /// [`ImageWriter::finish`] succeeds).
    pub fn create(path: impl AsRef<Path>, opts: BuildOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let spool_dir = crate::util::staged::dir_of(&path).to_path_buf();
        Ok(Self::with(Out::Path(path), spool_dir, opts))
    }

    /// A writer whose image is written into `w` (built in the temporary
    /// directory, then copied).
    pub fn new<W: Write + Seek + Send + 'static>(w: W, opts: BuildOptions) -> Result<Self> {
        Ok(Self::with(
            Out::Writer(Box::new(w)),
            std::env::temp_dir(),
            opts,
        ))
    }

    fn with(out: Out, spool_dir: PathBuf, opts: BuildOptions) -> Self {
        let mut tree = Tree::default();
        let mut root = Inode::new(
            Kind::Dir {
                entries: Vec::new(),
            },
            b"",
            0,
            PathBuf::from("/"),
        );
        root.perm = 0o755;
        tree.inodes.push(root);
        tree.root = 0;
        ImageWriter {
            tree,
            paths: HashMap::from([(Vec::new(), 0)]),
            implicit: std::collections::HashSet::from([0]),
            spool: None,
            spool_len: 0,
            spool_dir,
            opts,
            out,
        }
    }

    /// `path` as the tree names it (`a/b`), checked: relative or absolute,
    /// no `..`, no NUL, no name over 255 bytes.
    fn rel(path: &Path) -> Result<Vec<u8>> {
        let bytes = path.as_os_str().as_bytes();
        let bad = |why: &str| BuildError::input(path, why.to_owned());
        if bytes.contains(&0) {
            return Err(bad("a NUL byte in the path"));
        }
        let mut comps: Vec<&[u8]> = Vec::new();
        for c in bytes.split(|&b| b == b'/') {
            match c {
                b"" | b"." => {}
                b".." => return Err(bad("a `..` component")),
                c if c.len() > ferrofs_format::NAME_MAX => {
                    return Err(bad("a name longer than 255 bytes"))
                }
                c => comps.push(c),
            }
        }
        Ok(comps.join(&b'/'))
    }

    fn shown(rel: &[u8]) -> PathBuf {
        PathBuf::from(OsStr::from_bytes(rel))
    }

    /// The directory at `rel`, made (implicit) with its parents if missing.
    fn dir(&mut self, rel: &[u8]) -> Result<InodeId> {
        if let Some(&id) = self.paths.get(rel) {
            if !self.tree.inodes[id].is_dir() {
                return Err(BuildError::input(
                    Self::shown(rel),
                    "not a directory, yet an entry is appended below it",
                ));
            }
            return Ok(id);
        }
        let (parent_rel, name) = match rel.iter().rposition(|&b| b == b'/') {
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => (&b""[..], rel),
        };
        let parent = self.dir(parent_rel)?;
        let mut ino = Inode::new(
            Kind::Dir {
                entries: Vec::new(),
            },
            rel,
            parent,
            Self::shown(rel),
        );
        ino.perm = 0o755;
        let id = self.push(parent, name, ino);
        self.implicit.insert(id);
        Ok(id)
    }

    fn push(&mut self, parent: InodeId, name: &[u8], ino: Inode) -> InodeId {
        let id = self.tree.inodes.len();
        let rel = ino.rel.clone();
        self.tree.inodes.push(ino);
        if let Kind::Dir { entries } = &mut self.tree.inodes[parent].kind {
            entries.push((name.to_vec(), id));
        }
        self.paths.insert(rel, id);
        id
    }

    /// Adds an inode of `kind` at `path` with `meta`; the root and an
    /// implicit directory take a directory's metadata instead.
    fn add(&mut self, path: &Path, kind: Kind, meta: &EntryMeta) -> Result<InodeId> {
        let rel = Self::rel(path)?;
        let excluded = !rel.is_empty() && crate::source::dir::excluded(&self.opts, &rel);
        if excluded {
            return Ok(usize::MAX);
        }
        if let Some(&id) = self.paths.get(&rel) {
            let is_dir = matches!(kind, Kind::Dir { .. });
            if is_dir && self.implicit.remove(&id) {
                self.set_meta(id, meta)?;
                return Ok(id);
            }
            return Err(BuildError::input(
                Self::shown(&rel),
                "appended twice (the same path)",
            ));
        }
        let (parent_rel, name) = match rel.iter().rposition(|&b| b == b'/') {
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => (&b""[..], &rel[..]),
        };
        let parent = self.dir(parent_rel)?;
        let ino = Inode::new(kind, &rel, parent, Self::shown(&rel));
        let id = self.push(parent, name, ino);
        self.set_meta(id, meta)?;
        Ok(id)
    }

    fn set_meta(&mut self, id: InodeId, meta: &EntryMeta) -> Result<()> {
        let rel = self.tree.inodes[id].rel.clone();
        if meta.mode & !0o7777 != 0 || meta.mtime_nsec >= 1_000_000_000 {
            return Err(BuildError::input(
                Self::shown(&rel),
                format!(
                    "mode {:o} or nanoseconds {} out of range",
                    meta.mode, meta.mtime_nsec
                ),
            ));
        }
        let mut xattrs = if self.opts.xattr_tolerance < 0 {
            Vec::new()
        } else {
            meta.xattrs.clone()
        };
        xattrs.sort();
        if xattrs.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(BuildError::input(Self::shown(&rel), "an xattr named twice"));
        }
        let ino = &mut self.tree.inodes[id];
        ino.perm = u16::try_from(meta.mode).unwrap_or(0);
        (ino.uid, ino.gid) = (meta.uid, meta.gid);
        (ino.mtime, ino.mtime_nsec) = (meta.mtime, meta.mtime_nsec);
        ino.xattrs = xattrs;
        Ok(())
    }

    /// A directory (the root is `/`, `""` or `.`).
    pub fn append_dir(&mut self, path: impl AsRef<Path>, meta: &EntryMeta) -> Result<()> {
        let kind = Kind::Dir {
            entries: Vec::new(),
        };
        self.add(path.as_ref(), kind, meta).map(|_| ())
    }

    /// A regular file of `size` bytes read from `data` (spooled now); a
    /// reader that ends sooner is an error naming the path.
    pub fn append_file(
        &mut self,
        path: impl AsRef<Path>,
        meta: &EntryMeta,
        size: u64,
        mut data: impl Read,
    ) -> Result<()> {
        let path = path.as_ref();
        let spool = match &self.spool {
            Some(s) => s.clone(),
            None => {
                let f = Arc::new(crate::util::spool::unlinked_file(
                    &self.spool_dir,
                    "writer",
                )?);
                self.spool = Some(f.clone());
                f
            }
        };
        let start = self.spool_len;
        let mut buf = vec![0u8; 1 << 20];
        let mut got: u64 = 0;
        while got < size {
            let want = usize::try_from((size - got).min(buf.len() as u64)).unwrap_or(buf.len());
            let n = match data.read(&mut buf[..want]) {
                Ok(0) => {
                    return Err(BuildError::input(
                        path,
                        format!("its reader ended after {got} of {size} bytes"),
                    ))
                }
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(BuildError::io(path)(e)),
            };
            spool
                .write_all_at(&buf[..n], start + got)
                .map_err(BuildError::io(&self.spool_dir))?;
            got += n as u64;
        }
        let id = self.add(path, Kind::File { size, data: None }, meta)?;
        self.spool_len = start + size;
        if let Some(ino) = self.tree.inodes.get_mut(id) {
            ino.content = Content::Archive {
                archive: spool,
                segments: match size {
                    0 => Arc::from(Vec::new()),
                    _ => Arc::from(vec![Segment {
                        logical: 0,
                        len: size,
                        physical: start,
                    }]),
                },
            };
        }
        Ok(())
    }

    /// A regular file whose data is the local file `source` (read when the
    /// image is written; its holes stay holes), with `meta`.
    pub fn append_path(
        &mut self,
        path: impl AsRef<Path>,
        meta: &EntryMeta,
        source: impl AsRef<Path>,
    ) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        let source = source.as_ref();
        let m = std::fs::metadata(source).map_err(BuildError::io(source))?;
        if !m.is_file() {
            return Err(BuildError::input(source, "not a regular file"));
        }
        let data = crate::source::dir::data_ranges(source, m.len(), m.blocks())?;
        let id = self.add(
            path.as_ref(),
            Kind::File {
                size: m.len(),
                data,
            },
            meta,
        )?;
        if let Some(ino) = self.tree.inodes.get_mut(id) {
            ino.source = source.to_path_buf();
            ino.content = Content::Local;
            ino.stamp = Some(crate::tree::content::Stamp::of(&m));
        }
        Ok(())
    }

    /// A symbolic link to `target`.
    pub fn append_symlink(
        &mut self,
        path: impl AsRef<Path>,
        meta: &EntryMeta,
        target: impl AsRef<[u8]>,
    ) -> Result<()> {
        let target = target.as_ref();
        if target.is_empty() || target.contains(&0) || target.len() > 4095 {
            return Err(BuildError::input(
                path.as_ref(),
                "a symlink target must be 1 to 4095 bytes without NUL",
            ));
        }
        let kind = Kind::Symlink {
            target: target.to_vec(),
        };
        self.add(path.as_ref(), kind, meta).map(|_| ())
    }

    /// Another name for the file (not directory) appended at `target`.
    pub fn append_link(&mut self, path: impl AsRef<Path>, target: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let trel = Self::rel(target.as_ref())?;
        let Some(&id) = self.paths.get(&trel) else {
            return Err(BuildError::input(
                path,
                format!(
                    "hard link to {}, which was not appended",
                    target.as_ref().display()
                ),
            ));
        };
        if self.tree.inodes[id].is_dir() {
            return Err(BuildError::input(path, "hard link to a directory"));
        }
        let rel = Self::rel(path)?;
        if self.paths.contains_key(&rel) {
            return Err(BuildError::input(path, "appended twice (the same path)"));
        }
        let (parent_rel, name) = match rel.iter().rposition(|&b| b == b'/') {
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => (&b""[..], &rel[..]),
        };
        let parent = self.dir(parent_rel)?;
        if let Kind::Dir { entries } = &mut self.tree.inodes[parent].kind {
            entries.push((name.to_vec(), id));
        }
        self.paths.insert(rel, id);
        Ok(())
    }

    /// A character or block device.
    pub fn append_device(
        &mut self,
        path: impl AsRef<Path>,
        meta: &EntryMeta,
        kind: Device,
        major: u32,
        minor: u32,
    ) -> Result<()> {
        if major >= 1 << 12 || minor >= 1 << 20 {
            return Err(BuildError::input(
                path.as_ref(),
                format!("device number {major}:{minor} does not fit"),
            ));
        }
        let kind = match kind {
            Device::Char => Kind::CharDevice { major, minor },
            Device::Block => Kind::BlockDevice { major, minor },
        };
        self.add(path.as_ref(), kind, meta).map(|_| ())
    }

    /// A named pipe.
    pub fn append_fifo(&mut self, path: impl AsRef<Path>, meta: &EntryMeta) -> Result<()> {
        self.add(path.as_ref(), Kind::Fifo, meta).map(|_| ())
    }

    /// A socket.
    pub fn append_socket(&mut self, path: impl AsRef<Path>, meta: &EntryMeta) -> Result<()> {
        self.add(path.as_ref(), Kind::Socket, meta).map(|_| ())
    }

    /// Builds the image and returns what `mkfs` would summarize.
    pub fn finish(self) -> Result<Summary> {
        let ImageWriter {
            tree, opts, out, ..
        } = self;
        let tree = scan_order(tree);
        match out {
            Out::Path(p) => crate::build_tree(tree, &p, &opts, None, &|_| {}),
            Out::Writer(mut w) => {
                let dir = std::env::temp_dir();
                let path = dir.join(format!(".ferrofs-writer-{}.img", std::process::id()));
                let s = crate::build_tree(tree, &path, &opts, None, &|_| {});
                let copied = s.and_then(|s| {
                    let mut f = File::open(&path).map_err(BuildError::io(&path))?;
                    std::io::copy(&mut f, &mut w).map_err(BuildError::output(&path))?;
                    w.flush().map_err(BuildError::output(&path))?;
                    Ok(s)
                });
                let _ = std::fs::remove_file(&path);
                copied
            }
        }
    }
}

/// The tree with its entries sorted by name and its inodes numbered as
/// the directory scanner numbers them (a directory's children in name
/// order when it is taken off a stack, directories pushed as met), each
/// inode's `rel` its first name in that order: the same tree a scan of
/// the same files gives, so the same image.
fn scan_order(mut tree: Tree) -> Tree {
    for ino in &mut tree.inodes {
        if let Kind::Dir { entries } = &mut ino.kind {
            entries.sort_by(|a, b| a.0.cmp(&b.0));
        }
    }
    let n = tree.inodes.len();
    let mut new_id = vec![usize::MAX; n];
    let mut order = vec![tree.root];
    new_id[tree.root] = 0;
    let mut first_rel: Vec<Option<Vec<u8>>> = vec![None; n];
    first_rel[tree.root] = Some(Vec::new());
    let mut stack = vec![tree.root];
    while let Some(d) = stack.pop() {
        let Kind::Dir { entries } = &tree.inodes[d].kind else {
            continue;
        };
        let base = first_rel[d].clone().unwrap_or_default();
        for (name, c) in entries {
            if new_id[*c] != usize::MAX {
                continue;
            }
            new_id[*c] = order.len();
            order.push(*c);
            let mut rel = base.clone();
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(name);
            first_rel[*c] = Some(rel);
            if tree.inodes[*c].is_dir() {
                stack.push(*c);
            }
        }
    }
    for (id, rel) in first_rel.into_iter().enumerate() {
        if let (Some(rel), Some(ino)) = (rel, tree.inodes.get_mut(id)) {
            ino.rel = rel;
        }
    }
    let mut out = tree.renumbered(&order);
    crate::tree::overlay::mark_upper_dirs(&mut out);
    out
}
