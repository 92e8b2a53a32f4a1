//! Setting an extracted entry's owner, xattrs, mode and times (in that
//! order), through its descriptor when there is one, and recording what
//! the target refused.

// The parent's types and helpers (this pass is one of its stages).
#[allow(clippy::wildcard_imports)]
use super::*;

/// What setting one entry's metadata did besides succeeding.
#[derive(Default)]
pub(super) struct MetaOut {
    pub(super) xattrs: u64,
    pub(super) not_restored: Vec<NotRestored>,
}

/// Records an attribute the target refused for the entry at `path`.
pub(super) fn refused(
    out: &mut MetaOut,
    target: &Path,
    path: &Path,
    what: Attribute,
    e: rustix::io::Errno,
) {
    let rel = path.strip_prefix(target).unwrap_or(path);
    out.not_restored.push(NotRestored {
        path: format!("/{}", rel.display()),
        what,
        reason: io::Error::from(e).to_string(),
    });
}

/// Sets owner, xattrs, mode and times of the entry at `path`, through its
/// open descriptor `fd` when there is one (a regular file the walk
/// created), else by path without following a symlink.
pub(super) fn set_metadata(
    image: &Image,
    opts: &Options,
    target: &Path,
    path: &Path,
    inode: &Inode,
    fd: Option<&fs::File>,
    out: &mut MetaOut,
) -> Result<(), ExtractError> {
    let is_link = inode.is_symlink();
    // Order matters: chown clears security.capability and setuid bits,
    // so owners first, then xattrs, then the mode, then times.
    if opts.owners {
        let r = if inode.uid() == u32::MAX || inode.gid() == u32::MAX {
            // -1 is chown's "leave it as it is": no owner can be set to it
            // (and rustix refuses to make such an id).
            Err(rustix::io::Errno::INVAL)
        } else {
            let (uid, gid) = (
                Some(rustix::fs::Uid::from_raw(inode.uid())),
                Some(rustix::fs::Gid::from_raw(inode.gid())),
            );
            match fd {
                Some(fd) => rustix::fs::fchown(fd, uid, gid),
                None => rustix::fs::chownat(CWD, path, uid, gid, AtFlags::SYMLINK_NOFOLLOW),
            }
        };
        if let Err(e) = r {
            let what = Attribute::Owner {
                uid: inode.uid(),
                gid: inode.gid(),
            };
            refused(out, target, path, what, e);
        }
    }
    if opts.xattrs {
        let xs = image
            .raw()
            .xattrs(inode)
            .map_err(|source| ExtractError::Image {
                path: path.display().to_string(),
                source,
            })?;
        for x in xs {
            let flags = rustix::fs::XattrFlags::empty();
            let r = match fd {
                Some(fd) => rustix::fs::fsetxattr(fd, x.name.as_slice(), &x.value, flags),
                None => rustix::fs::lsetxattr(path, x.name.as_slice(), &x.value, flags),
            };
            match r {
                Ok(()) => out.xattrs += 1,
                Err(e) => {
                    let name = String::from_utf8_lossy(&x.name).into_owned();
                    refused(out, target, path, Attribute::Xattr(name), e);
                }
            }
        }
    }
    if !is_link {
        // After chown, which clears setuid/setgid.
        let mode = Mode::from_raw_mode(u32::from(inode.permissions()));
        match fd {
            Some(fd) => rustix::fs::fchmod(fd, mode),
            None => rustix::fs::chmod(path, mode),
        }
        .map_err(rx_err(path))?;
    }
    let t = Timespec {
        tv_sec: inode.mtime(),
        tv_nsec: i64::from(inode.mtime_nsec()).min(999_999_999) as _,
    };
    let times = Timestamps {
        last_access: t,
        last_modification: t,
    };
    match fd {
        Some(fd) => rustix::fs::futimens(fd, &times),
        None => rustix::fs::utimensat(CWD, path, &times, AtFlags::SYMLINK_NOFOLLOW),
    }
    .map_err(rx_err(path))?;
    Ok(())
}
