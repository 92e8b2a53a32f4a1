//! The metadata area (long xattr prefixes, shared xattrs, then every
//! inode with its xattrs, chunk table or compression index and inline
//! tail, in nid order) and the directory blocks after it; the root's
//! record on its own when it goes into the superblock's block.

use rayon::prelude::*;

use ferrofs_format::chunk::NULL_ADDR;
use ferrofs_format::dirent::{RawDirent, DIRENT_SIZE};
use ferrofs_format::inode::{DataLayout, RawInode, I_FORMAT_NLINK1_OR_DOT_OMITTED};
use ferrofs_format::Nid;

use crate::data::placed::Placed;
use crate::error::{BuildError, Result};
use crate::layout::{layout_meta, MetaLayout};
use crate::plan::{InodePlan, Plan};
use crate::tree::content::ContentReader;
use crate::tree::{InodeId, Kind, Tree};
use crate::util::out::Writer;

/// Where the metadata went, and the image's size.
pub(crate) struct Meta {
    /// The metadata area on the primary device.
    pub(crate) lay: MetaLayout,
    pub(crate) total_blocks: u64,
    pub(crate) root_nid: u64,
    /// The metabox inode's nid, when there is one.
    pub(crate) metabox_nid: Option<u64>,
    /// Byte offset of the long-prefix table in its space (the primary
    /// device or the metabox data; unused when it is in the packed inode).
    pub(crate) prefix_start: u64,
    /// Base block of shared xattr ids (in the metabox data with one).
    pub(crate) xattr_blkaddr: u64,
    /// The nid each inode got (by inode id; 0 for ids not laid out).
    pub(crate) nids: Vec<u64>,
    /// The root's record and its byte position, when it goes into the
    /// superblock's block (written with the superblock).
    pub(crate) root_record: Option<(u64, Vec<u8>)>,
}

/// Writes the metadata area and the directory blocks after the data; the
/// root's record at byte `root_at` of the superblock's block instead, when
/// given (it is returned, for the superblock's writer).
pub(crate) fn write_meta(
    w: &mut Writer,
    tree: &Tree,
    plan: &mut Plan,
    placed: &mut Placed,
    bs: u64,
    root_at: Option<u64>,
    pool: &rayon::ThreadPool,
) -> Result<Meta> {
    let data_end = w.block(bs);
    let item_len = plan.record_lens(tree.inodes.len());
    let prefixes = if plan.xattrs.prefixes_in_packed {
        Vec::new()
    } else {
        plan.xattrs.prefix_table()
    };
    let lay = layout_meta(
        &plan.order,
        &item_len,
        (prefixes.len() as u64, plan.xattrs.shared.len() as u64),
        bs,
        data_end,
        root_at,
    )?;
    let mut meta = vec![0u8; (lay.meta_blocks * bs) as usize];
    meta[..prefixes.len()].copy_from_slice(&prefixes);
    let ss = lay.shared_start as usize;
    meta[ss..ss + plan.xattrs.shared.len()].copy_from_slice(&plan.xattrs.shared);

    // Directory blocks go after the metadata area.
    let dir_cursor = place_dir_blocks(
        tree,
        plan,
        placed,
        &plan.order,
        lay.meta_blkaddr + lay.meta_blocks,
    );
    let total_blocks = dir_cursor.max(4096u64.div_ceil(bs));
    if total_blocks > u64::from(u32::MAX) {
        return Err(BuildError::TooLarge(format!("{total_blocks} blocks")));
    }

    let origin = lay.meta_blkaddr * bs;
    let mut root_record = None;
    // Each record goes into its own slice of `meta`, in parallel (a
    // record reads its file's inline tail).
    let mut records = Vec::with_capacity(plan.order.len());
    for (serial, &id) in plan.order.iter().enumerate() {
        match (serial, root_at) {
            (0, Some(at)) => {
                let r = lone_record(tree, plan, placed, &lay, (id, serial), bs)?;
                root_record = Some((at, r));
            }
            _ => records.push((lay.pos[id], serial, id)),
        }
    }
    put_records(
        &mut meta,
        origin,
        records,
        (tree, plan, placed, &lay),
        &item_len,
        bs,
        pool,
    )?;
    w.write(&meta)?;
    let (root_nid, prefix_start, xattr_blkaddr) = (
        lay.nid(plan.order[0], bs),
        lay.prefix_start,
        lay.meta_blkaddr,
    );
    write_dir_blocks(w, tree, plan, placed, &lay, &plan.order, bs)?;
    let nids = (0..lay.pos.len()).map(|id| lay.nid(id, bs)).collect();
    Ok(Meta {
        lay,
        total_blocks,
        root_nid,
        metabox_nid: None,
        prefix_start,
        xattr_blkaddr,
        nids,
        root_record,
    })
}

