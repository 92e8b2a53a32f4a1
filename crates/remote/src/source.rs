//! [`HttpSource`]: the reader's [`ReadAt`] over an HTTP(S) URL or an S3
//! object. A read is
//! served chunk by chunk from the cache; the missing chunks are fetched in
//! coalesced range requests, several at once for large reads, once however
//! many threads want them, and kept.

use std::collections::HashSet;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use ferrofs::ReadAt;
use sha2::{Digest, Sha256};

use crate::cache::{Cache, KEY_LEN};
use crate::error::{RemoteError, Result};
use crate::http::{Client, HttpOptions, Probe, Validators, WholeBody};
use crate::plan::{chunks_of, coalesce, spread, Fetch};

/// A request and the bytes it brought.
type Fetched = (Fetch, Vec<u8>);

/// How a [`HttpSource`] fetches.
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    pub http: HttpOptions,
    /// Bytes per cached chunk: a multiple of 4096 (rounded up to one).
    pub chunk_size: u64,
    /// Most bytes asked for in one request (adjacent misses beyond it are
    /// split into several requests).
    pub max_request: u64,
    /// Most requests in flight for one read.
    pub parallel: usize,
    /// A server that does not do range requests (`python3 -m
    /// http.server`): download the image whole into the cache once
    /// (`true`, the default), or refuse it.
    pub whole_download: bool,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            http: HttpOptions::default(),
            chunk_size: 256 << 10,
            max_request: 4 << 20,
            parallel: 4,
            whole_download: true,
        }
    }
}

/// Requests made and body bytes received by a source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub requests: u64,
    pub bytes: u64,
}

