//! dm-verity hash trees in `veritysetup`'s format (hash types 1 and 0): the
//! parameters of a tree, its on-disk superblock, where each level lies,
//! building one over data and checking data against one.

mod build;
mod geometry;
mod superblock;
mod verify;
mod write;

pub use build::{build, build_with_threads, Tree};
pub use geometry::{Geometry, Level};
pub use superblock::{SUPERBLOCK_LEN, SUPERBLOCK_MAGIC};
pub use verify::{Verified, DEFAULT_CACHE_BLOCKS};
pub use write::{append, append_file, write_hash_file, WriteOptions, Written};

use crate::error::{Error, Result};
use crate::hash::Algorithm;

/// Longest salt a superblock holds.
pub const MAX_SALT: usize = 256;

/// Smallest and largest data or hash block size accepted.
pub const MIN_BLOCK: u32 = 512;
/// See [`MIN_BLOCK`].
pub const MAX_BLOCK: u32 = 65536;

/// How a block's digest is taken: where the salt goes. For the algorithms
/// supported (whose digests are powers of two long) it is the types' one
/// difference; veritysetup's `--format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HashType {
    /// Chrome OS's original format (`--format=0`): the block, then the salt.
    ChromeOs,
    /// veritysetup's default (`--format=1`): the salt, then the block.
    #[default]
    Normal,
}

impl HashType {
    /// The type with veritysetup's number (`--format`, the superblock's
    /// hash type field).
    pub fn from_number(n: u32) -> Option<Self> {
        match n {
            0 => Some(HashType::ChromeOs),
            1 => Some(HashType::Normal),
            _ => None,
        }
    }

    /// veritysetup's number for it.
    pub fn number(self) -> u32 {
        match self {
            HashType::ChromeOs => 0,
            HashType::Normal => 1,
        }
    }

    /// The salted digest of `block` with `algorithm`.
    pub fn digest(self, algorithm: Algorithm, salt: &[u8], block: &[u8]) -> crate::hash::Digest {
        match self {
            HashType::ChromeOs => algorithm.hash(&[block, salt]),
            HashType::Normal => algorithm.hash(&[salt, block]),
        }
    }

    /// Appends to `out` the salted digest of each `block_size`-byte block
    /// of `blocks`, many at a time (see [`Algorithm::hash_blocks`]).
    pub fn digests(
        self,
        algorithm: Algorithm,
        salt: &[u8],
        blocks: &[u8],
        block_size: usize,
        out: &mut Vec<crate::hash::Digest>,
    ) {
        match self {
            HashType::ChromeOs => algorithm.hash_blocks(&[], blocks, block_size, salt, out),
            HashType::Normal => algorithm.hash_blocks(salt, blocks, block_size, &[], out),
        }
    }
}

impl std::str::FromStr for HashType {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        s.trim()
            .parse::<u32>()
            .ok()
            .and_then(HashType::from_number)
            .ok_or_else(|| format!("{s:?}: 0 (Chrome OS) or 1 (veritysetup's default)"))
    }
}

/// Everything that defines a tree (what veritysetup's superblock stores).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// The hash algorithm.
    pub algorithm: Algorithm,
    /// Where the salt goes in each digest (hash type 1 unless given).
    pub hash_type: HashType,
    /// Bytes per data block (512 or 4096 in practice).
    pub data_block_size: u32,
    /// Bytes per hash block (4096 by default).
    pub hash_block_size: u32,
    /// How many data blocks the tree covers.
    pub data_blocks: u64,
    /// The salt hashed before every block (at most [`MAX_SALT`] bytes).
    pub salt: Vec<u8>,
    /// The superblock's UUID (not covered by the root hash).
    pub uuid: [u8; 16],
}

impl Params {
    /// Parameters with veritysetup's defaults (sha256, 4096-byte blocks),
    /// the given salt, and `data_blocks` data blocks of `data_block_size`.
    pub fn new(data_block_size: u32, data_blocks: u64, salt: Vec<u8>) -> Self {
        Params {
            algorithm: Algorithm::Sha256,
            hash_type: HashType::Normal,
            data_block_size,
            hash_block_size: 4096,
            data_blocks,
            salt,
            uuid: [0; 16],
        }
    }

