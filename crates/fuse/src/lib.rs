//! ferrofs-fuse: serve an EROFS image through FUSE, read-only, behind one
//! call: [`mount`] (checks, detaching, signals, the session; [`spawn`] for
//! a mount served by threads of the caller). Below it, a thin adapter:
//! FUSE node ids to nids and back (the kernel's inode numbers, so `stat`
//! agrees with a loop mount), attributes, directory
//! cookies, xattrs (with the size-probe protocol), errno mapping (damage →
//! EIO, unsupported → EOPNOTSUPP). All data comes from the reader, whose
//! decoded-pcluster cache (single-flight, byte budget) is shared by the
//! worker threads.
//!
//! Open files and directories get a handle: `open` maps the file once and
//! every `read` reuses that mapping; `opendir` reads the directory once and
//! `readdir`/`readdirplus` page through it by index (the cookie of entry
//! `k` is `k + 1`). Each worker thread keeps one reply buffer for reads.
//!
//! ```no_run
//! use std::path::Path;
//!
//! let image = ferrofs::Image::open_path("system.erofs")?;
//! let options = ferrofs_fuse::MountOptions {
//!     foreground: true,
//!     ..Default::default()
//! };
//! // Serves until `umount /mnt/system` or ^C.
//! ferrofs_fuse::mount(image, Path::new("/mnt/system"), &options)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod convert;
mod ids;
mod mount;
mod mountinfo;
mod objects;
mod prefetch;
mod trace;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use convert::{errno, kind};
use ferrofs::format::Nid;
use ferrofs::{raw::Inode, raw::InodeFile as File, raw::RawDirEntry as DirEntry, Image};
use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyXattr, Request,
};
use ids::NodeIds;
use objects::Objects;
use prefetch::{Prefetch, STORE_READS_UNDER};
use trace::Tracer;

pub use mount::{mount, prepare, serves_here, spawn, MountError, MountOptions, Mounted};

/// How long the kernel may cache entries and attributes: the image never
/// changes while mounted.
const TTL: Duration = Duration::from_secs(24 * 3600);

/// Largest read the kernel sends with `max_pages` (1 MiB); the per-thread
/// reply buffer never grows beyond what one request asks for.
const MAX_READ: usize = 1 << 20;

