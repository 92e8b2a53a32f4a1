//! A byte-budgeted LRU cache of decoded pclusters, shared by all readers of
//! an image, so neighbouring reads do not decode the same cluster again.
//! Buffers of evicted entries go to a small free list and are decoded into
//! again, so a stream of decodes does not allocate (and fault in) fresh
//! memory each time.
//!
//! Arithmetic here is bookkeeping of this process's own memory, not of
//! image values: byte totals are sums of the capacities of buffers the cache
//! holds (so below `isize::MAX`), subtractions remove a capacity that was
//! added, and ticks and statistics count operations (never 2^64 of them).
#![allow(clippy::arithmetic_side_effects)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crate::map::{Pcluster, PclusterAt, PclusterFormat};

/// Identity of a pcluster: where it is and how it is decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub at: PclusterAt,
    pub len: u64,
    pub format: PclusterFormat,
}

impl Key {
    /// The key of a pcluster.
    pub fn of(pc: &Pcluster) -> Self {
        Self {
            at: pc.at,
            len: pc.len,
            format: pc.format,
        }
    }
}

struct Entry {
    data: Arc<Vec<u8>>,
    tick: u64,
}

#[derive(Default)]
struct State {
    map: HashMap<Key, Entry>,
    order: BTreeMap<u64, Key>,
    bytes: usize,
    tick: u64,
    hits: u64,
    misses: u64,
    decodes: u64,
    decoded_bytes: u64,
    /// Buffers no entry uses any more, ready to decode into.
    free: Vec<Vec<u8>>,
    free_bytes: usize,
    /// Pclusters whose decode failed, so they are not decoded again.
    failed: HashMap<Key, Failure>,
    /// Decodes that failed (each pcluster's first failure; later readers
    /// get the remembered error without decoding).
    decode_failures: u64,
}

/// A failed decode of a pcluster: the request and its error.
struct Failure {
    /// Bytes asked for.
    target: usize,
    /// Length of the extent.
    llen: usize,
    /// Whether the pcluster was partial.
    partial: bool,
    error: crate::error::Error,
}

/// Most failed pclusters remembered (each holds one error): a hostile
/// image cannot grow this without bound.
const MAX_FAILURES: usize = 4096;

/// Most buffers kept for reuse, and the bytes they may hold: an eighth of
/// the budget, at most 2 MiB (idle memory beyond the budget stays small).
const FREE_BUFFERS: usize = 8;
const FREE_SHARE: usize = 8;
const FREE_MAX: usize = 2 << 20;

/// Fresh decode buffers are sized in steps of this many bytes.
const BUFFER_STEP: usize = 16 << 10;

impl State {
    /// Keeps an evicted entry's buffer for the next decode if the free list
    /// has room.
    fn recycle(&mut self, data: Arc<Vec<u8>>, budget: usize) {
        let Ok(v) = Arc::try_unwrap(data) else {
            return;
        };
        let limit = (budget / FREE_SHARE).min(FREE_MAX);
        if v.capacity() > limit {
            return;
        }
        // Make room by dropping smaller buffers: a large one serves any
        // decode, a small one only small decodes.
        while self.free.len() >= FREE_BUFFERS || self.free_bytes + v.capacity() > limit {
            let Some((i, _)) = self
                .free
                .iter()
                .enumerate()
                .filter(|(_, f)| f.capacity() < v.capacity())
                .min_by_key(|(_, f)| f.capacity())
            else {
                return;
            };
            let dropped = self.free.swap_remove(i);
            self.free_bytes -= dropped.capacity();
        }
        self.free_bytes += v.capacity();
        self.free.push(v);
    }
}

/// Counters of the cache and the decoder, for statistics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that had to decode.
    pub misses: u64,
    /// Decoded pclusters held now.
    pub entries: usize,
    /// Bytes of decoded data held now.
    pub bytes: usize,
    /// Pcluster decodes run so far.
    pub decodes: u64,
    /// Pcluster decodes that failed. A pcluster that failed is not decoded
    /// again for as much (or more) of it: its error is returned.
    pub decode_failures: u64,
    /// Bytes those decodes produced.
    pub decoded_bytes: u64,
}

