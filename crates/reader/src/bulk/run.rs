//! Running a plan: workers claim runs of consecutive units (long, far
//! apart runs first, single units at the end), read or decode each unit
//! once within the byte budget, in physical order within the run, and hand
//! the pieces to the sink; the first failure in physical order decides the
//! result.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::bounds::clamp_len;
use crate::cache::Key;
use crate::decompress;
use crate::error::{Error, Location, Result};
use crate::file::fill_direct;
use crate::image::Image;
use crate::map::{Pcluster, PclusterFormat};

use super::{Delivery, ReadPlan, RunOptions, RunStats, Source, Unit};

impl ReadPlan {
    /// Reads every unit, in physical order on `opts.jobs` threads, and
    /// hands each piece to `sink`. A sink error stops the run: units after
    /// the failing one are skipped, and the error of the lowest failing
    /// unit is returned (the same one for any thread count).
    pub fn run<E: Send>(
        &mut self,
        opts: &RunOptions,
        sink: &(dyn Fn(Delivery<'_>) -> std::result::Result<(), E> + Sync),
    ) -> std::result::Result<RunStats, E> {
        self.units.sort_by_key(|u| u.order);
        // Pieces in file order inside a unit (deterministic delivery).
        for u in &mut self.units {
            u.pieces.sort_by_key(|p| (p.file, p.offset));
        }
        let run = Run {
            image: &self.image,
            units: &self.units,
            next: AtomicUsize::new(0),
            stop: AtomicUsize::new(usize::MAX),
            failure: Mutex::new(None),
            budget: Budget::new(opts.memory),
            jobs: opts.jobs.clamp(1, 256),
            cancel: opts.cancel.clone(),
            stats: Counters::default(),
        };
        // No more threads than units; one runs on this thread.
        let jobs = opts.jobs.clamp(1, 256).min(self.units.len().max(1));
        if jobs == 1 {
            run.worker(0, sink);
        } else {
            std::thread::scope(|s| {
                for worker in 0..jobs {
                    let run = &run;
                    s.spawn(move || run.worker(worker, sink));
                }
            });
        }
        let failure = run.failure.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some((_, e)) = failure {
            return Err(e);
        }
        let c = &run.stats;
        Ok(RunStats {
            pclusters_decoded: c.decoded.load(Ordering::Relaxed),
            bytes_decoded: c.decoded_bytes.load(Ordering::Relaxed),
            pclusters_cached: c.cached.load(Ordering::Relaxed),
            bytes_direct: c.direct_bytes.load(Ordering::Relaxed),
            bytes_delivered: c.delivered.load(Ordering::Relaxed),
            units: c.units.load(Ordering::Relaxed),
            interrupted: c.interrupted.load(Ordering::Relaxed),
        })
    }
}

#[derive(Default)]
struct Counters {
    decoded: AtomicU64,
    decoded_bytes: AtomicU64,
    cached: AtomicU64,
    direct_bytes: AtomicU64,
    delivered: AtomicU64,
    units: AtomicU64,
    interrupted: AtomicBool,
}

/// Bytes of data in memory at once, shared by the workers.
struct Budget {
    limit: u64,
    used: Mutex<u64>,
    freed: Condvar,
}

impl Budget {
    fn new(limit: u64) -> Self {
        Self {
            limit: limit.max(1),
            used: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// Waits until `n` more bytes fit (or nothing else is held).
    fn take(&self, n: u64) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        while *used > 0 && used.saturating_add(n) > self.limit {
            used = self.freed.wait(used).unwrap_or_else(|p| p.into_inner());
        }
        *used = used.saturating_add(n);
    }

    fn give(&self, n: u64) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        *used = used.saturating_sub(n);
        self.freed.notify_all();
    }
}

/// A worker claims the units left divided by `SHARE` times the workers (at
/// least one; a quarter with two workers): early claims are long runs far
/// apart, so the workers write different files
/// (two writers of one file wait on its lock) and each reads the image in
/// order; the claims shrink towards the end, so no thread idles while
/// another finishes a long run.
const SHARE: usize = 2;

struct Run<'a, E> {
    image: &'a Image,
    units: &'a [Unit],
    next: AtomicUsize,
    /// Units from this index on are skipped (a sink failed there).
    stop: AtomicUsize,
    /// Workers sharing the units (sizes the claims).
    jobs: usize,
    failure: Mutex<Option<(usize, E)>>,
    budget: Budget,
    cancel: Option<Arc<AtomicBool>>,
    stats: Counters,
}

impl<E> Run<'_, E> {
    fn worker(
        &self,
        worker: usize,
        sink: &(dyn Fn(Delivery<'_>) -> std::result::Result<(), E> + Sync),
    ) {
        let mut buf: Vec<u8> = Vec::new();
        while let Some(claim) = self.claim() {
            for i in claim {
                if i >= self.stop.load(Ordering::Relaxed) {
                    return;
                }
                if self
                    .cancel
                    .as_ref()
                    .is_some_and(|c| c.load(Ordering::Relaxed))
                {
                    self.stats.interrupted.store(true, Ordering::Relaxed);
                    return;
                }
                let Some(unit) = self.units.get(i) else {
                    return;
                };
                if let Err(e) = self.unit(i, unit, worker, &mut buf, sink) {
                    let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
                    if f.as_ref().is_none_or(|(at, _)| i < *at) {
                        *f = Some((i, e));
                    }
                    self.stop.fetch_min(i, Ordering::Relaxed);
                    return;
                }
            }
        }
    }

    /// The next run of units for a worker: a share of those left, in
    /// physical order, or `None` when every unit is taken.
    fn claim(&self) -> Option<std::ops::Range<usize>> {
        let total = self.units.len();
        let mut first = self.next.load(Ordering::Relaxed);
        loop {
            let left = total.checked_sub(first).filter(|&n| n > 0)?;
            let n = left
                .checked_div(self.jobs.saturating_mul(SHARE))
                .unwrap_or(1)
                .max(1);
            let end = first.saturating_add(n);
            match self
                .next
                .compare_exchange_weak(first, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(first..end),
                Err(now) => first = now,
            }
        }
    }

    fn unit(
        &self,
        i: usize,
        unit: &Unit,
        worker: usize,
        buf: &mut Vec<u8>,
        sink: &(dyn Fn(Delivery<'_>) -> std::result::Result<(), E> + Sync),
    ) -> std::result::Result<(), E> {
        let bytes = unit.bytes();
        self.budget.take(bytes);
        let read = self.read(unit, buf);
        let res = match read {
            Ok(data) => unit.pieces.iter().try_for_each(|p| {
                let data = usize::try_from(p.src)
                    .ok()
                    .zip(usize::try_from(p.src.saturating_add(p.len)).ok())
                    .and_then(|(a, b)| data.get(a..b));
                match data {
                    Some(data) => {
                        self.stats.delivered.fetch_add(p.len, Ordering::Relaxed);
                        sink(Delivery::Bytes {
                            file: p.file,
                            offset: p.offset,
                            data,
                            worker,
                        })
                    }
                    None => {
                        let error = Error::corrupt(
                            unit_location(unit),
                            "decoded pcluster shorter than an extent that uses it",
                        );
                        sink(Delivery::Failed {
                            file: Some(p.file),
                            error: &error,
                            unit: i,
                            worker,
                        })
                    }
                }
            }),
            Err(error) => {
                let mut last = None;
                let mut r = Ok(());
                for p in &unit.pieces {
                    if last == Some(p.file) {
                        continue;
                    }
                    last = Some(p.file);
                    r = sink(Delivery::Failed {
                        file: Some(p.file),
                        error: &error,
                        unit: i,
                        worker,
                    });
                    if r.is_err() {
                        break;
                    }
                }
                if unit.pieces.is_empty() {
                    r = sink(Delivery::Failed {
                        file: None,
                        error: &error,
                        unit: i,
                        worker,
                    });
                }
                r
            }
        };
        self.budget.give(bytes);
        self.stats.units.fetch_add(1, Ordering::Relaxed);
        res
    }

    /// The unit's bytes: read raw, or decoded (or taken from the cache).
    fn read<'b>(&self, unit: &Unit, buf: &'b mut Vec<u8>) -> Result<UnitData<'b>> {
        match unit.source {
            Source::Direct(d) => {
                let out = room(buf, clamp_len(d.len, usize::MAX));
                // Every byte is written (zeros for a hole) or it fails.
                fill_direct(self.image, d.base, &d.ext, d.pos, out, true)?;
                self.stats.direct_bytes.fetch_add(d.len, Ordering::Relaxed);
                Ok(UnitData::Buf(out))
            }
            Source::Decode(d) => {
                let PclusterFormat::Codec(alg) = d.pc.format else {
                    return Err(Error::corrupt(d.at, "raw pcluster sent to the decoder"));
                };
                let n = usize::try_from(d.llen)
                    .map_err(|_| Error::corrupt(d.at, "extent too large"))?;
                let key = Key::of(&d.pc);
                if let Some(hit) = self.image.inner.cache.peek(&key).filter(|h| h.len() >= n) {
                    self.stats.cached.fetch_add(1, Ordering::Relaxed);
                    return Ok(UnitData::Cached(hit));
                }
                let out = room(buf, n);
                let pc = Pcluster {
                    partial: !d.exact,
                    ..d.pc
                };
                // The decoder fills all of `out` or fails.
                decompress::decode_with(self.image, &pc, alg, n, out, d.at)?;
                self.image.inner.cache.count_decode(n);
                self.stats.decoded.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .decoded_bytes
                    .fetch_add(d.llen, Ordering::Relaxed);
                Ok(UnitData::Buf(out))
            }
        }
    }
}

/// The first `n` bytes of the worker's buffer, grown (and only the growth
/// zeroed) when it is shorter: every unit overwrites all the bytes it
/// uses, so they need no clearing between units.
fn room(buf: &mut Vec<u8>, n: usize) -> &mut [u8] {
    if buf.len() < n {
        buf.resize(n, 0);
    }
    buf.get_mut(..n).unwrap_or_default()
}

/// A unit's bytes: the worker's buffer or a cached decode.
enum UnitData<'b> {
    Buf(&'b [u8]),
    Cached(Arc<Vec<u8>>),
}

impl UnitData<'_> {
    fn get(&self, r: std::ops::Range<usize>) -> Option<&[u8]> {
        match self {
            UnitData::Buf(b) => b.get(r),
            UnitData::Cached(c) => c.get(r),
        }
    }
}

fn unit_location(unit: &Unit) -> Location {
    match unit.source {
        Source::Direct(d) => d.base.with_offset(d.pos),
        Source::Decode(d) => d.at,
    }
}
