//! FUSE node ids: the inode numbers Linux's EROFS driver gives the image's
//! inodes, so `stat` and readdir's `d_ino` under `ferrofs mount` agree with
//! a loop mount, and the way back to nids.

use ferrofs::format::superblock::Superblock;
use ferrofs::format::Nid;
use fuser::INodeNo;

/// Where the node ids of the inodes whose kernel number is 0 or 1 go (FUSE
/// keeps 0 for "none" and 1 for the root): no inode an image can address
/// has a kernel number this large (its nid would lie beyond 2^66 bytes).
const RESERVED_INOS: u64 = 1 << 62;

/// The node ids of one image.
#[derive(Clone)]
pub(crate) struct NodeIds {
    sb: Superblock,
}

impl NodeIds {
    /// The node ids of the image with superblock `sb`.
    pub(crate) fn new(sb: &Superblock) -> Self {
        Self { sb: sb.clone() }
    }

    /// The root directory's nid.
    pub(crate) fn root(&self) -> Nid {
        self.sb.root_nid()
    }

    /// Node id of `nid`: 1 for the root, otherwise the kernel's number
    /// ([`Superblock::kernel_ino`]); a kernel number of 0 or 1 moves to
    /// [`RESERVED_INOS`] + itself.
    pub(crate) fn node(&self, nid: Nid) -> INodeNo {
        if nid == self.root() {
            return INodeNo(1);
        }
        match self.sb.kernel_ino(nid) {
            k @ (0 | 1) => INodeNo(RESERVED_INOS + k),
            k => INodeNo(k),
        }
    }

    /// The inode number `stat` and `readdir` show for `nid`: its node id,
    /// but for the root, whose node id FUSE fixes at 1, the kernel's number.
    pub(crate) fn st_ino(&self, nid: Nid) -> u64 {
        if nid == self.root() {
            self.sb.kernel_ino(nid)
        } else {
            self.node(nid).0
        }
    }

    /// The nid behind node id `ino` (the inverse of [`NodeIds::node`]);
    /// none for 0.
    pub(crate) fn nid(&self, ino: INodeNo) -> Option<Nid> {
        match ino.0 {
            0 => None,
            1 => Some(self.root()),
            n if n.wrapping_sub(RESERVED_INOS) < 2 => {
                Some(self.sb.nid_of_kernel_ino(n - RESERVED_INOS))
            }
            n => Some(self.sb.nid_of_kernel_ino(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrofs::format::superblock::incompat;

    #[test]
    fn node_ids_are_the_kernels_numbers_and_map_back() {
        for (root, metabox) in [
            (36, false),
            (0, false),
            (1, false),
            (1 << 63, true),
            (36, true),
        ] {
            let mut sb = Superblock::empty();
            sb.feature_incompat = incompat::BIT48;
            sb.root_nid_64 = root;
            if metabox {
                sb.feature_incompat |= incompat::METABOX;
            }
            let ids = NodeIds::new(&sb);
            let root = Nid(root);
            assert_eq!(ids.root(), root);
            assert_eq!(ids.node(root), INodeNo(1));
            assert_eq!(ids.nid(INodeNo(1)), Some(root));
            assert_eq!(ids.nid(INodeNo(0)), None);
            assert_eq!(ids.st_ino(root), root.kernel_ino(metabox));
            let mut nids = vec![0, 1, 2, 36, 128, 1 << 31];
            if metabox {
                nids.extend([1 << 63, (1 << 63) + 1, (1 << 63) + 2, (1 << 63) + 36]);
            }
            let mut seen = std::collections::HashSet::new();
            for n in nids.into_iter().map(Nid) {
                let ino = ids.node(n);
                assert!(ino.0 >= 1, "root {root}: nid {n} -> node id 0");
                assert!(seen.insert(ino), "root {root}: node id {ino:?} twice");
                assert_eq!(ids.nid(ino), Some(n), "root {root}: nid {n}");
                let k = n.kernel_ino(metabox);
                if n != root && k > 1 {
                    assert_eq!(ino.0, k, "root {root}: nid {n}");
                }
            }
        }
    }
}
