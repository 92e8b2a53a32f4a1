//! Layering: a scanned directory put over the destination's tree with
//! overlayfs's rules (its entries replace what had their names, its
//! directories merge with the image's, a 0/0 character device deletes the
//! name, an opaque directory hides what the image had there), then which
//! inodes stay as the image has them: files with the same bytes and
//! metadata at the same path take the image's inode back, and a directory
//! keeps its place only when nothing under it changed and its parent keeps
//! its own (its `..` entry names the parent's nid).

use std::collections::{BTreeMap, HashMap};

use ferrofs::format::Nid;
use ferrofs::Image;
use rayon::prelude::*;

use super::load::OldTree;
use crate::error::Result;
use crate::tree::content::ContentReader;
use crate::tree::overlay::{is_whiteout, OVL_OPAQUE};
use crate::tree::{Inode, InodeId, Kind, Tree};

/// overlayfs's opaque-directory xattrs.
const OPAQUE_XATTRS: [&[u8]; 2] = [OVL_OPAQUE, b"user.overlay.opaque"];

fn is_opaque(ino: &Inode) -> bool {
    ino.xattrs
        .iter()
        .any(|(n, v)| OPAQUE_XATTRS.contains(&n.as_slice()) && v == b"y")
}

/// The metadata of `from` (a layer's inode) on `to`, entries kept.
fn take_meta(to: &mut Inode, from: &Inode) {
    to.perm = from.perm;
    to.uid = from.uid;
    to.gid = from.gid;
    to.mtime = from.mtime;
    to.mtime_nsec = from.mtime_nsec;
    to.xattrs = from.xattrs.clone();
    to.source = from.source.clone();
}

/// Puts the directory tree `src` over `lower` (whose inodes keep their
/// ids; the layer's are appended).
pub(crate) fn overlay_dir(mut lower: Tree, src: Tree) -> Tree {
    let mut imported: HashMap<InodeId, InodeId> = HashMap::new();
    let root = lower.root;
    take_meta(&mut lower.inodes[root], &src.inodes[src.root]);
    let mut stack = vec![(root, src.root)];
    while let Some((fdir, sdir)) = stack.pop() {
        let mut names: BTreeMap<Vec<u8>, InodeId> = match &lower.inodes[fdir].kind {
            Kind::Dir { entries } => entries.iter().cloned().collect(),
            _ => BTreeMap::new(),
        };
        let Kind::Dir { entries } = &src.inodes[sdir].kind else {
            continue;
        };
        for (name, schild) in entries {
            let s = &src.inodes[*schild];
            if is_whiteout(s) {
                names.remove(name);
                continue;
            }
            let below = names.get(name).copied();
            if s.is_dir() {
                let fchild = match below {
                    Some(f) if lower.inodes[f].is_dir() && !is_opaque(s) => {
                        take_meta(&mut lower.inodes[f], s);
                        f
                    }
                    _ => {
                        let mut ino = s.clone();
                        ino.kind = Kind::Dir {
                            entries: Vec::new(),
                        };
                        ino.parent = fdir;
                        lower.inodes.push(ino);
                        lower.inodes.len() - 1
                    }
                };
                names.insert(name.clone(), fchild);
                stack.push((fchild, *schild));
            } else {
                let id = *imported.entry(*schild).or_insert_with(|| {
                    lower.inodes.push(s.clone());
                    lower.inodes.len() - 1
                });
                names.insert(name.clone(), id);
            }
        }
        lower.inodes[fdir].kind = Kind::Dir {
            entries: names.into_iter().collect(),
        };
    }
    lower
}

/// Drops what no name reaches, renumbering as [`Tree::prune`] does and
/// carrying each inode's origin (its id in the destination's tree) and
/// `extra` (per inode) along.
pub(crate) fn prune<T: Copy>(
    tree: Tree,
    origin: &[Option<InodeId>],
    extra: &[Option<T>],
) -> (Tree, Vec<Option<InodeId>>, Vec<Option<T>>) {
    fn carry<U: Copy>(order: &[InodeId], v: &[Option<U>]) -> Vec<Option<U>> {
        order
            .iter()
            .map(|&id| v.get(id).copied().flatten())
            .collect()
    }
    let order = tree.bfs_order();
    let (moved, extra) = (carry(&order, origin), carry(&order, extra));
    (tree.prune(), moved, extra)
}

