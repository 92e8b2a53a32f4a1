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

use ferrofs_format::superblock::{checksum_len, compat, compute_checksum, incompat, Superblock};
use ferrofs_format::BlockSize;
use xxhash_rust::xxh3::Xxh3;

use super::{data, meta, Progress, Summary, Writer};
use crate::error::{BuildError, Result};
use crate::layout::layout_meta;
use crate::options::BuildOptions;
use crate::plan::Plan;
use crate::tree::Tree;

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

fn out_err(path: &Path) -> impl Fn(std::io::Error) -> BuildError + '_ {
    move |source| BuildError::Output {
        path: path.to_path_buf(),
        source,
    }
}

/// Appends the inodes of `plan.order` (the root aside) with their data and
/// writes block 0 last.
#[allow(clippy::too_many_arguments)]
pub(crate) fn append(
    t: &Target,
    tree: &mut Tree,
    plan: &mut Plan,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
    pool: &rayon::ThreadPool,
) -> Result<Appended> {
    let bs = opts.block_size();
    let err = out_err(t.path);
    let root = tree.root;
    let start = t.old_len.div_ceil(bs).max(t.sb.total_blocks());
    // The root is a directory: its record does not depend on the data.
    // The root's own block(s) first: its nid depends only on where the
    // image ended, not on how much data follows.
    let root_blocks = match t.root {
        RootPlace::Appended => meta::item_length(plan, root).div_ceil(bs),
        // Its entries inline only if they fit (in the old root's block).
        RootPlace::InPlace { capacity, pos } => {
            let rooms = (bs - pos % bs, capacity);
            match meta::fit_record(plan, root, rooms, bs) {
                Some(_) => 0,
                None => {
                    return Err(BuildError::Incremental {
                        path: t.path.to_path_buf(),
                        reason: format!(
                            "the new root inode needs {} bytes, its old place has {capacity}",
                            meta::item_length(plan, root)
                        ),
                    });
                }
            }
        }
    };
    let data_start = start + root_blocks;
    let mut w = Writer {
        data: BufWriter::with_capacity(1 << 20, t.file),
        base: 0,
        align: if opts.dsunit > 1 { opts.dsunit * bs } else { 0 },
        hash: Xxh3::new(),
        pos: data_start * bs,
        output: t.path,
        stop: interrupted,
    };
    w.data
        .seek(SeekFrom::Start(data_start * bs))
        .map_err(&err)?;
    let mut placed = data::write_data(&mut w, None, tree, plan, opts, progress, pool)?;
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

    // The new inodes after the data (their records known now that the
    // compression indexes are); the kept ones where they are.
    let item_len = meta::item_lengths(plan, tree.inodes.len());
    let nid_base = u64::from(t.sb.meta_blkaddr) * bs;
    let mut lay = layout_meta(&plan.order, &item_len, (0, 0), bs, w.block(bs), None)?;
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
    let mut cursor = lay.meta_blkaddr + lay.meta_blocks;
    for &id in plan.order.iter().chain([&root]) {
        if tree.inodes[id].is_dir() && plan.inodes[id].blocks > 0 {
            placed.start_blk[id] = cursor;
            cursor += plan.inodes[id].blocks;
        }
    }
    let total_blocks = cursor;
    if !plan.bit48 && total_blocks > u64::from(u32::MAX) {
        return Err(BuildError::TooLarge(format!("{total_blocks} blocks")));
    }
    let serial0 = t.sb.inos as usize;
    let mut buf = vec![0u8; (lay.meta_blocks * bs) as usize];
    for (k, &id) in plan.order.iter().enumerate() {
        let out = (&mut buf[..], lay.meta_blkaddr * bs);
        meta::put_inode(out, tree, plan, &placed, &lay, id, serial0 + k, bs)?;
    }
    w.write(&buf)?;
    for &id in plan.order.iter().chain([&root]) {
        let p = &plan.inodes[id];
        if !tree.inodes[id].is_dir() || p.blocks == 0 {
            continue;
        }
        if w.block(bs) != placed.start_blk[id] {
            return Err(BuildError::Internal("directory blocks out of place".into()));
        }
        for b in 0..p.blocks as usize {
            w.write(&meta::dir_block(p, b, &lay, bs))?;
            w.pad_to_block(bs)?;
        }
    }
    w.data.flush().map_err(&err)?;
    drop(w);

    // The root's record, in its block after the image or in block 0.
    let serial = serial0 + plan.order.len();
    let record = meta::lone_record(tree, plan, &placed, &lay, (root, serial), bs)?;
    let record = &record[..];
    let mut head = t.head.clone();
    match t.root {
        RootPlace::Appended => t.file.write_all_at(record, lay.pos[root]).map_err(&err)?,
        RootPlace::InPlace { capacity, pos } => {
            // The old record's bytes beyond the new one are zeroed.
            let mut padded = record.to_vec();
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
    t.file.set_len(total_blocks * bs).map_err(&err)?;
    t.file.sync_all().map_err(&err)?;
    super::check_stop(interrupted, t.path)?;

    let new_inodes = plan.order.len() as u64 + u64::from(matches!(t.root, RootPlace::Appended));
    let sb = patch_superblock(&mut head, t, plan, opts, root_nid, total_blocks, new_inodes)?;
    t.file.write_all_at(&head, 0).map_err(&err)?;
    t.file.sync_all().map_err(&err)?;
    let zs = || {
        plan.order
            .iter()
            .filter_map(|&id| plan.inodes[id].z.as_ref())
    };
    Ok(Appended {
        summary: Summary {
            inodes: sb.inos,
            blocks: total_blocks,
            meta_blocks: lay.meta_blocks,
            bytes: total_blocks * bs,
            compact_inodes: plan
                .order
                .iter()
                .filter(|&&id| !plan.inodes[id].extended)
                .count() as u64,
            compressed_files: zs().count() as u64,
            pclusters: zs().map(|z| z.extents.len() as u64).sum(),
            base: None,
            incremental: None,
            verity: None,
            phases: Vec::new(),
            layers: None,
        },
        start_block: start,
    })
}

/// The image's superblock with the new root, size and inode count, and
/// the feature bits the new inodes need (only those that change nothing
/// for the old ones); returns it after writing it into `head`.
fn patch_superblock(
    head: &mut [u8],
    t: &Target,
    plan: &Plan,
    opts: &BuildOptions,
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
    if plan.bit48
        && (root_nid > 0xFFFF || total_blocks > u64::from(u32::MAX) || sb.root_nid_64 != 0)
    {
        sb.root_nid_64 = root_nid;
        sb.root_nid_16 = (total_blocks >> 32) as u16;
    } else {
        sb.root_nid_16 = root_nid as u16;
    }
    sb.blocks = total_blocks as u32;
    let bsz = BlockSize::from_bits(sb.blkszbits).map_err(|e| BuildError::Option(e.to_string()))?;
    head[1024..1152].copy_from_slice(&sb.to_bytes());
    if sb.has_compat(compat::SB_CHKSUM) {
        sb.checksum = compute_checksum(&head[1024..1024 + checksum_len(bsz)]);
        head[1024..1152].copy_from_slice(&sb.to_bytes());
    }
    Ok(sb)
}
