//! The metabox (`-m`): every inode of the tree, with its xattrs, index or
//! chunk table and inline tail, plus the shared xattrs and the long-prefix
//! table (unless it is plain), laid out in a second metadata space that
//! is the data of one more inode, the metabox inode. Directory blocks and
//! file data stay on the primary device, where the metabox data follows
//! them, and a small metadata area after it holds the only inodes that
//! must stay there: the packed inode and the metabox inode itself.
//!
//! `[data][directory blocks][metabox data][packed inode, metabox inode]`

use std::os::unix::fs::FileExt;

use super::meta::{place_dir_blocks, put_inode, write_dir_blocks, Meta};
use crate::data::fragments::{add_internal_file, InternalFile};
use crate::data::pass::write_synthetic;
use crate::data::placed::Placed;
use crate::data::zpass::Alone;
use crate::error::{BuildError, Result};
use crate::layout::{layout_meta, MetaLayout, METABOX_NID_BIT};
use crate::options::view::DataOptions;
use crate::options::MetaboxOptions;
use crate::plan::Plan;
use crate::tree::content::Segment;
use crate::tree::{InodeId, Tree};
use crate::util::out::Writer;
use crate::util::staged::dir_of;

/// Writes the directory blocks, the metabox and the primary metadata area
/// after the data.
pub(crate) fn write_meta(
    w: &mut Writer,
    tree: &mut Tree,
    plan: &mut Plan,
    placed: &mut Placed,
    opts: &DataOptions<'_>,
    mb: MetaboxOptions,
    pool: &rayon::ThreadPool,
) -> Result<Meta> {
    let bs = opts.block_size();
    // Everything but the packed inode goes into the metabox.
    let boxed: Vec<InodeId> = plan
        .order
        .iter()
        .copied()
        .filter(|&id| Some(id) != placed.packed)
        .collect();
    let item_len = plan.record_lens(tree.inodes.len());
    let prefixes = if plan.xattrs.prefixes_in_packed || opts.plain_xattr_prefixes {
        Vec::new()
    } else {
        plan.xattrs.prefix_table()
    };
    let mut lay = layout_meta(
        &boxed,
        &item_len,
        (prefixes.len() as u64, plan.xattrs.shared.len() as u64),
        bs,
        0,
        None,
    )?;
    lay.space = METABOX_NID_BIT;

    // Directory blocks right after the data, on the primary device.
    place_dir_blocks(tree, plan, placed, &boxed, w.block(bs));
    write_dir_blocks(w, tree, plan, placed, &lay, &boxed, bs)?;
    let data = boxed_data(tree, plan, placed, &lay, &boxed, &prefixes, bs)?;
    let root_nid = lay.nid(plan.order[0], bs);
    let prefix_start = lay.prefix_start;

    let mid = add_metabox_inode(tree, plan, &data, opts, mb, w.output)?;
    write_synthetic(w, tree, plan, placed, mid, opts, Alone::default(), pool)?;
    placed.settle(plan, opts);

    // The primary metadata area: the packed inode and the metabox inode.
    let primary: Vec<InodeId> = placed.packed.into_iter().chain([mid]).collect();
    let item_len = plan.record_lens(tree.inodes.len());
    let data_end = w.block(bs);
    // A plain long-prefix table stays raw on the primary device.
    let plain = if opts.plain_xattr_prefixes && !plan.xattrs.prefixes_in_packed {
        plan.xattrs.prefix_table()
    } else {
        Vec::new()
    };
    let play = layout_meta(
        &primary,
        &item_len,
        (plain.len() as u64, 0),
        bs,
        data_end,
        None,
    )?;
    let mut meta = vec![0u8; (play.meta_blocks * bs) as usize];
    meta[..plain.len()].copy_from_slice(&plain);
    let prefix_start = if plain.is_empty() {
        prefix_start
    } else {
        play.prefix_start
    };
    for (k, &id) in primary.iter().enumerate() {
        put_inode(
            (&mut meta, play.meta_blkaddr * bs),
            tree,
            plan,
            placed,
            &play,
            id,
            boxed.len() + k,
            bs,
        )?;
    }
    w.write(&meta)?;
    let total_blocks = (play.meta_blkaddr + play.meta_blocks).max(4096u64.div_ceil(bs));
    if total_blocks > u64::from(u32::MAX) {
        return Err(BuildError::TooLarge(format!("{total_blocks} blocks")));
    }
    let metabox_nid = play.nid(mid, bs);
    plan.order.push(mid);
    let nids = (0..lay.pos.len()).map(|id| lay.nid(id, bs)).collect();
    Ok(Meta {
        lay: play,
        total_blocks,
        root_nid,
        metabox_nid: Some(metabox_nid),
        prefix_start,
        xattr_blkaddr: 0,
        nids,
        root_record: None,
    })
}

/// The metabox's data: the long-prefix table, the shared xattrs and the
/// records of the `boxed` inodes (trailing zeros of the last block are
/// not data).
fn boxed_data(
    tree: &Tree,
    plan: &Plan,
    placed: &Placed,
    lay: &MetaLayout,
    boxed: &[InodeId],
    prefixes: &[u8],
    bs: u64,
) -> Result<Vec<u8>> {
    let mut data = vec![0u8; (lay.meta_blocks * bs) as usize];
    data[..prefixes.len()].copy_from_slice(prefixes);
    let ss = lay.shared_start as usize;
    data[ss..ss + plan.xattrs.shared.len()].copy_from_slice(&plan.xattrs.shared);
    for (serial, &id) in boxed.iter().enumerate() {
        put_inode((&mut data, 0), tree, plan, placed, lay, id, serial, bs)?;
    }
    let used = boxed
        .iter()
        .map(|&id| lay.pos[id] + plan.record_len(id))
        .chain([lay.shared_start + plan.xattrs.shared.len() as u64])
        .max()
        .unwrap_or(0);
    data.truncate(used as usize);
    Ok(data)
}

/// Adds the metabox inode (a regular file no directory names, whose bytes
/// are `data`) to the tree and the plan; returns its id.
fn add_metabox_inode(
    tree: &mut Tree,
    plan: &mut Plan,
    data: &[u8],
    opts: &DataOptions<'_>,
    mb: MetaboxOptions,
    output: &std::path::Path,
) -> Result<InodeId> {
    let spool = crate::util::spool::unlinked_file(dir_of(output), "metabox")?;
    spool
        .write_all_at(data, 0)
        .map_err(BuildError::io(output))?;
    let size = data.len() as u64;
    let id = add_internal_file(
        tree,
        plan,
        InternalFile {
            spool,
            segments: vec![Segment {
                logical: 0,
                len: size,
                physical: 0,
            }],
            size,
            source: output.to_path_buf(),
            compress: mb.compressor.map(|c| (mb.pcluster_bytes, c)),
        },
        opts.block_size(),
    );
    Ok(id)
}