/// Whether two inodes carry the same metadata (entries and file bytes
/// aside).
fn same_meta(a: &Inode, b: &Inode) -> bool {
    let kind = match (&a.kind, &b.kind) {
        (Kind::Dir { .. }, Kind::Dir { .. }) => true,
        (Kind::File { size: x, .. }, Kind::File { size: y, .. }) => x == y,
        (x, y) => x == y,
    };
    kind && a.perm == b.perm
        && a.uid == b.uid
        && a.gid == b.gid
        && (a.mtime, a.mtime_nsec) == (b.mtime, b.mtime_nsec)
        && a.xattrs == b.xattrs
}

/// Whether the layer's regular file `ino` has the bytes of the image's
/// inode `nid` (compared in full).
fn same_bytes(ino: &Inode, image: &Image, nid: u64) -> Result<bool> {
    let Kind::File { size, .. } = ino.kind else {
        return Ok(true);
    };
    let raw = image.raw();
    let Ok(old) = raw.inode(Nid(nid)).and_then(|i| raw.open(i)) else {
        return Ok(false);
    };
    let src = ContentReader::open(ino)?;
    let mut a = vec![0u8; (1 << 20).min(size as usize)];
    let mut b = a.clone();
    let mut off = 0u64;
    while off < size {
        let n = (size - off).min(a.len() as u64) as usize;
        src.read_exact_at(&mut a[..n], off)?;
        let mut got = 0;
        while got < n {
            match old.read_at(&mut b[got..n], off + got as u64) {
                Ok(0) | Err(_) => return Ok(false),
                Ok(k) => got += k,
            }
        }
        if a[..n] != b[..n] {
            return Ok(false);
        }
        off += n as u64;
    }
    src.finish()?;
    Ok(true)
}

/// Gives every new non-directory that the image holds unchanged at the
/// same path (same type, metadata, link count and bytes) the image's inode
/// back; returns how many did. A regular file with the image's bytes but
/// other metadata keeps its new inode and gets, in `same_data`, the nid
/// whose data it can point at.
pub(crate) fn reuse_unchanged(
    tree: &mut Tree,
    origin: &mut Vec<Option<InodeId>>,
    same_data: &mut Vec<Option<u64>>,
    old: &OldTree,
    image: &Image,
) -> Result<u64> {
    let mut old_paths: HashMap<Vec<u8>, InodeId> = HashMap::new();
    walk(&old.tree, |path, id| {
        if !old.tree.inodes[id].is_dir() {
            old_paths.entry(path.to_vec()).or_insert(id);
        }
    });
    let mut cands: Vec<(InodeId, InodeId)> = Vec::new();
    let mut seen = vec![false; tree.inodes.len()];
    walk(tree, |path, id| {
        if origin[id].is_none() && !tree.inodes[id].is_dir() && !seen[id] {
            seen[id] = true;
            if let Some(&o) = old_paths.get(path) {
                cands.push((id, o));
            }
        }
    });
    let nlinks = tree.link_counts();
    let t: &Tree = tree;
    // (same inode, same bytes)
    let verdicts: Vec<Result<(bool, bool)>> = cands
        .par_iter()
        .map(|&(id, o)| {
            let (a, b) = (&t.inodes[id], &old.tree.inodes[o]);
            let meta = same_meta(a, b) && nlinks[id] == old.nlinks[o];
            let data = match (&a.kind, &b.kind) {
                (Kind::File { size: x, .. }, Kind::File { size: y, .. }) => x == y,
                _ => false,
            };
            if !meta && !data {
                return Ok((false, false));
            }
            let bytes = same_bytes(a, image, old.nids[o])?;
            Ok((meta && bytes, data && bytes))
        })
        .collect();
    let mut to: HashMap<InodeId, InodeId> = HashMap::new();
    same_data.resize(tree.inodes.len(), None);
    for (&(id, o), v) in cands.iter().zip(verdicts) {
        match v? {
            (true, _) => {
                to.insert(id, o);
            }
            (false, true) => same_data[id] = Some(old.nids[o]),
            _ => {}
        }
    }
    if to.is_empty() {
        return Ok(0);
    }
    // The image's inode is in the tree already when its id is an origin
    // (hard links spanning both); otherwise it joins it.
    let mut at: HashMap<InodeId, InodeId> = HashMap::new();
    for (i, o) in origin.iter().enumerate() {
        if let Some(o) = o {
            at.insert(*o, i);
        }
    }
    for o in to.values() {
        if !at.contains_key(o) {
            at.insert(*o, tree.inodes.len());
            tree.inodes.push(old.tree.inodes[*o].clone());
            origin.push(Some(*o));
            same_data.push(None);
        }
    }
    for ino in tree.inodes.iter_mut() {
        if let Kind::Dir { entries } = &mut ino.kind {
            for (_, c) in entries.iter_mut() {
                if let Some(o) = to.get(c) {
                    *c = at[o];
                }
            }
        }
    }
    Ok(to.len() as u64)
}