    /// Checks what every tree needs: power-of-two block sizes in range, a
    /// hash block holding at least two digests, a short enough salt, and
    /// at least one data block (veritysetup refuses an empty device).
    pub fn validate(&self) -> Result<()> {
        for (what, size) in [
            ("data", self.data_block_size),
            ("hash", self.hash_block_size),
        ] {
            if !size.is_power_of_two() || !(MIN_BLOCK..=MAX_BLOCK).contains(&size) {
                return Err(Error::Params(format!(
                    "{what} block size {size} (a power of two from {MIN_BLOCK} to {MAX_BLOCK})"
                )));
            }
        }
        if self.salt.len() > MAX_SALT {
            return Err(Error::Params(format!(
                "a salt of {} bytes (at most {MAX_SALT})",
                self.salt.len()
            )));
        }
        if self.data_blocks == 0 {
            return Err(Error::Params("no data blocks to protect".into()));
        }
        self.data_len()?;
        Ok(())
    }

    /// Bytes of data the tree covers.
    pub fn data_len(&self) -> Result<u64> {
        self.data_blocks
            .checked_mul(u64::from(self.data_block_size))
            .ok_or_else(|| Error::Params(format!("{} data blocks overflow", self.data_blocks)))
    }

    /// The tree's geometry (validating the parameters).
    pub fn geometry(&self) -> Result<Geometry> {
        Geometry::new(self)
    }

    /// The salt veritysetup would not pick but ferrofs does when none is
    /// given: derived from the data's first block and length, so the same
    /// image always gets the same salt (reproducible builds) while two
    /// images (with their own EROFS UUIDs) get different ones.
    pub fn derived_salt(algorithm: Algorithm, first_block: &[u8], data_len: u64) -> Vec<u8> {
        algorithm
            .hash(&[
                b"ferrofs dm-verity salt\0",
                &data_len.to_le_bytes(),
                first_block,
            ])
            .as_bytes()
            .to_vec()
    }

    /// A UUID derived from the root hash and salt (RFC 4122 version 4
    /// bits set), for reproducible superblocks.
    pub fn derived_uuid(&self, root: &[u8]) -> [u8; 16] {
        let d = self
            .algorithm
            .hash(&[b"ferrofs dm-verity uuid\0", &self.salt, root]);
        let mut uuid = [0u8; 16];
        for (u, b) in uuid.iter_mut().zip(d.as_bytes()) {
            *u = *b;
        }
        if let Some(b) = uuid.get_mut(6) {
            *b = (*b & 0x0f) | 0x40;
        }
        if let Some(b) = uuid.get_mut(8) {
            *b = (*b & 0x3f) | 0x80;
        }
        uuid
    }
}

/// Where a tree starts in its hash device: after the 512-byte superblock
/// at `hash_offset`, rounded up to a hash block (as veritysetup places it),
/// or at `hash_offset` itself without a superblock.
pub fn tree_offset(hash_offset: u64, hash_block_size: u32, superblock: bool) -> Result<u64> {
    let bs = u64::from(hash_block_size);
    let start = if superblock {
        hash_offset.checked_add(SUPERBLOCK_LEN as u64)
    } else {
        Some(hash_offset)
    };
    start
        .and_then(|s| s.checked_next_multiple_of(bs))
        .ok_or_else(|| Error::Params(format!("hash offset {hash_offset} overflows")))
}

/// The UUID as text (`8-4-4-4-12` hex digits).
pub fn uuid_text(uuid: &[u8; 16]) -> String {
    let hex = crate::hash::to_hex(uuid);
    let part = |r: std::ops::Range<usize>| hex.get(r).unwrap_or_default().to_string();
    [
        part(0..8),
        part(8..12),
        part(12..16),
        part(16..20),
        part(20..32),
    ]
    .join("-")
}
