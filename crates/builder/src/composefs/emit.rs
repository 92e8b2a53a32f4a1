//! Writes the planned image: the composefs header, the superblock, every
//! inode with its xattr body and inline tail, the shared xattr table, then
//! the data blocks (directory blocks, tails that did not fit inline).

use ferrofs_format::dirent::RawDirent;
use ferrofs_format::inode::{DataLayout, RawInode};
use ferrofs_format::superblock::{compat, Superblock};
use ferrofs_format::xattr::{encode_body_header, encode_entry, name_filter_bit};
use ferrofs_format::Nid;

use super::layout::{chunking, round_up, Entry, Placed, Plan, BLOCK, DIRENT};
use super::node::{
    split_prefix, Node, Tree, S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFREG, S_IFSOCK,
};

const CFS_MAGIC: u32 = 0xd078_629a;
const CFS_HEADER_VERSION: u32 = 1;
const CFS_FLAG_HAS_ACL: u32 = 1;
const SB_OFFSET: usize = 1024;

fn file_type_code(mode: u32) -> u8 {
    match mode & super::node::S_IFMT {
        S_IFREG => 1,
        S_IFDIR => 2,
        S_IFCHR => 3,
        S_IFBLK => 4,
        S_IFIFO => 5,
        S_IFSOCK => 6,
        S_IFLNK => 7,
        _ => 0,
    }
}

fn align(out: &mut Vec<u8>, to: u64) {
    let end = round_up(out.len() as u64, to);
    out.resize(usize::try_from(end).unwrap_or(usize::MAX), 0);
}

