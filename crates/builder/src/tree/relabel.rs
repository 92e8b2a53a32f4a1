//! Relabelling: what the options make of the source's owners and times,
//! in one place for every build (Android's tables, `--fs-config-file` and
//! `--file-contexts`, are `fsconfig` and `selabel` beside it). The owner
//! map and the time policy are applied to each inode as it is planned,
//! or, for an incremental build, to the layer's inodes only (the image's
//! keep what they have).

use crate::tree::{InodeId, Tree};

/// How inode timestamps are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimePolicy {
    /// Keep every file's mtime (seconds and nanoseconds). The image's
    /// epoch is the most common mtime, so those inodes can be compact.
    #[default]
    Keep,
    /// `-T T`: every file gets mtime T; the epoch is T.
    Fixed(i64),
    /// `-T T --mkfs-time`: keep mtimes; the epoch (build time) is T.
    BuildTimeOnly(i64),
    /// `SOURCE_DATE_EPOCH=T`: mtimes later than T are clamped to T; the
    /// epoch is T.
    Clamp(i64),
    /// `--ignore-mtime`: every file gets the epoch (the newest mtime).
    IgnoreMtime,
}

/// How owners are mapped: `--all-root`, `--force-uid/gid`, and the
/// offsets added to the ids (after the others).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct OwnerMap {
    pub(crate) all_root: bool,
    pub(crate) force_uid: Option<u32>,
    pub(crate) force_gid: Option<u32>,
    pub(crate) uid_offset: u32,
    pub(crate) gid_offset: u32,
}

/// The owner an inode is stored with: the source's (`uid`, `gid`), or
/// what `--all-root`, `--force-uid/gid` and the id offsets make of it.
pub(crate) fn owner(uid: u32, gid: u32, map: &OwnerMap) -> (u32, u32) {
    let (uid, gid) = match map.all_root {
        true => (0, 0),
        false => (map.force_uid.unwrap_or(uid), map.force_gid.unwrap_or(gid)),
    };
    // Offsets wrap around like mkfs.erofs's (ids are 32-bit).
    (
        uid.wrapping_add(map.uid_offset),
        gid.wrapping_add(map.gid_offset),
    )
}

/// The mtime an inode is stored with under `policy` (`newest`: the
/// tree's newest mtime).
pub(crate) fn time(policy: TimePolicy, mtime: i64, nsec: u32, newest: i64) -> (i64, u32) {
    match policy {
        TimePolicy::Keep | TimePolicy::BuildTimeOnly(_) => (mtime, nsec),
        TimePolicy::Fixed(t) => (t, 0),
        TimePolicy::Clamp(t) if mtime > t || (mtime == t && nsec > 0) => (t, 0),
        TimePolicy::Clamp(_) => (mtime, nsec),
        TimePolicy::IgnoreMtime => (newest, 0),
    }
}

/// Maps the owners and times of the inodes `ids` (an incremental build's
/// new or changed ones) as the options say, in the tree itself: they are
/// then planned with neutral options, like the image's inodes.
pub(crate) fn layer(tree: &mut Tree, ids: &[InodeId], owners: &OwnerMap, policy: TimePolicy) {
    let newest = ids.iter().map(|&i| tree.inode(i).mtime).max().unwrap_or(0);
    for &id in ids {
        let ino = tree.inode_mut(id);
        (ino.uid, ino.gid) = owner(ino.uid, ino.gid, owners);
        (ino.mtime, ino.mtime_nsec) = time(policy, ino.mtime, ino.mtime_nsec, newest);
    }
}
