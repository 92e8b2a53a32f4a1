//! Compressed directories (`--zD`): every directory goes whole into the
//! packed inode, so its entries are compressed with the fragments. A
//! directory's blocks name the nids of its entries, and nids are fixed by
//! the metadata layout, so the layout is worked out first (the relative
//! positions it gives do not depend on where the area starts, nor on the
//! packed inode that comes last), the blocks are encoded with those nids,
//! and once the metadata is written the nids are checked to be the same.

use super::meta::{dir_block, Meta};
use crate::data::fragments::Fragments;
use crate::data::pass::write_packed;
use crate::data::placed::Placed;
use crate::error::{BuildError, Result};
use crate::layout::{layout_meta, METABOX_NID_BIT};
use crate::options::view::DataOptions;
use crate::plan::zmap::{encode_whole_fragment, ZInode};
use crate::plan::Plan;
use crate::tree::{InodeId, Tree};
use crate::util::out::Writer;
use ferrofs_format::inode::DataLayout;

/// Smallest directory that goes to the packed inode (as mkfs.erofs).
const MIN_DIR_BYTES: u64 = 16;

/// Moves the directories into the packed inode and writes it; returns
/// the nid every directory entry was encoded with (by inode id).
pub(crate) fn pack_dirs(
    w: &mut Writer,
    tree: &mut Tree,
    plan: &mut Plan,
    placed: &mut Placed,
    opts: &DataOptions<'_>,
    pool: &rayon::ThreadPool,
) -> Result<Vec<(InodeId, u64)>> {
    let bs = opts.block_size();
    let dirs: Vec<InodeId> = plan
        .order
        .iter()
        .copied()
        .filter(|&id| tree.inodes[id].is_dir() && plan.inodes[id].size >= MIN_DIR_BYTES)
        .collect();
    for &id in &dirs {
        let p = &mut plan.inodes[id];
        p.layout = DataLayout::CompressedFull;
        p.blocks = 0;
        p.tail = 0;
        p.z = Some(ZInode {
            alg: 0,
            extents: Vec::new(),
            inline: None,
            index: encode_whole_fragment(0),
            compact: false,
            blocks: 0,
            fragment: None,
        });
    }
    // The layout the metadata pass will make (see the module docs).
    let item_len = plan.record_lens(tree.inodes.len());
    let plain = opts.plain_xattr_prefixes;
    let table = plan.xattrs.prefix_table().len() as u64;
    let (prefix_len, space) = match opts.metabox {
        // The table is in the metabox unless plain.
        Some(_) => (if plain { 0 } else { table }, METABOX_NID_BIT),
        // With a packed inode (there is one now), the table is in it
        // unless plain.
        None => (if plain { table } else { 0 }, 0),
    };
    let mut lay = layout_meta(
        &plan.order,
        &item_len,
        (prefix_len, plan.xattrs.shared.len() as u64),
        bs,
        0,
        None,
    )?;
    lay.space = space;
    let mut frags = match placed.frags.take() {
        Some(f) => f,
        None => Fragments::new(w.output)?,
    };
    for &id in &dirs {
        let p = &plan.inodes[id];
        let mut bytes = Vec::with_capacity(p.size as usize);
        for b in 0..p.dir_blocks.len() {
            if b > 0 {
                bytes.resize(b * bs as usize, 0);
            }
            bytes.extend_from_slice(&dir_block(p, b, &lay, bs));
        }
        if bytes.len() as u64 != p.size {
            return Err(BuildError::Internal(format!(
                "directory of {} bytes encoded as {}",
                p.size,
                bytes.len()
            )));
        }
        let fid = frags.add_bytes(id, &bytes)?;
        if let Some(z) = plan.inodes[id].z.as_mut() {
            z.fragment = Some((fid, 0));
        }
    }
    let nids = plan.order.iter().map(|&id| (id, lay.nid(id, bs))).collect();
    placed.packed = Some(write_packed(w, tree, plan, opts, frags, placed, pool)?);
    placed.settle(plan, opts);
    Ok(nids)
}

/// Checks that the metadata pass gave every inode the nid its directory
/// entries were encoded with.
pub(crate) fn check_nids(nids: &[(InodeId, u64)], meta: &Meta) -> Result<()> {
    for &(id, nid) in nids {
        let got = meta.nids.get(id).copied();
        if got != Some(nid) {
            return Err(BuildError::Internal(format!(
                "--zD: inode {id} was encoded as nid {nid} but placed at {got:?}"
            )));
        }
    }
    Ok(())
}