/// Encodes the `records` (position, serial number, inode id) into `meta`
/// (whose first byte is at image position `origin`), each into its own
/// slice, in parallel (a record reads its file's inline tail).
fn put_records(
    meta: &mut [u8],
    origin: u64,
    mut records: Vec<(u64, usize, InodeId)>,
    (tree, plan, placed, lay): (&Tree, &Plan, &Placed, &MetaLayout),
    item_len: &[u64],
    bs: u64,
    pool: &rayon::ThreadPool,
) -> Result<()> {
    records.sort_unstable();
    let mut slices = Vec::with_capacity(records.len());
    let (mut rest, mut rest_at): (&mut [u8], u64) = (meta, origin);
    for (pos, serial, id) in records {
        let len = item_len[id] as usize;
        let skip = pos.checked_sub(rest_at).map(|s| s as usize);
        let Some(skip) = skip.filter(|&s| s.saturating_add(len) <= rest.len()) else {
            return Err(BuildError::Internal(format!(
                "inode record at {pos} ({len} bytes) overlaps another or leaves the metadata area"
            )));
        };
        let (rec, after) = std::mem::take(&mut rest)[skip..].split_at_mut(len);
        slices.push((rec, pos, serial, id));
        (rest, rest_at) = (after, pos + len as u64);
    }
    pool.install(|| {
        slices
            .into_par_iter()
            .try_for_each(|(rec, pos, serial, id)| {
                put_inode((rec, pos), tree, plan, placed, lay, id, serial, bs)
            })
    })
}

/// Gives the directories among `ids` their blocks, one after another from
/// block `first`; returns the block after the last.
pub(crate) fn place_dir_blocks(
    tree: &Tree,
    plan: &Plan,
    placed: &mut Placed,
    ids: &[InodeId],
    first: u64,
) -> u64 {
    let mut cursor = first;
    for &id in ids {
        if tree.inodes[id].is_dir() && plan.inodes[id].blocks > 0 {
            placed.start_blk[id] = cursor;
            cursor += plan.inodes[id].blocks;
        }
    }
    cursor
}

/// Writes the directory blocks of the directories among `ids`, each at
/// the block the layout gave it (checked).
pub(crate) fn write_dir_blocks(
    w: &mut Writer<'_>,
    tree: &Tree,
    plan: &Plan,
    placed: &Placed,
    lay: &MetaLayout,
    ids: &[InodeId],
    bs: u64,
) -> Result<()> {
    for &id in ids {
        let p = &plan.inodes[id];
        if !tree.inodes[id].is_dir() || p.blocks == 0 {
            continue;
        }
        if w.block(bs) != placed.start_blk[id] {
            return Err(BuildError::Internal("directory blocks out of place".into()));
        }
        for b in 0..p.blocks as usize {
            w.write(&dir_block(p, b, lay, bs))?;
            w.pad_to_block(bs)?;
        }
    }
    Ok(())
}

/// The record of inode `id` (the `serial`-th in nid order) on its own.
pub(crate) fn lone_record(
    tree: &Tree,
    plan: &Plan,
    placed: &Placed,
    lay: &MetaLayout,
    (id, serial): (InodeId, usize),
    bs: u64,
) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; plan.record_len(id) as usize];
    let origin = lay.pos[id];
    put_inode((&mut buf, origin), tree, plan, placed, lay, id, serial, bs)?;
    Ok(buf)
}

/// Encodes inode `id` (the `serial`-th in nid order) with its xattrs and
/// what follows them into its place in `meta`, whose first byte is at
/// image position `origin`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn put_inode(
    (meta, origin): (&mut [u8], u64),
    tree: &Tree,
    plan: &Plan,
    placed: &Placed,
    lay: &MetaLayout,
    id: InodeId,
    serial: usize,
    bs: u64,
) -> Result<()> {
    let p = &plan.inodes[id];
    let ino = &tree.inodes[id];
    let mut body = plan.xattrs.bodies[id].clone();
    plan.xattrs.finish_body(&mut body, lay.shared_start);
    let xattr_icount = if body.is_empty() {
        0
    } else {
        ((body.len() - 12) / 4 + 1) as u16
    };
    let raw = raw_inode(plan, placed, id, serial, xattr_icount);
    let mut at = (lay.pos[id] - origin) as usize;
    if p.extended {
        meta[at..at + 64].copy_from_slice(&raw.to_extended_bytes());
        at += 64;
    } else {
        meta[at..at + 32].copy_from_slice(&raw.to_compact_bytes());
        at += 32;
    }
    meta[at..at + body.len()].copy_from_slice(&body);
    at += body.len();
    if let Some(z) = &p.z {
        at = at.div_ceil(8) * 8;
        meta[at..at + z.index.len()].copy_from_slice(&z.index);
        at += z.index.len();
        if let Some(idata) = &z.inline {
            meta[at..at + idata.len()].copy_from_slice(idata);
        }
        return Ok(());
    }
    at = put_chunk_table(meta, at, plan, ino, placed, id);
    if p.tail > 0 {
        put_tail(&mut meta[at..at + p.tail as usize], p, ino, lay, bs)?;
    }
    Ok(())
}

