//! The friendly API over an [`Image`]: path resolution (with a symlink
//! limit), directory listing, symlink targets and xattrs by inode.

use std::collections::VecDeque;

use crate::dir::{self, DirEntry};
use crate::error::{Error, Result};
use crate::file::File;
use crate::image::Image;
use crate::inode::Inode;
use crate::xattr::{self, Xattr};

/// Symbolic links followed while resolving one path, as Linux allows.
pub const MAX_SYMLINK_FOLLOWS: u32 = 40;
/// Longest symlink target Linux can hold.
pub const MAX_SYMLINK_LEN: u64 = 4095;

impl Image {
    /// Resolves `path` (bytes, `/`-separated, relative to the root) to an
    /// inode. Symlinks in the middle are followed; the last one only when
    /// `follow_last`.
    pub fn lookup_path(&self, path: &[u8], follow_last: bool) -> Result<Inode> {
        let shown = || String::from_utf8_lossy(path).into_owned();
        let root = self.root()?;
        let mut cur = root.clone();
        let mut pending: VecDeque<Vec<u8>> = split(path).collect();
        let mut follows = 0u32;
        while let Some(c) = pending.pop_front() {
            if !cur.is_dir() {
                return Err(Error::NotADirectory { path: shown() });
            }
            let dir = self.open_file(cur.clone())?;
            let entry = dir::lookup(&dir, &c)?.ok_or_else(|| Error::NotFound { path: shown() })?;
            let next = self.inode(entry.nid)?;
            if next.is_symlink() && (follow_last || !pending.is_empty()) {
                follows += 1;
                if follows > MAX_SYMLINK_FOLLOWS {
                    return Err(Error::TooManySymlinks { path: shown() });
                }
                let target = self.read_link(&next)?;
                if target.first() == Some(&b'/') {
                    cur = root.clone();
                }
                for (i, part) in split(&target).enumerate() {
                    pending.insert(i, part);
                }
                continue;
            }
            cur = next;
        }
        Ok(cur)
    }

    /// Entries of a directory inode, `.` and `..` included.
    pub fn read_dir(&self, dir: &Inode) -> Result<Vec<DirEntry>> {
        dir::read_dir(&self.open_file(dir.clone())?)
    }

    /// Looks one name up in a directory inode.
    pub fn lookup(&self, dir: &Inode, name: &[u8]) -> Result<Option<DirEntry>> {
        dir::lookup(&self.open_file(dir.clone())?, name)
    }

    /// The target of a symlink inode.
    pub fn read_link(&self, inode: &Inode) -> Result<Vec<u8>> {
        if !inode.is_symlink() {
            return Err(Error::WrongType {
                nid: inode.nid.0,
                expected: "symlink",
            });
        }
        if inode.size > MAX_SYMLINK_LEN {
            return Err(Error::corrupt(
                inode.loc(),
                format!("symlink target of {} bytes", inode.size),
            ));
        }
        self.open_file(inode.clone())?.read_all()
    }

    /// Every extended attribute of an inode.
    pub fn xattrs(&self, inode: &Inode) -> Result<Vec<Xattr>> {
        xattr::list(self, inode)
    }

    /// One extended attribute by full name.
    pub fn xattr(&self, inode: &Inode, name: &[u8]) -> Result<Option<Vec<u8>>> {
        xattr::get(self, inode, name)
    }

    /// Opens a regular file (or any inode with data) by path.
    pub fn open_path_file(&self, path: &[u8]) -> Result<File> {
        let inode = self.lookup_path(path, true)?;
        self.open_file(inode)
    }
}

fn split(path: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    path.split(|&c| c == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(<[u8]>::to_vec)
}
