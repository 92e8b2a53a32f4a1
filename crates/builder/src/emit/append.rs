//! Writing an incremental build: new file data, the new inodes and the new
//! directory blocks are appended after the image's last block; the image's
//! own bytes are never written, except in block 0 (the superblock, and the
//! root inode when the image keeps it there, as mkfs.erofs and ferrofs
//! do). Block 0 is written last, after everything appended is synced, and
//! put back (with the file cut to its old length) on any failure, so the
//! image is either the old one or the new one.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use ferrofs_format::superblock::{incompat, Superblock};
use ferrofs_format::BlockSize;
use xxhash_rust::xxh3::Xxh3;

use super::meta;
use crate::data::pass as data;
use crate::data::placed::Placed;
use crate::error::{BuildError, Result};
use crate::layout::{layout_meta, MetaLayout};
use crate::options::view::{EmitOptions, Views};
use crate::plan::Plan;
use crate::summary::{Progress, Summary};
use crate::tree::{InodeId, Tree};
use crate::util::out::Writer;

/// Where the new root inode goes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RootPlace {
    /// Over the old root inode at `pos` (its nid stays): this many bytes
    /// (inode, xattrs, inline data) are free there. In block 0 it is
    /// written with the superblock; elsewhere just before it.
    InPlace { capacity: u64, pos: u64 },
    /// In a block of its own right after the image (a new nid).
    Appended,
}

/// The image being extended.
pub(crate) struct Target<'a> {
    pub(crate) file: &'a File,
    pub(crate) path: &'a Path,
    pub(crate) sb: Superblock,
    /// Block 0 as it was.
    pub(crate) head: Vec<u8>,
    pub(crate) old_len: u64,
    pub(crate) root: RootPlace,
    /// The image's nid per inode id, for the inodes it keeps.
    pub(crate) kept: Vec<Option<u64>>,
}

/// What the append wrote, for the summary.
pub(crate) struct Appended {
    pub(crate) summary: Summary,
    /// Blocks the image had before (where the appended part starts).
    pub(crate) start_block: u64,
}

/// Appends the inodes of `plan.order` (the root aside) with their data and
/// writes block 0 last.
pub(crate) fn append(
    t: &Target,
    tree: &mut Tree,
    plan: &mut Plan,
    views: &Views<'_>,
    (interrupted, progress): (Option<&AtomicBool>, &dyn Fn(Progress)),
    pool: &rayon::ThreadPool,
) -> Result<Appended> {
    let bs = views.emit.block_size();
    let err = BuildError::output(t.path);
    let root = tree.root;
    let start = t.old_len.div_ceil(bs).max(t.sb.total_blocks());
    // The root's own block(s) first: its nid depends only on where the
    // image ended, not on how much data follows.
    let data_start = start + root_blocks(t, plan, root, bs)?;
    let mut w = Writer {
        data: BufWriter::with_capacity(1 << 20, t.file),
        base: 0,
        align: views.emit.data_align(),
        hash: Xxh3::new(),
        pos: data_start * bs,
        output: t.path,
        stop: interrupted,
        in_place: None,
    };
    w.data
        .seek(SeekFrom::Start(data_start * bs))
        .map_err(&err)?;
    let mut placed = data::write_data(&mut w, None, tree, plan, &views.data, progress, pool)?;
    placed.settle(plan, &views.data);
    if placed.packed.is_some() {
        return Err(BuildError::Internal(
            "an incremental build made a packed inode".into(),
        ));
    }
    w.pad_to_block(bs)?;
    for &id in &plan.order {
        if let Some(b) = plan.inodes[id].stored_at {
            placed.start_blk[id] = b;
        }
    }
    let (lay, total_blocks) = lay_out(t, tree, plan, &mut placed, w.block(bs), start, bs)?;
    let root_nid = lay.nid(root, bs);
    write_records(&mut w, tree, plan, &placed, &lay, t.sb.inos as usize, bs)?;
    w.data.flush().map_err(&err)?;
    drop(w);
    let mut head = t.head.clone();
    place_root(t, tree, plan, &placed, &lay, &mut head, bs)?;
    t.file.set_len(total_blocks * bs).map_err(&err)?;
    t.file.sync_all().map_err(&err)?;
    crate::util::out::check_stop(interrupted, t.path)?;

    let new_inodes = plan.order.len() as u64 + u64::from(matches!(t.root, RootPlace::Appended));
    let sb = patch_superblock(
        &mut head,
        t,
        plan,
        &views.emit,
        root_nid,
        total_blocks,
        new_inodes,
    )?;
    t.file.write_all_at(&head, 0).map_err(&err)?;
    t.file.sync_all().map_err(&err)?;
    Ok(Appended {
        summary: Summary::of(plan, sb.inos, (total_blocks, lay.meta_blocks), bs),
        start_block: start,
    })
}

/// Blocks the new root takes after the image: its record's when it is
/// appended, none when it goes in its old place (its entries inline only
/// if they fit there). The root is a directory: its record does not
/// depend on the data.
fn root_blocks(t: &Target, plan: &mut Plan, root: InodeId, bs: u64) -> Result<u64> {
    match t.root {
        RootPlace::Appended => Ok(plan.record_len(root).div_ceil(bs)),
        RootPlace::InPlace { capacity, pos } => {
            let rooms = (bs - pos % bs, capacity);
            match plan.fit_record(root, rooms, bs) {
                Some(_) => Ok(0),
                None => Err(BuildError::Incremental {
                    path: t.path.to_path_buf(),
                    reason: format!(
                        "the new root inode needs {} bytes, its old place has {capacity}",
                        plan.record_len(root)
                    ),
                }),
            }
        }
    }
}

