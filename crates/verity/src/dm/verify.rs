//! Reading data through a dm-verity tree: every data block checked
//! against its digest before a byte of it is returned, the hash blocks on
//! its path checked once from the root down and kept in a bounded cache.
//! Only the hash blocks on the paths of blocks read are ever read, so over
//! a lazily fetched source the tree is fetched lazily too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use super::build::read_padded;
use super::{Geometry, Params};
use crate::error::{Error, Result};
use crate::hash::{to_hex, Digest};
use crate::source::Bytes;

/// Hash blocks kept verified by default (4 MiB of 4 KiB blocks: the upper
/// levels of any image and the bottom level of a 512 MiB one).
pub const DEFAULT_CACHE_BLOCKS: usize = 1024;

/// Verified hash blocks by (level, index).
type Cache = HashMap<(usize, u64), Arc<[u8]>>;

/// Most data blocks [`Verified::verify_all`] and
/// [`Verified::verify_rest`] read and check at once.
const RUN_BLOCKS: usize = 64;

/// Most data blocks whose checks are remembered (a 128 MiB bitmap; a tree
/// over more blocks, or over more than the data holds, remembers none).
const MAX_TRACKED_BLOCKS: u64 = 1 << 30;

/// Data read through a dm-verity tree.
pub struct Verified<D, H> {
    data: D,
    hash: H,
    data_len: u64,
    tree_offset: u64,
    params: Params,
    geometry: Geometry,
    root: Vec<u8>,
    /// Read-locked on the hot path (a hit), write-locked to insert.
    cache: RwLock<Cache>,
    cache_blocks: usize,
    /// One bit per data block checked so far, good or not (so that
    /// [`Verified::verify_rest`] checks only the others).
    checked: Vec<AtomicU64>,
}

impl<D: Bytes, H: Bytes> Verified<D, H> {
    /// `data` checked against the tree `params` describe, stored in `hash`
    /// from byte `tree_offset` (see [`super::tree_offset`]), whose root
    /// hash is `root`. The root is checked here: a wrong root hash (or a
    /// damaged top block) fails now, not at the first read.
    pub fn open(data: D, hash: H, tree_offset: u64, params: Params, root: &[u8]) -> Result<Self> {
        let geometry = params.geometry()?;
        if root.len() != params.algorithm.digest_len() {
            return Err(Error::WrongRoot {
                expected: to_hex(root),
                actual: format!(
                    "a {}-byte {} digest",
                    params.algorithm.digest_len(),
                    params.algorithm
                ),
            });
        }
        let data_len = data.len().map_err(|source| Error::Io {
            what: "data",
            offset: 0,
            source,
        })?;
        let dbs = u64::from(params.data_block_size.max(1));
        let tracked = params.data_blocks <= data_len.div_ceil(dbs).saturating_add(1)
            && params.data_blocks <= MAX_TRACKED_BLOCKS;
        let words = match tracked {
            true => usize::try_from(params.data_blocks.div_ceil(64)).unwrap_or(0),
            false => 0,
        };
        let checked = (0..words).map(|_| AtomicU64::new(0)).collect();
        let v = Verified {
            checked,
            data,
            hash,
            data_len,
            tree_offset,
            params,
            geometry,
            root: root.to_vec(),
            cache: RwLock::new(HashMap::new()),
            cache_blocks: DEFAULT_CACHE_BLOCKS,
        };
        match v.geometry.levels.len().checked_sub(1) {
            Some(top) => {
                v.hash_block(top, 0)?;
            }
            None => {
                let mut block = vec![0u8; v.params.data_block_size as usize];
                v.read_data_blocks(0, &mut block)?;
            }
        }
        Ok(v)
    }

    /// Keeps at most `blocks` verified hash blocks (at least 1).
    pub fn with_cache_blocks(mut self, blocks: usize) -> Self {
        self.cache_blocks = blocks.max(1);
        self
    }

