//! fs-verity file digests, as `fsverity digest` computes them: a Merkle
//! tree of sha256 digests over 4 KiB blocks (no salt; a short last block
//! and every tree block zero-padded), its root hash put in a 256-byte
//! `fsverity_descriptor` with the file size, and the descriptor hashed.

use std::io::Read;

use crate::error::{Error, Result};
use crate::hash::{to_hex, Algorithm};

/// The block size of the digests `fsverity digest` prints by default.
pub const BLOCK_SIZE: usize = 4096;

/// Data blocks read and hashed at a time (256 KiB).
const RUN_BLOCKS: usize = 64;

const DESCRIPTOR_LEN: usize = 256;
/// `FS_VERITY_HASH_ALG_SHA256`.
const HASH_ALG_SHA256: u8 = 1;
/// log2 of [`BLOCK_SIZE`].
const LOG_BLOCK_SIZE: u8 = 12;

/// A file's fs-verity digest (sha256, 4 KiB blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileDigest(pub [u8; 32]);

impl std::fmt::Display for FileDigest {
    /// `sha256:HEX`, as `fsverity digest` prints it before the file name.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}", to_hex(&self.0))
    }
}

/// The fs-verity digest of everything `reader` yields.
pub fn digest(mut reader: impl Read) -> Result<FileDigest> {
    let alg = Algorithm::Sha256;
    let per_block = BLOCK_SIZE.checked_div(alg.digest_len()).unwrap_or(1);
    // levels[0]: the digests of the data blocks not yet packed into a
    // full tree block; levels[i]: those of level i-1's full blocks. Each
    // holds fewer than `per_block` digests, so memory is O(log size).
    let mut levels: Vec<Vec<u8>> = vec![Vec::new()];
    let mut size: u64 = 0;
    // Data blocks are read and hashed RUN_BLOCKS at a time (their digests
    // are independent, and many at once hash faster).
    let mut run = vec![0u8; BLOCK_SIZE.saturating_mul(RUN_BLOCKS)];
    let mut digests = Vec::with_capacity(RUN_BLOCKS);
    loop {
        let n = fill(&mut reader, &mut run, size)?;
        if n == 0 {
            break;
        }
        size = size.saturating_add(n as u64);
        let whole = n.div_ceil(BLOCK_SIZE).saturating_mul(BLOCK_SIZE);
        let blocks = run.get_mut(..whole).unwrap_or_default();
        if let Some(tail) = blocks.get_mut(n..) {
            tail.fill(0);
        }
        digests.clear();
        alg.hash_blocks(&[], blocks, BLOCK_SIZE, &[], &mut digests);
        for d in &digests {
            push(&mut levels, 0, d.as_bytes(), per_block);
        }
        if n < run.len() {
            break;
        }
    }
    let root = finish(levels, per_block);
    let mut desc = [0u8; DESCRIPTOR_LEN];
    let fields: [(usize, &[u8]); 5] = [
        (0, &[1]),
        (1, &[HASH_ALG_SHA256]),
        (2, &[LOG_BLOCK_SIZE]),
        (8, &size.to_le_bytes()),
        (16, &root),
    ];
    for (at, value) in fields {
        if let Some(dst) = at
            .checked_add(value.len())
            .and_then(|e| desc.get_mut(at..e))
        {
            dst.copy_from_slice(value);
        }
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(alg.hash(&[&desc]).as_bytes());
    Ok(FileDigest(out))
}

/// Reads until `buf` is full or the input ends; the bytes read. `base`
/// is the input offset `buf` starts at (for errors).
fn fill(reader: &mut impl Read, buf: &mut [u8], base: u64) -> Result<usize> {
    let mut n = 0;
    while let Some(rest) = buf.get_mut(n..).filter(|r| !r.is_empty()) {
        match reader.read(rest) {
            Ok(0) => break,
            Ok(k) => n = n.saturating_add(k),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(Error::Io {
                    what: "file",
                    offset: base.saturating_add(n as u64),
                    source,
                })
            }
        }
    }
    Ok(n)
}

/// Adds `digest` to level `at`; a level block that fills up is hashed into
/// the level above.
fn push(levels: &mut Vec<Vec<u8>>, at: usize, digest: &[u8], per_block: usize) {
    if levels.len() <= at {
        levels.resize_with(at.saturating_add(1), Vec::new);
    }
    let Some(level) = levels.get_mut(at) else {
        return;
    };
    level.extend_from_slice(digest);
    if level.len() >= per_block.saturating_mul(digest.len()) {
        let full = std::mem::take(level);
        let up = Algorithm::Sha256.hash(&[&full]);
        push(levels, at.saturating_add(1), up.as_bytes(), per_block);
    }
}

/// The root hash once the data ended: the partial blocks of every level
/// padded and hashed upwards; all zeros for an empty file, the data
/// block's own digest for a one-block file.
fn finish(mut levels: Vec<Vec<u8>>, per_block: usize) -> [u8; 32] {
    let mut root = [0u8; 32];
    let digest_len = Algorithm::Sha256.digest_len();
    let mut at = 0;
    loop {
        let pending = levels.get(at).map_or(0, Vec::len);
        let above = levels
            .iter()
            .skip(at.saturating_add(1))
            .any(|l| !l.is_empty());
        if pending == 0 && !above {
            return root;
        }
        if pending == digest_len && !above {
            // A single digest is the root (the tree's top).
            root.copy_from_slice(levels.get(at).map_or(&[][..], Vec::as_slice));
            return root;
        }
        if pending > 0 {
            let mut block = std::mem::take(levels.get_mut(at).unwrap_or(&mut Vec::new()));
            block.resize(BLOCK_SIZE, 0);
            let up = Algorithm::Sha256.hash(&[&block]);
            push(&mut levels, at.saturating_add(1), up.as_bytes(), per_block);
        }
        at = at.saturating_add(1);
    }
}