/// The image bytes.
pub(crate) fn emit(tree: &Tree, plan: &Plan, version: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(usize::try_from(plan.data_start).unwrap_or(0));
    for v in [
        CFS_MAGIC,
        CFS_HEADER_VERSION,
        if plan.has_acl { CFS_FLAG_HAS_ACL } else { 0 },
        version,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.resize(SB_OFFSET, 0);
    out.extend_from_slice(&superblock(plan).to_bytes());
    let mut next_block = plan.data_start;
    for (p, &i) in plan.order.iter().enumerate() {
        write_inode(&mut out, tree, plan, p, i, &mut next_block);
    }
    align(&mut out, 32);
    for x in &plan.shared_table {
        let (idx, suffix) = split_prefix(&x.key);
        encode_entry(&mut out, idx, suffix, &x.value);
    }
    align(&mut out, BLOCK);
    for (p, &i) in plan.order.iter().enumerate() {
        write_blocks(&mut out, tree, plan, p, i);
    }
    out
}

// why: the format's fields are 32-bit; composefs stores them narrowed.
#[allow(clippy::cast_possible_truncation)]
fn superblock(plan: &Plan) -> Superblock {
    let mut sb = Superblock::empty();
    sb.feature_compat = compat::MTIME | compat::XATTR_FILTER;
    sb.root_nid_16 = plan.placed.first().map_or(0, |r| r.nid) as u16;
    sb.inos = plan.order.len() as u64;
    sb.epoch = plan.min_mtime.0 as u64;
    sb.fixed_nsec = plan.min_mtime.1;
    sb.blocks = (plan.data_start / BLOCK).saturating_add(plan.n_data_blocks) as u32;
    sb.xattr_blkaddr = (plan.inodes_end / BLOCK) as u32;
    sb
}

/// Bytes of a regular file's or symlink's i_size, as composefs sets it.
fn inode_size(n: &Node, pl: &Placed) -> u64 {
    match n.file_type() {
        S_IFDIR => pl.n_blocks.saturating_mul(BLOCK).saturating_add(pl.tail),
        S_IFREG => n.size,
        S_IFLNK if pl.n_blocks == 0 => pl.tail,
        S_IFLNK => n.size,
        _ => 0,
    }
}

// why: mode, nlink and the block address are stored narrowed, as
// composefs stores them (compact inodes are chosen only when they fit).
#[allow(clippy::cast_possible_truncation)]
fn write_inode(out: &mut Vec<u8>, tree: &Tree, plan: &Plan, p: usize, i: usize, next: &mut u64) {
    let n = tree.node(i);
    let pl = &plan.placed[p];
    out.resize(out.len() + pl.ipad as usize, 0);
    let chunked = n.file_type() == S_IFREG && n.size > 0 && n.content.is_none();
    let mut layout = if pl.tail > 0 {
        DataLayout::FlatInline
    } else {
        DataLayout::FlatPlain
    };
    let mut i_u = 0u32;
    match n.file_type() {
        S_IFCHR | S_IFBLK => i_u = n.rdev,
        S_IFDIR | S_IFREG | S_IFLNK if pl.n_blocks > 0 => {
            i_u = (*next / BLOCK) as u32;
            *next = next.saturating_add(pl.n_blocks.saturating_mul(BLOCK));
        }
        _ => {}
    }
    if chunked {
        layout = DataLayout::ChunkBased;
        let bits = u32::from(chunking(n.size).0 as u16) - 12;
        i_u = (i_u & 0xffff_0000) | bits;
    }
    let raw = RawInode {
        format: layout.bits() << 1,
        extended: !pl.compact,
        xattr_icount: if pl.xattr_size == 0 {
            0
        } else {
            ((pl.xattr_size - 12) / 4 + 1) as u16
        },
        mode: n.mode as u16,
        nb: 0,
        size: inode_size(n, pl),
        mtime: if pl.compact { 0 } else { n.mtime_sec },
        mtime_nsec: n.mtime_nsec,
        i_u,
        ino: plan.ino[i].unwrap_or(0),
        uid: n.uid,
        gid: n.gid,
        nlink: n.nlink,
    };
    if pl.compact {
        out.extend_from_slice(&raw.to_compact_bytes());
    } else {
        out.extend_from_slice(&raw.to_extended_bytes());
    }
    write_xattrs(out, n, pl, plan.inodes_end);
    write_tail(out, tree, plan, p, i);
}

// why: shared counts are at most 128 and offsets are within the image.
#[allow(clippy::cast_possible_truncation)]
fn write_xattrs(out: &mut Vec<u8>, n: &Node, pl: &Placed, inodes_end: u64) {
    if pl.xattr_size == 0 {
        return;
    }
    let mut bits = 0u32;
    for x in &n.xattrs {
        let (idx, suffix) = split_prefix(&x.key);
        bits |= 1 << name_filter_bit(idx, suffix);
    }
    let n_shared = pl.shared.iter().flatten().count();
    out.extend_from_slice(&encode_body_header(!bits, n_shared as u8));
    for off in pl.shared.iter().flatten() {
        let at = (inodes_end % BLOCK + off) / 4;
        out.extend_from_slice(&(at as u32).to_le_bytes());
    }
    for (x, s) in n.xattrs.iter().zip(&pl.shared) {
        if s.is_none() {
            let (idx, suffix) = split_prefix(&x.key);
            encode_entry(out, idx, suffix, &x.value);
        }
    }
}

/// The inline tail: the last directory entries, a symlink's target, a
/// small file's last bytes or a chunk table of holes.
fn write_tail(out: &mut Vec<u8>, tree: &Tree, plan: &Plan, p: usize, i: usize) {
    let n = tree.node(i);
    let pl = &plan.placed[p];
    match n.file_type() {
        S_IFDIR => write_dirents(out, tree, plan, &plan.entries[p], pl.n_blocks, false),
        S_IFLNK if pl.n_blocks == 0 => out.extend_from_slice(n.payload.as_deref().unwrap_or(&[])),
        S_IFREG if pl.tail > 0 => match &n.content {
            Some(c) => {
                let from = c.len().saturating_sub(pl.tail as usize);
                out.extend_from_slice(&c[from..]);
            }
            None => {
                let count = pl.tail / 4;
                for _ in 0..count {
                    out.extend_from_slice(&u32::MAX.to_le_bytes());
                }
            }
        },
        _ => {}
    }
}

/// A directory's entries: its full blocks (`blocks_pass`) or its tail.
fn write_dirents(
    out: &mut Vec<u8>,
    tree: &Tree,
    plan: &Plan,
    es: &[Entry],
    n_blocks: u64,
    blocks_pass: bool,
) {
    let (mut first, mut used, mut written) = (0usize, 0u64, 0u64);
    for (k, e) in es.iter().enumerate() {
        let len = DIRENT + e.name.len() as u64;
        if used + len > BLOCK {
            if blocks_pass {
                write_chunk(out, tree, plan, &es[first..k], BLOCK);
            }
            written += 1;
            used = 0;
            first = k;
        }
        used += len;
    }
    if written < n_blocks {
        if blocks_pass {
            write_chunk(out, tree, plan, &es[first..], BLOCK);
        }
        used = 0;
        first = es.len();
    }
    if !blocks_pass && used > 0 {
        write_chunk(out, tree, plan, &es[first..], 1);
    }
}

// why: a chunk holds at most one block of entries, so offsets fit u16.
#[allow(clippy::cast_possible_truncation)]
fn write_chunk(out: &mut Vec<u8>, tree: &Tree, plan: &Plan, es: &[Entry], to: u64) {
    let mut nameoff = es.len() * DIRENT as usize;
    for e in es {
        let nid = plan.ino[e.target].map_or(0, |p| plan.placed[p as usize].nid);
        let d = RawDirent {
            nid: Nid(nid),
            nameoff: nameoff as u16,
            file_type: file_type_code(tree.node(e.target).mode),
        };
        out.extend_from_slice(&d.to_bytes());
        nameoff += e.name.len();
    }
    for e in es {
        out.extend_from_slice(&e.name);
    }
    align(out, to);
}

/// The data blocks of one inode (after the shared table).
// why: a block's worth of content is at most 4096 bytes.
#[allow(clippy::cast_possible_truncation)]
fn write_blocks(out: &mut Vec<u8>, tree: &Tree, plan: &Plan, p: usize, i: usize) {
    let n = tree.node(i);
    let pl = &plan.placed[p];
    if pl.n_blocks == 0 {
        return;
    }
    match n.file_type() {
        S_IFDIR => write_dirents(out, tree, plan, &plan.entries[p], pl.n_blocks, true),
        S_IFREG => match &n.content {
            // Only one block: composefs never inlines more than 5000 bytes.
            Some(c) => {
                out.extend_from_slice(&c[..c.len().min(BLOCK as usize)]);
                align(out, BLOCK);
            }
            None => out.resize(out.len() + BLOCK as usize, 0xff),
        },
        S_IFLNK => {
            let t = n.payload.as_deref().unwrap_or(&[]);
            out.extend_from_slice(&t[..t.len().min(BLOCK as usize)]);
            align(out, BLOCK);
        }
        _ => {}
    }
}
