//! The source trees of the mkfs image matrix: the corner tree's `prefixed/`
//! part (xattrs under the long prefixes) and the reverse-order copy the
//! determinism check builds from.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::corpus::{self, set_mtime};
use ferrofs_testkit::{copy, is_root, xattr, TempDir};

fn set_xattr(p: &Path, name: &str, value: &[u8]) -> io::Result<()> {
    if !is_root() && !name.starts_with("user.") {
        return Ok(()); // trusted.* needs root
    }
    xattr::set(p, name, value)
        .map_err(|e| io::Error::new(e.kind(), format!("setxattr {name} {}: {e}", p.display())))
}

/// Adds `prefixed/` to the tree: xattrs under both [`PREFIXES`](super::PREFIXES), inline and shared (carried by
/// several inodes), with an empty suffix (the name is exactly the prefix), a 255-byte name,
/// on files, a directory and a symlink, and names that merely resemble a prefix
/// (`user.long.prefixless`, `trusted.overlayfs`). Neither prefix occurs anywhere else in the
/// tree, so in an image that uses them each occurs exactly once (in the prefix table). The
/// root directory's mtime is restored afterwards.
pub(super) fn add_prefixed_xattrs(tree: &Path) -> io::Result<()> {
    let root_meta = fs::symlink_metadata(tree)?;
    let dir = tree.join("prefixed");
    fs::create_dir(&dir)?;
    let origin: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(37)).collect();
    for i in 1..=4u32 {
        let f = dir.join(format!("p{i}"));
        fs::write(&f, format!("prefixed {i}\n"))?;
        if i <= 3 {
            set_xattr(&f, "trusted.overlay.origin", &origin)?;
        }
        set_xattr(&f, "user.long.prefix.shared", b"the same on four files")?;
        set_xattr(
            &f,
            &format!("user.long.prefix.own{i}"),
            format!("v{i}").as_bytes(),
        )?;
        set_mtime(&f, 1_690_000_000 + i64::from(i), 1000 * i)?;
    }
    let p1 = dir.join("p1");
    set_xattr(&p1, "trusted.overlay.", b"empty suffix")?;
    set_xattr(&p1, "user.long.prefix.", b"")?;
    let p2 = dir.join("p2");
    set_xattr(&p2, "user.long.prefixless", b"not under the prefix")?;
    set_xattr(&p2, "trusted.overlayfs", b"neither")?;
    let p3 = dir.join("p3");
    let long = format!("user.long.prefix.{}", "x".repeat(255 - 17));
    assert_eq!(long.len(), 255);
    set_xattr(&p3, &long, b"a 255-byte name")?;
    let sub = dir.join("sub");
    fs::create_dir(&sub)?;
    set_xattr(&sub, "trusted.overlay.opaque", b"y")?;
    set_xattr(&sub, "user.long.prefix.dir", b"on a directory")?;
    set_mtime(&sub, 1_690_000_010, 0)?;
    let link = dir.join("link");
    std::os::unix::fs::symlink("p1", &link)?;
    set_xattr(&link, "trusted.overlay.redirect", b"/somewhere/else")?;
    set_mtime(&link, 1_690_000_011, 11)?;
    set_mtime(&dir, 1_690_000_012, 12)?;
    set_mtime(tree, root_meta.mtime(), root_meta.mtime_nsec() as u32)
}

/// Copies the tree in reverse creation order, onto tmpfs (`/dev/shm`) when there is one: it
/// lists directories in creation order, so the copy's listings differ from the source's
/// (ext4 lists in hash order whatever the creation order). The copy must compare equal to
/// the tree, and some directory listing must differ, or the determinism test proves nothing.
pub(super) fn make_reverse_copy(tree: &Path, work: &Path) -> Result<PathBuf, String> {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        work.to_path_buf()
    };
    // Leftovers of test processes that were killed (tmpfs is memory).
    for entry in fs::read_dir(&base).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix("ferrofs-mkfs-rev."))
            .and_then(|rest| rest.split('.').next());
        if pid.is_some_and(|pid| !Path::new("/proc").join(pid).exists()) {
            let _ = ferrofs_testkit::tmp::remove_tree(&entry.path());
        }
    }
    let mut holder = TempDir::new_in(&base, "ferrofs-mkfs-rev").map_err(|e| e.to_string())?;
    holder.keep();
    let holder = holder.path().to_path_buf();
    if !ferrofs_testkit::tmp::keep_requested() {
        ferrofs_testkit::tmp::remove_at_exit(&holder);
    }
    let rev = holder.join("tree");
    copy::copy_tree_reversed(tree, &rev).map_err(|e| format!("copy_tree_reversed: {e}"))?;
    let d = compare::compare_trees(tree, &rev, &CompareOptions::strict());
    if !d.is_empty() {
        return Err(format!(
            "the reverse copy {} differs from the tree: {}",
            rev.display(),
            d.iter()
                .take(10)
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    let differs = |rel: &str| -> bool {
        match (
            copy::readdir_order(&tree.join(rel)),
            copy::readdir_order(&rev.join(rel)),
        ) {
            (Ok(a), Ok(b)) => a != b,
            _ => false,
        }
    };
    if !["", corpus::BIG_DIR, "files/text", "names"]
        .iter()
        .any(|r| differs(r))
    {
        return Err(format!(
            "the reverse copy {} lists its directories in the same order as the tree",
            rev.display()
        ));
    }
    Ok(rev)
}
