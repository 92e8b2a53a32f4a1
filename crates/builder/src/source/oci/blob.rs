//! Blobs of an OCI image layout (`blobs/sha256/HEX`): their paths, small
//! ones (manifests, configs) read whole, and large ones (layers) read as
//! a stream whose size and sha256 digest are checked when it ends.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use sha2::{Digest, Sha256};

use crate::error::{BuildError, Result};

/// Largest manifest, index or config read (they are held in memory).
pub(super) const MAX_DOC: u64 = 16 << 20;

/// A blob's address: where it is and what its content must hash to.
pub(super) struct BlobRef {
    pub(super) digest: String,
    pub(super) hash: [u8; 32],
    pub(super) size: u64,
    pub(super) path: PathBuf,
}

/// The blob `digest` of `size` bytes in the layout at `dir`.
pub(super) fn blob_ref(dir: &Path, digest: &str, size: u64) -> Result<BlobRef> {
    let bad = |why: &str| BuildError::input(dir, format!("digest {digest:?}: {why}"));
    let Some(hex) = digest.strip_prefix("sha256:") else {
        return Err(bad("only sha256 digests are supported"));
    };
    if hex.len() != 64 || !hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(bad("not 64 lower-case hex digits"));
    }
    let mut hash = [0u8; 32];
    for (h, pair) in hash.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).map_err(|_| bad("bad hex"))?;
        *h = u8::from_str_radix(pair, 16).map_err(|_| bad("bad hex"))?;
    }
    Ok(BlobRef {
        digest: digest.to_string(),
        hash,
        size,
        path: dir.join("blobs").join("sha256").join(hex),
    })
}

/// Opens a blob; a missing one is an error naming it and what it is.
pub(super) fn open(b: &BlobRef, what: &str) -> Result<File> {
    File::open(&b.path).map_err(|e| {
        let reason = if e.kind() == io::ErrorKind::NotFound {
            format!("{what} blob {} is missing", b.digest)
        } else {
            format!("{what} blob {}: {e}", b.digest)
        };
        BuildError::input(&b.path, reason)
    })
}

/// The mismatch of what was read with the descriptor, if any.
fn mismatch(b: &BlobRef, len: u64, hash: &[u8]) -> Option<String> {
    if len != b.size {
        return Some(format!(
            "blob {} is {len} bytes, its descriptor says {}",
            b.digest, b.size
        ));
    }
    if hash != b.hash {
        return Some(format!(
            "blob {} does not match its digest (content hashes to sha256:{})",
            b.digest,
            hex(hash)
        ));
    }
    None
}

fn hex(h: &[u8]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a whole small blob and checks it.
pub(super) fn read_small(b: &BlobRef, what: &str) -> Result<Vec<u8>> {
    if b.size > MAX_DOC {
        return Err(BuildError::input(
            &b.path,
            format!("{what} blob {} of {} bytes is too large", b.digest, b.size),
        ));
    }
    let mut data = Vec::new();
    open(b, what)?
        .take(MAX_DOC + 1)
        .read_to_end(&mut data)
        .map_err(BuildError::io(&b.path))?;
    if let Some(why) = mismatch(b, data.len() as u64, &Sha256::digest(&data)) {
        return Err(BuildError::input(&b.path, format!("{what}: {why}")));
    }
    Ok(data)
}

/// Checks a whole blob file again (to tell a corrupt blob from a bad
/// archive after reading it failed).
pub(super) fn check_file(b: &BlobRef) -> Option<String> {
    let mut f = File::open(&b.path).ok()?;
    let mut h = Sha256::new();
    let len = io::copy(&mut f, &mut h).ok()?;
    mismatch(b, len, &h.finalize())
}

/// A blob read as a stream: more bytes than its size is an error at once,
/// fewer or a different digest at its end. `done` is set once the end
/// was reached and checked.
pub(super) struct Verified<R> {
    r: R,
    hasher: Sha256,
    len: u64,
    blob: BlobRef,
    done: Rc<Cell<bool>>,
}

impl<R: Read> Verified<R> {
    pub(super) fn new(r: R, blob: BlobRef, done: Rc<Cell<bool>>) -> Self {
        Verified {
            r,
            hasher: Sha256::new(),
            len: 0,
            blob,
            done,
        }
    }
}

impl<R: Read> Read for Verified<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done.get() || buf.is_empty() {
            return Ok(0);
        }
        let n = self.r.read(buf)?;
        let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
        if n == 0 {
            let hash = std::mem::take(&mut self.hasher).finalize();
            if let Some(why) = mismatch(&self.blob, self.len, &hash) {
                return Err(bad(why));
            }
            self.done.set(true);
            return Ok(0);
        }
        self.len = self.len.saturating_add(n as u64);
        if self.len > self.blob.size {
            return Err(bad(format!(
                "blob {} is longer than its descriptor's {} bytes",
                self.blob.digest, self.blob.size
            )));
        }
        self.hasher.update(buf.get(..n).unwrap_or_default());
        Ok(n)
    }
}

/// A reader that hashes what passes through it (a layer's uncompressed
/// tar, for the config's `diff_ids`).
pub(super) struct Hashing<R> {
    pub(super) r: R,
    pub(super) hasher: Rc<std::cell::RefCell<Sha256>>,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.r.read(buf)?;
        self.hasher
            .borrow_mut()
            .update(buf.get(..n).unwrap_or_default());
        Ok(n)
    }
}

/// `sha256:HEX` of what `hasher` saw.
pub(super) fn digest_of(hasher: &Rc<std::cell::RefCell<Sha256>>) -> String {
    format!("sha256:{}", hex(&hasher.borrow().clone().finalize()))
}
