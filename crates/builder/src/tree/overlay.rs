//! overlayfs's markers in a tree: whiteouts (character devices 0:0), the
//! opaque-directory xattr, and the empty `trusted.overlay.origin` that
//! mkfs.erofs gives a directory holding whiteouts, so that overlayfs
//! (since Linux 6.7, which no longer iterates such a directory directly)
//! hides them instead of listing them as `c?????????` entries.

use super::{Inode, Kind, Tree};

/// overlayfs's opaque-directory xattr (value `y`).
pub(crate) const OVL_OPAQUE: &[u8] = b"trusted.overlay.opaque";
/// overlayfs's origin xattr; empty, it only says "copied up".
pub(crate) const OVL_ORIGIN: &[u8] = b"trusted.overlay.origin";

/// Whether `ino` is an overlayfs whiteout.
pub(crate) fn is_whiteout(ino: &Inode) -> bool {
    matches!(ino.kind, Kind::CharDevice { major: 0, minor: 0 })
}

/// Gives directory `ino` an empty origin xattr unless it has one.
pub(crate) fn add_origin(ino: &mut Inode) {
    if !ino.xattrs.iter().any(|(n, _)| n == OVL_ORIGIN) {
        ino.xattrs.push((OVL_ORIGIN.to_vec(), Vec::new()));
        ino.xattrs.sort();
    }
}

/// A directory build of an overlay upper directory, as mkfs.erofs 1.9
/// makes it: every directory that holds a whiteout gets an empty origin
/// (replacing one it had); other directories keep theirs.
pub(crate) fn mark_upper_dirs(tree: &mut Tree) {
    for id in 0..tree.inodes.len() {
        let Some(ino) = tree.inodes.get(id) else {
            continue;
        };
        let Kind::Dir { entries } = &ino.kind else {
            continue;
        };
        let holds_whiteout = entries
            .iter()
            .any(|(_, c)| tree.inodes.get(*c).is_some_and(is_whiteout));
        if holds_whiteout {
            if let Some(ino) = tree.inodes.get_mut(id) {
                ino.xattrs.retain(|(n, _)| n != OVL_ORIGIN);
                add_origin(ino);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn node(kind: Kind, xattrs: Vec<(Vec<u8>, Vec<u8>)>) -> Inode {
        let mut i = Inode::new(kind, b"x", 0, PathBuf::from("x"));
        i.xattrs = xattrs;
        i
    }

    #[test]
    fn directories_with_whiteouts_get_an_empty_origin() {
        let dir = |entries: Vec<(Vec<u8>, usize)>, x| node(Kind::Dir { entries }, x);
        let wh = node(Kind::CharDevice { major: 0, minor: 0 }, vec![]);
        let dev = node(Kind::CharDevice { major: 1, minor: 3 }, vec![]);
        let origin = vec![(OVL_ORIGIN.to_vec(), b"\x00\xfb lower fh".to_vec())];
        let mut tree = Tree {
            inodes: vec![
                dir(
                    vec![(b"a".to_vec(), 1), (b"b".to_vec(), 2), (b"c".to_vec(), 3)],
                    vec![],
                ),
                dir(vec![(b"gone".to_vec(), 5)], vec![]),
                dir(vec![(b"null".to_vec(), 6)], vec![]),
                dir(vec![(b"gone".to_vec(), 5)], origin.clone()),
                dir(vec![], origin.clone()),
                wh,
                dev,
            ],
            root: 0,
            devices: Vec::new(),
        };
        mark_upper_dirs(&mut tree);
        let empty = vec![(OVL_ORIGIN.to_vec(), Vec::new())];
        assert!(tree.inodes[0].xattrs.is_empty(), "root holds no whiteout");
        assert_eq!(tree.inodes[1].xattrs, empty, "holds a whiteout");
        assert!(
            tree.inodes[2].xattrs.is_empty(),
            "a 1:3 device is no whiteout"
        );
        assert_eq!(tree.inodes[3].xattrs, empty, "its own origin gives way");
        assert_eq!(tree.inodes[4].xattrs, origin, "no whiteout: kept");
    }
}
