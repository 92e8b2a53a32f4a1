//! Layout: every range is reserved before a byte is written. The metadata
//! area starts in block 0 (superblock, long-prefix table, shared xattrs,
//! then inodes on 32-byte slots, packed first-fit so an inode with an
//! inline tail never crosses a block); data blocks follow it in nid order.

use crate::error::{BuildError, Result};
use crate::plan::Plan;

/// Where everything goes.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    /// Byte position of each inode (by inode id).
    pub pos: Vec<u64>,
    /// First data block of each inode (flat layouts).
    pub start_blk: Vec<u64>,
    /// First block of each chunk (chunk-based inodes; `None` for holes).
    pub chunk_blk: Vec<Vec<Option<u64>>>,
    pub prefix_start: u64,
    pub shared_start: u64,
    pub meta_blocks: u64,
    pub total_blocks: u64,
}

impl Layout {
    pub fn nid(&self, id: usize) -> u64 {
        self.pos[id] / 32
    }
}

/// Byte offset right after the superblock (no extension slots, no
/// compression records yet).
pub const META_START: u64 = 1024 + 128;

/// Blocks kept open for first-fit packing of small inodes.
const OPEN_BLOCKS: usize = 16;

/// Computes the layout of a plan.
pub fn layout(plan: &Plan, bs: u64) -> Result<Layout> {
    let n = plan.inodes.len();
    let mut l = Layout {
        pos: vec![0; n],
        start_blk: vec![0; n],
        chunk_blk: vec![Vec::new(); n],
        ..Default::default()
    };
    let mut cursor = META_START;
    l.prefix_start = cursor;
    cursor += plan.xattrs.prefix_table().len() as u64;
    cursor = cursor.div_ceil(4) * 4;
    l.shared_start = cursor;
    cursor += plan.xattrs.shared.len() as u64;
    cursor = cursor.div_ceil(32) * 32;

    // Open blocks: (block index, bytes used in it).
    let mut open: Vec<(u64, u64)> = vec![(cursor / bs, cursor % bs)];
    let mut next_block = cursor / bs + u64::from(!cursor.is_multiple_of(bs));
    if cursor.is_multiple_of(bs) {
        open.clear();
    }
    for &id in &plan.order {
        let p = &plan.inodes[id];
        let len = p.inode_size() + plan.xattrs.bodies[id].len() as u64 + p.table_len() + p.tail;
        let len = len.div_ceil(32) * 32;
        if len <= bs {
            if let Some(slot) = open.iter_mut().find(|(_, used)| *used + len <= bs) {
                l.pos[id] = slot.0 * bs + slot.1;
                slot.1 += len;
            } else {
                l.pos[id] = next_block * bs;
                open.push((next_block, len));
                next_block += 1;
                if open.len() > OPEN_BLOCKS {
                    open.remove(0);
                }
            }
            open.retain(|(_, used)| *used + 32 <= bs);
        } else {
            // Larger than a block (many xattrs or a long chunk table; never
            // with an inline tail): its own run of blocks.
            l.pos[id] = next_block * bs;
            let blocks = len.div_ceil(bs);
            let used = len - (blocks - 1) * bs;
            next_block += blocks;
            if used + 32 <= bs {
                open.push((next_block - 1, used));
            }
        }
    }
    let root = plan.order.first().copied().unwrap_or(0);
    if l.pos[root] / 32 > 0xFFFF {
        return Err(BuildError::TooLarge("root inode beyond nid 65535".into()));
    }
    l.meta_blocks = next_block.max(1);
    let mut data = l.meta_blocks;
    for &id in &plan.order {
        let p = &plan.inodes[id];
        if let Some(c) = &p.chunks {
            for ch in &c.chunks {
                l.chunk_blk[id].push(ch.map(|nb| {
                    let s = data;
                    data += nb;
                    s
                }));
            }
        } else if p.blocks > 0 {
            l.start_blk[id] = data;
            data += p.blocks;
        }
    }
    // The kernel reads the first 4 KiB at mount: never make a smaller image.
    l.total_blocks = data.max(4096u64.div_ceil(bs));
    if l.total_blocks > u64::from(u32::MAX) {
        return Err(BuildError::TooLarge(format!("{} blocks", l.total_blocks)));
    }
    Ok(l)
}