thread_local! {
    /// Reply buffer of this worker thread, reused across reads.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// What an open handle refers to.
#[derive(Clone)]
enum Handle {
    File(File),
    Dir(Arc<[DirEntry]>),
}

#[derive(Default)]
struct Handles {
    next: u64,
    open: HashMap<u64, Handle>,
}

/// The FUSE file system over one image.
pub(crate) struct ErofsFuse {
    image: Image,
    ids: NodeIds,
    handles: Mutex<Handles>,
    trace: Option<Mutex<Tracer>>,
    /// Pushes the next files of a directory into the page cache.
    prefetch: Option<Prefetch>,
    /// Open files by ino for reads that come without a handle (the kernel
    /// sends no `open` once we answer it with ENOSYS).
    files: Mutex<HashMap<u64, File>>,
    /// A composefs image's object store: set, the mount shows the
    /// overlay view (whiteouts hidden, private xattrs hidden or
    /// unescaped, contents of metacopy files from their objects).
    objects: Option<Objects>,
}

/// Most files kept mapped for handle-less reads.
const OPEN_FILES: usize = 64;
impl ErofsFuse {
    pub(crate) fn new(image: Image) -> Self {
        let ids = NodeIds::new(image.superblock());
        Self {
            image,
            ids,
            handles: Mutex::new(Handles::default()),
            trace: None,
            prefetch: None,
            files: Mutex::new(HashMap::new()),
            objects: None,
        }
    }

    /// Serves the image as overlayfs serves a composefs image over the
    /// object store `dir` (see [`Objects`]).
    pub(crate) fn with_objects(mut self, dir: std::path::PathBuf, verify: bool) -> Self {
        self.objects = Some(Objects::new(dir, verify));
        self
    }

    /// Whether the overlay view hides this entry (a whiteout).
    fn hidden(&self, i: &Inode) -> bool {
        self.objects.is_some() && ferrofs::composefs::is_whiteout(i)
    }

    /// Turns on prefetch into the page cache (the tree walk and small reads) with
    /// `budget` bytes per directory. Notifications go out once
    /// [`ErofsFuse::notifier_cell`] holds the session's notifier.
    pub(crate) fn with_prefetch(mut self, budget: u64) -> Self {
        self.prefetch = Prefetch::start(&self.image, &self.ids, budget);
        self
    }

    /// Where the mount code puts the session's notifier (for prefetch).
    pub(crate) fn notifier_cell(&self) -> Option<Arc<std::sync::OnceLock<fuser::Notifier>>> {
        self.prefetch.as_ref().map(|p| p.notifier.clone())
    }

    /// Appends every read to `file` as a trace (see
    /// `ferrofs_trace`).
    pub(crate) fn with_trace(mut self, file: std::fs::File) -> Self {
        self.trace = Some(Mutex::new(Tracer::new(file)));
        self
    }

    fn tracer(&self) -> Option<MutexGuard<'_, Tracer>> {
        self.trace
            .as_ref()
            .map(|t| t.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// FUSE node id of a nid (see [`NodeIds::node`]).
    pub(crate) fn ino(&self, nid: Nid) -> INodeNo {
        self.ids.node(nid)
    }

    /// The nid behind a FUSE node id (the inverse of [`ErofsFuse::ino`]).
    pub(crate) fn nid(&self, ino: INodeNo) -> Result<Nid, Errno> {
        self.ids.nid(ino).ok_or(Errno::ENOENT)
    }

    fn inode(&self, ino: INodeNo) -> Result<Inode, Errno> {
        self.image.raw().inode(self.nid(ino)?).map_err(errno)
    }

    fn table(&self) -> MutexGuard<'_, Handles> {
        // The table holds no invariant a panicking holder could break.
        self.handles.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn insert(&self, h: Handle) -> FileHandle {
        let mut t = self.table();
        t.next = t.next.wrapping_add(1);
        let fh = t.next;
        t.open.insert(fh, h);
        FileHandle(fh)
    }

    fn handle(&self, fh: FileHandle) -> Option<Handle> {
        self.table().open.get(&fh.0).cloned()
    }

    fn remove(&self, fh: FileHandle) {
        self.table().open.remove(&fh.0);
    }

    /// The open file behind `fh`, or a fresh mapping of `ino` if the kernel
    /// sent a handle we do not know.
    fn file(&self, ino: INodeNo, fh: FileHandle) -> Result<File, Errno> {
        if let Some(Handle::File(f)) = self.handle(fh) {
            if self.ino(f.inode().nid()) == ino {
                return Ok(f);
            }
        }
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = files.get(&ino.0) {
            return Ok(f.clone());
        }
        let f = self.image.raw().open(self.inode(ino)?).map_err(errno)?;
        if files.len() >= OPEN_FILES {
            files.clear();
        }
        files.insert(ino.0, f.clone());
        Ok(f)
    }

    /// The entries of directory `ino` behind `fh`, or read afresh.
    fn entries(&self, ino: INodeNo, fh: FileHandle) -> Result<Arc<[DirEntry]>, Errno> {
        if let Some(Handle::Dir(d)) = self.handle(fh) {
            return Ok(d);
        }
        let dir = self.inode(ino)?;
        if !dir.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let mut entries = self.image.raw().read_dir(&dir).map_err(errno)?;
        if self.objects.is_some() {
            objects::drop_whiteouts(&self.image, &mut entries)?;
        }
        if dir.dot_omitted() {
            // The image leaves "." out; list it last, as the kernel does.
            entries.push(DirEntry {
                name: b".".to_vec(),
                nid: dir.nid(),
                type_code: ferrofs::format::inode::FileType::Directory.dirent_code(),
            });
        }
        Ok(entries.into())
    }

    /// File bytes at `offset`: from the image, or from the object of a
    /// composefs metacopy file.
    fn read_contents(&self, f: &File, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        if let Some(objects) = &self.objects {
            if let Some(o) = objects.of(&self.image, f.inode())? {
                return objects.read(&o, f.inode().nid(), buf, offset);
            }
        }
        f.read_at(buf, offset).map_err(errno)
    }

    /// The attributes the kernel's EROFS driver would report (with an
    /// object store: a metacopy file's blocks are its object's, as
    /// overlayfs reports them).
    pub(crate) fn attr(&self, i: &Inode) -> FileAttr {
        let mut a = convert::attr(
            i,
            INodeNo(self.ids.st_ino(i.nid())),
            self.image.block_size().bits(),
        );
        if let Some(objects) = &self.objects {
            if let Ok(Some(o)) = objects.of(&self.image, i) {
                a.blocks = o.blocks.unwrap_or(a.blocks);
            }
        }
        a
    }
}

/// The xattr size-probe protocol: size 0 asks for the length.
fn reply_xattr(data: &[u8], size: u32, reply: ReplyXattr) {
    let Ok(len) = u32::try_from(data.len()) else {
        return reply.error(Errno::E2BIG);
    };
    if size == 0 {
        reply.size(len);
    } else if len <= size {
        reply.data(data);
    } else {
        reply.error(Errno::ERANGE);
    }
}

impl Filesystem for ErofsFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Optional kernel features: each is requested only if offered.
        for f in [
            InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_CACHE_SYMLINKS,
            InitFlags::FUSE_PARALLEL_DIROPS,
        ] {
            let _ = config.add_capabilities(f);
        }
        if self.trace.is_some() {
            // A trace records what the program reads, not the kernel's
            // readahead around it.
            let _ = config.set_max_readahead(0);
        } else if let Err(max) = config.set_max_readahead(u32::MAX) {
            let _ = config.set_max_readahead(max);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = (|| {
            let dir = self.inode(parent)?;
            if !dir.is_dir() {
                return Err(Errno::ENOTDIR);
            }
            let e = self
                .image
                .raw()
                .lookup(&dir, name.as_bytes())
                .map_err(errno)?
                .ok_or(Errno::ENOENT)?;
            if let Some(mut t) = self.tracer() {
                t.name(dir.nid(), e.nid, name.as_bytes());
            }
            let i = self.image.raw().inode(e.nid).map_err(errno)?;
            if self.hidden(&i) {
                return Err(Errno::ENOENT);
            }
            Ok(i)
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
            .and_then(|i| self.image.raw().read_link(&i).map_err(errno))
        {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.0 & libc::O_ACCMODE != libc::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        if self.trace.is_none() {
            // No state per open file is needed: ENOSYS tells the kernel to
            // stop sending opens (and releases) and to keep the page cache
            // across opens, one round trip less per file. Reads then come
            // without a handle and use `files`.
            return reply.error(Errno::ENOSYS);
        }
        let r = self
            .inode(ino)
            .and_then(|i| self.image.raw().open(i).map_err(errno));
        match r {
            Ok(f) => reply.opened(self.insert(Handle::File(f)), FopenFlags::FOPEN_KEEP_CACHE),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let f = match self.file(ino, fh) {
            Ok(f) => f,
            Err(e) => return reply.error(e),
        };
        if let (0, Some(p)) = (offset, &self.prefetch) {
            p.started(f.inode().nid());
        }
        let left = f.size().saturating_sub(offset);
        let want = usize::try_from(left.min(u64::from(size))).unwrap_or(MAX_READ);
        SCRATCH.with(|s| {
            let mut buf = s.borrow_mut();
            if buf.len() < want {
                buf.resize(want, 0);
            }
            let got = self.read_contents(&f, &mut buf[..want], offset);
            match got {
                Ok(n) => {
                    if let Some(mut t) = self.tracer() {
                        let path = t.path(self.ids.root(), f.inode().nid());
                        t.read(&path, offset, n as u64);
                    }
                    reply.data(&buf[..n])
                }
                Err(e) => reply.error(e),
            }
            if buf.len() > MAX_READ {
                *buf = Vec::new();
            }
        });
        // Offset 0 is where sequential readers start (the tree walk covers
        // them); random reads land elsewhere.
        if let (true, Some(p)) = (offset > 0 && size < STORE_READS_UNDER, &self.prefetch) {
            if let Some((start, data)) = f.cached_extent(offset) {
                p.decoded(f.inode().nid(), start, data, f.size());
            }
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.remove(fh);
        // A closed file's reads are on disk: a trace does not depend on
        // the daemon reaching its end to be complete.
        if let Some(mut t) = self.tracer() {
            t.flush();
        }
        reply.ok();
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.entries(ino, FileHandle(0)) {
            Ok(d) => reply.opened(
                self.insert(Handle::Dir(d)),
                FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_CACHE_DIR,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let entries = match self.entries(ino, fh) {
            Ok(d) => d,
            Err(e) => return reply.error(e),
        };
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        for (k, e) in entries.iter().enumerate().skip(skip) {
            let t = e.file_type().map_or(FileType::RegularFile, kind);
            let cookie = k as u64 + 1;
            let ino = INodeNo(self.ids.st_ino(e.nid));
            if reply.add(ino, cookie, t, OsStr::from_bytes(&e.name)) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let entries = match self.entries(ino, fh) {
            Ok(d) => d,
            Err(e) => return reply.error(e),
        };
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        let dir_nid = self.nid(ino).ok();
        if let (0, Some(p), Some(d)) = (offset, &self.prefetch, dir_nid) {
            p.listed(d, &entries);
        }
        for (k, e) in entries.iter().enumerate().skip(skip) {
            let i = match self.image.raw().inode(e.nid) {
                Ok(i) => i,
                Err(err) => return reply.error(errno(err)),
            };
            if let (Some(mut t), Some(d)) = (self.tracer(), dir_nid) {
                if e.name != b"." && e.name != b".." {
                    t.name(d, e.nid, &e.name);
                }
            }
            let cookie = k as u64 + 1;
            let name = OsStr::from_bytes(&e.name);
            // fuser sends `attr.ino` as both the node id and `d_ino`: for
            // every entry but the root they are one number, and the kernel
            // links no node for "." and "..", the only names of the root.
            if reply.add(
                self.ino(e.nid),
                cookie,
                name,
                &TTL,
                &self.attr(&i),
                Generation(0),
            ) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.remove(fh);
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let sb = self.image.superblock();
        let bs = 1u32 << self.image.block_size().bits();
        reply.statfs(u64::from(sb.blocks), 0, 0, sb.inos, 0, bs, 255, bs);
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let stored = objects::stored_name(self.objects.as_ref(), name.as_bytes());
        let r = self
            .inode(ino)
            .and_then(|i| self.image.raw().xattr(&i, &stored).map_err(errno));
        match r {
            Ok(Some(v)) => reply_xattr(&v, size, reply),
            Ok(None) => reply.error(Errno::ENODATA),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let r = self
            .inode(ino)
            .and_then(|i| self.image.raw().xattrs(&i).map_err(errno));
        match r {
            Ok(xs) => {
                let mut names = Vec::new();
                for x in &xs {
                    if let Some(n) = objects::shown_name(self.objects.as_ref(), &x.name) {
                        names.extend_from_slice(&n);
                        names.push(0);
                    }
                }
                reply_xattr(&names, size, reply);
            }
            Err(e) => reply.error(e),
        }
    }

    /// Only reached without `default_permissions`: nothing is writable,
    /// everything else is left to the kernel's mode checks.
    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        match self.inode(ino) {
            Ok(_) if mask.contains(AccessFlags::W_OK) => reply.error(Errno::EROFS),
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

/// Mount options and thread count of a session.
pub(crate) fn config(options: &MountOptions) -> fuser::Config {
    let (threads, allow_other) = (options.threads, options.allow_other);
    let source = options
        .source
        .as_deref()
        .filter(|s| !s.is_empty() && !s.contains([',', '\\']))
        .unwrap_or("ferrofs");
    let mut c = fuser::Config::default();
    c.mount_options = vec![
        fuser::MountOption::RO,
        fuser::MountOption::FSName(source.into()),
        fuser::MountOption::Subtype("erofs".into()),
        fuser::MountOption::DefaultPermissions,
    ];
    if allow_other {
        c.acl = fuser::SessionACL::All;
    }
    c.n_threads = Some(threads.max(1));
    c
}
