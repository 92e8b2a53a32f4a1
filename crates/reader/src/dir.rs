//! Directories: parsing directory blocks, listing them, and looking a name
//! up by binary search over blocks and then within a block, as the kernel does.

use std::cmp::Ordering;

use ferrofs_format::dirent::{RawDirent, DIRENT_SIZE};
use ferrofs_format::inode::FileType;
use ferrofs_format::{Nid, NAME_MAX};

use crate::error::{Error, Location, Result};
use crate::file::InodeFile;

/// One directory entry as stored: name, nid and type code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawDirEntry {
    /// The name (bytes, at most 255).
    pub name: Vec<u8>,
    /// The inode it names.
    pub nid: Nid,
    /// The dirent's type code (0 unknown, 1..7).
    pub type_code: u8,
}

impl RawDirEntry {
    /// The file type the entry records (`None`: unknown code).
    pub fn file_type(&self) -> Option<FileType> {
        FileType::from_dirent_code(self.type_code)
    }
    /// `.` or `..`.
    pub fn is_dot(&self) -> bool {
        self.name == b"." || self.name == b".."
    }
}

/// A parsed directory block: entries' (nameoff, end) and raw records.
#[derive(Debug)]
struct Block {
    data: Vec<u8>,
    valid: usize,
    count: usize,
}

impl Block {
    fn entry(&self, i: usize, at: Location) -> Result<RawDirEntry> {
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
        Ok(RawDirEntry {
            name: self.data[start..end].to_vec(),
            nid: d.nid,
            type_code: d.file_type,
        })
    }
}

fn dir_check(dir: &InodeFile) -> Result<()> {
    if !dir.inode().is_dir() {
        return Err(Error::WrongType {
            nid: dir.inode().nid.0,
            expected: "directory",
        });
    }
    Ok(())
}

fn read_block(dir: &InodeFile, index: u64) -> Result<Block> {
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

fn block_count(dir: &InodeFile) -> u64 {
    dir.image().block_size().blocks_for(dir.size())
}

/// Streams the entries of a directory in on-disk order (`.` and `..`
/// too): one directory block is held at a time, so memory stays at a block
/// whatever size the directory claims. After an error the iterator ends.
#[derive(Debug)]
pub struct Entries {
    dir: InodeFile,
    blocks: u64,
    next_block: u64,
    current: Option<(Block, Location)>,
    index: usize,
    failed: bool,
}

impl Entries {
    /// Starts streaming `dir` (which must be a directory).
    pub(crate) fn new(dir: InodeFile) -> Result<Self> {
        dir_check(&dir)?;
        Ok(Self {
            blocks: block_count(&dir),
            dir,
            next_block: 0,
            current: None,
            index: 0,
            failed: false,
        })
    }

    fn step(&mut self) -> Result<Option<RawDirEntry>> {
        loop {
            if let Some((block, at)) = &self.current {
                if self.index < block.count {
                    let e = block.entry(self.index, *at)?;
                    self.index += 1;
                    return Ok(Some(e));
                }
            }
            if self.next_block >= self.blocks {
                return Ok(None);
            }
            let b = self.next_block;
            self.next_block += 1;
            let at = self
                .dir
                .inode()
                .loc()
                .with_offset(b.saturating_mul(self.dir.image().block_size().bytes()));
            self.current = Some((read_block(&self.dir, b)?, at));
            self.index = 0;
        }
    }
}

impl Iterator for Entries {
    type Item = Result<RawDirEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let r = self.step().transpose();
        if matches!(r, Some(Err(_))) {
            self.failed = true;
        }
        r
    }
}

/// Looks `name` up in `dir`: binary search over the blocks' first names,
/// then within the candidate block.
pub fn lookup(dir: &InodeFile, name: &[u8]) -> Result<Option<RawDirEntry>> {
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
