//! Directories: parsing directory blocks, listing them, and looking a name
//! up by binary search over blocks and then within a block, as the kernel does.

use std::cmp::Ordering;

use ferrofs_format::dirent::{RawDirent, DIRENT_SIZE};
use ferrofs_format::inode::FileType;
use ferrofs_format::{Nid, NAME_MAX};

use crate::error::{Error, Location, Result};
use crate::file::File;

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub nid: Nid,
    /// The dirent's type code (0 unknown, 1..7).
    pub type_code: u8,
}

impl DirEntry {
    pub fn file_type(&self) -> Option<FileType> {
        FileType::from_dirent_code(self.type_code)
    }
    /// `.` or `..`.
    pub fn is_dot(&self) -> bool {
        self.name == b"." || self.name == b".."
    }
}

/// A parsed directory block: entries' (nameoff, end) and raw records.
struct Block {
    data: Vec<u8>,
    valid: usize,
    count: usize,
}

impl Block {
    fn entry(&self, i: usize, at: Location) -> Result<DirEntry> {
        let d = RawDirent::at(&self.data, i)
            .ok_or_else(|| Error::corrupt(at, "dirent outside its block"))?;
        let start = usize::from(d.nameoff);
        let end = if i + 1 < self.count {
            let next = RawDirent::at(&self.data, i + 1)
                .ok_or_else(|| Error::corrupt(at, "dirent outside its block"))?;
            usize::from(next.nameoff)
        } else {
            let tail = self.data.get(start..self.valid).unwrap_or(&[]);
            start + tail.iter().position(|&c| c == 0).unwrap_or(tail.len())
        };
        if start < self.count * DIRENT_SIZE
            || end <= start
            || end > self.valid
            || end - start > NAME_MAX
        {
            return Err(Error::corrupt(
                at,
                format!("bad name bounds [{start}, {end}) of dirent {i}"),
            ));
        }
        Ok(DirEntry {
            name: self.data[start..end].to_vec(),
            nid: d.nid,
            type_code: d.file_type,
        })
    }
}

fn dir_check(dir: &File) -> Result<()> {
    if !dir.inode().is_dir() {
        return Err(Error::WrongType {
            nid: dir.inode().nid.0,
            expected: "directory",
        });
    }
    Ok(())
}

fn read_block(dir: &File, index: u64) -> Result<Block> {
    let bs = dir.image().block_size().bytes();
    let start = index * bs;
    let valid = (dir.size() - start).min(bs) as usize;
    let at = dir.inode().loc().with_offset(start);
    let mut data = vec![0u8; valid];
    let n = dir.read_at(&mut data, start)?;
    if n != valid || valid < DIRENT_SIZE {
        return Err(Error::corrupt(at, "directory block too short"));
    }
    let first = RawDirent::at(&data, 0).ok_or_else(|| Error::corrupt(at, "empty block"))?;
    let nameoff0 = usize::from(first.nameoff);
    if nameoff0 < DIRENT_SIZE || nameoff0 as u64 >= bs || nameoff0 > valid {
        return Err(Error::corrupt(at, format!("bad first nameoff {nameoff0}")));
    }
    Ok(Block {
        data,
        valid,
        count: nameoff0 / DIRENT_SIZE,
    })
}

fn block_count(dir: &File) -> u64 {
    dir.image().block_size().blocks_for(dir.size())
}

/// Calls `f` on every entry of `dir` in on-disk order (`.` and `..` too).
/// Stops early when `f` returns `false`.
pub fn for_each_entry(dir: &File, mut f: impl FnMut(DirEntry) -> bool) -> Result<()> {
    dir_check(dir)?;
    for b in 0..block_count(dir) {
        let block = read_block(dir, b)?;
        let at = dir
            .inode()
            .loc()
            .with_offset(b * dir.image().block_size().bytes());
        for i in 0..block.count {
            if !f(block.entry(i, at)?) {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// All entries of `dir`, `.` and `..` included.
pub fn read_dir(dir: &File) -> Result<Vec<DirEntry>> {
    let mut out = Vec::new();
    for_each_entry(dir, |e| {
        out.push(e);
        true
    })?;
    Ok(out)
}

/// Looks `name` up in `dir`: binary search over the blocks' first names,
/// then within the candidate block.
pub fn lookup(dir: &File, name: &[u8]) -> Result<Option<DirEntry>> {
    dir_check(dir)?;
    let bs = dir.image().block_size().bytes();
    let (mut lo, mut hi) = (0u64, block_count(dir));
    let mut candidate: Option<(u64, Block)> = None;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let block = read_block(dir, mid)?;
        let at = dir.inode().loc().with_offset(mid * bs);
        let first = block.entry(0, at)?;
        match name.cmp(&first.name[..]) {
            Ordering::Equal => return Ok(Some(first)),
            Ordering::Less => hi = mid,
            Ordering::Greater => {
                lo = mid + 1;
                candidate = Some((mid, block));
            }
        }
    }
    let Some((b, block)) = candidate else {
        return Ok(None);
    };
    let at = dir.inode().loc().with_offset(b * bs);
    let (mut lo, mut hi) = (0usize, block.count);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let e = block.entry(mid, at)?;
        match name.cmp(&e.name[..]) {
            Ordering::Equal => return Ok(Some(e)),
            Ordering::Less => hi = mid,
            Ordering::Greater => lo = mid + 1,
        }
    }
    Ok(None)
}