/// Calls `f` with the path and id of every name the root reaches (each
/// directory once; no recursion).
fn walk(tree: &Tree, mut f: impl FnMut(&[u8], InodeId)) {
    let mut stack = vec![(tree.root, Vec::new())];
    while let Some((dir, path)) = stack.pop() {
        let Kind::Dir { entries } = &tree.inodes[dir].kind else {
            continue;
        };
        for (name, c) in entries {
            let p = if path.is_empty() {
                name.clone()
            } else {
                [&path[..], b"/", name].concat()
            };
            f(&p, *c);
            if tree.inodes[*c].is_dir() {
                stack.push((*c, p));
            }
        }
    }
}

/// The image nid each inode keeps, `None` for those written anew, and
/// whether the whole tree is the image's. A non-directory from the image
/// keeps its nid; a directory keeps it when its subtree is unchanged and
/// its parent's nid stays (`root_stays`: the root is rewritten in its old
/// place).
pub(crate) fn kept_nids(
    tree: &Tree,
    origin: &[Option<InodeId>],
    old: &OldTree,
    root_stays: bool,
) -> (Vec<Option<u64>>, bool) {
    let n = tree.inodes.len();
    let order = tree.bfs_order();
    // Bottom-up: a directory whose metadata, names and inodes are the
    // image's, and whose subdirectories are too.
    // (A non-directory from the image is its own; hard links can put it
    // after a deeper directory in breadth-first order, so first.)
    let mut same: Vec<bool> = (0..n)
        .map(|id| origin[id].is_some() && !tree.inodes[id].is_dir())
        .collect();
    for &id in order.iter().rev() {
        let ino = &tree.inodes[id];
        let Some(o) = origin[id] else { continue };
        let Kind::Dir { entries } = &ino.kind else {
            continue;
        };
        let Kind::Dir {
            entries: old_entries,
        } = &old.tree.inodes[o].kind
        else {
            continue;
        };
        same[id] = same_meta(ino, &old.tree.inodes[o])
            && entries.len() == old_entries.len()
            && entries
                .iter()
                .zip(old_entries)
                .all(|((a, c), (b, oc))| a == b && origin[*c] == Some(*oc) && same[*c]);
    }
    let mut kept: Vec<Option<u64>> = vec![None; n];
    let mut fixed = vec![false; n];
    for &id in &order {
        let Some(o) = origin[id] else { continue };
        if id == tree.root {
            fixed[id] = root_stays;
            continue;
        }
        let keep = if tree.inodes[id].is_dir() {
            same[id] && fixed[tree.inodes[id].parent]
        } else {
            true
        };
        if keep {
            kept[id] = Some(old.nids[o]);
            fixed[id] = true;
        }
    }
    (kept, same[tree.root])
}