pub(crate) struct PclusterCache {
    budget: usize,
    state: Mutex<State>,
}

impl PclusterCache {
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            state: Mutex::new(State::default()),
        }
    }

    /// Returns the cached decoded prefix of `key` if it holds at least
    /// `want` bytes; otherwise the length of a shorter cached prefix, if any.
    pub fn get(&self, key: &Key, want: usize) -> Result<Arc<Vec<u8>>, Option<usize>> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.tick += 1;
        let tick = st.tick;
        let found = match st.map.get_mut(key) {
            Some(e) if e.data.len() >= want => {
                let old = e.tick;
                e.tick = tick;
                Ok((old, e.data.clone()))
            }
            Some(e) => Err(Some(e.data.len())),
            None => Err(None),
        };
        match found {
            Ok((old, data)) => {
                st.order.remove(&old);
                st.order.insert(tick, *key);
                st.hits += 1;
                Ok(data)
            }
            Err(shorter) => {
                st.misses += 1;
                Err(shorter)
            }
        }
    }

    /// Counts one decode of `bytes` bytes.
    /// What the cache holds for `key`, without counting a hit or a miss
    /// or refreshing the entry.
    pub fn peek(&self, key: &Key) -> Option<Arc<Vec<u8>>> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.map.get(key).map(|e| e.data.clone())
    }

    /// The remembered error of an earlier failed decode of `key` that this
    /// request (the first `target` bytes of an extent of `llen`) cannot
    /// avoid: it asks for at least as many bytes of a decode that failed
    /// short of its goal, or is the same request. A smaller prefix may
    /// still decode, so it is tried.
    pub fn failure(
        &self,
        key: &Key,
        target: usize,
        llen: usize,
        partial: bool,
    ) -> Option<crate::error::Error> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let f = st.failed.get(key)?;
        let was_prefix = f.partial || f.target != f.llen;
        let same = f.target == target && f.llen == llen && f.partial == partial;
        (same || (was_prefix && target >= f.target)).then(|| f.error.clone_lossy())
    }

    /// Remembers that decoding `key` for this request failed with `error`.
    pub fn remember_failure(
        &self,
        key: Key,
        target: usize,
        llen: usize,
        partial: bool,
        error: &crate::error::Error,
    ) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.decode_failures += 1;
        if st.failed.len() >= MAX_FAILURES && !st.failed.contains_key(&key) {
            return;
        }
        // Keep the smallest failing prefix: it rules out the most requests.
        if st.failed.get(&key).is_some_and(|f| f.target < target) {
            return;
        }
        st.failed.insert(
            key,
            Failure {
                target,
                llen,
                partial,
                error: error.clone_lossy(),
            },
        );
    }

    pub fn count_decode(&self, bytes: usize) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.decodes += 1;
        st.decoded_bytes += bytes as u64;
    }

    pub fn insert(&self, key: Key, data: Arc<Vec<u8>>) {
        if data.capacity() > self.budget {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.tick += 1;
        let tick = st.tick;
        if let Some(old) = st.map.remove(&key) {
            st.order.remove(&old.tick);
            st.bytes -= old.data.capacity();
            st.recycle(old.data, self.budget);
        }
        st.bytes += data.capacity();
        st.map.insert(key, Entry { data, tick });
        st.order.insert(tick, key);
        while st.bytes > self.budget {
            let Some((&t, &k)) = st.order.iter().next() else {
                break;
            };
            st.order.remove(&t);
            if let Some(e) = st.map.remove(&k) {
                st.bytes -= e.data.capacity();
                st.recycle(e.data, self.budget);
            }
        }
    }

    /// A zeroed buffer of `len` bytes, recycled from an evicted entry when
    /// one is large enough. A fresh one gets room for `room` bytes (the
    /// whole extent), so it can serve any later decode of that size.
    /// Entries count against the budget by capacity: that is the memory
    /// they hold.
    pub fn buffer(&self, len: usize, room: usize) -> Vec<u8> {
        let reused = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            // The smallest buffer that fits.
            let best = st
                .free
                .iter()
                .enumerate()
                .filter(|(_, v)| v.capacity() >= len)
                .min_by_key(|(_, v)| v.capacity())
                .map(|(i, _)| i);
            match best {
                Some(i) => {
                    let v = st.free.swap_remove(i);
                    st.free_bytes -= v.capacity();
                    Some(v)
                }
                None => None,
            }
        };
        match reused {
            Some(mut v) => {
                // Old decoded bytes are overwritten by the decoder; only
                // growth needs zeroing.
                if v.len() >= len {
                    v.truncate(len);
                } else {
                    v.resize(len, 0);
                }
                v
            }
            None => {
                // Rounded up so that it fits the next extents of about
                // that size too when it is recycled.
                let want = room.max(len);
                let cap = want.checked_next_multiple_of(BUFFER_STEP).unwrap_or(want);
                // Zeroed by the allocator (fresh pages need no memset).
                let mut v = vec![0u8; cap];
                v.truncate(len);
                v
            }
        }
    }

    pub fn stats(&self) -> CacheStats {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        CacheStats {
            hits: st.hits,
            misses: st.misses,
            entries: st.map.len(),
            bytes: st.bytes,
            decodes: st.decodes,
            decoded_bytes: st.decoded_bytes,
            decode_failures: st.decode_failures,
        }
    }
}