/// The metadata layout of the append: the new inodes after the data
/// (from block `meta_at`; their records are known now that the
/// compression indexes are), the kept ones where they are, the root where
/// [`root_blocks`] put it; then the new directories' blocks. Returns it
/// with the image's new block count.
fn lay_out(
    t: &Target,
    tree: &Tree,
    plan: &Plan,
    placed: &mut Placed,
    meta_at: u64,
    start: u64,
    bs: u64,
) -> Result<(MetaLayout, u64)> {
    let root = tree.root;
    let item_len = plan.record_lens(tree.inodes.len());
    let nid_base = u64::from(t.sb.meta_blkaddr) * bs;
    let mut lay = layout_meta(&plan.order, &item_len, (0, 0), bs, meta_at, None)?;
    lay.nid_base = nid_base;
    for (id, k) in t.kept.iter().enumerate() {
        if let Some(nid) = k {
            lay.pos[id] = nid_base + nid * 32;
        }
    }
    lay.pos[root] = match t.root {
        RootPlace::Appended => start * bs,
        RootPlace::InPlace { .. } => nid_base + t.sb.root_nid().0 * 32,
    };
    let root_nid = lay.nid(root, bs);
    if !plan.bit48 && root_nid > 0xFFFF {
        return Err(BuildError::Incremental {
            path: t.path.to_path_buf(),
            reason: format!(
                "the new root inode would be nid {root_nid}, beyond the 16 bits an image without \
                 the 48-bit layout has for it ({} bytes of metadata precede it); rebuild the \
                 image with -E 48bit to extend it incrementally",
                start * bs - nid_base
            ),
        });
    }
    let ids: Vec<InodeId> = plan.order.iter().copied().chain([root]).collect();
    let cursor =
        meta::place_dir_blocks(tree, plan, placed, &ids, lay.meta_blkaddr + lay.meta_blocks);
    if !plan.bit48 && cursor > u64::from(u32::MAX) {
        return Err(BuildError::TooLarge(format!("{cursor} blocks")));
    }
    Ok((lay, cursor))
}

/// Writes the new inodes' records (`serial0`: the first one's serial
/// number), then the new directories' blocks, the root's included.
fn write_records(
    w: &mut Writer<'_>,
    tree: &Tree,
    plan: &Plan,
    placed: &Placed,
    lay: &MetaLayout,
    serial0: usize,
    bs: u64,
) -> Result<()> {
    let root = tree.root;
    let mut buf = vec![0u8; (lay.meta_blocks * bs) as usize];
    for (k, &id) in plan.order.iter().enumerate() {
        let out = (&mut buf[..], lay.meta_blkaddr * bs);
        meta::put_inode(out, tree, plan, placed, lay, id, serial0 + k, bs)?;
    }
    w.write(&buf)?;
    let ids: Vec<InodeId> = plan.order.iter().copied().chain([root]).collect();
    meta::write_dir_blocks(w, tree, plan, placed, lay, &ids, bs)
}

/// Writes the root's record: in its block after the image, or in its old
/// place (the old record's bytes beyond the new one zeroed), which is in
/// `head` (block 0, written last) or else written now.
fn place_root(
    t: &Target,
    tree: &Tree,
    plan: &Plan,
    placed: &Placed,
    lay: &MetaLayout,
    head: &mut [u8],
    bs: u64,
) -> Result<()> {
    let err = BuildError::output(t.path);
    let root = tree.root;
    let serial = t.sb.inos as usize + plan.order.len();
    let record = meta::lone_record(tree, plan, placed, lay, (root, serial), bs)?;
    match t.root {
        RootPlace::Appended => t.file.write_all_at(&record, lay.pos[root]).map_err(&err)?,
        RootPlace::InPlace { capacity, pos } => {
            let mut padded = record;
            padded.resize(capacity as usize, 0);
            match head.get_mut(pos as usize..(pos + capacity) as usize) {
                Some(place) => place.copy_from_slice(&padded),
                None => {
                    t.file.sync_all().map_err(&err)?;
                    t.file.write_all_at(&padded, pos).map_err(&err)?;
                }
            }
        }
    }
    Ok(())
}

/// The image's superblock with the new root, size and inode count, and
/// the feature bits the new inodes need (only those that change nothing
/// for the old ones); returns it after writing it into `head`.
fn patch_superblock(
    head: &mut [u8],
    t: &Target,
    plan: &Plan,
    opts: &EmitOptions<'_>,
    root_nid: u64,
    total_blocks: u64,
    new_inodes: u64,
) -> Result<Superblock> {
    let mut sb = t.sb.clone();
    let new = |id: &usize| &plan.inodes[*id];
    if plan.chunked {
        sb.feature_incompat |= incompat::CHUNKED_FILE;
    }
    if plan
        .order
        .iter()
        .any(|id| new(id).z.as_ref().is_some_and(|z| z.inline.is_some()))
    {
        sb.feature_incompat |= incompat::ZTAILPACKING;
    }
    sb.inos = sb.inos.saturating_add(new_inodes);
    if let Some(u) = opts.uuid {
        sb.uuid = u;
    }
    let wide = plan.bit48
        && (root_nid > 0xFFFF || total_blocks > u64::from(u32::MAX) || sb.root_nid_64 != 0);
    super::superblock::set_root_nid(&mut sb, root_nid, total_blocks, wide);
    sb.blocks = total_blocks as u32;
    let bsz = BlockSize::from_bits(sb.blkszbits).map_err(|e| BuildError::Option(e.to_string()))?;
    super::superblock::seal(&mut sb, head, bsz);
    Ok(sb)
}
