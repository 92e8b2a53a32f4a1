//! Comparing two images: which paths were added, removed or changed
//! (contents, type, permissions, owner, mtime, xattrs, device number), and
//! how many blocks of the two image files differ on disk (what a
//! block-level delta between them has to carry).

use std::collections::{BTreeMap, HashMap};

use ferrofs::format::Nid;
use ferrofs::{raw::Inode, Image};

use crate::walk::{walk, Visit};

/// What one path is in an image, as far as a comparison looks.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    mode: u16,
    uid: u32,
    gid: u32,
    mtime: (i64, u32),
    rdev: (u32, u32),
    size: u64,
    /// SHA-256 of the data (regular files, symlink targets); zeros else.
    content: [u8; 32],
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A path present in both images that differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changed {
    pub path: Vec<u8>,
    /// What differs: "type", "content", "mode", "owner", "mtime", "xattrs",
    /// "rdev".
    pub what: Vec<&'static str>,
}

/// The differences between two images.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub added: Vec<Vec<u8>>,
    pub removed: Vec<Vec<u8>>,
    pub changed: Vec<Changed>,
    /// Blocks of the larger image file, and how many of them differ (a
    /// block only one file has counts as differing).
    pub blocks: u64,
    pub blocks_differ: u64,
    pub block_size: u64,
    /// What could not be read, by path; those paths are left out.
    pub errors: Vec<String>,
}

/// Compares the trees of `old` and `new`, and their stored blocks.
pub fn diff(old: &Image, new: &Image) -> ferrofs::Result<Report> {
    let (a, mut errors) = index(old, "old");
    let (b, e2) = index(new, "new");
    errors.extend(e2);
    let mut r = Report {
        errors,
        block_size: new.block_size().bytes(),
        ..Report::default()
    };
    for (path, na) in &a {
        match b.get(path) {
            None => r.removed.push(path.clone()),
            Some(nb) => {
                let what = differences(na, nb);
                if !what.is_empty() {
                    r.changed.push(Changed {
                        path: path.clone(),
                        what,
                    });
                }
            }
        }
    }
    r.added = b.keys().filter(|p| !a.contains_key(*p)).cloned().collect();
    (r.blocks, r.blocks_differ) = blocks_differ(old, new, r.block_size)?;
    Ok(r)
}

fn differences(a: &Node, b: &Node) -> Vec<&'static str> {
    let mut what = Vec::new();
    if a.mode & 0o170000 != b.mode & 0o170000 {
        what.push("type");
    }
    if a.size != b.size || a.content != b.content {
        what.push("content");
    }
    for (differs, name) in [
        (a.mode & 0o7777 != b.mode & 0o7777, "mode"),
        ((a.uid, a.gid) != (b.uid, b.gid), "owner"),
        (a.mtime != b.mtime, "mtime"),
        (a.xattrs != b.xattrs, "xattrs"),
        (a.rdev != b.rdev, "rdev"),
    ] {
        if differs {
            what.push(name);
        }
    }
    what
}

/// Every path of `image` (the root is "/") and what it is.
fn index(image: &Image, which: &str) -> (BTreeMap<Vec<u8>, Node>, Vec<String>) {
    let mut nodes = BTreeMap::new();
    let mut errors = Vec::new();
    let mut sums: HashMap<Nid, [u8; 32]> = HashMap::new();
    let mut add = |path: &[u8], inode: &Inode, errors: &mut Vec<String>| {
        let mut shown = b"/".to_vec();
        shown.extend_from_slice(path);
        match node(image, inode, &mut sums) {
            Ok(n) => {
                nodes.insert(shown, n);
            }
            Err(e) => errors.push(format!("{which}: {}: {e}", String::from_utf8_lossy(&shown))),
        }
    };
    walk(image, |v| match v {
        Visit::Dir { path, inode, .. } if path.is_empty() => add(path, inode, &mut errors),
        Visit::Entry { path, inode, .. } => add(path, inode, &mut errors),
        Visit::Error { path, error, .. } => errors.push(format!(
            "{which}: /{}: {error}",
            String::from_utf8_lossy(path)
        )),
        Visit::Dir { .. } => {}
    });
    (nodes, errors)
}

fn node(image: &Image, inode: &Inode, sums: &mut HashMap<Nid, [u8; 32]>) -> ferrofs::Result<Node> {
    let content = if inode.is_reg() || inode.is_symlink() {
        match sums.get(&inode.nid()) {
            Some(s) => *s,
            None => {
                let s = crate::digest::sha256(image, inode)?.ok_or_else(|| {
                    ferrofs::Error::Corrupt {
                        at: ferrofs::Location::nid(inode.nid().0),
                        what: "data ends before the file's size".into(),
                    }
                })?;
                sums.insert(inode.nid(), s);
                s
            }
        }
    } else {
        [0; 32]
    };
    let xattrs = image
        .raw()
        .xattrs(inode)?
        .into_iter()
        .map(|x| (x.name, x.value))
        .collect();
    Ok(Node {
        mode: inode.mode(),
        uid: inode.uid(),
        gid: inode.gid(),
        mtime: (inode.mtime(), inode.mtime_nsec()),
        rdev: inode.rdev(),
        size: if inode.is_dir() { 0 } else { inode.size() },
        content,
        xattrs,
    })
}

/// (blocks of the larger image, blocks that differ): the two images'
/// sources compared in blocks of `bs` bytes.
fn blocks_differ(a: &Image, b: &Image, bs: u64) -> ferrofs::Result<(u64, u64)> {
    let bs = bs.max(512);
    let (la, lb) = (a.source_len(), b.source_len());
    let total = la.max(lb).div_ceil(bs);
    // Read in runs of blocks: remote sources fetch in large requests.
    const RUN: u64 = 256;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    let mut differ = 0u64;
    let mut block = 0u64;
    while block < total {
        let n = RUN.min(total - block);
        let start = block * bs;
        let end = start.saturating_add(n * bs);
        let read = |img: &Image, len: u64, buf: &mut Vec<u8>| -> ferrofs::Result<()> {
            let upto = end.min(len).max(start);
            buf.resize((upto - start) as usize, 0);
            img.read_source(buf, start)
        };
        read(a, la, &mut x)?;
        read(b, lb, &mut y)?;
        for k in 0..n as usize {
            let r = k * bs as usize..(k + 1) * bs as usize;
            let p = x.get(r.start..r.end.min(x.len())).unwrap_or(&[]);
            let q = y.get(r.start..r.end.min(y.len())).unwrap_or(&[]);
            if p != q {
                differ += 1;
            }
        }
        block += n;
    }
    Ok((total, differ))
}