/// Decodes in progress, one lock per pcluster: a reader that misses the
/// cache takes the pcluster's lock, looks in the cache again (another
/// reader may just have filled it) and decodes only if it is still
/// missing, so concurrent readers of one pcluster cost one decode
/// (the paper's cohort decompression). A failed decode just lets the next
/// waiter try; nothing waits forever.
#[derive(Default)]
pub(crate) struct Flights {
    map: Mutex<HashMap<Key, Arc<Mutex<()>>>>,
}

/// Membership in a pcluster's flight; leaving it (on drop) removes the
/// entry if it is still this flight's.
pub(crate) struct Flight<'a> {
    flights: &'a Flights,
    key: Key,
    lock: Arc<Mutex<()>>,
}

impl Flights {
    pub fn join(&self, key: Key) -> Flight<'_> {
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let lock = m.entry(key).or_default().clone();
        Flight {
            flights: self,
            key,
            lock,
        }
    }
}

impl Flight<'_> {
    /// Waits for whoever decodes this pcluster now, then runs `f` alone.
    pub fn run<T>(&self, f: impl FnOnce(&Self) -> T) -> T {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        f(self)
    }

    /// Whether other readers have joined this flight (and wait for it).
    pub fn shared(&self) -> bool {
        // One reference is the table's, one this member's.
        Arc::strong_count(&self.lock) > 2
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        let mut m = self.flights.map.lock().unwrap_or_else(|p| p.into_inner());
        if m.get(&self.key).is_some_and(|l| Arc::ptr_eq(l, &self.lock))
            && Arc::strong_count(&self.lock) <= 2
        {
            m.remove(&self.key);
        }
    }
}

/// A small LRU cache of metadata blocks of the primary device, so the many
/// small reads of inodes, indexes, xattrs and dirents cost one pread per
/// block instead of one per field.
pub(crate) struct BlockCache {
    capacity: usize,
    state: Mutex<BlockState>,
}

#[derive(Default)]
struct BlockState {
    map: HashMap<u64, (Arc<[u8]>, u64)>,
    order: BTreeMap<u64, u64>,
    tick: u64,
}

