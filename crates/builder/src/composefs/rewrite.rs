//! The changes mkcomposefs makes to a tree before laying it out: the
//! format version (a whiteout raises it to 1 when allowed), source
//! `trusted.overlay.*` xattrs escaped, `metacopy` and `redirect` xattrs on
//! files whose data lives in the object store, whiteouts (character
//! devices 0/0) turned into escaped whiteout files, the root made opaque
//! and given the `00`…`ff` whiteouts that hide the store's directories.

use super::layout::chunking;
use super::node::{valid_type, Node, Tree, S_IFCHR, S_IFMT, S_IFREG};
use crate::error::{BuildError, Result};

/// Most chunk indexes a file's inline chunk table may hold.
pub(crate) const MAX_CHUNKS: u64 = 1024;

const OVERLAY_PREFIX: &[u8] = b"trusted.overlay.";
const ESCAPED_PREFIX: &[u8] = b"trusted.overlay.overlay.";

/// The newest format version mkcomposefs 1.0.8 writes.
pub const VERSION_MAX: u32 = 1;

fn is_whiteout(n: &Node) -> bool {
    n.link_to.is_none() && n.file_type() == S_IFCHR && n.rdev == 0
}

/// The version written: `min`, raised to 1 if the tree has a whiteout and
/// `max` allows it.
pub(crate) fn choose_version(tree: &Tree, min: u32, max: u32) -> Result<u32> {
    if min > VERSION_MAX || max > VERSION_MAX {
        return Err(BuildError::Option(format!(
            "format version {} is not supported (at most {VERSION_MAX})",
            min.max(max)
        )));
    }
    let max = max.max(min);
    if min < 1 && max >= 1 && tree.nodes.iter().any(is_whiteout) {
        return Ok(1);
    }
    Ok(min)
}

/// Applies every rewrite, in mkcomposefs's order.
pub(crate) fn rewrite(tree: &mut Tree, version: u32) -> Result<()> {
    // Parents come before their children in the arena, so a whiteout's
    // marks on its directory land after that directory's own escaping.
    for i in 0..tree.nodes.len() {
        if tree.node(i).link_to.is_some() {
            continue;
        }
        validate(tree, i)?;
        overlay_xattrs(tree, i, version).map_err(|r| BuildError::input(tree.path_of(i), r))?;
    }
    let root = tree.node_mut(0);
    root.set_xattr(b"trusted.overlay.opaque", b"y")
        .map_err(|r| BuildError::input("/", r))?;
    add_root_whiteouts(tree).map_err(|r| BuildError::input("/", r))
}

fn validate(tree: &Tree, i: usize) -> Result<()> {
    let n = tree.node(i);
    if !valid_type(n.mode) {
        return Err(BuildError::input(
            tree.path_of(i),
            format!("invalid mode {:o}", n.mode),
        ));
    }
    if n.file_type() == S_IFREG && n.size > 0 && n.content.is_none() {
        let (_, count) = chunking(n.size);
        if count > MAX_CHUNKS {
            return Err(BuildError::input(tree.path_of(i), "file too large"));
        }
    }
    Ok(())
}

/// The overlayfs xattrs of one node (and its directory's, for a whiteout).
fn overlay_xattrs(tree: &mut Tree, i: usize, version: u32) -> Result<(), String> {
    let node = tree.node_mut(i);
    for x in &mut node.xattrs {
        if let Some(rest) = x.key.strip_prefix(OVERLAY_PREFIX) {
            x.key = [ESCAPED_PREFIX, rest].concat();
        }
    }
    if node.file_type() == S_IFREG && node.size > 0 && node.content.is_none() {
        let value = match node.digest {
            Some(d) => [&[0u8, 36, 0, 1][..], &d].concat(),
            None => Vec::new(),
        };
        node.set_xattr(b"trusted.overlay.metacopy", &value)?;
        if let Some(p) = node.payload.as_ref().filter(|p| !p.is_empty()) {
            let redirect = [b"/", p.as_slice()].concat();
            node.set_xattr(b"trusted.overlay.redirect", &redirect)?;
        }
    }
    if !is_whiteout(node) {
        return Ok(());
    }
    node.size = 0;
    node.mode = S_IFREG | (node.mode & !S_IFMT);
    node.set_xattr(b"trusted.overlay.overlay.whiteout", b"")?;
    node.set_xattr(b"user.overlay.whiteout", b"")?;
    let parent = tree.node_mut(node_parent(tree, i));
    parent.set_xattr(b"trusted.overlay.overlay.whiteouts", b"")?;
    parent.set_xattr(b"user.overlay.whiteouts", b"")?;
    if version >= 1 {
        parent.set_xattr(b"trusted.overlay.overlay.opaque", b"x")?;
        parent.set_xattr(b"user.overlay.opaque", b"x")?;
    }
    Ok(())
}

fn node_parent(tree: &Tree, i: usize) -> usize {
    tree.node(i).parent
}

/// The whiteouts `00`…`ff` at the root, for names not taken.
fn add_root_whiteouts(tree: &mut Tree) -> Result<(), String> {
    let root = tree.node(0).clone();
    let selinux = root.xattr(b"security.selinux").map(<[u8]>::to_vec);
    for b in 0..=255u8 {
        let name = format!("{b:02x}");
        if tree.lookup(0, name.as_bytes()).is_some() {
            continue;
        }
        let mut n = Node::with_mode(S_IFCHR | 0o644);
        n.uid = root.uid;
        n.gid = root.gid;
        n.mtime_sec = root.mtime_sec;
        n.mtime_nsec = root.mtime_nsec;
        if let Some(v) = &selinux {
            n.set_xattr(b"security.selinux", v)?;
        }
        tree.add_child(0, name.as_bytes(), n)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
