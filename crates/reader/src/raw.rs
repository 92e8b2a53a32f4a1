//! Inode-level access, for tools that need more than paths: fsck, dump,
//! extract, the FUSE adapter. Everything here starts from an [`Image`]
//! through [`Image::raw`] and hands out [`Inode`]s that only this crate
//! can make (their fields are read through methods), so nothing a caller
//! builds by hand reaches a read path. Most programs want the path API on
//! [`Image`] instead (`read`, `metadata`, `read_dir`, `open_file`).

use std::collections::VecDeque;

use crate::dir::{self, Entries};
use crate::error::{Error, Result};
use crate::image::Image;
use crate::xattr;

pub use crate::addr::{MetaAddr, METABOX_SPACE};
pub use crate::cache::CacheStats;
pub use crate::dir::RawDirEntry;
pub use crate::file::{Extents, InodeFile};
pub use crate::image::Device;
pub use crate::inode::Inode;
pub use crate::map;
pub use crate::xattr::Xattr;
pub use ferrofs_format::Nid;

/// Symbolic links followed while resolving one path, as Linux allows.
pub const MAX_SYMLINK_FOLLOWS: u32 = 40;
/// Longest symlink target Linux can hold.
pub const MAX_SYMLINK_LEN: u64 = 4095;
/// Path components looked up while resolving one path, symlink targets
/// included: a path of 4096 bytes has at most 2048, and a hostile image's
/// 40 chained targets of 4095 bytes would otherwise make one call walk
/// some 84,000.
pub const MAX_PATH_STEPS: u32 = 8192;

/// Inode-level view of an image (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct Raw<'a> {
    image: &'a Image,
}

impl Image {
    /// Inode-level access: inodes by nid, directory entries with their nids,
    /// maps and raw metadata bytes.
    pub fn raw(&self) -> Raw<'_> {
        Raw { image: self }
    }
}

impl<'a> Raw<'a> {
    /// The image this view reads.
    pub fn image(&self) -> &'a Image {
        self.image
    }

    /// Loads and validates inode `nid`.
    pub fn inode(&self, nid: Nid) -> Result<Inode> {
        self.image.inode(nid)
    }

    /// The root directory's inode.
    pub fn root(&self) -> Result<Inode> {
        self.image.root()
    }

    /// Opens an inode's data for reading at any offset.
    pub fn open(&self, inode: Inode) -> Result<InodeFile> {
        self.image.open_inode(inode)
    }

    /// Resolves `path` (bytes, `/`-separated, relative to the root) to an
    /// inode. Symlinks in the middle are followed; the last one only when
    /// `follow_last`.
    pub fn lookup_path(&self, path: &[u8], follow_last: bool) -> Result<Inode> {
        resolve(self.image, path, follow_last)
    }

    /// Opens the inode `path` names (symlinks followed), as an inode-level
    /// file with its map.
    pub fn open_path(&self, path: &[u8]) -> Result<InodeFile> {
        self.open(resolve(self.image, path, true)?)
    }

    /// Streams the entries of a directory inode, `.` and `..` included,
    /// one directory block in memory at a time.
    pub fn entries(&self, dir: &Inode) -> Result<Entries> {
        Entries::new(self.open(dir.clone())?)
    }

    /// All entries of a directory inode, `.` and `..` included.
    pub fn read_dir(&self, dir: &Inode) -> Result<Vec<RawDirEntry>> {
        self.entries(dir)?.collect()
    }

    /// Looks one name up in a directory inode.
    pub fn lookup(&self, dir: &Inode, name: &[u8]) -> Result<Option<RawDirEntry>> {
        dir::lookup(&self.open(dir.clone())?, name)
    }

    /// The last name of a directory as Linux's lookup compares it, when
    /// that differs from the name a listing shows: `(listed, looked_up)`.
    /// A listing ends the last name of a block at a NUL or at the
    /// directory's size; Linux's lookup reads it on to a NUL or the end of
    /// the block, and its page of a directory whose last block is stored
    /// raw holds the bytes stored past the directory's end (an inline tail
    /// or compressed data it zero-fills). Such a name is listed but can
    /// never be looked up.
    pub fn lookup_name_past_end(&self, dir: &Inode) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        dir::lookup_name_past_end(&self.open(dir.clone())?)
    }

    /// The target of a symlink inode.
    pub fn read_link(&self, inode: &Inode) -> Result<Vec<u8>> {
        read_link(self.image, inode)
    }

    /// Every extended attribute of an inode.
    pub fn xattrs(&self, inode: &Inode) -> Result<Vec<Xattr>> {
        xattr::list(self.image, inode)
    }

    /// One extended attribute by full name.
    pub fn xattr(&self, inode: &Inode, name: &[u8]) -> Result<Option<Vec<u8>>> {
        xattr::get(self.image, inode, name)
    }

    /// The SHA-256-style content fingerprint an inode carries
    /// (`--xattr-inode-digest`), if the image records them.
    pub fn fingerprint(&self, inode: &Inode) -> Result<Option<Vec<u8>>> {
        xattr::fingerprint(self.image, inode)
    }

    /// The xattr name filter (bloom) word of an inode, if the image has
    /// the feature and the inode an xattr body.
    pub fn xattr_name_filter(&self, inode: &Inode) -> Result<Option<u32>> {
        xattr::name_filter(self.image, inode)
    }

    /// Whether the filter word `filter` rules out attribute `name` (an
    /// attribute the filter rules out but the inode has is damage).
    pub fn xattr_filtered_out(&self, filter: u32, name: &[u8]) -> bool {
        xattr::filtered_out(self.image, filter, name)
    }

    /// The packed (fragments) inode, if the image has one.
    pub fn packed_file(&self) -> Option<InodeFile> {
        self.image.packed_file()
    }

    /// The metabox inode (the metadata space of metabox images), if any.
    pub fn metabox_file(&self) -> Option<InodeFile> {
        self.image.metabox_file()
    }

    /// Reads `buf.len()` bytes of metadata at `at` (on the primary device
    /// or in the metabox).
    pub fn read_raw(&self, buf: &mut [u8], at: MetaAddr) -> Result<()> {
        self.image.read_raw(buf, at)
    }

    /// Reads `buf.len()` stored bytes at a pcluster position (in blocks of
    /// the unified address space, or inline in the metadata).
    pub fn read_stored(&self, at: map::PclusterAt, buf: &mut [u8]) -> Result<()> {
        self.image.read_stored(at, buf)
    }

    /// The stored bytes of a pcluster as the image holds them (whole
    /// blocks with their zero padding, or the exact inline bytes), read
    /// without decoding: what a builder copies into a new image. At most
    /// the format's 1 MiB pcluster limit is read.
    pub fn read_pcluster(&self, pc: &map::Pcluster) -> Result<Vec<u8>> {
        self.image.read_pcluster(pc)
    }

    /// Statistics of the decompressed-pcluster cache.
    pub fn cache_stats(&self) -> CacheStats {
        self.image.cache_stats()
    }
}

