//! The front door: paths in, `std::fs`-shaped answers out. [`Image`]
//! reads files, metadata, directories, symlinks and xattrs by path, the way
//! `std::fs` does on a mounted file system; [`File`] is `Read + Seek` with a
//! positional `read_at`. Paths are bytes on Unix, `/`-separated, taken
//! relative to the image's root (a leading `/` is the root too).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use ferrofs_format::inode::FileType as RawType;

use crate::dir::{Entries, RawDirEntry};
use crate::error::{Error, Result};
use crate::file::InodeFile;
use crate::image::Image;
use crate::inode::Inode;
use crate::raw::{read_link, resolve};

fn bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

impl Image {
    /// Metadata of the file `path` names, following symlinks (as
    /// [`std::fs::metadata`]).
    ///
    /// ```
    /// let image = ferrofs::Image::open_path("../../testdata/plain.erofs")?;
    /// let root = image.metadata("/")?;
    /// assert!(root.is_dir());
    /// assert_eq!(root.mode() & 0o170000, 0o040000);
    /// # Ok::<(), ferrofs::Error>(())
    /// ```
    pub fn metadata(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        resolve(self, bytes(path.as_ref()), true).map(|i| Metadata::new(self, i))
    }

    /// Metadata of `path` itself: a symlink is described, not followed (as
    /// [`std::fs::symlink_metadata`]).
    pub fn symlink_metadata(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        resolve(self, bytes(path.as_ref()), false).map(|i| Metadata::new(self, i))
    }

    /// Whether `path` names something, following symlinks (a dangling link
    /// is `false`); errors other than "not found" are returned (as
    /// [`std::fs::exists`]).
    pub fn exists(&self, path: impl AsRef<Path>) -> Result<bool> {
        match resolve(self, bytes(path.as_ref()), true) {
            Ok(_) => Ok(true),
            Err(Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The whole contents of a regular file (as [`std::fs::read`]).
    pub fn read(&self, path: impl AsRef<Path>) -> Result<Vec<u8>> {
        self.open_file(path)?.inner.read_all()
    }

    /// The whole contents of a regular file as UTF-8 text (as
    /// [`std::fs::read_to_string`]).
    pub fn read_to_string(&self, path: impl AsRef<Path>) -> Result<String> {
        let path = path.as_ref();
        String::from_utf8(self.read(path)?).map_err(|_| Error::NotUtf8 { path: shown(path) })
    }

    /// The target of the symlink `path` (as [`std::fs::read_link`]).
    pub fn read_link(&self, path: impl AsRef<Path>) -> Result<PathBuf> {
        let path = path.as_ref();
        let inode = resolve(self, bytes(path), false)?;
        if !inode.is_symlink() {
            return Err(Error::NotASymlink { path: shown(path) });
        }
        Ok(PathBuf::from(OsString::from_vec(read_link(self, &inode)?)))
    }

    /// The entries of the directory `path`, streamed (one directory block
    /// in memory at a time), without `.` and `..` (as [`std::fs::read_dir`]).
    ///
    /// ```
    /// let image = ferrofs::Image::open_path("../../testdata/plain.erofs")?;
    /// for entry in image.read_dir("/")? {
    ///     let entry = entry?;
    ///     let kind = if entry.file_type()?.is_dir() { "dir" } else { "other" };
    ///     println!("{kind} {}", entry.path().display());
    /// }
    /// # Ok::<(), ferrofs::Error>(())
    /// ```
    pub fn read_dir(&self, path: impl AsRef<Path>) -> Result<ReadDir> {
        let path = path.as_ref();
        let inode = resolve(self, bytes(path), true)?;
        if !inode.is_dir() {
            return Err(Error::NotADirectory { path: shown(path) });
        }
        Ok(ReadDir {
            image: self.clone(),
            parent: path.to_path_buf(),
            entries: Entries::new(self.open_inode(inode)?)?,
        })
    }

    /// Opens the regular file `path` for reading (as [`std::fs::File::open`]
    /// with read access; a directory is refused).
    ///
    /// ```
    /// use std::io::Read;
    ///
    /// let image = ferrofs::Image::open_path("../../testdata/lz4hc-big.erofs")?;
    /// let mut file = image.open_file("text.txt")?;
    /// let mut head = [0u8; 64];
    /// file.read_exact(&mut head)?;
    /// // Positional reads need no `&mut` and can share the handle.
    /// let mut same = [0u8; 64];
    /// file.read_at(&mut same, 0)?;
    /// assert_eq!(head, same);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_file(&self, path: impl AsRef<Path>) -> Result<File> {
        let path = path.as_ref();
        let inode = resolve(self, bytes(path), true)?;
        if inode.is_dir() {
            return Err(Error::IsADirectory { path: shown(path) });
        }
        Ok(File {
            inner: self.open_inode(inode)?,
            pos: 0,
        })
    }

    /// One extended attribute of `path` by its full name (`user.comment`),
    /// following symlinks as `getxattr(2)` does; `None` if it is not set.
    pub fn xattr(
        &self,
        path: impl AsRef<Path>,
        name: impl AsRef<OsStr>,
    ) -> Result<Option<Vec<u8>>> {
        let inode = resolve(self, bytes(path.as_ref()), true)?;
        crate::xattr::get(self, &inode, name.as_ref().as_bytes())
    }

    /// Every extended attribute of `path` as (full name, value), following
    /// symlinks, in on-disk order.
    pub fn xattrs(&self, path: impl AsRef<Path>) -> Result<Vec<(OsString, Vec<u8>)>> {
        let inode = resolve(self, bytes(path.as_ref()), true)?;
        Ok(crate::xattr::list(self, &inode)?
            .into_iter()
            .map(|x| (OsString::from_vec(x.name), x.value))
            .collect())
    }
}

/// What kind of file an entry is (as [`std::fs::FileType`] with
/// [`std::os::unix::fs::FileTypeExt`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileType(RawType);

impl FileType {
    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.0 == RawType::Regular
    }
    /// A directory.
    pub fn is_dir(&self) -> bool {
        self.0 == RawType::Directory
    }
    /// A symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.0 == RawType::Symlink
    }
    /// A block device node.
    pub fn is_block_device(&self) -> bool {
        self.0 == RawType::BlockDevice
    }
    /// A character device node.
    pub fn is_char_device(&self) -> bool {
        self.0 == RawType::CharDevice
    }
    /// A named pipe.
    pub fn is_fifo(&self) -> bool {
        self.0 == RawType::Fifo
    }
    /// A Unix socket.
    pub fn is_socket(&self) -> bool {
        self.0 == RawType::Socket
    }
}

