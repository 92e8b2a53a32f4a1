//! Where each level of a dm-verity tree lies, as veritysetup computes it:
//! as many levels as it takes for one hash block to cover every data
//! block, the top level first, each level a whole number of hash blocks.

use super::Params;
use crate::error::{Error, Result};
use crate::hash::Algorithm;

/// Most levels a tree may have (veritysetup's limit).
const MAX_LEVELS: usize = 63;

/// One level of the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    /// Its first hash block, counted from the tree's start.
    pub start: u64,
    /// How many hash blocks it has.
    pub blocks: u64,
}

/// The shape of a tree: digests per hash block and the levels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// The hash algorithm.
    pub algorithm: Algorithm,
    /// Where the salt goes in each digest.
    pub hash_type: super::HashType,
    /// Bytes per data block.
    pub data_block_size: u32,
    /// Bytes per hash block.
    pub hash_block_size: u32,
    /// Data blocks covered.
    pub data_blocks: u64,
    /// Bytes a digest takes in a hash block (its length rounded up to a
    /// power of two; the rest zero).
    pub digest_slot: usize,
    /// log2 of the digests per hash block.
    pub per_block_bits: u32,
    /// The levels, `levels[0]` over the data (stored last), the last one
    /// the single top block (stored first). Empty for one data block: its
    /// digest is the root hash.
    pub levels: Vec<Level>,
}

impl Geometry {
    /// The geometry of the tree `params` describe.
    pub fn new(params: &Params) -> Result<Self> {
        params.validate()?;
        let digest_len = params.algorithm.digest_len();
        let digest_slot = digest_len.next_power_of_two();
        let per_block = (params.hash_block_size as usize)
            .checked_div(digest_slot)
            .filter(|&n| n >= 2)
            .ok_or_else(|| {
                Error::Params(format!(
                    "a hash block of {} bytes holds fewer than two {} digests",
                    params.hash_block_size, params.algorithm
                ))
            })?;
        // Both sizes are powers of two: so is the quotient.
        let per_block_bits = per_block.trailing_zeros();
        let last = params.data_blocks.saturating_sub(1);
        let mut count: u32 = 0;
        while per_block_bits.saturating_mul(count) < 64
            && last
                .checked_shr(per_block_bits.saturating_mul(count))
                .unwrap_or(0)
                != 0
        {
            count = count.saturating_add(1);
        }
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        if count > MAX_LEVELS {
            return Err(Error::Params(format!("a tree of {count} levels")));
        }
        let mut levels = vec![
            Level {
                start: 0,
                blocks: 0
            };
            count
        ];
        let mut pos: u64 = 0;
        for (i, level) in levels.iter_mut().enumerate().rev() {
            let shift = u32::try_from(i)
                .ok()
                .and_then(|i| i.checked_add(1))
                .and_then(|i| i.checked_mul(per_block_bits))
                .ok_or_else(|| Error::Params("tree level overflows".into()))?;
            let blocks = ceil_shr(params.data_blocks, shift);
            *level = Level { start: pos, blocks };
            pos = pos
                .checked_add(blocks)
                .ok_or_else(|| Error::Params("tree size overflows".into()))?;
        }
        Ok(Geometry {
            algorithm: params.algorithm,
            hash_type: params.hash_type,
            data_block_size: params.data_block_size,
            hash_block_size: params.hash_block_size,
            data_blocks: params.data_blocks,
            digest_slot,
            per_block_bits,
            levels,
        })
    }

    /// The salted digest of a data or hash block.
    pub fn digest(&self, salt: &[u8], block: &[u8]) -> crate::hash::Digest {
        self.hash_type.digest(self.algorithm, salt, block)
    }

    /// Appends to `out` the salted digests of the `block_size`-byte blocks
    /// `blocks` holds, many at a time.
    pub fn digests(
        &self,
        salt: &[u8],
        blocks: &[u8],
        block_size: usize,
        out: &mut Vec<crate::hash::Digest>,
    ) {
        self.hash_type
            .digests(self.algorithm, salt, blocks, block_size, out);
    }

