//! Copying a tree with every entry created in the opposite order (for determinism tests).
//!
//! [`copy_tree_reversed`] reproduces everything [`crate::compare_trees`] looks at (contents with
//! their holes, modes, owners, mtimes with nanoseconds, xattrs including ACLs and
//! `security.capability`, hardlink groups, device numbers, symlink targets), but creates the
//! entries, and sets each entry's xattrs, in the reverse of the sorted walk order. On a file
//! system that lists directories in creation order (tmpfs) the copy's directory listings,
//! inode numbers and xattr listing order therefore all differ from the source's.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::compare::list_tree;
use crate::corpus::set_mtime;

fn annotate(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// The data ranges `(start, end)` of `f` (of length `len`), found with `SEEK_DATA`/`SEEK_HOLE`.
pub fn data_ranges(f: &File, len: u64) -> io::Result<Vec<(u64, u64)>> {
    let fd = f.as_raw_fd();
    let mut out = Vec::new();
    let mut pos = 0u64;
    while pos < len {
        // SAFETY: lseek on a valid descriptor owned by `f`; no memory is passed.
        let start = unsafe { libc::lseek(fd, pos as libc::off_t, libc::SEEK_DATA) };
        if start < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENXIO) {
                break;
            }
            return Err(e);
        }
        let start = start as u64;
        if start >= len {
            break;
        }
        // SAFETY: as above.
        let end = unsafe { libc::lseek(fd, start as libc::off_t, libc::SEEK_HOLE) };
        if end < 0 {
            return Err(io::Error::last_os_error());
        }
        let end = (end as u64).min(len);
        out.push((start, end));
        pos = end;
    }
    Ok(out)
}

/// Copies a regular file's data range by range, so holes stay holes.
fn copy_file_data(src: &Path, dst: &Path, len: u64) -> io::Result<()> {
    let mut from = File::open(src).map_err(|e| annotate(e, "open", src))?;
    let mut to = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dst)
        .map_err(|e| annotate(e, "create", dst))?;
    let ranges = data_ranges(&from, len).map_err(|e| annotate(e, "seek data/hole", src))?;
    let mut buf = vec![0u8; 1 << 20];
    use std::io::Seek;
    for (start, end) in ranges {
        from.seek(io::SeekFrom::Start(start))?;
        to.seek(io::SeekFrom::Start(start))?;
        let mut left = end - start;
        while left > 0 {
            let n = (left as usize).min(buf.len());
            from.read_exact(&mut buf[..n])
                .map_err(|e| annotate(e, "read", src))?;
            to.write_all(&buf[..n])
                .map_err(|e| annotate(e, "write", dst))?;
            left -= n as u64;
        }
    }
    to.set_len(len)?;
    Ok(())
}

fn mknod(path: &Path, mode: u32, rdev: u64) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    // SAFETY: c is a valid NUL-terminated path.
    let rc = unsafe { libc::mknod(c.as_ptr(), mode as libc::mode_t, rdev as libc::dev_t) };
    if rc == 0 {
        Ok(())
    } else {
        Err(annotate(io::Error::last_os_error(), "mknod", path))
    }
}

/// Owner (when root), xattrs (in reverse listing order) and permission bits of `dst` from
/// `src`; xattrs `dst` has that `src` lacks (e.g. inherited default ACLs) are removed. The
/// owner goes first because chown clears `security.capability` and setuid/setgid bits.
fn copy_metadata(src: &Path, dst: &Path, m: &fs::Metadata) -> io::Result<()> {
    if crate::is_root() {
        std::os::unix::fs::lchown(dst, Some(m.uid()), Some(m.gid()))
            .map_err(|e| annotate(e, "lchown", dst))?;
    }
    let names: Vec<_> = xattr::list(src)
        .map_err(|e| annotate(e, "listxattr", src))?
        .collect();
    for name in xattr::list(dst).map_err(|e| annotate(e, "listxattr", dst))? {
        if !names.contains(&name) {
            xattr::remove(dst, &name).map_err(|e| annotate(e, "removexattr", dst))?;
        }
    }
    for name in names.iter().rev() {
        let value = xattr::get(src, name)
            .map_err(|e| annotate(e, "getxattr", src))?
            .unwrap_or_default();
        xattr::set(dst, name, &value)
            .map_err(|e| annotate(e, &format!("setxattr {}", name.to_string_lossy()), dst))?;
    }
    if !m.file_type().is_symlink() {
        fs::set_permissions(dst, fs::Permissions::from_mode(m.mode() & 0o7777))
            .map_err(|e| annotate(e, "chmod", dst))?;
    }
    Ok(())
}