/// An image (or device) read lazily over HTTP(S) range requests.
pub struct HttpSource {
    pub(crate) client: Client,
    pub(crate) object: Validators,
    pub(crate) key: String,
    pub(crate) cache: Arc<Cache>,
    pub(crate) chunk: u64,
    pub(crate) max_chunks: u64,
    pub(crate) parallel: usize,
    requests: AtomicU64,
    bytes: AtomicU64,
    /// Chunks some reader is fetching now, and the signal that some landed.
    pub(crate) inflight: Mutex<HashSet<u64>>,
    pub(crate) landed: Condvar,
    /// The first change of the object seen (what, was, now): every later
    /// fetch fails with it at once.
    changed: Mutex<Option<(&'static str, String, String)>>,
    /// After a fetch that timed out (or was too slow) for good: until
    /// when the server is not asked, and why.
    quiet_until: Mutex<Option<(Instant, String)>>,
    /// The first read that failed, as its error said.
    failed: Mutex<Option<String>>,
}

/// The cache's name for the object: URL, validators and chunk size, so a
/// changed object (or another chunking) never meets old chunks.
fn object_key(url: &str, v: &Validators, chunk: u64) -> String {
    let mut h = Sha256::new();
    for part in [
        url,
        v.etag.as_deref().unwrap_or(""),
        v.last_modified.as_deref().unwrap_or(""),
        &v.len.to_string(),
        &chunk.to_string(),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    hex[..KEY_LEN].to_owned()
}

impl HttpSource {
    /// Opens `url`: one request for its first byte, which gives its
    /// length, ETag and Last-Modified (checked on every later response)
    /// and shows that the server honours Range. From a server that does
    /// not, the image is downloaded whole into the cache (unless the cache
    /// already holds it), if `opts.whole_download`.
    pub fn open(url: &str, cache: Arc<Cache>, opts: &RemoteOptions) -> Result<HttpSource> {
        Self::open_noting(url, cache, opts, &mut |_| {})
    }

    /// [`HttpSource::open`], calling `before_whole(len)` before a whole
    /// download of `len` bytes starts (to say so).
    pub fn open_noting(
        url: &str,
        cache: Arc<Cache>,
        opts: &RemoteOptions,
        before_whole: &mut dyn FnMut(u64),
    ) -> Result<HttpSource> {
        let client = Client::new(url, opts.http.clone())?;
        Self::open_client(client, url, cache, opts, before_whole)
    }

    /// Opens the S3 object `target` as [`HttpSource::open`] opens a URL,
    /// every request signed with its credentials.
    pub fn open_s3(
        target: crate::s3::Target,
        cache: Arc<Cache>,
        opts: &RemoteOptions,
    ) -> Result<HttpSource> {
        // The cache tells objects apart by the URL requested.
        let url = target.object_url();
        let client = Client::s3(Arc::new(target), opts.http.clone());
        Self::open_client(client, &url, cache, opts, &mut |_| {})
    }

    pub(crate) fn open_client(
        client: Client,
        url: &str,
        cache: Arc<Cache>,
        opts: &RemoteOptions,
        before_whole: &mut dyn FnMut(u64),
    ) -> Result<HttpSource> {
        let (object, body) = match client.probe_or_whole()? {
            Probe::Ranges(v) => (v, None),
            Probe::Whole(v, _) if !opts.whole_download => {
                return Err(RemoteError::NoRangeSupport {
                    url: client.url().to_owned(),
                    status: 200,
                    len: Some(v.len),
                })
            }
            Probe::Whole(v, body) => (v, Some(body)),
        };
        let chunk = opts.chunk_size.max(1).div_ceil(4096) * 4096;
        // The probe's byte, or (counted as read) the whole answer's.
        let probed = if body.is_some() { 0 } else { object.len.min(1) };
        let src = HttpSource {
            key: object_key(url, &object, chunk),
            bytes: AtomicU64::new(probed),
            client,
            object,
            cache,
            chunk,
            max_chunks: (opts.max_request / chunk).max(1),
            parallel: opts.parallel.max(1),
            requests: AtomicU64::new(1),
            inflight: Mutex::new(HashSet::new()),
            landed: Condvar::new(),
            changed: Mutex::new(None),
            quiet_until: Mutex::new(None),
            failed: Mutex::new(None),
        };
        if let Some(body) = body {
            src.store_whole(body, before_whole)?;
        }
        Ok(src)
    }

    /// Keeps every chunk of the whole-object answer `body` in the cache
    /// (nothing is read when the cache holds them all already).
    fn store_whole(&self, mut body: WholeBody, before: &mut dyn FnMut(u64)) -> Result<()> {
        let len = self.object.len;
        let chunks = len.div_ceil(self.chunk);
        if (0..chunks).all(|c| self.cache.holds(&self.key, c)) {
            return Ok(());
        }
        // Every chunk file carries a 4-byte checksum.
        let need = len.saturating_add(chunks.saturating_mul(4));
        if need > self.cache.limit() {
            return Err(RemoteError::TooLargeForWholeDownload {
                url: self.url().to_owned(),
                len,
                limit: self.cache.limit(),
            });
        }
        before(len);
        let mut buf = Vec::new();
        for c in 0..chunks {
            let (start, end) = self.chunk_span(c);
            buf.resize((end - start) as usize, 0);
            self.client.read_whole(&mut body, &mut buf, start)?;
            self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
            self.cache.store(&self.key, c, &buf);
        }
        Ok(())
    }

    /// The URL read.
    pub fn url(&self) -> &str {
        self.client.url()
    }

    /// Requests made and bytes received so far (the opening probe too).
    pub fn stats(&self) -> Stats {
        Stats {
            requests: self.requests.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }

    /// Byte range of chunk `c` in the object.
    pub(crate) fn chunk_span(&self, c: u64) -> (u64, u64) {
        let start = c.saturating_mul(self.chunk);
        (start, start.saturating_add(self.chunk).min(self.object.len))
    }

    /// The change of the object this source has seen, if any (as the
    /// error its reads failed with): from then on every read that needs a
    /// request fails with it, without asking.
    pub fn changed(&self) -> Option<RemoteError> {
        let seen = self.changed.lock().unwrap_or_else(|e| e.into_inner());
        seen.as_ref().map(|(what, was, now)| RemoteError::Changed {
            url: self.url().to_owned(),
            what,
            was: was.clone(),
            now: now.clone(),
        })
    }

    /// The first read of this source that failed (its error's message):
    /// whatever read the image did not see all of it.
    pub fn failed(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Fetches the chunks of `f` in one request.
    pub(crate) fn fetch(&self, f: Fetch) -> Result<Fetched> {
        if let Some(e) = self.changed() {
            return Err(e);
        }
        if let Some((until, why)) = &*self.quiet_until.lock().unwrap_or_else(|e| e.into_inner()) {
            let now = Instant::now();
            if now < *until {
                return Err(RemoteError::Unresponsive {
                    url: self.url().to_owned(),
                    why: why.clone(),
                    left: *until - now,
                });
            }
        }
        let start = self.chunk_span(f.first).0;
        let end = self.chunk_span(f.first + f.count - 1).1;
        self.requests.fetch_add(1, Ordering::Relaxed);
        let data = match self.client.fetch(&self.object, start, end) {
            Ok(data) => data,
            Err(e) => {
                if let RemoteError::Changed { what, was, now, .. } = &e {
                    let mut seen = self.changed.lock().unwrap_or_else(|e| e.into_inner());
                    seen.get_or_insert_with(|| (*what, was.clone(), now.clone()));
                }
                if e.is_unresponsive() {
                    // Every attempt within the deadline failed: give the
                    // server as long again before asking it anything.
                    let msg = e.to_string();
                    let why = msg
                        .strip_prefix(self.url())
                        .and_then(|m| m.strip_prefix(": "))
                        .unwrap_or(&msg)
                        .to_owned();
                    let until = Instant::now() + self.client.options().deadline;
                    *self.quiet_until.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some((until, why));
                }
                return Err(e);
            }
        };
        self.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok((f, data))
    }

    /// Fetches every request of `fetches`, spread over parallel requests.
    fn fetch_all(&self, fetches: &[Fetch]) -> Result<Vec<Fetched>> {
        let groups = spread(fetches, self.parallel);
        if groups.len() <= 1 {
            return fetches.iter().map(|f| self.fetch(*f)).collect();
        }
        let results: Vec<Result<Vec<Fetched>>> = std::thread::scope(|s| {
            let handles: Vec<_> = groups
                .iter()
                .map(|g| s.spawn(move || g.iter().map(|f| self.fetch(*f)).collect()))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        let mut out = Vec::new();
        for r in results {
            out.extend(r?);
        }
        Ok(out)
    }
}

/// Where a read lands: bytes `offset..end` of the object into `buf`.
struct Target<'b> {
    buf: &'b mut [u8],
    offset: u64,
    end: u64,
}

/// Releases claimed chunks (and wakes the waiting readers) when dropped,
/// whether the fetch worked or not.
struct Claim<'s> {
    src: &'s HttpSource,
    chunks: Vec<u64>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut set = self.src.inflight.lock().unwrap_or_else(|e| e.into_inner());
        for c in &self.chunks {
            set.remove(c);
        }
        self.src.landed.notify_all();
    }
}

impl HttpSource {
    /// The part of `t.buf` chunk `c` covers, where in the chunk it starts,
    /// and the chunk's length.
    fn overlap(&self, t: &Target, c: u64) -> (Range<usize>, u64, u64) {
        let (cs, ce) = self.chunk_span(c);
        let (a, b) = (t.offset.max(cs), t.end.min(ce));
        (
            (a - t.offset) as usize..(b - t.offset) as usize,
            a - cs,
            ce - cs,
        )
    }

    /// Fills `t` from the cache where it can; the chunks it could not.
    fn read_cached(&self, t: &mut Target, chunks: impl Iterator<Item = u64>) -> Vec<u64> {
        let mut missing = Vec::new();
        for c in chunks {
            let (dst, within, clen) = self.overlap(t, c);
            if !self.cache.read(&self.key, c, clen, within, &mut t.buf[dst]) {
                missing.push(c);
            }
        }
        missing
    }

    /// Splits `missing` into the chunks this reader now fetches (claimed)
    /// and those another reader is fetching already.
    fn claim(&self, missing: &[u64]) -> (Claim<'_>, Vec<u64>) {
        let mut set = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        let (mine, theirs) = missing.iter().partition(|&&c| set.insert(c));
        (
            Claim {
                src: self,
                chunks: mine,
            },
            theirs,
        )
    }

    /// Waits until no reader is fetching any of `chunks`.
    fn wait_for(&self, chunks: &[u64]) {
        let mut set = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        while chunks.iter().any(|c| set.contains(c)) {
            set = self.landed.wait(set).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Fetches `missing` (coalesced, in parallel), keeps every chunk and
    /// copies its part into `t`.
    fn fetch_into(&self, t: &mut Target, missing: &[u64]) -> io::Result<()> {
        if missing.is_empty() {
            return Ok(());
        }
        for (f, data) in self.fetch_all(&coalesce(missing, self.max_chunks))? {
            let base = self.chunk_span(f.first).0;
            self.store_fetched(f, &data)?;
            for c in f.first..f.first + f.count {
                let (cs, _) = self.chunk_span(c);
                let (dst, within, _) = self.overlap(t, c);
                let w = (cs - base + within) as usize;
                let n = dst.len();
                t.buf[dst].copy_from_slice(&data[w..w + n]);
            }
        }
        Ok(())
    }

    /// Checks that `data` is what `f` asked for and keeps its chunks.
    pub(crate) fn store_fetched(&self, f: Fetch, data: &[u8]) -> io::Result<()> {
        let base = self.chunk_span(f.first).0;
        let stop = self.chunk_span(f.first + f.count - 1).1;
        if data.len() as u64 != stop - base {
            return Err(io::Error::other(format!(
                "{}: {} bytes received for bytes {base}..{stop}",
                self.url(),
                data.len()
            )));
        }
        for c in f.first..f.first + f.count {
            let (cs, ce) = self.chunk_span(c);
            self.cache.store(
                &self.key,
                c,
                &data[(cs - base) as usize..(ce - base) as usize],
            );
        }
        Ok(())
    }
}

impl ReadAt for HttpSource {
    /// Cached chunks are copied; the missing ones are fetched once however
    /// many threads want them: a chunk another reader is fetching is
    /// waited for and then read from the cache (or fetched, should the
    /// cache not have kept it).
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let len = buf.len() as u64;
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= self.object.len)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "{}: read of {len} bytes at {offset} past the end ({})",
                        self.url(),
                        self.object.len
                    ),
                )
            })?;
        let mut t = Target { buf, offset, end };
        let missing = self.read_cached(&mut t, chunks_of(offset, len, self.chunk));
        if missing.is_empty() {
            return Ok(());
        }
        let (mine, theirs) = self.claim(&missing);
        let res = self.fetch_into(&mut t, &mine.chunks);
        drop(mine);
        let res = res.and_then(|()| {
            if !theirs.is_empty() {
                self.wait_for(&theirs);
                let still = self.read_cached(&mut t, theirs.into_iter());
                self.fetch_into(&mut t, &still)?;
            }
            Ok(())
        });
        if let Err(e) = &res {
            let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
            failed.get_or_insert_with(|| e.to_string());
        }
        res
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.object.len)
    }
}
