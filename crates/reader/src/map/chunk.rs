//! CHUNK_BASED files: a table of per-chunk block addresses (block map or
//! chunk indexes with device ids); missing chunks are holes.

use ferrofs_format::chunk::{ChunkEntry, ChunkFormat};

use super::{Extent, ExtentKind};
use crate::addr::MetaAddr;
use crate::error::{Error, OrCorrupt, Result};
use crate::image::Image;
use crate::inode::Inode;

/// Mapping state of a chunk-based inode (block map or chunk indexes).
#[derive(Clone, Debug)]
pub struct ChunkMap {
    pub(crate) format: ChunkFormat,
    pub(crate) chunkbits: u32,
    table: MetaAddr,
    pub(crate) chunks: u64,
    device_mask: u16,
}

impl ChunkMap {
    /// The chunk format word (block map or indexes, chunk size bits).
    pub fn format(&self) -> &ChunkFormat {
        &self.format
    }
    /// log2 of the chunk size in bytes.
    pub fn chunkbits(&self) -> u32 {
        self.chunkbits
    }
    /// Number of chunks.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    pub(crate) fn new(image: &Image, inode: &Inode) -> Result<Self> {
        let format = ChunkFormat::parse(inode.i_u).map_err(|_| {
            Error::unsupported(inode.loc(), format!("chunk format {:#x}", inode.i_u))
        })?;
        let chunkbits = u32::from(image.block_size().bits())
            .checked_add(u32::from(format.chunkbits_extra))
            .or_corrupt(inode.loc(), "chunk size")?;
        if chunkbits > 48 {
            return Err(Error::corrupt(
                inode.loc(),
                format!("chunk size 2^{chunkbits}"),
            ));
        }
        let unit = format.entry_size() as u64;
        let table = inode
            .inode_end()
            .round_up(unit)
            .or_corrupt(inode.loc(), "chunk table overflows")?;
        let chunks = inode.size.div_ceil(1u64 << chunkbits);
        // Device ids are masked to the bits the device count needs.
        let device_mask = u16::try_from(image.devices().len())
            .ok()
            .and_then(|extra| extra.checked_add(1))
            .and_then(u16::checked_next_power_of_two)
            .and_then(|p| p.checked_sub(1))
            .or_corrupt(inode.loc(), "too many devices")?;
        Ok(Self {
            format,
            chunkbits,
            table,
            chunks,
            device_mask,
        })
    }

    /// Reads the table entry of chunk `k`.
    pub fn entry(&self, image: &Image, inode: &Inode, k: u64) -> Result<ChunkEntry> {
        let esz = self.format.entry_size() as u64;
        let pos = k
            .checked_mul(esz)
            .and_then(|o| self.table.checked_add(o))
            .ok_or_else(|| Error::corrupt(inode.loc(), "chunk table overflows"))?;
        let e = if self.format.indexes {
            let mut b = [0u8; 8];
            image.read_raw(&mut b, pos)?;
            let mut e = ChunkEntry::parse_index(&b, self.format.bit48);
            e.device_id &= self.device_mask;
            e
        } else {
            let mut b = [0u8; 4];
            image.read_raw(&mut b, pos)?;
            ChunkEntry::parse_blockmap(&b)
        };
        if usize::from(e.device_id) > image.devices().len() {
            return Err(Error::corrupt(
                inode.loc().with_offset(pos.bits()),
                format!("chunk {k} names device {}", e.device_id),
            ));
        }
        Ok(e)
    }

    pub(crate) fn map(&self, image: &Image, inode: &Inode, offset: u64) -> Result<Extent> {
        let k = offset >> self.chunkbits;
        let logical = k << self.chunkbits;
        let left = inode
            .size
            .checked_sub(logical)
            .or_corrupt(inode.loc().with_offset(offset), "chunk past the end")?;
        let len = (1u64 << self.chunkbits).min(left);
        let e = self.entry(image, inode, k)?;
        let kind = match e.startblk {
            None => ExtentKind::Hole,
            Some(blk) => {
                let bs = image.block_size().bytes();
                let pos = blk
                    .checked_mul(bs)
                    .ok_or_else(|| Error::corrupt(inode.loc(), "chunk address overflows"))?;
                // The device's end: the unified address space's for device
                // 0, else the blocks its slot states (0: not stated).
                let end = match usize::from(e.device_id).checked_sub(1) {
                    None => image.mapped_bytes(),
                    Some(i) => image
                        .devices()
                        .get(i)
                        .map(|d| d.slot.blocks)
                        .filter(|&b| b > 0)
                        .and_then(|b| b.checked_mul(bs)),
                };
                if end.is_some_and(|end| pos.checked_add(len).is_none_or(|e| e > end)) {
                    return Err(Error::corrupt(
                        inode.loc().with_offset(offset),
                        format!(
                            "chunk {k} ({len} bytes at block {blk} of device {}) runs past \
                             the device's end",
                            e.device_id
                        ),
                    ));
                }
                ExtentKind::Raw {
                    device: e.device_id,
                    pos,
                }
            }
        };
        Ok(Extent { logical, len, kind })
    }
}