/// Copies the tree `src` to `dst` (which must not exist), creating every entry in the reverse
/// of the sorted walk order (directories necessarily before their contents, but siblings in
/// reverse), preserving everything [`crate::compare_trees`] compares. Foreign owners, device
/// nodes and `trusted.*` xattrs need root, as for the source tree.
pub fn copy_tree_reversed(src: &Path, dst: &Path) -> io::Result<()> {
    let entries = list_tree(src)?;
    fs::create_dir(dst).map_err(|e| annotate(e, "mkdir", dst))?;
    // Directories: shallowest first, siblings (and cousins) in reverse name order.
    let mut dirs: Vec<&(PathBuf, fs::Metadata)> =
        entries.iter().filter(|(_, m)| m.is_dir()).collect();
    dirs.sort_by(|a, b| {
        a.0.components()
            .count()
            .cmp(&b.0.components().count())
            .then_with(|| b.0.cmp(&a.0))
    });
    for (rel, _) in &dirs {
        let p = dst.join(rel);
        fs::create_dir(&p).map_err(|e| annotate(e, "mkdir", &p))?;
    }
    // Everything else in reverse walk order; the first name of a hardlink group to be
    // created becomes the inode, later names link to it.
    let mut first_name: HashMap<(u64, u64), PathBuf> = HashMap::new();
    for (rel, m) in entries.iter().rev().filter(|(_, m)| !m.is_dir()) {
        let (s, d) = (src.join(rel), dst.join(rel));
        let key = (m.dev(), m.ino());
        if m.nlink() > 1 {
            if let Some(existing) = first_name.get(&key) {
                fs::hard_link(existing, &d).map_err(|e| annotate(e, "link", &d))?;
                continue;
            }
            first_name.insert(key, d.clone());
        }
        let ft = m.file_type();
        if ft.is_file() {
            copy_file_data(&s, &d, m.len())?;
        } else if ft.is_symlink() {
            let target = fs::read_link(&s).map_err(|e| annotate(e, "readlink", &s))?;
            std::os::unix::fs::symlink(&target, &d).map_err(|e| annotate(e, "symlink", &d))?;
        } else if ft.is_fifo() || ft.is_socket() || ft.is_char_device() || ft.is_block_device() {
            mknod(&d, m.mode(), m.rdev())?;
        } else {
            return Err(io::Error::other(format!(
                "{}: unknown file type",
                s.display()
            )));
        }
        copy_metadata(&s, &d, m)?;
    }
    // Directory metadata after all their contents exist (a default ACL set now is not
    // inherited by the copies, which carry their own ACL xattrs anyway).
    for (rel, m) in dirs.iter().rev() {
        copy_metadata(&src.join(rel), &dst.join(rel), m)?;
    }
    let root_meta = fs::symlink_metadata(src)?;
    copy_metadata(src, dst, &root_meta)?;
    // Times last: creating entries changed their directories' mtimes.
    for (rel, m) in entries.iter().rev() {
        set_mtime(&dst.join(rel), m.mtime(), m.mtime_nsec() as u32)?;
    }
    set_mtime(dst, root_meta.mtime(), root_meta.mtime_nsec() as u32)
}

/// The names of `dir`'s entries in the order the file system lists them.
pub fn readdir_order(dir: &Path) -> io::Result<Vec<std::ffi::OsString>> {
    fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_exactly_in_reverse() {
        let t = crate::TempDir::new("ferrofs-copy-test").unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        fs::create_dir_all(a.join("sub/deeper")).unwrap();
        fs::write(a.join("sub/f"), b"hello").unwrap();
        fs::write(a.join("g"), b"same").unwrap();
        fs::hard_link(a.join("g"), a.join("sub/g2")).unwrap();
        std::os::unix::fs::symlink("sub/f", a.join("l")).unwrap();
        let f = File::create(a.join("sparse")).unwrap();
        f.set_len(1 << 20).unwrap();
        use std::os::unix::fs::FileExt;
        f.write_all_at(b"data", 512 << 10).unwrap();
        drop(f);
        xattr::set(a.join("g"), "user.x", b"1").unwrap_or(());
        fs::set_permissions(a.join("sub"), fs::Permissions::from_mode(0o750)).unwrap();
        set_mtime(&a.join("sub"), 12345, 678).unwrap();
        copy_tree_reversed(&a, &b).unwrap();
        let d = crate::compare_trees(&a, &b, &crate::CompareOptions::strict());
        assert!(d.is_empty(), "{d:#?}");
        let m = fs::metadata(b.join("sparse")).unwrap();
        assert!(m.blocks() * 512 < m.len(), "holes were filled: {m:?}");
    }
}
