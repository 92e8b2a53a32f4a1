//! The on-disk cache of fetched chunks: one file per chunk under a
//! directory per object (`DIR/<object key>/<chunk index>`, both hex), a
//! byte bound kept by evicting the least recently used chunks. The object
//! key covers the URL and its validators, so a changed object never reads
//! another one's chunks. Only files named like ours are ever counted or
//! removed. Several sources (an image and its devices) share one cache.
//!
//! A chunk file is the chunk's bytes followed by their CRC32C (4 bytes,
//! little endian). The first read of a chunk in a process reads the whole
//! file and checks it; a file that fails (torn by a crash, damaged on
//! disk, written by something else) is removed and the chunk fetched
//! again. Later reads of a checked chunk read only the bytes they need.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use crate::error::{RemoteError, Result};

/// Length of an object directory's name (hex digits).
pub const KEY_LEN: usize = 32;
/// Length of a chunk file's name (hex digits).
const CHUNK_NAME_LEN: usize = 16;
/// Temporary files older than this are a crashed writer's and are removed.
const STALE_TMP: Duration = Duration::from_secs(600);
/// Bytes of the checksum after a chunk's data.
const TRAILER: u64 = 4;

/// A bounded store of chunks on disk, shared between threads.
pub struct Cache {
    root: PathBuf,
    limit: u64,
    /// Remove `root` when dropped (the per-process default cache).
    temporary: bool,
    state: Mutex<State>,
}

type ChunkId = (String, u64);

/// What is known of one chunk file.
struct Entry {
    /// File size (data and checksum).
    size: u64,
    /// Last use.
    tick: u64,
    /// Its checksum was checked by this process.
    checked: bool,
}

#[derive(Default)]
struct State {
    /// Every chunk on disk.
    entries: HashMap<ChunkId, Entry>,
    /// Chunks by last-use tick, least recent first.
    lru: BTreeMap<u64, ChunkId>,
    tick: u64,
    total: u64,
}

impl State {
    fn touch(&mut self, id: &ChunkId) {
        self.tick += 1;
        let tick = self.tick;
        if let Some(e) = self.entries.get_mut(id) {
            self.lru.remove(&e.tick);
            e.tick = tick;
            e.checked = true;
            self.lru.insert(tick, id.clone());
        }
    }

    fn insert(&mut self, id: ChunkId, size: u64, checked: bool) {
        self.tick += 1;
        self.lru.insert(self.tick, id.clone());
        let tick = self.tick;
        self.entries.insert(
            id,
            Entry {
                size,
                tick,
                checked,
            },
        );
        self.total += size;
    }

    /// Drops `id` from the books; whether it was there.
    fn forget(&mut self, id: &ChunkId) -> bool {
        match self.entries.remove(id) {
            Some(e) => {
                self.lru.remove(&e.tick);
                self.total -= e.size;
                true
            }
            None => false,
        }
    }
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Cache {
    /// Opens (creating it if absent) the cache in `dir`, bounded to
    /// `limit` bytes; the chunks already there are counted, oldest first
    /// to go, and evicted down to the bound.
    pub fn open(dir: &Path, limit: u64) -> Result<Cache> {
        let err = |source| RemoteError::Cache {
            path: dir.to_path_buf(),
            source,
        };
        fs::create_dir_all(dir).map_err(err)?;
        let cache = Cache {
            root: dir.to_path_buf(),
            limit,
            temporary: false,
            state: Mutex::new(State::default()),
        };
        cache.scan().map_err(err)?;
        Ok(cache)
    }

    /// A cache in a new directory under the system's temporary directory,
    /// removed when the cache is dropped.
    pub fn temporary(limit: u64) -> Result<Cache> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "ferrofs-remote-{}-{nanos}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let mut cache = Cache::open(&dir, limit)?;
        cache.temporary = true;
        Ok(cache)
    }

