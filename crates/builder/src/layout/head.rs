//! The image's head, decided before any data is written: the superblock
//! and the compression records after it, the device table (the blob's
//! slot or rebuild mode's layers), and whether the root's record fits in
//! the superblock's block; file data starts after all of it.

use ferrofs_format::compress::{ALG_DEFLATE, ALG_LZ4, ALG_LZMA, ALG_ZSTD};
use ferrofs_format::device::DEVICE_SLOT_SIZE;

use crate::options::compress::lzma_dict;
use crate::options::view::LayoutOptions;
use crate::plan::Plan;
use crate::tree::Tree;

/// Where the parts of the head go.
pub(crate) struct Head {
    /// Compression records, the superblock fields they imply.
    pub(crate) records: (Vec<u8>, u16, bool),
    /// Where the records (and the device table) end.
    pub(crate) sb_end: u64,
    /// Where the device table starts, when there is one.
    pub(crate) devt_at: Option<u64>,
    /// Where the root's record goes and its length, when it is in the
    /// superblock's block.
    pub(crate) root_at: Option<(u64, u64)>,
    /// The first block of file data.
    pub(crate) data_start: u64,
}

impl Head {
    /// The head of an image of `tree` as planned (`blob`: with a
    /// `--blobdev` blob, whose slot is the device table). May move the
    /// root's last directory block out of line so its record fits.
    pub(crate) fn new(tree: &Tree, plan: &mut Plan, opts: &LayoutOptions<'_>, blob: bool) -> Head {
        let bs = opts.block_size();
        let records = compression_records(opts, bs);
        // The device table (one slot for the blob, or rebuild mode's
        // layers) follows, slot-aligned.
        let slots = if blob { 1 } else { tree.devices.len() };
        let (sb_end, devt_at) = sb_end(opts, records.0.len() as u64, slots);
        let root_at = root_home(tree, plan, opts, sb_end, bs);
        let head_end = root_at.map_or(sb_end, |(at, len)| at + len);
        let data_start = head_end.div_ceil(bs).max(1);
        debug_assert_eq!(data_start, Head::data_start_of(opts, slots));
        Head {
            records,
            sb_end,
            devt_at,
            root_at,
            data_start,
        }
    }

    /// The first block of file data, known before the tree is: the block
    /// after the superblock's (the root's record, when it is in the head,
    /// ends inside that block) with `slots` device table slots.
    pub(crate) fn data_start_of(opts: &LayoutOptions<'_>, slots: usize) -> u64 {
        let bs = opts.block_size();
        let records = compression_records(opts, bs).0.len() as u64;
        sb_end(opts, records, slots).0.div_ceil(bs).max(1)
    }
}

/// Where the superblock, its `records` bytes of compression records and a
/// device table of `slots` slots end, and where that table starts.
fn sb_end(opts: &LayoutOptions<'_>, records: u64, slots: usize) -> (u64, Option<u64>) {
    let end = 1024 + sb_size(opts.metabox.is_some()) as u64 + records;
    if slots == 0 {
        return (end, None);
    }
    let at = end.next_multiple_of(DEVICE_SLOT_SIZE as u64);
    (at + (slots * DEVICE_SLOT_SIZE) as u64, Some(at))
}

/// Compression records that follow the superblock, and the SB fields they
/// imply: (records, available bitmap, use COMPR_CFGS).
pub(crate) fn compression_records(opts: &LayoutOptions<'_>, bs: u64) -> (Vec<u8>, u16, bool) {
    let Some(c) = opts.compress else {
        return (Vec::new(), 0, false);
    };
    let max_pcl = c
        .hints
        .iter()
        .map(|h| h.pcluster_bytes)
        .chain([c.pcluster_bytes])
        .chain(c.packed_pcluster)
        .chain(
            opts.metabox
                .filter(|m| m.compressor.is_some())
                .map(|m| m.pcluster_bytes),
        )
        .max()
        .unwrap_or(bs);
    let mut bitmap = 0u16;
    for comp in &c.compressors {
        bitmap |= 1 << comp.alg.id();
    }
    let cfgs = bitmap != 1 << ALG_LZ4 || max_pcl > bs;
    if !cfgs {
        return (Vec::new(), bitmap, false);
    }
    let mut r = Vec::new();
    let mut rec = |payload: &[u8]| {
        r.resize(r.len().div_ceil(4) * 4, 0);
        r.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        r.extend_from_slice(payload);
    };
    for alg in [ALG_LZ4, ALG_LZMA, ALG_DEFLATE, ALG_ZSTD] {
        if bitmap & (1 << alg) == 0 {
            continue;
        }
        let mut p = Vec::new();
        match alg {
            ALG_LZ4 => {
                p.extend_from_slice(&65535u16.to_le_bytes());
                p.extend_from_slice(&((max_pcl / bs) as u16).to_le_bytes());
                p.resize(14, 0);
            }
            ALG_LZMA => {
                p.extend_from_slice(&lzma_dict(max_pcl).to_le_bytes());
                p.resize(14, 0);
            }
            ALG_DEFLATE => {
                p.push(15);
                p.resize(6, 0);
            }
            _ => {
                p.push(0);
                p.push((ferrofs_codec::ZSTD_ENCODER_WINDOW_LOG - 10) as u8);
                p.resize(6, 0);
            }
        }
        rec(&p);
    }
    (r, bitmap, true)
}

/// Bytes of the superblock: one extension slot (the metabox nid) with a
/// metabox.
pub(crate) fn sb_size(metabox: bool) -> usize {
    if metabox {
        144
    } else {
        128
    }
}

/// Where the root's record goes in the superblock's block (right after
/// the superblock, its compression records and device table), and its
/// length: so an incremental build, which rewrites that block anyway,
/// writes the new root there and no other block of the image. Nids then
/// count from byte 0 (`meta_blkaddr` 0). Not with the 48-bit layout (its
/// root nid has 64 bits: a new root goes after the image), a metabox, or
/// `--zD` (its directories' nids must not depend on where the metadata
/// area starts). The root's entries stay inline only if they fit there
/// too; a root whose record does not fit even without them (large
/// xattrs) stays in the metadata area, nids counting from its start.
fn root_home(
    tree: &Tree,
    plan: &mut Plan,
    opts: &LayoutOptions<'_>,
    sb_end: u64,
    bs: u64,
) -> Option<(u64, u64)> {
    if plan.bit48 || opts.metabox.is_some() || opts.compress_dirs {
        return None;
    }
    if plan.order.first() != Some(&tree.root) || !tree.inodes[tree.root].is_dir() {
        return None;
    }
    let at = sb_end.next_multiple_of(32);
    let block_end = (1024 / bs + 1) * bs;
    let room = block_end.checked_sub(at)?;
    plan.fit_record(tree.root, (room, room), bs)
        .map(|len| (at, len))
}
