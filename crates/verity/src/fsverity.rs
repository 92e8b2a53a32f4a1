//! fs-verity file digests, as `fsverity digest` computes them: a Merkle
//! tree of sha256 digests over 4 KiB blocks (no salt; a short last block
//! and every tree block zero-padded), its root hash put in a 256-byte
//! `fsverity_descriptor` with the file size, and the descriptor hashed.

use std::io::Read;

use crate::error::{Error, Result};
use crate::hash::{to_hex, Algorithm};

/// The block size of the digests `fsverity digest` prints by default.
pub const BLOCK_SIZE: usize = 4096;

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
    let mut tree = Tree::new();
    let mut size: u64 = 0;
    let mut block = vec![0u8; BLOCK_SIZE];
    loop {
        let n = fill(&mut reader, &mut block)?;
        if n == 0 {
            break;
        }
        size = size.saturating_add(n as u64);
        tree.add(&block_digest(block.get(..n).unwrap_or_default()));
        if n < BLOCK_SIZE {
            break;
        }
    }
    Ok(tree.finish(size))
}

/// The digest of one data block of a file (level 0 of its Merkle tree):
/// `block` is [`BLOCK_SIZE`] bytes, or fewer at the file's end (zero-padded
/// here).
pub fn block_digest(block: &[u8]) -> [u8; 32] {
    let alg = Algorithm::Sha256;
    let d = if block.len() < BLOCK_SIZE {
        let mut padded = [0u8; BLOCK_SIZE];
        if let Some(head) = padded.get_mut(..block.len()) {
            head.copy_from_slice(block);
        }
        alg.hash(&[&padded])
    } else {
        alg.hash(&[block])
    };
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_bytes());
    out
}

/// The digests of the data blocks in `data`, appended to `out`: whole
/// blocks, and a short last one when `data` ends the file. Pieces of a
/// file cut at block boundaries can be digested apart (on several
/// threads) and their digests handed to [`digest_from_blocks`] in order.
pub fn block_digests(data: &[u8], out: &mut Vec<[u8; 32]>) {
    out.extend(data.chunks(BLOCK_SIZE).map(block_digest));
}

/// The fs-verity digest of a file of `size` bytes from its data blocks'
/// digests ([`block_digest`]), in file order.
pub fn digest_from_blocks<'a>(
    size: u64,
    blocks: impl IntoIterator<Item = &'a [u8; 32]>,
) -> FileDigest {
    let mut tree = Tree::new();
    for d in blocks {
        tree.add(d);
    }
    tree.finish(size)
}

/// A Merkle tree being built from its data blocks' digests: `levels[0]`
/// holds the data-block digests not yet packed into a full tree block;
/// `levels[i]` those of level i-1's full blocks. Each holds fewer than
/// `per_block` digests, so memory is O(log size).
struct Tree {
    levels: Vec<Vec<u8>>,
    per_block: usize,
}

impl Tree {
    fn new() -> Self {
        let per_block = BLOCK_SIZE
            .checked_div(Algorithm::Sha256.digest_len())
            .unwrap_or(1);
        Self {
            levels: vec![Vec::new()],
            per_block,
        }
    }

    /// Adds the next data block's digest.
    fn add(&mut self, digest: &[u8; 32]) {
        push(&mut self.levels, 0, digest, self.per_block);
    }

    /// The file digest: the root hash in a descriptor with the size.
    fn finish(self, size: u64) -> FileDigest {
        let root = finish(self.levels, self.per_block);
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
        out.copy_from_slice(Algorithm::Sha256.hash(&[&desc]).as_bytes());
        FileDigest(out)
    }
}

/// Reads until `buf` is full or the input ends; the bytes read.
fn fill(reader: &mut impl Read, buf: &mut [u8]) -> Result<usize> {
    let mut n = 0;
    while let Some(rest) = buf.get_mut(n..).filter(|r| !r.is_empty()) {
        match reader.read(rest) {
            Ok(0) => break,
            Ok(k) => n = n.saturating_add(k),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(Error::Io {
                    what: "file",
                    offset: n as u64,
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
