//! A depth-first walk of an image's tree without recursion: an explicit
//! stack, a depth limit and a visited set, so a hostile image with
//! directory loops or absurd depth cannot hang or overflow the stack.

use std::collections::HashSet;

use ferrofs::format::Nid;
use ferrofs::{raw::Inode, raw::RawDirEntry as DirEntry, Error, Image};

/// Deepest directory nesting walked (Linux paths hold at most 4096 bytes,
/// so real trees stay far below this).
pub const MAX_DEPTH: usize = 2048;

/// What the walker hands to its visitor.
pub enum Visit<'a> {
    /// A directory was entered; its entries follow.
    Dir {
        path: &'a [u8],
        inode: &'a Inode,
        entries: &'a [DirEntry],
        parent: Nid,
    },
    /// A non-directory entry, or a directory seen for the first time
    /// (it is entered later).
    Entry {
        path: &'a [u8],
        entry: &'a DirEntry,
        inode: &'a Inode,
    },
    /// Something could not be read; the walk goes on elsewhere.
    Error {
        path: &'a [u8],
        nid: Option<Nid>,
        error: Error,
    },
}

/// Joins a parent path and a name with `/` (the root is the empty path).
pub fn join(parent: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(parent.len() + 1 + name.len());
    p.extend_from_slice(parent);
    if !parent.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// Walks the tree from the root, calling `visit` for every directory and
/// entry. Directories reached twice (loops, hard-linked directories) are
/// reported as errors and not entered again.
pub fn walk(image: &Image, mut visit: impl FnMut(Visit<'_>)) {
    match image.raw().root() {
        Ok(root) => {
            let nid = root.nid();
            walk_from(image, root, nid, visit)
        }
        Err(error) => visit(Visit::Error {
            path: b"",
            nid: Some(image.root_nid()),
            error,
        }),
    }
}

/// [`walk`] from directory `root`, whose `..` is `parent`, instead of the
/// image's root: paths are relative to it (`root` itself is the empty
/// path).
pub fn walk_from(image: &Image, root: Inode, parent: Nid, mut visit: impl FnMut(Visit<'_>)) {
    let mut seen: HashSet<Nid> = HashSet::new();
    let mut stack: Vec<(Vec<u8>, Inode, Nid, usize)> = vec![(Vec::new(), root.clone(), parent, 0)];
    seen.insert(root.nid());
    while let Some((path, inode, parent, depth)) = stack.pop() {
        let entries = match image.raw().read_dir(&inode) {
            Ok(e) => e,
            Err(error) => {
                visit(Visit::Error {
                    path: &path,
                    nid: Some(inode.nid()),
                    error,
                });
                continue;
            }
        };
        visit(Visit::Dir {
            path: &path,
            inode: &inode,
            entries: &entries,
            parent,
        });
        let mut subdirs = Vec::new();
        for e in entries.iter().filter(|e| !e.is_dot()) {
            let p = join(&path, &e.name);
            let child = match image.raw().inode(e.nid) {
                Ok(c) => c,
                Err(error) => {
                    visit(Visit::Error {
                        path: &p,
                        nid: Some(e.nid),
                        error,
                    });
                    continue;
                }
            };
            visit(Visit::Entry {
                path: &p,
                entry: e,
                inode: &child,
            });
            if child.is_dir() {
                if depth + 1 > MAX_DEPTH {
                    visit(Visit::Error {
                        path: &p,
                        nid: Some(e.nid),
                        error: Error::Corrupt {
                            at: ferrofs::Location::nid(e.nid.0),
                            what: "directory nesting deeper than the walk limit".into(),
                        },
                    });
                } else if !seen.insert(child.nid()) {
                    visit(Visit::Error {
                        path: &p,
                        nid: Some(e.nid),
                        error: Error::Corrupt {
                            at: ferrofs::Location::nid(e.nid.0),
                            what: "directory reached twice (loop or hard-linked directory)".into(),
                        },
                    });
                } else {
                    subdirs.push((p, child, inode.nid(), depth + 1));
                }
            }
        }
        // Visit subdirectories in name order.
        stack.extend(subdirs.into_iter().rev());
    }
}
