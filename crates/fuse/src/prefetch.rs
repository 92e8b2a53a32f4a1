//! Prefetch into the kernel's page cache (`FUSE_NOTIFY_STORE`) for the
//! FUSE mount: the tree walk (small files after the one being read in a
//! listed directory) and decoded pclusters of small reads. Two background
//! threads do the work; the request handlers only hand them jobs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ferrofs::format::inode::FileType as Ft;
use ferrofs::format::Nid;
use ferrofs::{raw::RawDirEntry as DirEntry, Image};

use crate::ids::NodeIds;

/// The kernel's page size (FUSE page cache granularity).
const PAGE: u64 = 4096;
/// Files larger than this are left to the kernel's readahead.
const PREFETCH_FILE_MAX: u64 = 1 << 20;
/// Directories and children remembered for prefetching.
const PREFETCH_DIRS: usize = 64;
const PREFETCH_CHILDREN: usize = 16384;

/// Reads shorter than this (random access) have the rest of their decoded
/// pcluster stored in the page cache; longer ones are the kernel's
/// readahead, which fills the page cache itself.
pub(crate) const STORE_READS_UNDER: u32 = 32 << 10;
/// Decoded extents remembered as stored.
const STORED: usize = 4096;

/// Background stores into the kernel's page cache (`FUSE_NOTIFY_STORE`),
/// so reads find their data there without a round trip to the daemon:
/// - tree walk: when a program reads the first bytes of a file in a
///   directory it listed (tar, cp -r, rsync), the small files that follow
///   it in that directory are decoded and stored (once per directory,
///   `budget` bytes at most);
/// - decoded pclusters: a small read decodes (a prefix of) a whole
///   pcluster; all of what was decoded is stored, as the kernel's EROFS
///   keeps what it decompressed, so the next reads in that range are page
///   cache hits.
pub(crate) struct Prefetch {
    /// Tree-walk jobs and store jobs go to threads of their own, so
    /// stores never crowd out a directory.
    dirs: std::sync::mpsc::SyncSender<Job>,
    stores: std::sync::mpsc::SyncSender<Job>,
    pub(crate) notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
    state: Mutex<PrefetchState>,
}

#[derive(Default)]
struct PrefetchState {
    /// Listings of recently listed directories.
    dirs: HashMap<u64, Arc<[DirEntry]>>,
    /// Child nid -> directory nid and the child's index in the listing.
    parent: HashMap<u64, (u64, usize)>,
    /// Directories handed to the prefetch thread, each with the index of
    /// the furthest file the program itself has started to read there.
    done: HashMap<u64, Arc<AtomicUsize>>,
    /// (nid, extent start) -> bytes stored.
    stored: HashMap<(u64, u64), usize>,
}

/// Work for the prefetch thread.
enum Job {
    /// Small files of a listing, after the index in the counter (which
    /// the program's own reads move forward).
    Dir(Arc<[DirEntry]>, Arc<AtomicUsize>),
    /// Decoded bytes of a file (size) starting at an offset.
    Store(Nid, u64, Arc<Vec<u8>>, u64),
}

