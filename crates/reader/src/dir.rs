//! Directories: parsing directory blocks, listing them, and looking a name
//! up by binary search over blocks and then within a block, as the kernel does.

use std::cmp::Ordering;

use ferrofs_format::dirent::{RawDirent, DIRENT_SIZE};
use ferrofs_format::inode::FileType;
use ferrofs_format::{BlockAddr, Nid, NAME_MAX};

use crate::error::{Error, Location, OrCorrupt, Result};
use crate::file::InodeFile;
use crate::map::ExtentKind;

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
        let end = match i.checked_add(1).filter(|&next| next < self.count) {
            Some(next) => {
                let next = RawDirent::at(&self.data, next)
                    .ok_or_else(|| Error::corrupt(at, "dirent outside its block"))?;
                usize::from(next.nameoff)
            }
            None => {
                let tail = self.data.get(start..self.valid).unwrap_or(&[]);
                let len = tail.iter().position(|&c| c == 0).unwrap_or(tail.len());
                start.checked_add(len).or_corrupt(at, "dirent name end")?
            }
        };
        let names_start = self
            .count
            .checked_mul(DIRENT_SIZE)
            .or_corrupt(at, "dirent count")?;
        let name = if start < names_start || end > self.valid {
            None
        } else {
            self.data.get(start..end)
        };
        let Some(name) = name.filter(|n| !n.is_empty() && n.len() <= NAME_MAX) else {
            return Err(Error::corrupt(
                at,
                format!("bad name bounds [{start}, {end}) of dirent {i}"),
            ));
        };
        Ok(RawDirEntry {
            name: name.to_vec(),
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
    let bs = dir.image().block_size();
    let start = bs
        .pos(BlockAddr(index))
        .or_corrupt(dir.inode().loc(), "directory block address overflows")?;
    let at = dir.inode().loc().with_offset(start);
    let left = dir
        .size()
        .checked_sub(start)
        .or_corrupt(at, "directory block past the end")?;
    let valid = bs.at_most(left);
    let mut data = vec![0u8; valid];
    let n = dir.read_at(&mut data, start)?;
    if n != valid || valid < DIRENT_SIZE {
        return Err(Error::corrupt(at, "directory block too short"));
    }
    let first = RawDirent::at(&data, 0).ok_or_else(|| Error::corrupt(at, "empty block"))?;
    let nameoff0 = usize::from(first.nameoff);
    if nameoff0 < DIRENT_SIZE || nameoff0 >= bs.usize() || nameoff0 > valid {
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
                    // index < count, a number of 12-byte dirents in a block.
                    self.index = self.index.checked_add(1).or_corrupt(*at, "dirent index")?;
                    return Ok(Some(e));
                }
            }
            if self.next_block >= self.blocks {
                return Ok(None);
            }
            let b = self.next_block;
            let dir_at = self.dir.inode().loc();
            self.next_block = b.checked_add(1).or_corrupt(dir_at, "directory block")?;
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
        let mid = lo.midpoint(hi);
        let block = read_block(dir, mid)?;
        // Saturating: only the position an error message names.
        let at = dir.inode().loc().with_offset(mid.saturating_mul(bs));
        let first = block.entry(0, at)?;
        match name.cmp(&first.name[..]) {
            Ordering::Equal => return Ok(Some(first)),
            Ordering::Less => hi = mid,
            Ordering::Greater => {
                lo = mid.checked_add(1).or_corrupt(at, "directory block")?;
                candidate = Some((mid, block));
            }
        }
    }
    let Some((b, block)) = candidate else {
        return Ok(None);
    };
    let at = dir.inode().loc().with_offset(b.saturating_mul(bs));
    let (mut lo, mut hi) = (0usize, block.count);
    while lo < hi {
        let mid = lo.midpoint(hi);
        let e = block.entry(mid, at)?;
        match name.cmp(&e.name[..]) {
            Ordering::Equal => return Ok(Some(e)),
            Ordering::Less => hi = mid,
            Ordering::Greater => lo = mid.checked_add(1).or_corrupt(at, "dirent index")?,
        }
    }
    Ok(None)
}

/// The last entry of a directory as Linux's lookup sees it, when that
/// differs from what a listing shows: `(listed, looked_up)`.
///
/// A listing ends the last name of a block at a NUL or at the directory's
/// size; a lookup reads it to a NUL or to the end of the block. Linux's
/// page of a directory whose last block is stored raw (flat or chunk-based
/// layouts, not an inline tail nor compressed data, which it zero-fills)
/// holds the bytes stored past the directory's end, so a last name that
/// runs up to the size without a NUL, followed by non-zero bytes, is
/// listed but can never be looked up.
pub fn lookup_name_past_end(dir: &InodeFile) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    dir_check(dir)?;
    let bs = dir.image().block_size();
    let size = dir.size();
    let at = dir.inode().loc();
    let used = size.checked_rem(bs.bytes()).or_corrupt(at, "block size")?;
    if used == 0 {
        return Ok(None);
    }
    let last = size.checked_div(bs.bytes()).or_corrupt(at, "block size")?;
    let block = read_block(dir, last)?;
    let at = dir
        .inode()
        .loc()
        .with_offset(last.saturating_mul(bs.bytes()));
    let Some(i) = block.count.checked_sub(1) else {
        return Ok(None);
    };
    let entry = block.entry(i, at)?;
    // The name ends at the directory's end, not at a NUL.
    let start = usize::from(
        RawDirent::at(&block.data, i)
            .ok_or_else(|| Error::corrupt(at, "dirent outside its block"))?
            .nameoff,
    );
    if start.checked_add(entry.name.len()) != Some(block.valid) {
        return Ok(None);
    }
    let mut raw = None;
    for ext in dir.extents() {
        let ext = ext?;
        if ext.logical < size && size <= ext.end() {
            if let ExtentKind::Raw { device, pos } = ext.kind {
                raw = size
                    .checked_sub(ext.logical)
                    .and_then(|rel| pos.checked_add(rel))
                    .map(|p| (device, p));
            }
            break;
        }
    }
    let Some((device, pos)) = raw else {
        return Ok(None);
    };
    // Up to the end of the block, and a name is at most NAME_MAX bytes.
    let rest = bs
        .bytes()
        .checked_sub(used)
        .and_then(|r| usize::try_from(r).ok())
        .or_corrupt(at, "directory block")?;
    let mut past = vec![0u8; rest.min(NAME_MAX.saturating_add(1))];
    if dir.image().read_physical(device, pos, &mut past).is_err() {
        // Past the image's end: the kernel's read fails too, and says so.
        return Ok(None);
    }
    let n = past.iter().position(|&b| b == 0).unwrap_or(past.len());
    if n == 0 {
        return Ok(None);
    }
    let mut looked_up = entry.name.clone();
    looked_up.extend_from_slice(past.get(..n).unwrap_or_default());
    Ok(Some((entry.name, looked_up)))
}
