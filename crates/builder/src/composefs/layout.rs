//! Where everything goes, by mkcomposefs 1.0.8's rules: inodes in
//! breadth-first order of the name-sorted tree (numbered in that order),
//! each at the next 32-byte slot and moved to the next block when its
//! inline tail would cross one; compact inodes for those whose mtime is
//! the tree's oldest and whose fields fit; xattrs used more than once put
//! in the shared table (ordered by name, then value, descending); data
//! blocks (directory blocks, tails that did not fit) after the table.

use std::collections::HashMap;

use super::node::{Tree, Xattr, S_IFDIR, S_IFLNK, S_IFREG};
use crate::error::{BuildError, Result};

pub(crate) const BLOCK: u64 = 4096;
const BLOCK_BITS: u32 = 12;
const SLOT: u64 = 32;
/// Where inodes start: after the composefs header's block part and the
/// 128-byte superblock at 1024.
pub(crate) const META_START: u64 = 1024 + 128;
pub(crate) const DIRENT: u64 = 12;
const XATTR_HEADER: u64 = 12;
/// Most shared xattrs one inode references.
const MAX_SHARED_PER_INODE: usize = 128;
/// Largest chunk size, as log2: a 5-bit block count above the block size.
const MAX_CHUNK_BITS: u32 = 31 + BLOCK_BITS;

/// The chunk size (log2) and chunk count of a chunk-based file of `size`
/// bytes (`size` > 0): as few chunks as the 5-bit chunk format allows.
pub(crate) fn chunking(size: u64) -> (u32, u64) {
    let below = size.saturating_sub(1);
    let bits = (u64::BITS - below.leading_zeros()).max(1);
    let bits = bits.clamp(BLOCK_BITS, MAX_CHUNK_BITS);
    (bits, size.div_ceil(1u64 << bits))
}

pub(crate) fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to).saturating_mul(to)
}

/// One directory entry: its name and the node it leads to.
pub(crate) struct Entry {
    pub(crate) name: Vec<u8>,
    pub(crate) target: usize,
}

/// An inode's placement.
#[derive(Default, Clone)]
pub(crate) struct Placed {
    pub(crate) compact: bool,
    /// Padding before the inode.
    pub(crate) ipad: u64,
    pub(crate) nid: u64,
    pub(crate) n_blocks: u64,
    pub(crate) tail: u64,
    pub(crate) xattr_size: u64,
    /// Shared-table offsets (bytes from the table start) of the inode's
    /// shared xattrs, in its xattr order; `None` for an inline one.
    pub(crate) shared: Vec<Option<u64>>,
}

/// The whole plan.
pub(crate) struct Plan {
    /// Nodes in inode order.
    pub(crate) order: Vec<usize>,
    /// Inode number (position in `order`) of each node index.
    pub(crate) ino: Vec<Option<u32>>,
    /// Entries of each directory (by position in `order`), sorted.
    pub(crate) entries: Vec<Vec<Entry>>,
    pub(crate) placed: Vec<Placed>,
    pub(crate) min_mtime: (i64, u32),
    pub(crate) has_acl: bool,
    pub(crate) shared_table: Vec<Xattr>,
    pub(crate) shared_size: u64,
    pub(crate) inodes_end: u64,
    pub(crate) data_start: u64,
    pub(crate) n_data_blocks: u64,
}

/// Orders, numbers and places every inode of the rewritten tree.
pub(crate) fn plan(tree: &mut Tree) -> Result<Plan> {
    let order = breadth_first(tree);
    let mut ino = vec![None; tree.nodes.len()];
    let mut min_mtime = (tree.node(0).mtime_sec, tree.node(0).mtime_nsec);
    let mut has_acl = false;
    for (pos, &i) in order.iter().enumerate() {
        ino[i] = Some(u32::try_from(pos).map_err(|_| BuildError::input("/", "too many inodes"))?);
        let subdirs = tree
            .node(i)
            .children
            .iter()
            .filter(|&&c| tree.node(c).file_type() == S_IFDIR)
            .count();
        let n = tree.node_mut(i);
        if n.is_dir() {
            n.nlink = u32::try_from(subdirs.saturating_add(2)).unwrap_or(u32::MAX);
        }
        n.xattrs.sort_by(|a, b| a.key.cmp(&b.key));
        min_mtime = min_mtime.min((n.mtime_sec, n.mtime_nsec));
        has_acl |= n.xattr(b"system.posix_acl_access").is_some()
            || n.xattr(b"system.posix_acl_default").is_some();
    }
    let entries = order
        .iter()
        .map(|&i| dir_entries(tree, i))
        .collect::<Result<Vec<_>>>()?;
    let (shared_table, offsets, shared_size) = share_xattrs(tree, &order);
    let mut plan = Plan {
        order,
        ino,
        entries,
        placed: Vec::new(),
        min_mtime,
        has_acl,
        shared_table,
        shared_size,
        inodes_end: 0,
        data_start: 0,
        n_data_blocks: 0,
    };
    place_inodes(tree, &mut plan, &offsets);
    Ok(plan)
}