/// Metadata of one file (as [`std::fs::Metadata`] with
/// [`std::os::unix::fs::MetadataExt`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    inode: Inode,
    ino: u64,
}

impl Metadata {
    fn new(image: &Image, inode: Inode) -> Self {
        Self {
            ino: ino_of(image, inode.nid().0),
            inode,
        }
    }
    /// Size in bytes (a symlink: the length of its target).
    pub fn len(&self) -> u64 {
        self.inode.size()
    }
    /// Whether the size is zero.
    pub fn is_empty(&self) -> bool {
        self.inode.size() == 0
    }
    /// The kind of file.
    pub fn file_type(&self) -> FileType {
        FileType(self.inode.file_type())
    }
    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.file_type().is_file()
    }
    /// A directory.
    pub fn is_dir(&self) -> bool {
        self.file_type().is_dir()
    }
    /// A symbolic link (only from [`Image::symlink_metadata`]).
    pub fn is_symlink(&self) -> bool {
        self.file_type().is_symlink()
    }
    /// `st_mode`: file type and permission bits.
    pub fn mode(&self) -> u32 {
        u32::from(self.inode.mode())
    }
    /// Owner user id.
    pub fn uid(&self) -> u32 {
        self.inode.uid()
    }
    /// Owner group id.
    pub fn gid(&self) -> u32 {
        self.inode.gid()
    }
    /// Number of hard links.
    pub fn nlink(&self) -> u64 {
        u64::from(self.inode.nlink())
    }
    /// Modification time in seconds since the Unix epoch.
    pub fn mtime(&self) -> i64 {
        self.inode.mtime()
    }
    /// Nanoseconds of the modification time.
    pub fn mtime_nsec(&self) -> i64 {
        i64::from(self.inode.mtime_nsec())
    }
    /// Inode number as Linux reports it (see [`DirEntry::ino`]).
    pub fn ino(&self) -> u64 {
        self.ino
    }
    /// Device number of a device node, encoded as Linux's `st_rdev`.
    pub fn rdev(&self) -> u64 {
        let (major, minor) = self.inode.rdev();
        let (major, minor) = (u64::from(major), u64::from(minor));
        ((major & 0xfff) << 8) | ((major & !0xfff) << 32) | (minor & 0xff) | ((minor & !0xff) << 12)
    }
    /// The inode behind this metadata, for inode-level work ([`crate::raw`]).
    pub fn inode(&self) -> &Inode {
        &self.inode
    }
}

