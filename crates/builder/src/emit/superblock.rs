//! The superblock, the compression configuration records and the device
//! table after it (and the root's record, when it is in that block),
//! written last: the default uuid is derived from everything else.

use std::fs::File;
use std::os::unix::fs::FileExt;

use ferrofs_format::device::DEVICE_SLOT_SIZE;
use ferrofs_format::superblock::{checksum_len, compat, compute_checksum, incompat, Superblock};
use ferrofs_format::BlockSize;

use super::meta::Meta;
use crate::error::{BuildError, Result};
use crate::options::view::EmitOptions;
use crate::plan::Plan;
use crate::tree::{ExtraDevice, InodeId};
use crate::util::out::Writer;

/// The blob (`--blobdev`): where its device slot goes, its length, and a
/// hash of its bytes (its id, and part of the default uuid).
pub(crate) struct Blob {
    pub(crate) slot_at: u64,
    pub(crate) blocks: u64,
    pub(crate) hash: u128,
}

/// What goes into the head of the image besides the superblock.
pub(crate) struct Head<'a> {
    pub(crate) packed: Option<InodeId>,
    /// Compression records, the superblock fields they imply.
    pub(crate) records: (Vec<u8>, u16, bool),
    /// Where the records (and the device table) end.
    pub(crate) sb_end: u64,
    pub(crate) blob: Option<Blob>,
    /// Where rebuild mode's device table starts.
    pub(crate) devt_at: u64,
    /// Rebuild mode's layers, in device-table order.
    pub(crate) devices: &'a [ExtraDevice],
}

/// Writes the superblock, the compression records and the device table at
/// the start of `file`, and sets the image's length.
pub(crate) fn write_head(
    file: &File,
    w: &Writer,
    opts: &EmitOptions<'_>,
    plan: &Plan,
    meta: &Meta,
    head: Head<'_>,
) -> Result<()> {
    let bs = opts.block_size();
    let bsz =
        BlockSize::from_bits(opts.blkszbits).map_err(|e| BuildError::Option(e.to_string()))?;
    let mut sb = superblock(opts, plan, meta, &head);
    let root_end = meta
        .root_record
        .as_ref()
        .map_or(0, |(at, r)| *at as usize + r.len());
    let mut bytes = vec![
        0u8;
        (1024 + checksum_len(bsz))
            .max(head.sb_end as usize)
            .max(root_end)
    ];
    if let Some((at, r)) = &meta.root_record {
        bytes[*at as usize..root_end].copy_from_slice(r);
    }
    let rec_at = 1024 + crate::layout::head::sb_size(opts.metabox.is_some());
    let records = &head.records.0;
    bytes[rec_at..rec_at + records.len()].copy_from_slice(records);
    device_table(&mut bytes, &head, meta.total_blocks, plan.bit48);
    bytes[1024..1152].copy_from_slice(&sb.to_bytes());
    if sb.sb_extslots > 0 {
        bytes[1152..1168].copy_from_slice(&sb.ext_to_bytes());
    }
    sb.uuid = match opts.uuid {
        Some(u) => u,
        None => {
            // Content-derived: equal inputs and options give equal images.
            let mut h = w.hash.clone();
            h.update(&bytes);
            if let Some(b) = &head.blob {
                h.update(&b.hash.to_le_bytes());
            }
            let mut u = h.digest128().to_le_bytes();
            u[6] = (u[6] & 0x0f) | 0x40;
            u[8] = (u[8] & 0x3f) | 0x80;
            u
        }
    };
    seal(&mut sb, &mut bytes, bsz);
    file.write_all_at(&bytes, opts.offset)
        .map_err(BuildError::output(w.output))?;
    file.set_len(opts.offset + meta.total_blocks * bs)
        .map_err(BuildError::output(w.output))?;
    Ok(())
}