/// Non-link nodes, breadth first, each directory's children by name.
fn breadth_first(tree: &Tree) -> Vec<usize> {
    let mut order = vec![0];
    let mut at = 0;
    while let Some(&i) = order.get(at) {
        at += 1;
        for &c in &tree.node(i).children {
            if tree.node(c).link_to.is_none() {
                order.push(c);
            }
        }
    }
    order
}

/// A directory's entries with `.` and `..`, sorted by name bytes.
fn dir_entries(tree: &Tree, i: usize) -> Result<Vec<Entry>> {
    let n = tree.node(i);
    if !n.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(n.children.len().saturating_add(2));
    out.push(Entry {
        name: b".".to_vec(),
        target: i,
    });
    out.push(Entry {
        name: b"..".to_vec(),
        target: if i == 0 { 0 } else { n.parent },
    });
    for &c in &n.children {
        let target = tree
            .follow(c)
            .ok_or_else(|| BuildError::input(tree.path_of(c), "hard link loop"))?;
        out.push(Entry {
            name: tree.node(c).name.clone(),
            target,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The size of an xattr entry (header, name suffix, value, padded to 4).
pub(crate) fn entry_size(x: &Xattr) -> u64 {
    let (_, suffix) = super::node::split_prefix(&x.key);
    round_up(4 + suffix.len() as u64 + x.value.len() as u64, 4)
}

/// The shared table, each (node position, xattr index)'s offset in it
/// (shared ones only, at most 128 per inode), and the table's size.
#[allow(clippy::type_complexity)]
fn share_xattrs(tree: &Tree, order: &[usize]) -> (Vec<Xattr>, Vec<Vec<Option<u64>>>, u64) {
    let mut counts: HashMap<(&[u8], &[u8]), u32> = HashMap::new();
    for &i in order {
        for x in &tree.node(i).xattrs {
            let c = counts.entry((&x.key, &x.value)).or_insert(0);
            *c = c.saturating_add(1);
        }
    }
    let mut multi: Vec<(&[u8], &[u8])> = counts
        .iter()
        .filter(|(_, &c)| c > 1)
        .map(|(&k, _)| k)
        .collect();
    multi.sort_by(|a, b| {
        b.0.cmp(a.0)
            .then(b.1.len().cmp(&a.1.len()))
            .then(b.1.cmp(a.1))
    });
    let mut offset_of: HashMap<(&[u8], &[u8]), u64> = HashMap::new();
    let mut table = Vec::with_capacity(multi.len());
    let mut size = 0u64;
    for (k, v) in multi {
        let x = Xattr {
            key: k.to_vec(),
            value: v.to_vec(),
        };
        offset_of.insert((k, v), size);
        size = size.saturating_add(entry_size(&x));
        table.push(x);
    }
    let offsets = order
        .iter()
        .map(|&i| {
            let mut n_shared = 0;
            tree.node(i)
                .xattrs
                .iter()
                .map(|x| {
                    let off = offset_of.get(&(x.key.as_slice(), x.value.as_slice()))?;
                    (n_shared < MAX_SHARED_PER_INODE).then(|| {
                        n_shared += 1;
                        *off
                    })
                })
                .collect()
        })
        .collect();
    (table, offsets, size)
}

/// Data blocks and inline tail bytes of a node before placement.
fn data_shape(tree: &Tree, i: usize, entries: &[Entry]) -> (u64, u64) {
    let n = tree.node(i);
    match n.file_type() {
        S_IFDIR => {
            let (mut blocks, mut used) = (0u64, 0u64);
            for e in entries {
                let len = DIRENT + e.name.len() as u64;
                if used + len > BLOCK {
                    blocks += 1;
                    used = 0;
                }
                used += len;
            }
            // Never more than half a block inline.
            if used > BLOCK / 2 {
                (blocks + 1, 0)
            } else {
                (blocks, used)
            }
        }
        S_IFLNK => (0, n.payload.as_ref().map_or(0, |p| p.len() as u64)),
        S_IFREG if n.size > 0 => {
            if n.content.is_some() {
                let (blocks, tail) = (n.size / BLOCK, n.size % BLOCK);
                if tail > BLOCK / 2 {
                    (blocks.saturating_add(1), 0)
                } else {
                    (blocks, tail)
                }
            } else {
                (0, chunking(n.size).1.saturating_mul(4))
            }
        }
        _ => (0, 0),
    }
}

/// Whether the 32-byte inode holds the node.
fn fits_compact(tree: &Tree, i: usize, blocks: u64, tail: u64, min_mtime: (i64, u32)) -> bool {
    let n = tree.node(i);
    let size = if n.is_dir() {
        blocks.saturating_mul(BLOCK).saturating_add(tail)
    } else {
        n.size
    };
    (n.mtime_sec, n.mtime_nsec) == min_mtime
        && n.nlink <= u32::from(u16::MAX)
        && n.uid <= u32::from(u16::MAX)
        && n.gid <= u32::from(u16::MAX)
        && size <= u64::from(u32::MAX)
}

/// Padding before an inode at `pos` so its inline tail does not cross a
/// block; a tail that cannot be kept inline becomes one more block.
fn tail_padding(symlink: bool, pos: u64, head: u64, blocks: &mut u64, tail: &mut u64) -> u64 {
    let to_block = round_up(pos, BLOCK) - pos;
    if symlink {
        // The target stays in the inode's block; one that cannot goes
        // to a block of its own, and the inode still moves on if it
        // would have straddled.
        let total = head + *tail;
        if total / BLOCK > 0 {
            *blocks += 1;
            *tail = 0;
        }
        return if pos / BLOCK != (pos + total - 1) / BLOCK {
            to_block
        } else {
            0
        };
    }
    let room = BLOCK - (pos + head) % BLOCK;
    if room >= *tail {
        return 0;
    }
    let pad = round_up(room, SLOT);
    if *tail <= BLOCK - (pos + head + pad) % BLOCK {
        return pad;
    }
    *blocks += 1;
    *tail = 0;
    to_block
}

/// Places every inode after the superblock, then the shared table.
fn place_inodes(tree: &Tree, plan: &mut Plan, offsets: &[Vec<Option<u64>>]) {
    let mut pos = META_START;
    let mut placed = Vec::with_capacity(plan.order.len());
    for (p, &i) in plan.order.iter().enumerate() {
        let n = tree.node(i);
        let (mut n_blocks, mut tail) = data_shape(tree, i, &plan.entries[p]);
        let compact = fits_compact(tree, i, n_blocks, tail, plan.min_mtime);
        let inode = if compact { 32 } else { 64 };
        let shared = offsets[p].clone();
        let n_shared = shared.iter().flatten().count() as u64;
        let inline: u64 = n
            .xattrs
            .iter()
            .zip(&shared)
            .filter(|(_, s)| s.is_none())
            .map(|(x, _)| entry_size(x))
            .sum();
        let xattr_size = if n_shared == 0 && inline == 0 {
            0
        } else {
            round_up(XATTR_HEADER + 4 * n_shared + inline, 4)
        };
        let start = round_up(pos, SLOT);
        let mut ipad = start - pos;
        pos = start;
        let symlink = n.file_type() == S_IFLNK;
        let extra = tail_padding(symlink, pos, inode + xattr_size, &mut n_blocks, &mut tail);
        ipad += extra;
        pos += extra;
        plan.n_data_blocks = plan.n_data_blocks.saturating_add(n_blocks);
        placed.push(Placed {
            compact,
            ipad,
            nid: pos / SLOT,
            n_blocks,
            tail,
            xattr_size,
            shared,
        });
        pos += inode + xattr_size + tail;
    }
    plan.placed = placed;
    plan.inodes_end = round_up(pos, SLOT);
    plan.data_start = round_up(plan.inodes_end + plan.shared_size, BLOCK);
}
