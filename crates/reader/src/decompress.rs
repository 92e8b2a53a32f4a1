//! Decoding one pcluster: read its bytes, strip the zero padding, run the
//! codec for just the prefix a read needs (or the whole extent), and keep
//! the result in the shared cache.

use std::sync::{Arc, Mutex};

use ferrofs_codec::{Algorithm, DecodeMode, Decoder, DecoderConfig};
use ferrofs_format::compress::CompressionConfig;
use ferrofs_format::superblock::incompat;

use crate::cache::Key;
use crate::error::{Error, Location, Result};
use crate::image::Image;
use crate::map::{Pcluster, PclusterFormat};

/// Decoder states reused across pclusters (one per concurrent reader).
pub(crate) struct DecoderPool {
    cfg: DecoderConfig,
    idle: Mutex<Vec<Decoder>>,
}

const MAX_IDLE_DECODERS: usize = 16;

impl DecoderPool {
    pub fn new(cfg: CompressionConfig) -> Self {
        Self {
            cfg: DecoderConfig {
                lzma_dict_size: cfg.lzma_dict_size,
                zstd_window_log: cfg.zstd_window_log,
                deflate_window_bits: cfg.deflate_window_bits,
            },
            idle: Mutex::new(Vec::new()),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Decoder) -> T) -> T {
        let taken = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut d = taken.unwrap_or_else(|| Decoder::new(self.cfg));
        let out = f(&mut d);
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE_DECODERS {
            idle.push(d);
        }
        out
    }
}

/// Requests at least this long are taken as streaming (see [`decoded`]).
pub(crate) const STREAMING_READ: usize = 32 << 10;

/// Returns at least the first `want` decoded bytes of pcluster `pc`, whose
/// extent is `llen` bytes long (`want <= llen`). `streaming`: the request
/// is large ([`STREAMING_READ`]), so the whole extent is decoded at once.
pub(crate) fn decoded(
    image: &Image,
    pc: &Pcluster,
    llen: u64,
    want: u64,
    streaming: bool,
    at: Location,
) -> Result<Arc<Vec<u8>>> {
    let PclusterFormat::Codec(alg) = pc.format else {
        return Err(Error::corrupt(at, "raw pcluster sent to the decoder"));
    };
    let key = Key::of(pc);
    let inner = &image.inner;
    let want_us = usize::try_from(want).map_err(|_| Error::corrupt(at, "extent too large"))?;
    let llen_us = usize::try_from(llen).map_err(|_| Error::corrupt(at, "extent too large"))?;
    if let Ok(hit) = inner.cache.get(&key, want_us) {
        return Ok(hit);
    }
    let flight = inner.flights.join(key);
    flight.run(|_| {
        let target = match inner.cache.get(&key, want_us) {
            Ok(hit) => return Ok(hit),
            // Seen before with a shorter prefix: this is a sequential
            // reader, decode the whole extent once.
            Err(Some(_)) => llen_us,
            // A large read (readahead, a streaming reader) will want the
            // rest next: decode it all now rather than twice. A small one
            // (random access) gets only the prefix it needs.
            Err(None) if streaming => llen_us,
            Err(None) => want_us,
        };
        let mut out = inner.cache.buffer(target, llen_us);
        decode_with(image, pc, alg, llen_us, &mut out, at)?;
        inner.cache.count_decode(out.len());
        let out = Arc::new(out);
        inner.cache.insert(key, out.clone());
        Ok(out)
    })
}

