//! The hash algorithms trees use (sha256, sha512), salted block digests
//! (one at a time, or many blocks at once), and hex text for root hashes
//! and salts.

use sha2::{Digest as _, Sha256, Sha512};

use crate::error::{Error, Result};

/// Largest digest of any algorithm here (sha512).
pub const MAX_DIGEST: usize = 64;

/// Blocks [`Algorithm::hash_blocks`] hands the multi-buffer kernel at once
/// (enough for every lane of its widest backend).
const GROUP: usize = 32;

/// A tree's hash algorithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// SHA-256 (veritysetup's and fs-verity's default).
    #[default]
    Sha256,
    /// SHA-512.
    Sha512,
}

/// A digest of at most [`MAX_DIGEST`] bytes, of which `len` are used.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Digest {
    bytes: [u8; MAX_DIGEST],
    len: usize,
}

impl Digest {
    /// A digest holding `bytes` (at most [`MAX_DIGEST`] of them).
    fn from_bytes(bytes: &[u8]) -> Self {
        let mut out = [0u8; MAX_DIGEST];
        let len = bytes.len().min(MAX_DIGEST);
        if let (Some(dst), Some(src)) = (out.get_mut(..len), bytes.get(..len)) {
            dst.copy_from_slice(src);
        }
        Digest { bytes: out, len }
    }

    /// The digest's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&to_hex(self.as_bytes()))
    }
}

impl Algorithm {
    /// The name veritysetup stores and prints (`sha256`, `sha512`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha512 => "sha512",
        }
    }

    /// The algorithm named `name` (as in a verity superblock, any case).
    pub fn from_name(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "sha256" => Ok(Algorithm::Sha256),
            "sha512" => Ok(Algorithm::Sha512),
            _ => Err(Error::Params(format!(
                "hash algorithm {name:?} (sha256 and sha512 are supported)"
            ))),
        }
    }

    /// Bytes of a digest.
    pub fn digest_len(self) -> usize {
        match self {
            Algorithm::Sha256 => 32,
            Algorithm::Sha512 => 64,
        }
    }

    /// The digest of `parts` hashed one after the other.
    pub fn hash(self, parts: &[&[u8]]) -> Digest {
        let mut bytes = [0u8; MAX_DIGEST];
        let len = self.digest_len();
        let out = bytes.get_mut(..len).unwrap_or_default();
        match self {
            Algorithm::Sha256 => {
                let mut h = Sha256::new();
                parts.iter().for_each(|p| h.update(p));
                out.copy_from_slice(&h.finalize());
            }
            Algorithm::Sha512 => {
                let mut h = Sha512::new();
                parts.iter().for_each(|p| h.update(p));
                out.copy_from_slice(&h.finalize());
            }
        }
        Digest { bytes, len }
    }

    /// Appends to `out` the digest of `prefix`, a block and `suffix` for
    /// each `block_size`-byte block of `blocks`, in order (a short last
    /// block is hashed as it is). The blocks are independent messages, so
    /// SHA-256 hashes many at once: while one message's rounds wait on each
    /// other the CPU's SHA unit works on the others, which nearly doubles
    /// its throughput over 4 KiB blocks.
    pub fn hash_blocks(
        self,
        prefix: &[u8],
        blocks: &[u8],
        block_size: usize,
        suffix: &[u8],
        out: &mut Vec<Digest>,
    ) {
        if block_size == 0 || blocks.is_empty() {
            return;
        }
        match self {
            // One block (most metadata reads) leaves the other lanes idle,
            // where `sha2` is about 7 % faster.
            Algorithm::Sha256 if blocks.len() <= block_size => {
                out.push(self.hash(&[prefix, blocks, suffix]));
            }
            Algorithm::Sha256 => {
                let mut digests = [[0u8; 32]; GROUP];
                let mut msgs = Vec::with_capacity(GROUP);
                for group in blocks.chunks(block_size.saturating_mul(GROUP)) {
                    msgs.clear();
                    msgs.extend(group.chunks(block_size).map(|body| tape_sha256::Message {
                        prefix,
                        body,
                        tail: suffix,
                    }));
                    let Some(dst) = digests.get_mut(..msgs.len()) else {
                        return;
                    };
                    tape_sha256::hash_messages(&msgs, dst);
                    out.extend(dst.iter().map(|d| Digest::from_bytes(d)));
                }
            }
            Algorithm::Sha512 => out.extend(
                blocks
                    .chunks(block_size)
                    .map(|block| self.hash(&[prefix, block, suffix])),
            ),
        }
    }
}

