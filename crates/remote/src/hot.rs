//! Trace-guided prefetch: an image built with `mkfs --profile` names, in
//! its boot area, the byte ranges its recorded start-up reads
//! (`ferrofs_format::hotrange`). [`HttpSource::hot_ranges`] reads and
//! checks that record; [`HttpSource::prefetch`] fetches the ranges' chunks
//! into the cache in a few large parallel requests, releasing each
//! request's chunks to waiting readers as soon as it lands. The record is
//! only a hint: a damaged or stale one is reported and ignored, and a
//! wrong one only costs bytes (the cache holds the object's real bytes).

use std::collections::HashSet;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use ferrofs::format::hotrange::{HotRanges, AREA};
use ferrofs::format::SUPERBLOCK_OFFSET;
use ferrofs::ReadAt;

use crate::plan::{chunks_of, coalesce, spread, Fetch};
use crate::source::{HttpSource, Stats};

/// Gaps between hot chunks up to this many bytes are fetched with them:
/// one request instead of two costs less than the round trip it saves.
const JOIN_GAP: u64 = 512 << 10;
/// Offset of the UUID in the superblock.
const UUID_AT: u64 = 0x30;
/// A record asking for more than this share of the image (and more than
/// [`CAP_MIN`]) is not believed.
const CAP_SHARE: u64 = 2;
const CAP_MIN: u64 = 32 << 20;

/// Chunks claimed by a prefetch: released one request at a time as they
/// land, the rest (after a failure) when dropped.
struct Claimed<'s> {
    src: &'s HttpSource,
    left: Mutex<HashSet<u64>>,
}

impl Claimed<'_> {
    fn release(&self, chunks: impl Iterator<Item = u64>) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        let mut set = self.src.inflight.lock().unwrap_or_else(|e| e.into_inner());
        for c in chunks {
            if left.remove(&c) {
                set.remove(&c);
            }
        }
        self.src.landed.notify_all();
    }
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        let left: Vec<u64> = self
            .left
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .collect();
        self.release(left.into_iter());
    }
}

impl HttpSource {
    /// The byte ranges of the object that the hot-range record of the
    /// image starting `base` bytes into it names, if it has a record that
    /// fits it. `Err` says why a record that is there is ignored: damaged,
    /// made for another image (length or superblock UUID), or asking for
    /// most of the image.
    pub fn hot_ranges(&self, base: u64) -> std::result::Result<Option<Vec<(u64, u64)>>, String> {
        self.hot_ranges_of(base, self.object.len.saturating_sub(base))
    }

    /// [`HttpSource::hot_ranges`] of an image of `len` bytes at `base`
    /// that the object holds with more after it (a dm-verity tree).
    pub fn hot_ranges_of(
        &self,
        base: u64,
        len: u64,
    ) -> std::result::Result<Option<Vec<(u64, u64)>>, String> {
        let len = len.min(self.object.len.saturating_sub(base));
        if len < SUPERBLOCK_OFFSET + UUID_AT + 16 {
            return Ok(None);
        }
        let mut area = [0u8; AREA];
        self.read_exact_at(&mut area, base)
            .map_err(|e| format!("reading the boot area: {e}"))?;
        let Some(h) = HotRanges::decode(&area).map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        if h.image_len != len {
            return Err(format!(
                "made for an image of {} bytes, this one has {len}",
                h.image_len
            ));
        }
        let mut uuid = [0u8; 16];
        self.read_exact_at(&mut uuid, base + SUPERBLOCK_OFFSET + UUID_AT)
            .map_err(|e| format!("reading the superblock: {e}"))?;
        if uuid != h.uuid {
            return Err("made for another image (superblock UUID differs)".into());
        }
        let cap = (len / CAP_SHARE).max(CAP_MIN);
        if h.bytes() > cap {
            return Err(format!(
                "names {} bytes, more than half of the image",
                h.bytes()
            ));
        }
        // Inside the image (decode checked), so inside the object.
        Ok(Some(
            h.ranges
                .iter()
                .map(|&(a, b)| (a + base, b + base))
                .collect(),
        ))
    }

    /// Fetches the chunks of `ranges` (byte ranges inside the object) that
    /// the cache does not hold and no reader is fetching, small gaps
    /// included, in requests of up to the request cap spread over the
    /// parallel connections. Returns what it fetched. Once `stop` is set,
    /// no further request is made (those in flight finish).
    pub fn prefetch(&self, ranges: &[(u64, u64)], stop: &AtomicBool) -> io::Result<Stats> {
        let len = self.object.len;
        let mut chunks: Vec<u64> = ranges
            .iter()
            .map(|&(a, b)| (a.min(len), b.min(len)))
            .filter(|(a, b)| a < b)
            .flat_map(|(a, b)| chunks_of(a, b - a, self.chunk))
            .collect();
        chunks.sort_unstable();
        chunks.dedup();
        let gap = JOIN_GAP / self.chunk;
        let mut want: Vec<u64> = Vec::with_capacity(chunks.len());
        for c in chunks {
            if let Some(&l) = want.last() {
                if c > l + 1 && c - l - 1 <= gap {
                    want.extend(l + 1..c);
                }
            }
            want.push(c);
        }
        want.retain(|&c| !self.cache.holds(&self.key, c));
        let claimed = {
            let mut set = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
            want.retain(|&c| set.insert(c));
            Claimed {
                src: self,
                left: Mutex::new(want.iter().copied().collect()),
            }
        };
        let fetches = coalesce(&want, self.max_chunks);
        let run = |group: &[Fetch]| -> io::Result<Stats> {
            let mut st = Stats::default();
            for &f in group {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let (_, data) = self.fetch(f)?;
                self.store_fetched(f, &data)?;
                claimed.release(f.first..f.first + f.count);
                st.requests += 1;
                st.bytes += data.len() as u64;
            }
            Ok(st)
        };
        let results: Vec<io::Result<Stats>> = std::thread::scope(|s| {
            let handles: Vec<_> = spread(&fetches, self.parallel)
                .into_iter()
                .map(|g| s.spawn(move || run(&g)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        drop(claimed);
        let mut total = Stats::default();
        for r in results {
            let st = r?;
            total.requests += st.requests;
            total.bytes += st.bytes;
        }
        Ok(total)
    }
}