/// Decodes a whole extent straight into the caller's buffer (`out.len()`
/// equals the extent length): no intermediate buffer; concurrent readers
/// of the same pcluster wait for this decode and copy its result from
/// the cache.
pub(crate) fn decode_into(
    image: &Image,
    pc: &Pcluster,
    out: &mut [u8],
    at: Location,
) -> Result<()> {
    let PclusterFormat::Codec(alg) = pc.format else {
        return Err(Error::corrupt(at, "raw pcluster sent to the decoder"));
    };
    let n = out.len();
    let key = Key::of(pc);
    let cache = &image.inner.cache;
    let flight = image.inner.flights.join(key);
    flight.run(|flight| {
        // Someone decoded it while this reader waited, or just before.
        if let Ok(hit) = cache.get(&key, n) {
            // The cache answers only with at least n bytes.
            if let Some(hit) = hit.get(..n) {
                out.copy_from_slice(hit);
                return Ok(());
            }
        }
        decode_with(image, pc, alg, n, out, at)?;
        cache.count_decode(n);
        // A copy for the readers that come next, or at least for those
        // waiting on this decode (a memcpy is far cheaper than decoding
        // again).
        if image.inner.cache_whole_reads || flight.shared() {
            let mut copy = cache.buffer(n, n);
            copy.copy_from_slice(out);
            cache.insert(key, Arc::new(copy));
        }
        Ok(())
    })
}

/// Decodes the first `out.len()` bytes of an extent of `llen` bytes.
pub(crate) fn decode_with(
    image: &Image,
    pc: &Pcluster,
    alg: Algorithm,
    llen: usize,
    out: &mut [u8],
    at: Location,
) -> Result<()> {
    let plen = usize::try_from(pc.len).map_err(|_| Error::corrupt(at, "pcluster too large"))?;
    // A pcluster that failed to decode fails again without decoding: many
    // files (or inodes of a metabox, directories of the packed inode) may
    // share one damaged pcluster.
    let cache = &image.inner.cache;
    let key = Key::of(pc);
    if let Some(e) = cache.failure(&key, out.len(), llen, pc.partial) {
        return Err(e);
    }
    let r = RAW.with(|cell| {
        // Reused across decodes on this thread; an unusually large
        // pcluster's buffer is not kept.
        let mut raw = cell.take();
        // The read overwrites it: only growth is zeroed.
        raw.resize(plen, 0);
        let r = decode_raw(image, pc, alg, llen, out, at, &mut raw);
        if raw.capacity() <= KEEP_RAW {
            cell.replace(raw);
        }
        r
    });
    if let Err(e) = &r {
        // Damage, not an I/O error that may pass (a network source).
        if matches!(e, Error::Codec { .. } | Error::Corrupt { .. }) {
            cache.remember_failure(key, out.len(), llen, pc.partial, e);
        }
    }
    r
}

/// Largest compressed-input buffer a thread keeps between decodes.
const KEEP_RAW: usize = 1 << 20;

thread_local! {
    static RAW: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Reads pcluster `pc` into `raw` (its length) and decodes from it.
fn decode_raw(
    image: &Image,
    pc: &Pcluster,
    alg: Algorithm,
    llen: usize,
    out: &mut [u8],
    at: Location,
    raw: &mut [u8],
) -> Result<()> {
    let target = out.len();
    let inner = &image.inner;
    let plen = raw.len();
    image.read_stored(pc.at, raw)?;
    let padded = alg != Algorithm::Lz4 || inner.sb.has_incompat(incompat::ZERO_PADDING);
    let src: &[u8] = if padded {
        let window = plen.min(inner.bs.usize());
        let start = raw
            .iter()
            .take(window)
            .position(|&b| b != 0)
            .ok_or_else(|| {
                Error::corrupt(
                    at.with_offset(pc.at.bits()),
                    "pcluster padding is all zeros",
                )
            })?;
        raw.get(start..).unwrap_or_default()
    } else {
        raw
    };
    let exact = padded && !pc.partial && target == llen;
    let mode = if exact {
        DecodeMode::Exact
    } else {
        DecodeMode::Prefix
    };
    inner
        .decoders
        .with(|d| d.decompress(alg, src, out, mode))
        .map_err(|source| Error::Codec {
            at: at.with_offset(pc.at.bits()),
            source,
        })
}
