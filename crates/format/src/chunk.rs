//! Chunk-based files: the per-inode chunk format word and the chunk table
//! entries (4-byte block map or 8-byte chunk index).

use crate::le::{u16_at, u32_at};
use crate::FormatError;

pub const CHUNK_FORMAT_BLKBITS_MASK: u32 = 0x1F;
pub const CHUNK_FORMAT_INDEXES: u32 = 0x20;
pub const CHUNK_FORMAT_48BIT: u32 = 0x40;
pub const CHUNK_FORMAT_ALL: u32 = 0x7F;
/// A block-map entry or chunk start that marks a hole.
pub const NULL_ADDR: u32 = u32::MAX;

/// Decoded chunk format word (`i_u` of a chunk-based inode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkFormat {
    /// log2(chunk size) - log2(block size).
    pub chunkbits_extra: u8,
    pub indexes: bool,
    pub bit48: bool,
}

impl ChunkFormat {
    pub fn parse(i_u: u32) -> Result<Self, FormatError> {
        if i_u & !CHUNK_FORMAT_ALL != 0 {
            return Err(FormatError::invalid("chunk format", i_u));
        }
        Ok(Self {
            chunkbits_extra: (i_u & CHUNK_FORMAT_BLKBITS_MASK) as u8,
            indexes: i_u & CHUNK_FORMAT_INDEXES != 0,
            bit48: i_u & CHUNK_FORMAT_48BIT != 0,
        })
    }
    /// Bytes per table entry.
    pub fn entry_size(self) -> usize {
        if self.indexes {
            8
        } else {
            4
        }
    }
}

/// One chunk table entry: where a chunk lives, or a hole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkEntry {
    pub device_id: u16,
    /// `None` for a hole.
    pub startblk: Option<u64>,
}

impl ChunkEntry {
    pub fn parse_blockmap(b: &[u8; 4]) -> Self {
        let v = u32_at(b, 0);
        Self {
            device_id: 0,
            startblk: (v != NULL_ADDR).then_some(u64::from(v)),
        }
    }
    pub fn parse_index(b: &[u8; 8], bit48: bool) -> Self {
        let hi = u64::from(u16_at(b, 0));
        let lo = u64::from(u32_at(b, 4));
        let (v, null) = if bit48 {
            ((hi << 32) | lo, (1u64 << 48) - 1)
        } else {
            (lo, u64::from(u32::MAX))
        };
        Self {
            device_id: u16_at(b, 2),
            startblk: (v != null).then_some(v),
        }
    }
}
