//! Whole-file deduplication: regular files whose bytes are identical to an
//! earlier file's (in data order) share that file's data instead of
//! storing their own. Candidates are grouped by size, hashed in parallel,
//! and every match is confirmed byte by byte, so a hash collision cannot
//! make two different files share data.

use std::collections::HashMap;

use rayon::prelude::*;
use xxhash_rust::xxh3::Xxh3;

use ferrofs_format::inode::DataLayout;

use crate::error::Result;
use crate::plan::Plan;
use crate::tree::content::ContentReader;
use crate::tree::{InodeId, Kind, Tree};

const BUF: usize = 1 << 20;

fn hash(tree: &Tree, id: InodeId) -> Result<u128> {
    let ino = &tree.inodes[id];
    let size = ino.data_size();
    let r = ContentReader::open(ino)?;
    let mut buf = vec![0u8; (size as usize).min(BUF)];
    let mut h = Xxh3::new();
    let mut off = 0;
    while off < size {
        let n = (size - off).min(BUF as u64) as usize;
        r.read_exact_at(&mut buf[..n], off)?;
        h.update(&buf[..n]);
        off += n as u64;
    }
    r.finish()?;
    Ok(h.digest128())
}

fn same(tree: &Tree, a: InodeId, b: InodeId) -> Result<bool> {
    let size = tree.inodes[a].data_size();
    let ra = ContentReader::open(&tree.inodes[a])?;
    let rb = ContentReader::open(&tree.inodes[b])?;
    let n0 = (size as usize).min(BUF);
    let (mut x, mut y) = (vec![0u8; n0], vec![0u8; n0]);
    let mut off = 0;
    while off < size {
        let n = (size - off).min(BUF as u64) as usize;
        ra.read_exact_at(&mut x[..n], off)?;
        rb.read_exact_at(&mut y[..n], off)?;
        if x[..n] != y[..n] {
            return Ok(false);
        }
        off += n as u64;
    }
    Ok(true)
}

/// For every inode, the earlier inode (in `plan.order`) whose data it can
/// share: same bytes, and stored the same way: both flat with an inline
/// tail or both without (a flat file's blocks stop before an inline tail),
/// and with `inline_tails` (ztailpacking) the same inode + xattr length, so
/// the inline pcluster fits after the inode the same way. Chunk-based
/// files are left out.
pub fn find_duplicates(
    tree: &Tree,
    plan: &Plan,
    inline_tails: bool,
) -> Result<Vec<Option<InodeId>>> {
    let mut by_size: HashMap<(u64, u64), Vec<InodeId>> = HashMap::new();
    for &id in &plan.order {
        let p = &plan.inodes[id];
        if let Kind::File { size, .. } = tree.inodes[id].kind {
            if size > 0 && p.chunks.is_none() {
                let class = if inline_tails {
                    plan.head_len(id)
                } else {
                    u64::from(p.layout == DataLayout::FlatInline)
                };
                by_size.entry((size, class)).or_default().push(id);
            }
        }
    }
    let mut groups: Vec<Vec<InodeId>> = by_size.into_values().filter(|g| g.len() > 1).collect();
    groups.sort();
    let candidates: Vec<InodeId> = groups.iter().flatten().copied().collect();
    let hashes: Vec<u128> = candidates
        .par_iter()
        .map(|&id| hash(tree, id))
        .collect::<Result<_>>()?;
    let hash_of: HashMap<InodeId, u128> = candidates.iter().copied().zip(hashes).collect();
    // Pairs (duplicate, original) to confirm byte by byte.
    let mut pairs = Vec::new();
    for g in &groups {
        let mut first: HashMap<u128, InodeId> = HashMap::new();
        for &id in g {
            match first.get(&hash_of[&id]) {
                Some(&orig) => pairs.push((id, orig)),
                None => {
                    first.insert(hash_of[&id], id);
                }
            }
        }
    }
    let confirmed: Vec<bool> = pairs
        .par_iter()
        .map(|&(d, o)| same(tree, d, o))
        .collect::<Result<_>>()?;
    let mut dup = vec![None; tree.inodes.len()];
    for (&(d, o), ok) in pairs.iter().zip(confirmed) {
        if ok {
            dup[d] = Some(o);
        }
    }
    Ok(dup)
}
