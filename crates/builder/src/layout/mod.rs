//! Layout of the metadata area. The image is laid out as
//! `[superblock + compression records (+ root inode)][file data][metadata][directory blocks]`:
//! data is streamed first (so compressed sizes are known before any
//! inode is placed), then the metadata area holds the long-prefix table,
//! the shared xattrs and the inodes on 32-byte slots, packed best-fit so
//! that an inode with inline data never crosses a block. The root inode
//! may instead sit in the superblock's block (see [`layout_meta`]'s
//! `root_at`); nids then count from byte 0 of the image.

pub(crate) mod head;

use std::collections::BTreeSet;

use crate::error::{BuildError, Result};

/// Where the metadata goes.
#[derive(Clone, Debug, Default)]
pub struct MetaLayout {
    /// Absolute byte position of each inode (by inode id).
    pub pos: Vec<u64>,
    /// Absolute byte position of the long-prefix table.
    pub prefix_start: u64,
    /// Offset of the shared xattr area inside the metadata area.
    pub shared_start: u64,
    /// Block where the metadata area starts (the superblock's
    /// `xattr_blkaddr`; its `meta_blkaddr` is `nid_base` in blocks).
    pub meta_blkaddr: u64,
    pub meta_blocks: u64,
    /// Bit 63 for a layout of the metabox's data (nids in the metabox).
    pub space: u64,
    /// Byte position of nid 0 (the image's `meta_blkaddr`: the start of
    /// the metadata area, or 0 with the root in the superblock's block; an
    /// incremental build lays its metadata out after the image's, whose
    /// nids stay).
    pub nid_base: u64,
}

/// Bit 63 of a nid: the inode lies in the metabox.
pub const METABOX_NID_BIT: u64 = 1 << 63;

impl MetaLayout {
    /// The nid of an inode (`_bs`: kept for the callers; the base is in
    /// bytes).
    pub fn nid(&self, id: usize, _bs: u64) -> u64 {
        ((self.pos[id] - self.nid_base) / 32) | self.space
    }
}

/// Places the prefix table, the shared xattrs and one item per inode
/// (`item_len[id]`, in the order `order`) in a metadata area starting at
/// block `meta_blkaddr`. With `root_at`, the first inode of `order` (the
/// root) is not in the area but at that byte of the image (its record,
/// 32-byte aligned, is the caller's to fit: in the superblock's block),
/// and nids count from byte 0.
pub fn layout_meta(
    order: &[usize],
    item_len: &[u64],
    (prefix_len, shared_len): (u64, u64),
    bs: u64,
    meta_blkaddr: u64,
    root_at: Option<u64>,
) -> Result<MetaLayout> {
    let base = meta_blkaddr * bs;
    let mut l = MetaLayout {
        pos: vec![0; item_len.len()],
        prefix_start: base,
        meta_blkaddr,
        nid_base: if root_at.is_some() { 0 } else { base },
        ..Default::default()
    };
    let mut cursor = prefix_len.div_ceil(4) * 4;
    l.shared_start = cursor;
    cursor += shared_len;
    // Slot 0 stays unused: nid 0 would be inode number 0, which readdir
    // users take for a deleted entry (and a packed nid of 0 for none).
    // Counted from byte 0, no inode of the area is at nid 0.
    cursor = cursor.div_ceil(32).max(u64::from(l.nid_base == base)) * 32;
    if prefix_len > 0 && (base + prefix_len) / 4 > u64::from(u32::MAX) {
        return Err(BuildError::TooLarge(
            "xattr prefix table beyond 16 GiB".into(),
        ));
    }

    // Blocks with room left, by how many 32-byte slots they have used
    // (relative block indexes, lowest first): every record goes to the
    // fullest block it fits in, the earliest of those, as mkfs.erofs packs
    // its metadata.
    let slots = (bs / 32) as usize;
    let mut open: Vec<BTreeSet<u64>> = vec![BTreeSet::new(); slots];
    let reopen = |open: &mut [BTreeSet<u64>], blk: u64, used: u64| {
        if let Some(set) = open.get_mut((used / 32) as usize) {
            set.insert(blk);
        }
    };
    let mut next_block = cursor / bs;
    if !cursor.is_multiple_of(bs) {
        reopen(&mut open, next_block, cursor % bs);
        next_block += 1;
    }
    let (order, root) = match (root_at, order.split_first()) {
        (Some(at), Some((&root, rest))) => {
            l.pos[root] = at;
            (rest, Some(root))
        }
        _ => (order, order.first().copied()),
    };
    for &id in order {
        let len = item_len[id].div_ceil(32) * 32;
        let rel = if len <= bs {
            let need = (len / 32) as usize;
            let fit = (0..=slots - need)
                .rev()
                .find_map(|u| open[u].pop_first().map(|blk| (blk, u as u64 * 32)));
            let (blk, used) = fit.unwrap_or_else(|| {
                next_block += 1;
                (next_block - 1, 0)
            });
            reopen(&mut open, blk, used + len);
            blk * bs + used
        } else {
            // Larger than a block (many xattrs or indexes; never with inline
            // data): a run of blocks of its own.
            let at = next_block * bs;
            let blocks = len.div_ceil(bs);
            next_block += blocks;
            reopen(&mut open, next_block - 1, len - (blocks - 1) * bs);
            at
        };
        l.pos[id] = base + rel;
    }
    if let Some(root) = root {
        if l.nid(root, bs) > 0xFFFF {
            return Err(BuildError::TooLarge("root inode beyond nid 65535".into()));
        }
    }
    l.meta_blocks = next_block.max(1);
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::layout_meta;

    #[test]
    fn a_root_in_block_0_makes_nids_count_from_byte_0() {
        let (order, len) = ([2, 0, 1], [32, 100, 64]);
        let l = layout_meta(&order, &len, (0, 0), 4096, 10, Some(1152)).unwrap();
        assert_eq!((l.nid_base, l.pos[2], l.nid(2, 4096)), (0, 1152, 36));
        // The others fill the area from its first byte (no nid 0 there).
        assert_eq!(l.pos[0], 10 * 4096);
        assert_eq!(l.nid(0, 4096), 10 * 4096 / 32);
        assert_eq!(l.pos[1], 10 * 4096 + 32);
        // Without: nids count from the area, whose slot 0 stays unused.
        let l = layout_meta(&order, &len, (0, 0), 4096, 10, None).unwrap();
        assert_eq!((l.nid_base, l.nid(2, 4096), l.nid(0, 4096)), (40960, 1, 3));
    }

    #[test]
    fn small_records_fill_the_room_left_in_any_earlier_block() {
        // 1,000 records of 4,000 bytes (96 left in each block, 64 in the
        // first, whose slot 0 stays unused), then 2,999 of 32 bytes: every
        // small one fits in an earlier block's room, however far back.
        let n = 3999;
        let len: Vec<u64> = (0..n).map(|i| if i < 1000 { 4000 } else { 32 }).collect();
        let order: Vec<usize> = (0..n).collect();
        let l = layout_meta(&order, &len, (0, 0), 4096, 0, None).unwrap();
        assert_eq!(l.meta_blocks, 1000);
        let mut ends: Vec<(u64, u64)> = order
            .iter()
            .map(|&i| (l.pos[i], l.pos[i] + len[i].div_ceil(32) * 32))
            .collect();
        ends.sort_unstable();
        assert!(ends.windows(2).all(|w| w[0].1 <= w[1].0), "records overlap");
        assert!(
            ends.iter().all(|&(a, b)| a / 4096 == (b - 1) / 4096),
            "a record crosses a block"
        );
    }
}