/// The superblock of a new image (its uuid and checksum still to come).
fn superblock(opts: &EmitOptions<'_>, plan: &Plan, meta: &Meta, head: &Head<'_>) -> Superblock {
    let bs = opts.block_size();
    let lay = &meta.lay;
    let mut sb = Superblock::empty();
    sb.blkszbits = opts.blkszbits;
    // Like mkfs.erofs: no checksum with blocks below 2 KiB (fsck.erofs
    // 1.8.6 crashes on such images).
    sb.feature_compat = compat::MTIME;
    if bs >= 2048 && opts.sb_checksum {
        sb.feature_compat |= compat::SB_CHKSUM;
    }
    if plan.xattrs.any && opts.xattr_filter {
        sb.feature_compat |= compat::XATTR_FILTER;
    }
    if plan.chunked {
        sb.feature_incompat |= incompat::CHUNKED_FILE;
    }
    compression_fields(&mut sb, opts, plan, head.records.1, head.records.2);
    xattr_prefix_fields(&mut sb, opts, plan, meta, head.packed.is_some());
    if let Some(mb) = meta.metabox_nid {
        sb.feature_incompat |= incompat::METABOX;
        sb.sb_extslots = 1;
        sb.metabox_nid = mb;
        // Shared xattrs in the metabox data, said so (6.18 would look for
        // them on the device and, for some inodes, read the wrong page).
        if !plan.xattrs.shared.is_empty() {
            sb.feature_compat |= compat::SHARED_EA_IN_METABOX;
        }
    }
    // The root is in the metabox: its nid needs the 64-bit field.
    set_root_nid(
        &mut sb,
        meta.root_nid,
        meta.total_blocks,
        meta.metabox_nid.is_some(),
    );
    if let Some(pid) = head.packed {
        sb.feature_incompat |= incompat::FRAGMENTS;
        sb.packed_nid = lay.nid(pid, bs);
    }
    sb.inos = plan.order.len() as u64;
    // Two's complement: the 48-bit layout's epoch may be negative.
    sb.epoch = u64::from_le_bytes(plan.epoch.to_le_bytes());
    sb.fixed_nsec = plan.fixed_nsec;
    if plan.bit48 {
        sb.feature_incompat |= incompat::BIT48;
        sb.build_time = plan.build_time;
    }
    sb.blocks = meta.total_blocks as u32;
    // Nids count from here (block 0 when the root is in the superblock's
    // block, else the metadata area's start).
    sb.meta_blkaddr = (lay.nid_base / bs) as u32;
    sb.xattr_blkaddr = meta.xattr_blkaddr as u32;
    sb.volume_name[..opts.label.len()].copy_from_slice(opts.label);
    if let Some(b) = &head.blob {
        sb.feature_incompat |= incompat::DEVICE_TABLE;
        sb.extra_devices = 1;
        sb.devt_slotoff = (b.slot_at / DEVICE_SLOT_SIZE as u64) as u16;
    } else if !head.devices.is_empty() {
        sb.feature_incompat |= incompat::DEVICE_TABLE;
        sb.extra_devices = head.devices.len() as u16;
        sb.devt_slotoff = (head.devt_at / DEVICE_SLOT_SIZE as u64) as u16;
    }
    sb
}

/// The compression feature bits and the algorithm field (`algs`: the
/// records' bitmap, `cfgs`: whether there are records).
fn compression_fields(
    sb: &mut Superblock,
    opts: &EmitOptions<'_>,
    plan: &Plan,
    algs: u16,
    cfgs: bool,
) {
    if opts.compress.is_none() && plan.inodes.iter().all(|p| p.z.is_none()) {
        return;
    }
    sb.feature_incompat |= incompat::ZERO_PADDING;
    if cfgs {
        sb.feature_incompat |= incompat::COMPR_CFGS;
        sb.u1 = algs;
    } else {
        sb.u1 = 65535;
    }
    if plan
        .inodes
        .iter()
        .any(|p| p.z.as_ref().is_some_and(|z| z.inline.is_some()))
    {
        sb.feature_incompat |= incompat::ZTAILPACKING;
    }
}

