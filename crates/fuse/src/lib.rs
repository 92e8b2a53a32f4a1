//! ferrofs-fuse: serve an EROFS image through FUSE, read-only. A thin
//! adapter: FUSE inode numbers to nids and back, attributes, directory
//! cookies, xattrs (with the size-probe protocol), errno mapping (damage →
//! EIO, unsupported → EOPNOTSUPP). All data comes from the reader, whose
//! decoded-pcluster cache is shared by the worker threads.

#![forbid(unsafe_code)]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, UNIX_EPOCH};

use ferrofs::format::inode::FileType as Ft;
use ferrofs::format::Nid;
use ferrofs::{Error, Image, Inode};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyXattr, Request,
};

/// How long the kernel may cache entries and attributes: the image never
/// changes while mounted.
pub const TTL: Duration = Duration::from_secs(24 * 3600);

/// The FUSE file system over one image.
pub struct ErofsFuse {
    image: Image,
    root: Nid,
}

impl ErofsFuse {
    pub fn new(image: Image) -> Self {
        let root = image.root_nid();
        Self { image, root }
    }

    /// FUSE ino of a nid: the root is 1, every other nid is shifted by 2.
    fn ino(&self, nid: Nid) -> INodeNo {
        if nid == self.root {
            INodeNo(1)
        } else {
            INodeNo(nid.0 + 2)
        }
    }

    fn nid(&self, ino: INodeNo) -> Result<Nid, Errno> {
        match ino.0 {
            1 => Ok(self.root),
            n if n >= 2 => Ok(Nid(n - 2)),
            _ => Err(Errno::ENOENT),
        }
    }

    fn inode(&self, ino: INodeNo) -> Result<Inode, Errno> {
        self.image.inode(self.nid(ino)?).map_err(errno)
    }

    fn attr(&self, i: &Inode) -> FileAttr {
        let t = if i.mtime >= 0 {
            UNIX_EPOCH + Duration::new(i.mtime as u64, i.mtime_nsec.min(999_999_999))
        } else {
            UNIX_EPOCH
                .checked_sub(Duration::from_secs(i.mtime.unsigned_abs()))
                .and_then(|t| t.checked_add(Duration::from_nanos(u64::from(i.mtime_nsec))))
                .unwrap_or(UNIX_EPOCH)
        };
        let (major, minor) = i.rdev;
        FileAttr {
            ino: self.ino(i.nid),
            size: i.size,
            blocks: i.size.div_ceil(512),
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind: kind(i.file_type),
            perm: i.permissions(),
            nlink: i.nlink,
            uid: i.uid,
            gid: i.gid,
            rdev: ((major & 0xfff) << 8) | (minor & 0xff) | ((minor & !0xff) << 12),
            blksize: 4096,
            flags: 0,
        }
    }
}

fn kind(t: Ft) -> FileType {
    match t {
        Ft::Regular => FileType::RegularFile,
        Ft::Directory => FileType::Directory,
        Ft::Symlink => FileType::Symlink,
        Ft::CharDevice => FileType::CharDevice,
        Ft::BlockDevice => FileType::BlockDevice,
        Ft::Fifo => FileType::NamedPipe,
        Ft::Socket => FileType::Socket,
    }
}

/// Maps reader errors to errno values.
pub fn errno(e: Error) -> Errno {
    match e {
        Error::NotFound { .. } => Errno::ENOENT,
        Error::NotADirectory { .. } => Errno::ENOTDIR,
        Error::Unsupported { .. } => Errno::EOPNOTSUPP,
        Error::WrongType { .. } => Errno::EINVAL,
        _ => Errno::EIO,
    }
}

impl Filesystem for ErofsFuse {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = (|| {
            let dir = self.inode(parent)?;
            if !dir.is_dir() {
                return Err(Errno::ENOTDIR);
            }
            let e = self
                .image
                .lookup(&dir, name.as_bytes())
                .map_err(errno)?
                .ok_or(Errno::ENOENT)?;
            self.image.inode(e.nid).map_err(errno)
        })();
        match r {
            Ok(i) => reply.entry(&TTL, &self.attr(&i), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.inode(ino) {
            Ok(i) => reply.attr(&TTL, &self.attr(&i)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self
            .inode(ino)
            .and_then(|i| self.image.read_link(&i).map_err(errno))
        {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _ = flags;
        match self.inode(ino) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let r = (|| {
            let i = self.inode(ino)?;
            let f = self.image.open_file(i).map_err(errno)?;
            let want = (size as u64).min(f.size().saturating_sub(offset)) as usize;
            let mut buf = vec![0u8; want];
            let n = f.read_at(&mut buf, offset).map_err(errno)?;
            buf.truncate(n);
            Ok(buf)
        })();
        match r {
            Ok(b) => reply.data(&b),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let r = self
            .inode(ino)
            .and_then(|i| self.image.read_dir(&i).map_err(errno));
        match r {
            Ok(entries) => {
                for (k, e) in entries.iter().enumerate().skip(offset as usize) {
                    let kind = e.file_type().map_or(FileType::RegularFile, kind);
                    if reply.add(
                        self.ino(e.nid),
                        (k + 1) as u64,
                        kind,
                        OsStr::from_bytes(&e.name),
                    ) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let sb = self.image.superblock();
        let bs = self.image.block_size().bytes() as u32;
        reply.statfs(u64::from(sb.blocks), 0, 0, sb.inos, 0, bs, 255, bs);
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let r = self
            .inode(ino)
            .and_then(|i| self.image.xattr(&i, name.as_bytes()).map_err(errno));
        match r {
            Ok(Some(v)) if size == 0 => reply.size(v.len() as u32),
            Ok(Some(v)) if v.len() <= size as usize => reply.data(&v),
            Ok(Some(_)) => reply.error(Errno::ERANGE),
            Ok(None) => reply.error(Errno::ENODATA),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let r = self
            .inode(ino)
            .and_then(|i| self.image.xattrs(&i).map_err(errno));
        match r {
            Ok(xs) => {
                let mut names = Vec::new();
                for x in xs {
                    names.extend_from_slice(&x.name);
                    names.push(0);
                }
                if size == 0 {
                    reply.size(names.len() as u32);
                } else if names.len() <= size as usize {
                    reply.data(&names);
                } else {
                    reply.error(Errno::ERANGE);
                }
            }
            Err(e) => reply.error(e),
        }
    }
}

/// Mount options and thread count of a session.
pub fn config(threads: usize, allow_other: bool) -> fuser::Config {
    let mut c = fuser::Config::default();
    c.mount_options = vec![
        fuser::MountOption::RO,
        fuser::MountOption::FSName("ferrofs".into()),
        fuser::MountOption::Subtype("erofs".into()),
        fuser::MountOption::DefaultPermissions,
    ];
    if allow_other {
        c.acl = fuser::SessionACL::All;
    }
    c.n_threads = Some(threads.max(1));
    c
}