impl BlockCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            state: Mutex::new(BlockState::default()),
        }
    }

    pub fn get(&self, blk: u64) -> Option<Arc<[u8]>> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.tick += 1;
        let tick = st.tick;
        let (data, old) = {
            let e = st.map.get_mut(&blk)?;
            let old = e.1;
            e.1 = tick;
            (e.0.clone(), old)
        };
        st.order.remove(&old);
        st.order.insert(tick, blk);
        Some(data)
    }

    pub fn insert(&self, blk: u64, data: Arc<[u8]>) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.tick += 1;
        let tick = st.tick;
        if let Some((_, old)) = st.map.insert(blk, (data, tick)) {
            st.order.remove(&old);
        }
        st.order.insert(tick, blk);
        while st.map.len() > self.capacity {
            let Some((&t, &b)) = st.order.iter().next() else {
                break;
            };
            st.order.remove(&t);
            st.map.remove(&b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pos: u64) -> Key {
        Key {
            at: PclusterAt::Blocks(pos),
            len: 4096,
            format: PclusterFormat::Shifted,
        }
    }

    #[test]
    fn entries_count_by_capacity_and_stay_within_the_budget() {
        let c = PclusterCache::new(100_000);
        // A 10-byte prefix in a 40,000-byte buffer holds 40,000 bytes.
        let mut v = Vec::with_capacity(40_000);
        v.resize(10, 7);
        c.insert(key(0), Arc::new(v));
        assert!(c.stats().bytes >= 40_000);
        for k in 1..10u8 {
            c.insert(key(k.into()), Arc::new(vec![k; 30_000]));
        }
        let st = c.stats();
        assert!(st.bytes <= 100_000, "{st:?}");
        assert_eq!(st.entries, 3, "{st:?}");
        // The most recent entries are kept.
        assert!(c.get(&key(9), 30_000).is_ok());
        assert!(c.get(&key(0), 1).is_err());
    }

    fn free_list(c: &PclusterCache) -> Vec<usize> {
        let st = c.state.lock().unwrap();
        st.free.iter().map(|v| v.capacity()).collect()
    }

    #[test]
    fn evicted_buffers_are_decoded_into_again() {
        // Free list: up to an eighth of 1 MiB. (Fresh buffers are sized in
        // steps of 16 KiB; 98,304 is six of them.)
        let c = PclusterCache::new(1 << 20);
        for k in 0..10 {
            c.insert(key(k), Arc::new(c.buffer(98_304, 98_304)));
        }
        assert!(free_list(&c).is_empty());
        // The eleventh entry evicts the first, whose buffer is kept.
        c.insert(key(10), Arc::new(c.buffer(98_304, 98_304)));
        assert!(c.get(&key(0), 1).is_err(), "first entry evicted");
        assert_eq!(free_list(&c), vec![98_304]);
        // The next decode takes it (no new allocation), even for less.
        let again = c.buffer(60_000, 98_304);
        assert_eq!((again.len(), again.capacity()), (60_000, 98_304));
        assert!(free_list(&c).is_empty());
        // A buffer a reader still holds is not recycled when evicted.
        let held = c.peek(&key(1)).unwrap();
        c.insert(key(11), Arc::new(again));
        assert!(c.get(&key(1), 1).is_err(), "evicted");
        assert!(free_list(&c).is_empty(), "held by a reader");
        drop(held);
        // Never more than the free list's share of the budget.
        for k in 12..20 {
            c.insert(key(k), Arc::new(vec![0; 100_000]));
        }
        assert!(free_list(&c).iter().sum::<usize>() <= (1 << 20) / 8);
    }

    #[test]
    fn fresh_buffers_are_rounded_up_and_large_ones_displace_small_ones() {
        let c = PclusterCache::new(1 << 20);
        assert_eq!(c.buffer(1, 100_000).capacity(), 114_688);
        // Eight small buffers fill the free list.
        {
            let mut st = c.state.lock().unwrap();
            for _ in 0..FREE_BUFFERS {
                st.recycle(Arc::new(Vec::with_capacity(4096)), 1 << 20);
            }
        }
        assert_eq!(free_list(&c), vec![4096; FREE_BUFFERS]);
        // A larger one takes the place of a small one; a smaller one is
        // dropped.
        c.state
            .lock()
            .unwrap()
            .recycle(Arc::new(Vec::with_capacity(65_536)), 1 << 20);
        c.state
            .lock()
            .unwrap()
            .recycle(Arc::new(Vec::with_capacity(1024)), 1 << 20);
        let mut got = free_list(&c);
        got.sort_unstable();
        let mut want = vec![4096; FREE_BUFFERS - 1];
        want.push(65_536);
        assert_eq!(got, want);
        // Then it serves a decode of that size.
        assert_eq!(c.buffer(50_000, 50_000).capacity(), 65_536);
    }
}