/// The long xattr name prefixes' table: where it is and how many.
fn xattr_prefix_fields(
    sb: &mut Superblock,
    opts: &EmitOptions<'_>,
    plan: &Plan,
    meta: &Meta,
    packed: bool,
) {
    if plan.xattrs.prefixes.is_empty() {
        return;
    }
    // The table is at the head of the packed inode's data, or raw on the
    // primary device; then say so, or a 6.17+ kernel looks for it in the
    // packed inode (mkfs.erofs 1.9 sets the bit whenever it writes the
    // table there).
    if !plan.xattrs.prefixes_in_packed {
        let on_device = opts.metabox.is_none() && (packed || opts.bit48);
        if opts.plain_xattr_prefixes || on_device {
            sb.feature_compat |= compat::PLAIN_XATTR_PFX;
        }
        sb.xattr_prefix_start = (meta.prefix_start / 4) as u32;
    }
    sb.feature_incompat |= incompat::XATTR_PREFIXES;
    if let Some(id) = plan.xattrs.digest_prefix {
        sb.feature_compat |= compat::ISHARE_XATTRS;
        sb.ishare_xattr_prefix_id = id;
    }
    sb.xattr_prefix_count = plan.xattrs.prefixes.len() as u8;
}

/// The device table's slots in `bytes` (the image's head): the blob's,
/// tagged with its id (its trailer holds it too: see
/// `ferrofs_format::device::blob_tag`), or rebuild mode's layers, tagged;
/// each mapped after the image's own blocks (and the layers before it) in
/// the unified address space, as mkfs.erofs maps them.
fn device_table(bytes: &mut [u8], head: &Head<'_>, total_blocks: u64, bit48: bool) {
    if let Some(b) = &head.blob {
        let at = b.slot_at as usize;
        bytes[at..at + 64].copy_from_slice(&ferrofs_format::device::blob_tag(b.hash));
        bytes[at + 64..at + 68].copy_from_slice(&(b.blocks as u32).to_le_bytes());
        bytes[at + 68..at + 72].copy_from_slice(&(total_blocks as u32).to_le_bytes());
    }
    let mut uniaddr = total_blocks;
    for (k, d) in head.devices.iter().enumerate() {
        let at = head.devt_at as usize + k * DEVICE_SLOT_SIZE;
        bytes[at..at + 64].copy_from_slice(&d.tag);
        bytes[at + 64..at + 68].copy_from_slice(&(d.blocks as u32).to_le_bytes());
        bytes[at + 68..at + 72].copy_from_slice(&(uniaddr as u32).to_le_bytes());
        if bit48 {
            bytes[at + 72..at + 74].copy_from_slice(&((d.blocks >> 32) as u16).to_le_bytes());
            bytes[at + 74..at + 76].copy_from_slice(&((uniaddr >> 32) as u16).to_le_bytes());
        }
        uniaddr = uniaddr.saturating_add(d.blocks);
    }
}

/// Puts the root's nid into the superblock: into the 64-bit field when
/// `wide` (`root_nid_16` then holds the high bits of the block count),
/// else into the 16-bit one.
pub(crate) fn set_root_nid(sb: &mut Superblock, nid: u64, total_blocks: u64, wide: bool) {
    if wide {
        sb.root_nid_64 = nid;
        sb.root_nid_16 = (total_blocks >> 32) as u16;
    } else {
        sb.root_nid_16 = nid as u16;
    }
}

/// Encodes `sb` into the head `bytes` (at byte 1024) with its checksum,
/// when the image has one, over the bytes as they are then.
pub(crate) fn seal(sb: &mut Superblock, bytes: &mut [u8], bsz: BlockSize) {
    bytes[1024..1152].copy_from_slice(&sb.to_bytes());
    if sb.has_compat(compat::SB_CHKSUM) {
        sb.checksum = compute_checksum(&bytes[1024..1024 + checksum_len(bsz)]);
        bytes[1024..1152].copy_from_slice(&sb.to_bytes());
    }
}