    /// Hash blocks in the whole tree.
    pub fn tree_blocks(&self) -> u64 {
        self.levels
            .iter()
            .fold(0u64, |n, l| n.saturating_add(l.blocks))
    }

    /// Bytes of the whole tree.
    pub fn tree_len(&self) -> Result<u64> {
        self.tree_blocks()
            .checked_mul(u64::from(self.hash_block_size))
            .ok_or_else(|| Error::Params("tree size overflows".into()))
    }

    /// The hash block (within level `level + 1`, or the root for the top
    /// level) holding the digest of block `index` of level `level` (level
    /// `None`: the data), and the byte of its slot in that block.
    pub fn parent(&self, index: u64) -> (u64, usize) {
        let block = index.checked_shr(self.per_block_bits).unwrap_or(0);
        let mask = (1u64 << self.per_block_bits).saturating_sub(1);
        let slot = usize::try_from(index & mask)
            .unwrap_or(0)
            .saturating_mul(self.digest_slot);
        (block, slot)
    }

    /// Byte offset, from the tree's start, of block `index` of `level`.
    pub fn block_offset(&self, level: usize, index: u64) -> Result<u64> {
        let l = self
            .levels
            .get(level)
            .filter(|l| index < l.blocks)
            .ok_or_else(|| Error::Params(format!("no hash block {index} at level {level}")))?;
        l.start
            .checked_add(index)
            .and_then(|b| b.checked_mul(u64::from(self.hash_block_size)))
            .ok_or_else(|| Error::Params("hash block offset overflows".into()))
    }
}

/// `ceil(n / 2^shift)`, 1 for any nonzero `n` once `shift` reaches 64.
fn ceil_shr(n: u64, shift: u32) -> u64 {
    if shift >= 64 {
        return u64::from(n != 0);
    }
    let q = n >> shift;
    let rem = n & ((1u64 << shift).saturating_sub(1));
    q.saturating_add(u64::from(rem != 0))
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    fn geo(data_blocks: u64, dbs: u32, alg: Algorithm) -> Geometry {
        let mut p = Params::new(dbs, data_blocks, vec![]);
        p.algorithm = alg;
        p.geometry().unwrap()
    }

    #[test]
    fn levels_as_veritysetup_counts_them() {
        let g = geo(1, 4096, Algorithm::Sha256);
        assert!(g.levels.is_empty());
        let g = geo(2, 4096, Algorithm::Sha256);
        assert_eq!(
            g.levels,
            vec![Level {
                start: 0,
                blocks: 1
            }]
        );
        let g = geo(128, 4096, Algorithm::Sha256);
        assert_eq!(g.levels.len(), 1);
        // 129 blocks: two level-0 blocks under one top block.
        let g = geo(129, 4096, Algorithm::Sha256);
        assert_eq!(
            g.levels,
            vec![
                Level {
                    start: 1,
                    blocks: 2
                },
                Level {
                    start: 0,
                    blocks: 1
                }
            ]
        );
        assert_eq!(g.tree_blocks(), 3);
        assert_eq!(g.block_offset(0, 1).unwrap(), 2 * 4096);
        assert!(g.block_offset(0, 2).is_err());
        assert!(g.block_offset(2, 0).is_err());
        // sha512: 64 digests per block.
        let g = geo(65, 512, Algorithm::Sha512);
        assert_eq!(g.per_block_bits, 6);
        assert_eq!(g.levels.len(), 2);
        // The largest count still has a bounded number of levels.
        let g = geo(u64::MAX / 4096, 4096, Algorithm::Sha256);
        assert_eq!(g.levels.len(), 8);
        assert_eq!(g.parent(130), (1, 2 * 32));
    }

    #[test]
    fn refuses_impossible_parameters() {
        assert!(Params::new(4096, 0, vec![]).geometry().is_err());
        assert!(Params::new(1000, 1, vec![]).geometry().is_err());
        assert!(Params::new(4096, u64::MAX, vec![]).geometry().is_err());
        assert!(Params::new(4096, 1, vec![0; 257]).geometry().is_err());
        let mut p = Params::new(512, 4, vec![]);
        p.hash_block_size = 64;
        assert!(p.geometry().is_err());
    }
}
