//! composefs images as overlayfs presents them: the header libcomposefs
//! puts before the superblock, and the overlay view of an inode — which
//! extended attributes a mount shows (and under which name), which entries
//! are whiteouts it hides, and where a regular file's contents live in the
//! object store (`trusted.overlay.redirect`) with the fs-verity digest it
//! must have (`trusted.overlay.metacopy`).
//!
//! A composefs image is an ordinary EROFS image; overlayfs mounts it as
//! the one metadata layer over a data-only layer (the object store). The
//! rules here are the kernel's (6.7 and later, with escaped xattrs), so a
//! FUSE mount or a dump built on them answers as the overlay mount does.

use std::borrow::Cow;

use crate::error::{Error, Location, Result};
use crate::format::inode::FileType;
use crate::raw::{Inode, Raw};
use crate::Image;

/// The first word of an image libcomposefs wrote.
pub const MAGIC: u32 = 0xd078_629a;

/// Header flag: some inode carries a POSIX ACL.
pub const FLAG_HAS_ACL: u32 = 1;

/// The private xattr namespace of overlayfs.
const PRIVATE: &[u8] = b"trusted.overlay.";
/// A private xattr stored for the layer above: shown with one
/// `overlay.` less.
const ESCAPED: &[u8] = b"trusted.overlay.overlay.";
const REDIRECT: &[u8] = b"trusted.overlay.redirect";
const METACOPY: &[u8] = b"trusted.overlay.metacopy";
/// fs-verity's algorithm number for SHA-256 (the only one composefs uses).
const SHA256: u8 = 1;

/// The 32-byte header at the start of a composefs image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Version of the header itself (1).
    pub header_version: u32,
    /// [`FLAG_HAS_ACL`] and future flags.
    pub flags: u32,
    /// The composefs format version the image was written as (0 or 1).
    pub format_version: u32,
}

impl Header {
    /// Reads the header from the first bytes of an image, if the image
    /// starts with composefs's magic.
    pub fn parse(bytes: &[u8; 16]) -> Option<Header> {
        let mut words = bytes
            .chunks_exact(4)
            .map(|c| c.try_into().map_or(0, u32::from_le_bytes));
        let mut next = || words.next().unwrap_or(0);
        let magic = next();
        let (header_version, flags, format_version) = (next(), next(), next());
        (magic == MAGIC).then_some(Header {
            header_version,
            flags,
            format_version,
        })
    }

    /// The header of `image`, if libcomposefs wrote it.
    pub fn of(image: &Image) -> Result<Option<Header>> {
        let mut b = [0u8; 16];
        image.read_source(&mut b, 0)?;
        Ok(Header::parse(&b))
    }
}

/// Where a regular file's contents live: an object of the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backing {
    /// The object's path under the store, without the leading `/`
    /// (`ab/cdef…`); `None` when the file has no redirect (overlayfs then
    /// finds no data for it in a data-only layer).
    pub object: Option<Vec<u8>>,
    /// The object's fs-verity digest (SHA-256), when the metacopy
    /// carries one.
    pub digest: Option<[u8; 32]>,
}

impl Backing {
    /// The digest as lowercase hex, if there is one.
    pub fn digest_hex(&self) -> Option<String> {
        self.digest
            .map(|d| d.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }
}

/// The name overlayfs shows for a stored xattr: escaped private names lose
/// one `overlay.`, other private names are hidden (`None`), the rest are
/// shown as stored.
pub fn visible_name(stored: &[u8]) -> Option<Cow<'_, [u8]>> {
    if let Some(rest) = stored.strip_prefix(ESCAPED) {
        let mut name = PRIVATE.to_vec();
        name.extend_from_slice(rest);
        return Some(Cow::Owned(name));
    }
    if stored.starts_with(PRIVATE) {
        return None;
    }
    Some(Cow::Borrowed(stored))
}

/// The stored name of the xattr the overlay view calls `name` (the
/// inverse of [`visible_name`]).
pub fn stored_name(name: &[u8]) -> Cow<'_, [u8]> {
    match name.strip_prefix(PRIVATE) {
        Some(rest) => {
            let mut stored = ESCAPED.to_vec();
            stored.extend_from_slice(rest);
            Cow::Owned(stored)
        }
        None => Cow::Borrowed(name),
    }
}