/// A streaming iterator over a directory's entries, from [`Image::read_dir`].
#[derive(Debug)]
pub struct ReadDir {
    image: Image,
    parent: PathBuf,
    entries: Entries,
}

impl Iterator for ReadDir {
    type Item = Result<DirEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            return match self.entries.next()? {
                Ok(e) if e.is_dot() => continue,
                Ok(raw) => Some(Ok(DirEntry {
                    image: self.image.clone(),
                    path: self.parent.join(OsStr::from_bytes(&raw.name)),
                    raw,
                })),
                Err(e) => Some(Err(e)),
            };
        }
    }
}

/// One entry of a directory (as [`std::fs::DirEntry`]).
#[derive(Clone, Debug)]
pub struct DirEntry {
    image: Image,
    path: PathBuf,
    raw: RawDirEntry,
}

impl DirEntry {
    /// The entry's name.
    pub fn file_name(&self) -> OsString {
        OsString::from_vec(self.raw.name.clone())
    }
    /// The directory's path joined with the entry's name.
    pub fn path(&self) -> PathBuf {
        self.path.clone()
    }
    /// The kind of file, from the directory entry when it records one,
    /// else from the inode.
    pub fn file_type(&self) -> Result<FileType> {
        match self.raw.file_type() {
            Some(t) => Ok(FileType(t)),
            None => Ok(FileType(self.image.inode(self.raw.nid)?.file_type())),
        }
    }
    /// Metadata of the entry itself (a symlink is not followed).
    pub fn metadata(&self) -> Result<Metadata> {
        self.image
            .inode(self.raw.nid)
            .map(|i| Metadata::new(&self.image, i))
    }
    /// The entry's inode number as Linux reports it: the nid, except in
    /// metabox images, where the metabox bit (63) moves to bit 31 and
    /// bits 31..62 move up by one, as the kernel numbers them.
    pub fn ino(&self) -> u64 {
        ino_of(&self.image, self.raw.nid.0)
    }
}

/// An open regular file: `Read + Seek`, and `read_at` for positional reads
/// that share one handle between threads.
#[derive(Clone, Debug)]
pub struct File {
    inner: InodeFile,
    pos: u64,
}

impl File {
    /// Reads up to `buf.len()` bytes at `offset` (short only at the end).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.inner.read_at(buf, offset)
    }
    /// The file's metadata.
    pub fn metadata(&self) -> Metadata {
        Metadata::new(self.inner.image(), self.inner.inode().clone())
    }
    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.inner.size()
    }
    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.inner.size() == 0
    }
    /// The inode-level handle, for map inspection ([`crate::raw`]).
    pub fn raw(&self) -> &InodeFile {
        &self.inner
    }
}

impl io::Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read_at(buf, self.pos)?;
        self.pos = self.pos.saturating_add(n as u64);
        Ok(n)
    }
}

impl io::Seek for File {
    fn seek(&mut self, from: io::SeekFrom) -> io::Result<u64> {
        let to = match from {
            io::SeekFrom::Start(p) => Some(p),
            io::SeekFrom::End(d) => self.inner.size().checked_add_signed(d),
            io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = to.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek before the start of the file",
            )
        })?;
        Ok(self.pos)
    }
}

/// The inode number Linux reports for `nid` (see [`DirEntry::ino`]).
fn ino_of(image: &Image, nid: u64) -> u64 {
    image.superblock().kernel_ino(ferrofs_format::Nid(nid))
}