/// The fields of inode `id`'s on-disk inode.
fn raw_inode(
    plan: &Plan,
    placed: &Placed,
    id: InodeId,
    serial: usize,
    xattr_icount: u16,
) -> RawInode {
    let p = &plan.inodes[id];
    let i_u = if let Some(z) = &p.z {
        z.blocks as u32
    } else {
        match p.layout {
            DataLayout::ChunkBased => p.chunks.as_ref().map_or(0, |c| c.format()),
            _ if p.rdev.is_some() => p.rdev.unwrap_or(0),
            _ if p.blocks > 0 => placed.start_blk[id] as u32,
            DataLayout::FlatInline => u32::MAX,
            _ if p.all_hole => u32::MAX,
            _ => 0,
        }
    };
    // Extended inodes carry address bits 32..47 in i_nb: all ones for the
    // null address of an all-hole file, else 0 (addresses stay 32-bit).
    let nb = if p.all_hole && p.extended { 0xFFFF } else { 0 };
    // Bit 4: DOT_OMITTED on directories (NLINK_1 is never needed).
    let format = p.layout.bits() << 1
        | if p.dot_omitted {
            I_FORMAT_NLINK1_OR_DOT_OMITTED
        } else {
            0
        };
    let mtime = if p.extended {
        p.mtime
    } else if plan.bit48 {
        // An unsigned offset from the epoch (plan checked it fits).
        p.mtime - plan.epoch
    } else {
        0
    };
    RawInode {
        format,
        extended: p.extended,
        xattr_icount,
        mode: p.mode,
        nb,
        size: p.size,
        mtime,
        mtime_nsec: p.mtime_nsec,
        i_u,
        ino: (serial + 1) as u32,
        uid: p.uid,
        gid: p.gid,
        nlink: p.nlink,
    }
}

/// Writes a chunk-based file's chunk table at `at` in `meta` (none for
/// other files); returns where it ends. Rebuild mode's files index the
/// layers (the tail a layer kept inline is in this image's block); the
/// others this image's blocks, or the blob's (device 1) when there is
/// one.
fn put_chunk_table(
    meta: &mut [u8],
    mut at: usize,
    plan: &Plan,
    ino: &crate::tree::Inode,
    placed: &Placed,
    id: InodeId,
) -> usize {
    let p = &plan.inodes[id];
    if let (Some(c), Some(x)) = (&p.chunks, ino.content.external()) {
        // (high start bits, device, start) into the layers.
        at = at.next_multiple_of(8);
        let start = at;
        for chunk in &x.chunks {
            let null = match plan.bit48 {
                true => (1 << 48) - 1,
                false => u64::from(NULL_ADDR),
            };
            let (dev, blk) = chunk.unwrap_or((0, null));
            let last = at + 8 == start + 8 * x.chunks.len();
            let (dev, blk) = match x.tail && last {
                true => (0, placed.start_blk[id]),
                false => (dev, blk),
            };
            meta[at..at + 2].copy_from_slice(&((blk >> 32) as u16).to_le_bytes());
            meta[at + 2..at + 4].copy_from_slice(&dev.to_le_bytes());
            meta[at + 4..at + 8].copy_from_slice(&(blk as u32).to_le_bytes());
            at += 8;
        }
        debug_assert_eq!(c.chunks.len(), x.chunks.len());
    } else if let Some(c) = &p.chunks {
        let unit = c.entry_size() as usize;
        at = at.next_multiple_of(unit);
        for blk in &placed.chunk_blk[id] {
            let v = blk.map_or(NULL_ADDR, |b| b as u32);
            // A chunk index is (high start bits, device, start).
            meta[at + unit - 4..at + unit].copy_from_slice(&v.to_le_bytes());
            if c.indexes && placed.chunks_on_blob && blk.is_some() {
                meta[at + 2..at + 4].copy_from_slice(&1u16.to_le_bytes());
            }
            at += unit;
        }
    }
    at
}

/// Fills `out` with an inode's inline tail: a file's last bytes, a
/// symlink target's, or a directory's last block.
fn put_tail(
    out: &mut [u8],
    p: &InodePlan,
    ino: &crate::tree::Inode,
    lay: &MetaLayout,
    bs: u64,
) -> Result<()> {
    match &ino.kind {
        Kind::File { size, .. } => {
            let f = ContentReader::open(ino)?;
            f.read_exact_at(out, size - p.tail)?;
            f.finish()?;
        }
        Kind::Symlink { target } => {
            let s = target.len() - out.len();
            out.copy_from_slice(&target[s..]);
        }
        Kind::Dir { .. } => {
            let last = p.dir_blocks.len() - 1;
            let b = dir_block(p, last, lay, bs);
            out[..b.len()].copy_from_slice(&b);
        }
        _ => {}
    }
    Ok(())
}

/// Encodes a directory block (entries, then names).
pub(crate) fn dir_block(p: &InodePlan, block: usize, lay: &MetaLayout, bs: u64) -> Vec<u8> {
    let entries = &p.dir_blocks[block];
    let mut b = Vec::new();
    let mut nameoff = (entries.len() * DIRENT_SIZE) as u16;
    for e in entries {
        let d = RawDirent {
            nid: Nid(lay.nid(e.target, bs)),
            nameoff,
            file_type: e.file_type,
        };
        b.extend_from_slice(&d.to_bytes());
        nameoff += e.name.len() as u16;
    }
    for e in entries {
        b.extend_from_slice(&e.name);
    }
    b
}