/// Resolves a path to an inode (see [`Raw::lookup_path`]).
pub(crate) fn resolve(image: &Image, path: &[u8], follow_last: bool) -> Result<Inode> {
    let shown = || String::from_utf8_lossy(path).into_owned();
    let root = image.root()?;
    let mut cur = root.clone();
    let mut pending: VecDeque<Vec<u8>> = split(path).collect();
    let (mut follows, mut steps) = (0u32, 0u32);
    while let Some(c) = pending.pop_front() {
        if !cur.is_dir() {
            return Err(Error::NotADirectory { path: shown() });
        }
        steps = steps.saturating_add(1);
        if steps > MAX_PATH_STEPS {
            return Err(Error::TooManySymlinks { path: shown() });
        }
        let dir = image.open_inode(cur.clone())?;
        let entry = dir::lookup(&dir, &c)?.ok_or_else(|| Error::NotFound { path: shown() })?;
        let next = image.inode(entry.nid)?;
        if next.is_symlink() && (follow_last || !pending.is_empty()) {
            follows = follows.saturating_add(1);
            // Saturating is right: any count past the limit is refused.
            if follows > MAX_SYMLINK_FOLLOWS {
                return Err(Error::TooManySymlinks { path: shown() });
            }
            let target = read_link(image, &next)?;
            if target.first() == Some(&b'/') {
                cur = root.clone();
            }
            // The target's components go first, in one pass.
            let rest = std::mem::take(&mut pending);
            pending = split(&target).collect();
            pending.extend(rest);
            continue;
        }
        cur = next;
    }
    Ok(cur)
}

/// The target of a symlink inode, bounded by [`MAX_SYMLINK_LEN`].
pub(crate) fn read_link(image: &Image, inode: &Inode) -> Result<Vec<u8>> {
    if !inode.is_symlink() {
        return Err(Error::WrongType {
            nid: inode.nid().0,
            expected: "symlink",
        });
    }
    if inode.size() > MAX_SYMLINK_LEN {
        return Err(Error::corrupt(
            inode.loc(),
            format!("symlink target of {} bytes", inode.size()),
        ));
    }
    image.open_inode(inode.clone())?.read_all()
}

fn split(path: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    path.split(|&c| c == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(<[u8]>::to_vec)
}
