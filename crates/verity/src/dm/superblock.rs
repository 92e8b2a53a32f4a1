//! veritysetup's 512-byte on-disk superblock (version 1, hash type 1 or 0),
//! all little-endian: magic `verity\0\0`, version, hash type, UUID,
//! algorithm name, data and hash block sizes, data block count, salt size
//! and salt.

use super::{HashType, Params, MAX_SALT};
use crate::error::{Error, Result};
use crate::hash::Algorithm;

/// Bytes of the superblock.
pub const SUPERBLOCK_LEN: usize = 512;
/// Its first eight bytes.
pub const SUPERBLOCK_MAGIC: &[u8; 8] = b"verity\0\0";

const VERSION: u32 = 1;
const ALGORITHM_LEN: usize = 32;
const SALT_AT: usize = 88;

/// A little-endian field reader over the superblock's bytes.
struct Fields<'a> {
    bytes: &'a [u8; SUPERBLOCK_LEN],
}

impl Fields<'_> {
    fn take<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        if let Some(src) = at.checked_add(N).and_then(|end| self.bytes.get(at..end)) {
            out.copy_from_slice(src);
        }
        out
    }
    fn u16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.take(at))
    }
    fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.take(at))
    }
    fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.take(at))
    }
}

impl Params {
    /// Parses the superblock `bytes`, read at byte `offset` (named in
    /// errors), and validates the parameters it holds.
    pub fn parse_superblock(bytes: &[u8; SUPERBLOCK_LEN], offset: u64) -> Result<Params> {
        let bad = |why: String| Error::BadSuperblock { offset, why };
        let f = Fields { bytes };
        if &f.take::<8>(0) != SUPERBLOCK_MAGIC {
            return Err(bad("no \"verity\" magic".into()));
        }
        let version = f.u32(8);
        if version != VERSION {
            return Err(bad(format!("version {version} (only 1 is known)")));
        }
        let hash_type = f.u32(12);
        let hash_type = HashType::from_number(hash_type).ok_or_else(|| {
            bad(format!(
                "hash type {hash_type} (1, veritysetup's default, or 0, Chrome OS's)"
            ))
        })?;
        let name = f.take::<ALGORITHM_LEN>(32);
        let name_len = name.iter().position(|&b| b == 0).unwrap_or(ALGORITHM_LEN);
        let name = std::str::from_utf8(name.get(..name_len).unwrap_or_default())
            .map_err(|_| bad("the algorithm name is not text".into()))?;
        let algorithm = Algorithm::from_name(name).map_err(|e| bad(e.to_string()))?;
        let salt_size = usize::from(f.u16(80));
        if salt_size > MAX_SALT {
            return Err(bad(format!(
                "a salt of {salt_size} bytes (at most {MAX_SALT})"
            )));
        }
        let salt = SALT_AT
            .checked_add(salt_size)
            .and_then(|end| bytes.get(SALT_AT..end))
            .ok_or_else(|| bad("salt out of range".into()))?
            .to_vec();
        let params = Params {
            algorithm,
            hash_type,
            data_block_size: f.u32(64),
            hash_block_size: f.u32(68),
            data_blocks: f.u64(72),
            salt,
            uuid: f.take(16),
        };
        params.validate().map_err(|e| bad(e.to_string()))?;
        Ok(params)
    }

    /// The superblock holding these parameters.
    pub fn superblock(&self) -> Result<[u8; SUPERBLOCK_LEN]> {
        self.validate()?;
        let mut b = [0u8; SUPERBLOCK_LEN];
        let name = self.algorithm.name().as_bytes();
        let salt_len =
            u16::try_from(self.salt.len()).map_err(|_| Error::Params("salt too long".into()))?;
        let fields: [(usize, &[u8]); 10] = [
            (0, SUPERBLOCK_MAGIC),
            (8, &VERSION.to_le_bytes()),
            (12, &self.hash_type.number().to_le_bytes()),
            (16, &self.uuid),
            (32, name),
            (64, &self.data_block_size.to_le_bytes()),
            (68, &self.hash_block_size.to_le_bytes()),
            (72, &self.data_blocks.to_le_bytes()),
            (80, &salt_len.to_le_bytes()),
            (SALT_AT, &self.salt),
        ];
        for (at, value) in fields {
            at.checked_add(value.len())
                .and_then(|end| b.get_mut(at..end))
                .ok_or_else(|| Error::Params("superblock field out of range".into()))?
                .copy_from_slice(value);
        }
        Ok(b)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    fn sample() -> Params {
        let mut p = Params::new(512, 1234, vec![1, 2, 3]);
        p.algorithm = Algorithm::Sha512;
        p.uuid = [7; 16];
        p
    }

    #[test]
    fn round_trips() {
        let p = sample();
        let b = p.superblock().unwrap();
        assert_eq!(&b[..8], SUPERBLOCK_MAGIC);
        assert_eq!(&b[32..38], b"sha512");
        assert_eq!(Params::parse_superblock(&b, 0).unwrap(), p);
        let chrome = Params {
            hash_type: HashType::ChromeOs,
            ..p
        };
        let b = chrome.superblock().unwrap();
        assert_eq!(b[12..16], [0; 4]);
        assert_eq!(Params::parse_superblock(&b, 0).unwrap(), chrome);
    }

    #[test]
    fn every_damaged_field_is_a_typed_error() {
        let good = sample().superblock().unwrap();
        let damage: [(usize, u8); 8] = [
            (0, b'V'),  // magic
            (8, 2),     // version
            (12, 2),    // hash type (neither 0 nor 1)
            (32, b'x'), // algorithm name
            (64, 0x13), // data block size not a power of two
            (69, 0xff), // hash block size too large
            (81, 0x10), // salt size 4099
            (72, 0),    // (with 78 below) data blocks
        ];
        for (at, v) in damage {
            let mut b = good;
            b[at] = v;
            if at == 72 {
                b[72..80].fill(0);
            }
            let e = Params::parse_superblock(&b, 4096).unwrap_err();
            assert!(
                matches!(e, Error::BadSuperblock { offset: 4096, .. }),
                "byte {at}: {e}"
            );
        }
        // Every single-byte value anywhere: an error or parameters, no panic.
        for at in 0..SUPERBLOCK_LEN {
            for v in [0u8, 1, 0x80, 0xff] {
                let mut b = good;
                b[at] = v;
                let _ = Params::parse_superblock(&b, 0);
            }
        }
    }
}