    /// The directory the chunks are kept in.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// The byte bound.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes of chunks held now.
    pub fn used(&self) -> u64 {
        self.lock().total
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn path(&self, id: &ChunkId) -> PathBuf {
        self.root.join(&id.0).join(format!("{:016x}", id.1))
    }

    /// Counts the chunks already in the directory (least recently modified
    /// first to be evicted) and removes stale temporary files.
    fn scan(&self) -> io::Result<()> {
        let mut found: Vec<(SystemTime, ChunkId, u64)> = Vec::new();
        for obj in fs::read_dir(&self.root)? {
            let obj = obj?;
            let Some(key) = obj.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !is_hex(&key, KEY_LEN) || !obj.file_type()?.is_dir() {
                continue;
            }
            for f in fs::read_dir(obj.path())? {
                let f = f?;
                let name = f.file_name();
                let Some(name) = name.to_str() else { continue };
                let meta = f.metadata()?;
                let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                if name.starts_with(".tmp-") {
                    if mtime.elapsed().is_ok_and(|age| age > STALE_TMP) {
                        let _ = fs::remove_file(f.path());
                    }
                    continue;
                }
                if !is_hex(name, CHUNK_NAME_LEN) || !meta.is_file() {
                    continue;
                }
                if let Ok(idx) = u64::from_str_radix(name, 16) {
                    found.push((mtime, (key.clone(), idx), meta.len()));
                }
            }
        }
        found.sort_by_key(|f| f.0);
        let mut st = self.lock();
        for (_, id, size) in found {
            st.insert(id, size, false);
        }
        self.evict(&mut st, 0);
        Ok(())
    }

    /// Removes least recently used chunks until `room` more bytes fit.
    fn evict(&self, st: &mut State, room: u64) {
        while st.total.saturating_add(room) > self.limit {
            let Some((_, id)) = st.lru.pop_first() else {
                break;
            };
            let _ = fs::remove_file(self.path(&id));
            if let Some(e) = st.entries.remove(&id) {
                st.total -= e.size;
            }
        }
    }

    /// Whether chunk `chunk` of object `key` is held.
    pub fn holds(&self, key: &str, chunk: u64) -> bool {
        self.lock().entries.contains_key(&(key.to_owned(), chunk))
    }

    /// Fills `dst` from byte `within` of chunk `chunk` of object `key`, if
    /// that chunk is held, `len` bytes long and (on its first read here)
    /// matches its checksum. A chunk whose file went missing, has another
    /// length or fails the check is forgotten and its file removed (a
    /// miss).
    pub fn read(&self, key: &str, chunk: u64, len: u64, within: u64, dst: &mut [u8]) -> bool {
        let id = (key.to_owned(), chunk);
        let Some(checked) = self.lock().entries.get(&id).map(|e| e.checked) else {
            return false;
        };
        let path = self.path(&id);
        let ok = fs::File::open(&path).is_ok_and(|f| {
            f.metadata()
                .is_ok_and(|m| Some(m.len()) == len.checked_add(TRAILER))
                && if checked {
                    f.read_exact_at(dst, within).is_ok()
                } else {
                    read_checked(&f, len, within, dst)
                }
        });
        let mut st = self.lock();
        if ok {
            st.touch(&id);
        } else if st.forget(&id) {
            let _ = fs::remove_file(&path);
        }
        ok
    }

    /// Keeps chunk `chunk` of object `key`, evicting others to stay within
    /// the bound. A chunk larger than the whole bound is not kept; a
    /// failure to write only means the chunk is not kept.
    pub fn store(&self, key: &str, chunk: u64, data: &[u8]) {
        let size = data.len() as u64 + TRAILER;
        if size > self.limit {
            return;
        }
        let id = (key.to_owned(), chunk);
        let mut st = self.lock();
        if st.entries.contains_key(&id) {
            return;
        }
        self.evict(&mut st, size);
        let path = self.path(&id);
        let tmp = self
            .root
            .join(&id.0)
            .join(format!(".tmp-{}-{:016x}", std::process::id(), chunk));
        let written = fs::create_dir_all(self.root.join(&id.0))
            .and_then(|()| fs::File::create(&tmp))
            .and_then(|mut f| {
                f.write_all(data)?;
                f.write_all(&crc32c::crc32c(data).to_le_bytes())
            })
            .and_then(|()| fs::rename(&tmp, &path));
        match written {
            Ok(()) => st.insert(id, size, true),
            Err(_) => {
                let _ = fs::remove_file(&tmp);
            }
        }
    }
}

/// Reads the whole chunk file `f` (`len` bytes of data and the checksum),
/// and, if the checksum matches, copies bytes `within..` of the data into
/// `dst`.
fn read_checked(f: &fs::File, len: u64, within: u64, dst: &mut [u8]) -> bool {
    let Some(total) = len
        .checked_add(TRAILER)
        .and_then(|t| usize::try_from(t).ok())
    else {
        return false;
    };
    let mut all = vec![0u8; total];
    if f.read_exact_at(&mut all, 0).is_err() {
        return false;
    }
    let (data, sum) = all.split_at(total - TRAILER as usize);
    if crc32c::crc32c(data).to_le_bytes()[..] != *sum {
        return false;
    }
    let part = usize::try_from(within)
        .ok()
        .and_then(|a| Some(a..a.checked_add(dst.len())?))
        .and_then(|r| data.get(r));
    match part {
        Some(p) => {
            dst.copy_from_slice(p);
            true
        }
        None => false,
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        if self.temporary {
            let _ = fs::remove_dir_all(&self.root);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef";

    fn chunk(n: u8, len: usize) -> Vec<u8> {
        vec![n; len]
    }

    fn files(dir: &Path) -> usize {
        fs::read_dir(dir.join(KEY)).map_or(0, |d| d.count())
    }

    #[test]
    fn bound_is_kept_by_evicting_least_recent() {
        const FILE: u64 = 100 + TRAILER;
        let c = Cache::temporary(3 * FILE).unwrap();
        for n in 0..3 {
            c.store(KEY, n, &chunk(n as u8, 100));
        }
        assert_eq!(c.used(), 3 * FILE);
        let mut b = [0u8; 10];
        // Chunk 0 used again: chunk 1 is now the least recent.
        assert!(c.read(KEY, 0, 100, 5, &mut b));
        assert_eq!(b, [0u8; 10]);
        c.store(KEY, 3, &chunk(3, 100));
        assert_eq!(c.used(), 3 * FILE);
        assert_eq!(files(c.dir()), 3);
        assert!(!c.read(KEY, 1, 100, 0, &mut b), "chunk 1 was evicted");
        for n in [0u64, 2, 3] {
            assert!(c.read(KEY, n, 100, 90, &mut b), "chunk {n} kept");
            assert_eq!(b, [n as u8; 10]);
        }
        // Larger than the whole bound: not kept, nothing evicted.
        c.store(KEY, 9, &chunk(9, 3 * FILE as usize - 3));
        assert_eq!(c.used(), 3 * FILE);
        assert!(!c.read(KEY, 9, 3 * FILE - 3, 0, &mut b));
        // A wrong expected length is a miss, and the chunk is forgotten.
        assert!(!c.read(KEY, 2, 99, 0, &mut b));
        assert_eq!(c.used(), 2 * FILE);
        assert_eq!(files(c.dir()), 2, "its file is removed");
        let dir = c.dir().to_path_buf();
        drop(c);
        assert!(!dir.exists(), "a temporary cache is removed");
    }

    #[test]
    fn reopened_cache_counts_and_trims_what_is_there() {
        let base = std::env::temp_dir().join(format!("ferrofs-cache-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        {
            let c = Cache::open(&base, 1040).unwrap();
            for n in 0..5 {
                c.store(KEY, n, &chunk(n as u8, 100));
                // Distinct modification times, so the reopening sees the order.
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // Someone else's files are neither counted nor removed.
        fs::write(base.join("notes.txt"), b"mine").unwrap();
        fs::write(base.join(KEY).join("notes"), b"mine").unwrap();
        let c = Cache::open(&base, 1040).unwrap();
        assert_eq!(c.used(), 520);
        let mut b = [0u8; 1];
        assert!(c.read(KEY, 4, 100, 0, &mut b) && b == [4]);
        drop(c);
        // A smaller bound: the oldest chunks go.
        let c = Cache::open(&base, 260).unwrap();
        assert_eq!(c.used(), 208);
        assert!(!c.read(KEY, 0, 100, 0, &mut b));
        assert!(c.read(KEY, 3, 100, 0, &mut b) && b == [3]);
        assert!(c.read(KEY, 4, 100, 0, &mut b) && b == [4]);
        assert!(base.join("notes.txt").exists() && base.join(KEY).join("notes").exists());
        drop(c);
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_chunk_removed_behind_our_back_is_a_miss() {
        let c = Cache::temporary(1000).unwrap();
        c.store(KEY, 7, &chunk(7, 100));
        fs::remove_file(c.dir().join(KEY).join(format!("{:016x}", 7))).unwrap();
        let mut b = [0u8; 4];
        assert!(!c.read(KEY, 7, 100, 0, &mut b));
        assert_eq!(c.used(), 0);
    }

    /// A chunk file damaged on disk (one flipped byte, or cut short and
    /// padded back to length as a crash can leave it), by this process or
    /// found by a later one, is a miss and is removed; a sound one in the
    /// same directory still reads.
    #[test]
    fn a_damaged_chunk_is_a_miss_and_is_removed() {
        let base = std::env::temp_dir().join(format!("ferrofs-cache-crc-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let file = |n: u64| base.join(KEY).join(format!("{n:016x}"));
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 7 + i / 13) as u8).collect();
        {
            let c = Cache::open(&base, 1 << 20).unwrap();
            for n in 0..3 {
                c.store(KEY, n, &data);
            }
        }
        // Chunk 0: one byte flipped, far from the part read.
        let mut bytes = fs::read(file(0)).unwrap();
        bytes[3000] ^= 0x20;
        fs::write(file(0), &bytes).unwrap();
        // Chunk 1: zeros from byte 1000 on (a torn write), same length.
        let mut bytes = fs::read(file(1)).unwrap();
        bytes[1000..].fill(0);
        fs::write(file(1), &bytes).unwrap();
        let c = Cache::open(&base, 1 << 20).unwrap();
        let mut b = [0u8; 16];
        assert!(!c.read(KEY, 0, 4096, 0, &mut b), "a flipped byte is caught");
        assert!(!c.read(KEY, 1, 4096, 0, &mut b), "a torn chunk is caught");
        assert!(!file(0).exists() && !file(1).exists());
        assert!(c.read(KEY, 2, 4096, 100, &mut b));
        assert_eq!(b[..], data[100..116]);
        assert_eq!(c.used(), 4096 + TRAILER);
        // A removed chunk can be stored again and read.
        c.store(KEY, 0, &data);
        assert!(c.read(KEY, 0, 4096, 8, &mut b) && b[..] == data[8..24]);
        drop(c);
        fs::remove_dir_all(&base).unwrap();
    }
}