impl Prefetch {
    /// Starts the two prefetch threads (`None` if a thread cannot start).
    pub(crate) fn start(image: &Image, ids: &NodeIds, budget: u64) -> Option<Self> {
        let notifier: Arc<std::sync::OnceLock<fuser::Notifier>> = Arc::default();
        let mut senders = Vec::new();
        for name in ["prefetch-dirs", "prefetch-stores"] {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(4);
            let (image, cell, ids) = (image.clone(), notifier.clone(), ids.clone());
            let spawned = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || prefetch_worker(rx, &image, &ids, &cell, budget));
            if spawned.is_err() {
                return None;
            }
            senders.push(tx);
        }
        let stores = senders.pop();
        let dirs = senders.pop();
        Some(Prefetch {
            dirs: dirs?,
            stores: stores?,
            notifier,
            state: Mutex::default(),
        })
    }

    pub(crate) fn listed(&self, dir: Nid, entries: &Arc<[DirEntry]>) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.done.contains_key(&dir.0) {
            return;
        }
        if st.dirs.len() >= PREFETCH_DIRS || st.parent.len() + entries.len() > PREFETCH_CHILDREN {
            st.dirs.clear();
            st.parent.clear();
        }
        if entries.len() > PREFETCH_CHILDREN {
            return;
        }
        for (k, e) in entries.iter().enumerate() {
            if e.file_type() == Some(Ft::Regular) {
                st.parent.insert(e.nid.0, (dir.0, k));
            }
        }
        st.dirs.insert(dir.0, entries.clone());
    }

    /// `nid` is being read from its start: prefetch what follows it. If
    /// its directory is being prefetched already, the program has caught
    /// up with the prefetch thread: move that on past this file, so it
    /// works ahead of the program instead of behind it.
    pub(crate) fn started(&self, nid: Nid) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(&(dir, k)) = st.parent.get(&nid.0) else {
            return;
        };
        if let Some(cursor) = st.done.get(&dir) {
            cursor.fetch_max(k, Ordering::Relaxed);
            return;
        }
        if st.done.len() >= PREFETCH_CHILDREN {
            st.done.clear();
        }
        let Some(entries) = st.dirs.remove(&dir) else {
            return;
        };
        let cursor = Arc::new(AtomicUsize::new(k));
        st.done.insert(dir, cursor.clone());
        drop(st);
        // Dropped when the thread is behind: only a hint.
        let _ = self.dirs.try_send(Job::Dir(entries, cursor));
    }

    /// `data` is the decoded start of the extent at `start` of file `nid`
    /// (`size` bytes): store it unless that much was stored before.
    pub(crate) fn decoded(&self, nid: Nid, start: u64, data: Arc<Vec<u8>>, size: u64) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st
            .stored
            .get(&(nid.0, start))
            .is_some_and(|&n| n >= data.len())
        {
            return;
        }
        if st.stored.len() >= STORED {
            st.stored.clear();
        }
        let n = data.len();
        if self
            .stores
            .try_send(Job::Store(nid, start, data, size))
            .is_ok()
        {
            st.stored.insert((nid.0, start), n);
        }
    }
}

/// The loop of a prefetch thread: runs jobs until the mount goes away.
fn prefetch_worker(
    rx: std::sync::mpsc::Receiver<Job>,
    image: &Image,
    ids: &NodeIds,
    cell: &std::sync::OnceLock<fuser::Notifier>,
    budget: u64,
) {
    let ino = |nid: Nid| ids.node(nid);
    let mut buf = Vec::new();
    for job in rx {
        let Some(n) = cell.get() else { continue };
        match job {
            Job::Dir(entries, cursor) => {
                let mut left = budget;
                for (k, e) in entries.iter().enumerate() {
                    // At or before a file the program has read itself.
                    if k <= cursor.load(Ordering::Relaxed) || e.file_type() != Some(Ft::Regular) {
                        continue;
                    }
                    let Ok(i) = image.raw().inode(e.nid) else {
                        continue;
                    };
                    if i.size() == 0 || i.size() > PREFETCH_FILE_MAX || i.size() > left {
                        continue;
                    }
                    left -= i.size();
                    let Ok(f) = image.raw().open(i) else { continue };
                    buf.resize(f.size() as usize, 0);
                    if f.read_at(&mut buf, 0).ok() != Some(buf.len()) {
                        continue;
                    }
                    // The kernel may have dropped the inode: then
                    // it is simply not stored.
                    let _ = n.store(ino(e.nid), 0, &buf);
                }
            }
            Job::Store(nid, start, data, size) => {
                // Whole pages only (a partial page would not be
                // marked up to date), except the file's last.
                let end = start + data.len() as u64;
                let first = start.div_ceil(PAGE) * PAGE;
                let last = if end >= size { end } else { end / PAGE * PAGE };
                if first < last {
                    let a = (first - start) as usize;
                    let b = (last - start) as usize;
                    let _ = n.store(ino(nid), first, &data[a..b]);
                }
            }
        }
        // Memory is for the cache: keep no large buffer idle.
        if buf.capacity() > 256 << 10 {
            buf = Vec::new();
        }
    }
}
