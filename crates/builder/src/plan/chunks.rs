//! Chunk tables of chunk-based files: the chunk size (grown until the
//! table has at most 64 Ki entries), which chunks hold data and which are
//! holes, and the tables of rebuild mode's files whose data stays on the
//! layers' devices.

use crate::error::{BuildError, Result};
use crate::options::view::PlanOptions;

/// A chunk-based file: chunk size and, per chunk, its length in blocks
/// (`None` for a hole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkPlan {
    /// log2(chunk size) - log2(block size).
    pub bits_extra: u8,
    pub chunks: Vec<Option<u64>>,
    /// 8-byte chunk indexes rather than the 4-byte block map.
    pub indexes: bool,
}

impl ChunkPlan {
    /// Bytes per table entry.
    pub fn entry_size(&self) -> u64 {
        if self.indexes {
            8
        } else {
            4
        }
    }
    /// The inode's chunk format word (`i_u`).
    pub fn format(&self) -> u32 {
        let indexes = if self.indexes {
            ferrofs_format::chunk::CHUNK_FORMAT_INDEXES
        } else {
            0
        };
        u32::from(self.bits_extra) | indexes
    }

    /// After the data is written (`blks`: each chunk's first block, `None`
    /// for a hole), takes the largest chunk size that still describes the
    /// file, as mkfs.erofs does: runs of holes and runs of physically
    /// contiguous chunks are measured in blocks, and the chunk size grows
    /// to the smallest power of two dividing every run (the last run
    /// counted in whole blocks). 20 MiB of zeros in 4 KiB chunks becomes
    /// five 4 MiB holes. `blks` is rewritten to the merged table.
    pub fn merge(&mut self, blks: &mut Vec<Option<u64>>, size: u64, bs: u64) {
        let cs = bs << self.bits_extra;
        let cblks = cs / bs;
        let mut min = size.div_ceil(bs);
        let mut shrink = |start: u64, end: u64| {
            let run = (end - start) / bs;
            if run > 0 {
                min = min.min(1 << run.trailing_zeros());
            }
        };
        let mut start = 0u64;
        for k in 1..blks.len() {
            let joined = match (blks[k - 1], blks[k]) {
                (None, None) => true,
                (Some(a), Some(b)) => a.checked_add(cblks) == Some(b),
                _ => false,
            };
            if !joined {
                let pos = k as u64 * cs;
                shrink(start, pos);
                start = pos;
            }
        }
        shrink(start, size);
        let extra = u64::from(min.max(1).ilog2()).min(31) as u8;
        if extra <= self.bits_extra || blks.len() != self.chunks.len() {
            return;
        }
        let step = 1usize << (extra - self.bits_extra);
        let new_cs = bs << extra;
        *blks = blks.iter().step_by(step).copied().collect();
        self.chunks = blks
            .iter()
            .enumerate()
            .map(|(k, b)| {
                let len = new_cs.min(size - k as u64 * new_cs);
                b.map(|_| len.div_ceil(bs))
            })
            .collect();
        self.bits_extra = extra;
    }
}

/// The chunk table of a file of `size` bytes whose data lies in the byte
/// ranges `data` (`None`: everywhere); `--chunksize` or one block per chunk.
pub(super) fn chunk_plan(
    size: u64,
    data: Option<&[(u64, u64)]>,
    opts: &PlanOptions<'_>,
) -> Result<ChunkPlan> {
    let bs = opts.block_size();
    let mut cs = match opts.chunk_size {
        // A file with no data at all is one hole, as mkfs.erofs makes it.
        _ if data.is_some_and(<[_]>::is_empty) => size.next_power_of_two().max(bs),
        Some(c) => c,
        None => bs,
    };
    // Keep the table to at most 64 Ki entries (256 KiB of metadata).
    while size.div_ceil(cs) > 1 << 16 {
        cs *= 2;
    }
    let bits_extra = (cs.trailing_zeros() - bs.trailing_zeros()) as u8;
    if bits_extra > 31 {
        return Err(BuildError::TooLarge(format!("chunk size {cs}")));
    }
    let n = size.div_ceil(cs);
    let mut chunks = Vec::with_capacity(n as usize);
    for k in 0..n {
        let start = k * cs;
        let end = (start + cs).min(size);
        let has_data = data.is_none_or(|ranges| ranges.iter().any(|&(a, b)| a < end && b > start));
        chunks.push(has_data.then(|| (end - start).div_ceil(bs)));
    }
    Ok(ChunkPlan {
        bits_extra,
        chunks,
        // A chunk on an extra device needs an index that names it.
        indexes: opts.chunk_indexes,
    })
}

/// The chunk table of a file whose data stays on extra devices.
pub(super) fn external_plan(x: &crate::tree::content::External, size: u64, bs: u64) -> ChunkPlan {
    let cs = bs << x.bits_extra;
    let chunks = x
        .chunks
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let len = cs.min(size.saturating_sub(k as u64 * cs));
            c.map(|_| len.div_ceil(bs))
        })
        .collect();
    ChunkPlan {
        bits_extra: x.bits_extra,
        chunks,
        indexes: true,
    }
}
