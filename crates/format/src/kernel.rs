//! Which Linux kernels mount an image: the oldest release that knows every
//! feature its superblock declares, and the features a current kernel
//! (6.18) logs as "EXPERIMENTAL" when it mounts one. Pure: from the
//! superblock alone.

use crate::compress::{ALG_DEFLATE, ALG_LZMA, ALG_ZSTD};
use crate::superblock::{incompat, Superblock};

/// A Linux release, `(major, minor)`.
pub type Release = (u8, u8);

/// What kernels make of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSupport {
    /// The oldest release that mounts the image (given the codecs'
    /// config options).
    pub oldest: Release,
    /// What needs that release (empty: EROFS itself).
    pub because: &'static str,
    /// The features Linux 6.18 calls experimental in its log, by its name
    /// for them.
    pub experimental: Vec<&'static str>,
}

/// Incompatible feature bits and the release that added each (from the
/// kernel's history of `erofs_fs.h`).
const INCOMPAT: &[(u32, Release, &str)] = &[
    (incompat::ZERO_PADDING, (5, 4), "compressed data"),
    (
        incompat::COMPR_CFGS,
        (5, 13),
        "pclusters larger than a block",
    ),
    (incompat::CHUNKED_FILE, (5, 15), "chunk-based files"),
    (incompat::DEVICE_TABLE, (5, 16), "extra devices"),
    (incompat::ZTAILPACKING, (5, 17), "ztailpacking"),
    (incompat::FRAGMENTS, (6, 1), "fragments and dedupe"),
    (incompat::XATTR_PREFIXES, (6, 4), "long xattr name prefixes"),
    (incompat::BIT48, (6, 15), "the 48-bit layout"),
    (incompat::METABOX, (6, 17), "the metabox"),
];

/// Codecs other than LZ4 and the release that added each.
const CODECS: &[(u8, Release, &str)] = &[
    (ALG_LZMA, (5, 16), "LZMA"),
    (ALG_DEFLATE, (6, 6), "DEFLATE"),
    (ALG_ZSTD, (6, 10), "Zstandard"),
];

/// The kernels that mount an image with superblock `sb`, assuming 4 KiB
/// pages.
pub fn support(sb: &Superblock) -> KernelSupport {
    let mut oldest: Release = (5, 4);
    let mut because = "";
    let mut need = |r: Release, what: &'static str| {
        if r > oldest {
            oldest = r;
            because = what;
        }
    };
    for &(bit, r, what) in INCOMPAT {
        if sb.has_incompat(bit) {
            need(r, what);
        }
    }
    // The algorithm bitmap is only there with COMPR_CFGS; without it, the
    // one codec is LZ4.
    let algs = if sb.has_incompat(incompat::COMPR_CFGS) {
        sb.u1
    } else {
        0
    };
    for &(alg, r, what) in CODECS {
        if algs & (1 << alg) != 0 {
            need(r, what);
        }
    }
    let compressed = sb.has_incompat(incompat::ZERO_PADDING) || algs != 0;
    if sb.blkszbits < 12 {
        if compressed {
            need((6, 13), "compressed data in blocks smaller than a page");
        } else {
            need((6, 4), "blocks smaller than a page");
        }
    }
    let mut experimental = Vec::new();
    if sb.has_incompat(incompat::BIT48) {
        experimental.push("48-bit layout");
    }
    if sb.has_incompat(incompat::METABOX) {
        experimental.push("metadata compression");
    }
    if algs & (1 << ALG_DEFLATE) != 0 {
        experimental.push("DEFLATE");
    }
    KernelSupport {
        oldest,
        because,
        experimental,
    }
}
