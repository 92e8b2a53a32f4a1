//! Block-level dedupe (`-E dedupe`) inside one image: compressed
//! pclusters, and with no compression the (zero-padded) chunks of
//! chunk-based files, that are already stored are pointed at instead of
//! written again; a hash match is confirmed against the stored bytes.

use std::collections::HashMap;

use crate::error::Result;
use crate::util::out::Writer;

/// The "algorithm" under which [`PclusterDedupe`] keeps raw data chunks.
pub(crate) const CHUNK_KEY: u8 = u8::MAX;

/// `-E dedupe` across files: compressed pclusters already stored (same
/// stream, same decoded length) are pointed at instead of written again.
/// A hash match is confirmed against the stored bytes.
#[derive(Default)]
pub(crate) struct PclusterDedupe {
    seen: HashMap<(u128, u64, u8), u64>,
    shared: u64,
}

impl PclusterDedupe {
    fn key(stream: &[u8], llen: u64, alg: u8) -> (u128, u64, u8) {
        (xxhash_rust::xxh3::xxh3_128(stream), llen, alg)
    }

    pub(crate) fn find(
        &mut self,
        w: &mut Writer,
        stream: &[u8],
        llen: u64,
        alg: u8,
        bs: u64,
    ) -> Result<Option<u64>> {
        let Some(&pblk) = self.seen.get(&Self::key(stream, llen, alg)) else {
            return Ok(None);
        };
        let end = (pblk + (stream.len() as u64).div_ceil(bs)) * bs;
        let mut stored = vec![0u8; stream.len()];
        w.read_back(&mut stored, end - stream.len() as u64)?;
        if stored != stream {
            return Ok(None);
        }
        self.shared += 1;
        Ok(Some(pblk))
    }

    pub(crate) fn insert(&mut self, stream: &[u8], llen: u64, alg: u8, pblk: u64) {
        self.seen
            .entry(Self::key(stream, llen, alg))
            .or_insert(pblk);
    }
}