/// Whether overlayfs treats the inode as a whiteout and hides it: a
/// character device 0:0 (composefs's `00`–`ff` under the root; whiteouts
/// of the source tree are stored escaped, as regular files).
pub fn is_whiteout(inode: &Inode) -> bool {
    inode.file_type() == FileType::CharDevice && inode.rdev() == (0, 0)
}

/// The backing object of a regular file with a metacopy xattr; `None` for
/// files whose contents are in the image itself.
pub fn backing(raw: &Raw<'_>, inode: &Inode) -> Result<Option<Backing>> {
    if !inode.is_reg() {
        return Ok(None);
    }
    let at = Location::nid(inode.nid().0);
    let Some(meta) = raw.xattr(inode, METACOPY)? else {
        return Ok(None);
    };
    let digest = parse_metacopy(&meta).map_err(|why| Error::corrupt(at, why))?;
    let object = match raw.xattr(inode, REDIRECT)? {
        Some(r) => Some(object_path(&r).map_err(|why| Error::corrupt(at, why))?),
        None => None,
    };
    Ok(Some(Backing { object, digest }))
}

/// The digest in a metacopy value: empty (none), or version 0, its own
/// length, flags, algorithm, then the digest.
fn parse_metacopy(v: &[u8]) -> std::result::Result<Option<[u8; 32]>, &'static str> {
    match v {
        [] => Ok(None),
        [0, len, _flags, alg, digest @ ..] if usize::from(*len) == v.len() => {
            if *alg != SHA256 {
                return Err("metacopy digest is not SHA-256");
            }
            let d: [u8; 32] = digest
                .try_into()
                .map_err(|_| "metacopy digest is not 32 bytes")?;
            Ok(Some(d))
        }
        _ => Err("malformed trusted.overlay.metacopy"),
    }
}

/// A redirect as a path under the store: absolute in the xattr, made
/// relative; `.`, `..`, empty components and NUL are refused, so an
/// image cannot name a file outside the store.
fn object_path(redirect: &[u8]) -> std::result::Result<Vec<u8>, &'static str> {
    let rel = redirect
        .strip_prefix(b"/")
        .ok_or("trusted.overlay.redirect is not an absolute path")?;
    let bad = rel.is_empty()
        || rel.contains(&0)
        || rel
            .split(|&b| b == b'/')
            .any(|c| c.is_empty() || c == b"." || c == b"..");
    if bad {
        return Err("trusted.overlay.redirect leaves the object store");
    }
    Ok(rel.to_vec())
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_one_level() {
        assert_eq!(
            visible_name(b"trusted.overlay.overlay.whiteout").as_deref(),
            Some(&b"trusted.overlay.whiteout"[..])
        );
        assert_eq!(visible_name(b"trusted.overlay.redirect"), None);
        assert_eq!(visible_name(b"user.x").as_deref(), Some(&b"user.x"[..]));
        for n in [
            &b"trusted.overlay.foo"[..],
            b"user.overlay.whiteout",
            b"security.x",
        ] {
            let s = stored_name(n);
            assert_eq!(visible_name(&s).as_deref(), Some(n));
        }
    }

    #[test]
    fn metacopy_values() {
        assert_eq!(parse_metacopy(&[]), Ok(None));
        let mut v = vec![0, 36, 0, 1];
        v.extend(1..=32u8);
        let d = parse_metacopy(&v).unwrap().unwrap();
        assert_eq!(d[0], 1);
        v[3] = 2;
        assert!(parse_metacopy(&v).is_err());
        assert!(parse_metacopy(&v[..20]).is_err());
        assert!(parse_metacopy(&[1, 4, 0, 1]).is_err());
    }

    #[test]
    fn redirects_stay_in_the_store() {
        assert_eq!(object_path(b"/ab/cd").unwrap(), b"ab/cd");
        for bad in [
            &b"ab/cd"[..],
            b"/",
            b"/../x",
            b"/a/../b",
            b"/a//b",
            b"/a\0b",
            b"/./a",
        ] {
            assert!(
                object_path(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn header_magic() {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4] = 1;
        b[12] = 1;
        let h = Header::parse(&b).unwrap();
        assert_eq!((h.header_version, h.flags, h.format_version), (1, 0, 1));
        b[0] = 0;
        assert_eq!(Header::parse(&b), None);
    }
}
