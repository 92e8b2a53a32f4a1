//! Reading the destination image's tree into the builder's [`Tree`], each
//! inode remembering the nid it has in the image (hard links are one
//! inode), so the layer put over it can keep what did not change.

#![warn(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ferrofs::format::inode::FileType;
use ferrofs::format::Nid;
use ferrofs::Image;

use crate::error::{BuildError, Result};
use crate::tree::{Inode, InodeId, Kind, Tree};

/// The destination's tree and, by inode id, the nid of every inode.
pub(crate) struct OldTree {
    pub(crate) tree: Tree,
    pub(crate) nids: Vec<u64>,
    /// Link counts as the image stores them.
    pub(crate) nlinks: Vec<u32>,
}

fn bad(path: &Path, what: impl std::fmt::Display) -> BuildError {
    BuildError::Incremental {
        path: path.to_path_buf(),
        reason: what.to_string(),
    }
}

/// Reads every inode the root reaches (breadth first, without recursion);
/// a directory reached twice is a corrupt image.
pub(crate) fn load(image: &Image, path: &Path) -> Result<OldTree> {
    let raw = image.raw();
    let root = raw
        .root()
        .map_err(|e| bad(path, format!("its root inode: {e}")))?;
    let mut out = OldTree {
        tree: Tree::default(),
        nids: Vec::new(),
        nlinks: Vec::new(),
    };
    let mut by_nid: HashMap<u64, InodeId> = HashMap::new();
    let mut queue: Vec<(ferrofs::raw::Inode, InodeId)> = Vec::new();
    let root_id = add(&mut out, image, &root, Vec::new(), 0, path)?;
    by_nid.insert(root.nid().0, root_id);
    queue.push((root, root_id));
    let mut next = 0usize;
    while let Some((dir, id)) = queue.get(next).cloned() {
        next = next.saturating_add(1);
        let rel = out.tree.inode(id).rel.clone();
        let entries = raw
            .read_dir(&dir)
            .map_err(|e| bad(path, format!("directory /{}: {e}", show(&rel))))?;
        let mut kids = Vec::new();
        for e in entries {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let child_rel = join(&rel, &e.name);
            let child = match by_nid.get(&e.nid.0) {
                Some(&c) if out.tree.inode(c).is_dir() => {
                    return Err(bad(
                        path,
                        format!("directory /{} is linked twice", show(&child_rel)),
                    ))
                }
                Some(&c) => c,
                None => {
                    let ino = raw.inode(Nid(e.nid.0)).map_err(|err| {
                        bad(path, format!("inode of /{}: {err}", show(&child_rel)))
                    })?;
                    let c = add(&mut out, image, &ino, child_rel, id, path)?;
                    by_nid.insert(e.nid.0, c);
                    if ino.is_dir() {
                        queue.push((ino, c));
                    }
                    c
                }
            };
            kids.push((e.name, child));
        }
        kids.sort();
        out.tree.inode_mut(id).kind = Kind::Dir { entries: kids };
    }
    out.tree.root = root_id;
    Ok(out)
}

/// Adds one inode of the image (a directory without its entries yet).
fn add(
    out: &mut OldTree,
    image: &Image,
    ino: &ferrofs::raw::Inode,
    rel: Vec<u8>,
    parent: InodeId,
    path: &Path,
) -> Result<InodeId> {
    let raw = image.raw();
    let what = |e: ferrofs::Error| bad(path, format!("/{}: {e}", show(&rel)));
    let (major, minor) = ino.rdev();
    let kind = match ino.file_type() {
        FileType::Directory => Kind::Dir {
            entries: Vec::new(),
        },
        FileType::Regular => Kind::File {
            size: ino.size(),
            data: None,
        },
        FileType::Symlink => Kind::Symlink {
            target: raw.read_link(ino).map_err(what)?,
        },
        FileType::CharDevice => Kind::CharDevice { major, minor },
        FileType::BlockDevice => Kind::BlockDevice { major, minor },
        FileType::Fifo => Kind::Fifo,
        FileType::Socket => Kind::Socket,
    };
    let mut xattrs: Vec<(Vec<u8>, Vec<u8>)> = raw
        .xattrs(ino)
        .map_err(what)?
        .into_iter()
        .map(|x| (x.name, x.value))
        .collect();
    xattrs.sort();
    let id = out.tree.inodes.len();
    out.tree.inodes.push(Inode {
        kind,
        perm: ino.permissions(),
        uid: ino.uid(),
        gid: ino.gid(),
        mtime: ino.mtime(),
        mtime_nsec: ino.mtime_nsec(),
        xattrs,
        source: PathBuf::from(format!("{}:/{}", path.display(), show(&rel))),
        content: Default::default(),
        rel,
        parent: if ino.is_dir() { parent } else { 0 },
        stamp: None,
    });
    out.nids.push(ino.nid().0);
    out.nlinks.push(ino.nlink());
    Ok(id)
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir.is_empty() {
        name.to_vec()
    } else {
        [dir, b"/", name].concat()
    }
}

fn show(rel: &[u8]) -> String {
    String::from_utf8_lossy(rel).into_owned()
}