impl std::str::FromStr for Algorithm {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::from_name(s)
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Lower-case hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(
        String::with_capacity(bytes.len().saturating_mul(2)),
        |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        },
    )
}

/// The bytes of hex `text` (`what` names it in the error: "root hash",
/// "salt"); `-` alone is no bytes, as veritysetup's `--salt=-`.
pub fn parse_hex(what: &'static str, text: &str) -> Result<Vec<u8>> {
    let t = text.trim();
    if t == "-" {
        return Ok(Vec::new());
    }
    let bad = |why| Error::BadHex {
        what,
        text: text.to_string(),
        why,
    };
    if !t.len().is_multiple_of(2) {
        return Err(bad("an odd number of hex digits"));
    }
    let digit = |c: u8| {
        (c as char)
            .to_digit(16)
            .ok_or_else(|| bad("not a hex digit"))
    };
    t.as_bytes()
        .chunks_exact(2)
        .map(|pair| match pair {
            [hi, lo] => {
                let v = digit(*hi)?
                    .checked_mul(16)
                    .and_then(|h| h.checked_add(digit(*lo).ok()?));
                v.and_then(|v| u8::try_from(v).ok())
                    .ok_or_else(|| bad("not a hex digit"))
            }
            _ => Err(bad("an odd number of hex digits")),
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_junk() {
        assert_eq!(to_hex(&[0, 0xab, 0x10]), "00ab10");
        assert_eq!(parse_hex("salt", "00AB10").unwrap(), vec![0, 0xab, 0x10]);
        assert_eq!(parse_hex("salt", "-").unwrap(), Vec::<u8>::new());
        assert!(parse_hex("salt", "abc").is_err());
        assert!(parse_hex("salt", "zz").is_err());
        assert!(parse_hex("salt", "+1").is_err());
    }

    #[test]
    fn known_digests() {
        assert_eq!(
            to_hex(Algorithm::Sha256.hash(&[b"a", b"bc"]).as_bytes()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Algorithm::Sha512.hash(&[b"abc"]).as_bytes().len(), 64);
        assert_eq!(Algorithm::from_name("SHA512").unwrap(), Algorithm::Sha512);
        assert!(Algorithm::from_name("md5").is_err());
    }

    /// Many blocks at once give what one at a time gives: both algorithms,
    /// with a prefix, a suffix or neither, block counts around the
    /// multi-buffer group, and a short last block.
    #[test]
    fn hash_blocks_equals_one_block_at_a_time() {
        let data: Vec<u8> = (0..(GROUP * 2 + 3) * 512 + 100)
            .map(|i: usize| (i.wrapping_mul(2_654_435_761) >> 11).to_le_bytes()[0])
            .collect();
        let salt = b"a salt of some length";
        for alg in [Algorithm::Sha256, Algorithm::Sha512] {
            for (prefix, suffix) in [
                (&salt[..], &[][..]),
                (&[][..], &salt[..]),
                (&[][..], &[][..]),
            ] {
                for len in [0, 512, 512 * GROUP, 512 * (GROUP + 1), data.len()] {
                    let blocks = &data[..len];
                    let mut got = Vec::new();
                    alg.hash_blocks(prefix, blocks, 512, suffix, &mut got);
                    let want: Vec<Digest> = blocks
                        .chunks(512)
                        .map(|b| alg.hash(&[prefix, b, suffix]))
                        .collect();
                    assert_eq!(got, want, "{alg} len {len}");
                }
            }
        }
    }
}