    /// The tree's parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Bytes the tree covers (the data blocks, the last one padded).
    pub fn len(&self) -> u64 {
        self.params.data_len().unwrap_or(0)
    }

    /// Whether the tree covers no bytes (never: a tree has a data block).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` with verified data from byte `offset`: every data block
    /// the range touches is read whole and checked first.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let len = buf.len() as u64;
        let covered = self.len();
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= covered)
            .ok_or(Error::OutOfRange {
                offset,
                len,
                covered,
            })?;
        if buf.is_empty() {
            return Ok(());
        }
        let dbs = u64::from(self.params.data_block_size);
        let first = offset.checked_div(dbs).unwrap_or(0);
        let last = end.saturating_sub(1).checked_div(dbs).unwrap_or(0);
        let start = first.saturating_mul(dbs);
        let stop = last.saturating_add(1).saturating_mul(dbs);
        let aligned = start == offset && stop == end;
        let mut span = if aligned {
            Vec::new()
        } else {
            vec![0u8; usize::try_from(stop.saturating_sub(start)).unwrap_or(0)]
        };
        let whole: &mut [u8] = if aligned { buf } else { &mut span };
        read_padded(&self.data, whole, start, self.data_len)?;
        self.check_data_blocks(first, whole)?;
        if !aligned {
            let skip = usize::try_from(offset.saturating_sub(start)).unwrap_or(0);
            let src = skip
                .checked_add(buf.len())
                .and_then(|e| span.get(skip..e))
                .ok_or(Error::OutOfRange {
                    offset,
                    len,
                    covered,
                })?;
            buf.copy_from_slice(src);
        }
        Ok(())
    }

    /// Reads the data blocks from `first` on into `buf` (whole blocks)
    /// and checks them.
    fn read_data_blocks(&self, first: u64, buf: &mut [u8]) -> Result<()> {
        let offset = first.saturating_mul(u64::from(self.params.data_block_size));
        read_padded(&self.data, buf, offset, self.data_len)?;
        self.check_data_blocks(first, buf)
    }

    /// Checks the data blocks from `first` on, whose bytes are `blocks`
    /// (whole blocks): their digests are taken together, then each is
    /// checked in order, so the first bad block is the one reported.
    fn check_data_blocks(&self, first: u64, blocks: &[u8]) -> Result<()> {
        let mut digests = Vec::new();
        self.geometry.digests(
            &self.params.salt,
            blocks,
            self.params.data_block_size as usize,
            &mut digests,
        );
        for (i, digest) in digests.iter().enumerate() {
            self.check_digest(first.saturating_add(i as u64), digest)?;
        }
        Ok(())
    }

    /// Checks data block `index`, whose digest is `digest`.
    fn check_digest(&self, index: u64, digest: &Digest) -> Result<()> {
        let good = if self.geometry.levels.is_empty() {
            index == 0 && digest.as_bytes() == self.root.as_slice()
        } else {
            let (parent, slot) = self.geometry.parent(index);
            let hb = self.hash_block(0, parent)?;
            self.slot_matches(&hb, slot, digest.as_bytes())
        };
        // Checked, whatever the outcome: a mismatch is reported by the
        // read that found it, not again by `verify_rest`.
        self.mark(index);
        if good {
            return Ok(());
        }
        if self.geometry.levels.is_empty() {
            return Err(Error::WrongRoot {
                expected: to_hex(&self.root),
                actual: to_hex(digest.as_bytes()),
            });
        }
        Err(Error::DataMismatch {
            block: index,
            offset: index.saturating_mul(u64::from(self.params.data_block_size)),
            size: self.params.data_block_size,
        })
    }

    fn slot_matches(&self, block: &[u8], slot: usize, digest: &[u8]) -> bool {
        slot.checked_add(digest.len())
            .and_then(|end| block.get(slot..end))
            .is_some_and(|stored| stored == digest)
    }

    /// Hash block `index` of `level`, verified (against the root for the
    /// top level, else against its parent, verified first).
    fn hash_block(&self, level: usize, index: u64) -> Result<Arc<[u8]>> {
        let key = (level, index);
        let hit = self
            .cache
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        if let Some(b) = hit {
            return Ok(b);
        }
        let offset = self
            .geometry
            .block_offset(level, index)?
            .checked_add(self.tree_offset)
            .ok_or_else(|| Error::Params("hash block offset overflows".into()))?;
        let mut block = vec![0u8; self.geometry.hash_block_size as usize];
        self.hash
            .read_exact_at(&mut block, offset)
            .map_err(|source| Error::Io {
                what: "hash device",
                offset,
                source,
            })?;
        let digest = self.geometry.digest(&self.params.salt, &block);
        let top = level.checked_add(1) == Some(self.geometry.levels.len());
        if top {
            if digest.as_bytes() != self.root.as_slice() {
                return Err(Error::WrongRoot {
                    expected: to_hex(&self.root),
                    actual: to_hex(digest.as_bytes()),
                });
            }
        } else {
            let (parent, slot) = self.geometry.parent(index);
            let above = self.hash_block(level.saturating_add(1), parent)?;
            if !self.slot_matches(&above, slot, digest.as_bytes()) {
                return Err(Error::HashMismatch {
                    level,
                    index,
                    offset,
                });
            }
        }
        let block: Arc<[u8]> = block.into();
        let mut cache = self.cache.write().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= self.cache_blocks {
            // Evict a bottom-level block first: the upper levels are few
            // and on every path.
            let victim = cache.keys().min_by_key(|(l, _)| *l).copied();
            if let Some(k) = victim {
                cache.remove(&k);
            }
        }
        cache.insert(key, block.clone());
        Ok(block)
    }

    /// Reads and checks every data block (what `veritysetup verify` does).
    pub fn verify_all(&self) -> Result<()> {
        self.verify_where(|_| true).map(|_| ())
    }

    /// Reads and checks every data block no read has checked yet (the
    /// blocks a file system check never reads: free space, padding), so
    /// that with the reads before it every block the tree covers has been
    /// checked once. Returns how many it checked.
    pub fn verify_rest(&self) -> Result<u64> {
        self.verify_where(|index| !self.was_checked(index))
    }

    /// Reads and checks the data blocks `wanted` picks, in order, in runs
    /// of up to [`RUN_BLOCKS`]; returns how many.
    fn verify_where(&self, wanted: impl Fn(u64) -> bool) -> Result<u64> {
        let dbs = self.params.data_block_size as usize;
        let mut buf = vec![0u8; dbs.saturating_mul(RUN_BLOCKS)];
        let total = self.params.data_blocks;
        let mut n = 0u64;
        let mut index = 0u64;
        while index < total {
            if !wanted(index) {
                index = index.saturating_add(1);
                continue;
            }
            let mut run: usize = 1;
            while run < RUN_BLOCKS
                && index.saturating_add(run as u64) < total
                && wanted(index.saturating_add(run as u64))
            {
                run = run.saturating_add(1);
            }
            let part = buf.get_mut(..run.saturating_mul(dbs)).unwrap_or_default();
            self.read_data_blocks(index, part)?;
            n = n.saturating_add(run as u64);
            index = index.saturating_add(run as u64);
        }
        Ok(n)
    }

    /// The word and bit of data block `index` in `checked`.
    fn bit(&self, index: u64) -> Option<(&AtomicU64, u64)> {
        let word = usize::try_from(index / 64).ok()?;
        Some((self.checked.get(word)?, 1u64 << (index % 64)))
    }

    fn mark(&self, index: u64) {
        if let Some((w, b)) = self.bit(index) {
            w.fetch_or(b, Ordering::Relaxed);
        }
    }

    fn was_checked(&self, index: u64) -> bool {
        self.bit(index)
            .is_some_and(|(w, b)| w.load(Ordering::Relaxed) & b != 0)
    }
}
