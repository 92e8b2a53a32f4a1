//! Relabelling: what the options make of the source's owners, times and
//! labels, in one place for every build. Android's tables (`--fs-config-file`,
//! `--file-contexts`) change the tree itself; `--all-root`, `--force-uid/gid`,
//! the id offsets and the time policy are applied to each inode as it is
//! planned, or, for an incremental build, to the layer's inodes only (the
//! image's keep what they have).

use crate::error::Result;
use crate::options::{BuildOptions, TimePolicy};
use crate::tree::{InodeId, Tree};

/// Applies Android's fs_config and file_contexts tables to the tree:
/// owners, modes, capabilities and SELinux labels.
pub(crate) fn apply_tables(tree: &mut Tree, opts: &BuildOptions) -> Result<()> {
    if let Some(fc) = &opts.fs_config {
        fc.apply(tree, &opts.mount_point)?;
    }
    if let Some(fc) = &opts.file_contexts {
        fc.apply(tree, &opts.mount_prefix());
    }
    Ok(())
}

/// The owner an inode is stored with: the source's (`uid`, `gid`), or
/// what `--all-root`, `--force-uid/gid` and the id offsets make of it.
pub(crate) fn owner(uid: u32, gid: u32, opts: &BuildOptions) -> (u32, u32) {
    let (uid, gid) = match opts.all_root {
        true => (0, 0),
        false => (opts.force_uid.unwrap_or(uid), opts.force_gid.unwrap_or(gid)),
    };
    // Offsets wrap around like mkfs.erofs's (ids are 32-bit).
    (
        uid.wrapping_add(opts.uid_offset),
        gid.wrapping_add(opts.gid_offset),
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
pub(crate) fn layer(tree: &mut Tree, ids: &[InodeId], opts: &BuildOptions) {
    let newest = ids.iter().map(|&i| tree.inode(i).mtime).max().unwrap_or(0);
    for &id in ids {
        let ino = tree.inode_mut(id);
        (ino.uid, ino.gid) = owner(ino.uid, ino.gid, opts);
        (ino.mtime, ino.mtime_nsec) = time(opts.time, ino.mtime, ino.mtime_nsec, newest);
    }
}
