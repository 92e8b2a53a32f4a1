//! Inode fingerprints (`--xattr-inode-digest`): a regular file's
//! fingerprint xattr must hold `sha256:` and the SHA-256 of its contents,
//! as fsck.erofs 1.9 checks them.

use ferrofs::{raw::Inode, Error, Image};
use sha2::{Digest, Sha256};

/// Checks the fingerprint of regular file `inode` in an image with
/// COMPAT_ISHARE_XATTRS: `Ok(None)` when it matches (or the file is empty
/// and has none), `Ok(Some(why))` when it is missing or wrong.
pub fn check(image: &Image, inode: &Inode) -> Result<Option<String>, Error> {
    let stored = image.raw().fingerprint(inode)?;
    if inode.size() == 0 {
        return Ok(None);
    }
    let Some(stored) = stored else {
        return Ok(Some("no inode fingerprint".into()));
    };
    let Some(sum) = sha256(image, inode)? else {
        return Ok(Some("file ends early".into()));
    };
    let mut want = b"sha256:".to_vec();
    want.extend_from_slice(&sum);
    Ok((stored != want).then(|| "inode fingerprint does not match the contents".into()))
}

/// The SHA-256 of an inode's data as the image reads it; `None` when the
/// data ends before its size.
pub fn sha256(image: &Image, inode: &Inode) -> Result<Option<[u8; 32]>, Error> {
    let file = image.raw().open(inode.clone())?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; (1usize << 20).min(usize::try_from(inode.size()).unwrap_or(1 << 20))];
    let mut pos = 0u64;
    while pos < inode.size() {
        let n = file.read_at(&mut buf, pos)?;
        if n == 0 {
            return Ok(None);
        }
        h.update(&buf[..n]);
        pos += n as u64;
    }
    Ok(Some(h.finalize().into()))
}
