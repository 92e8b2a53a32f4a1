//! What compression a build was asked for: the configured compressors
//! (`-z lz4hc,12:lzma`), the pcluster sizes, `--compress-hints` lines, and
//! how each becomes an encoder.

use ferrofs_codec::{Algorithm, Encoder, EncoderConfig};
use regex::bytes::Regex;

use crate::error::{BuildError, Result};

/// One configured compressor (`-z lz4hc,12`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compressor {
    /// The algorithm (LZ4 for `lz4` and `lz4hc`).
    pub alg: Algorithm,
    /// The level; `None`: the codec's default.
    pub level: Option<i32>,
    /// LZ4 with the high-compression encoder.
    pub lz4hc: bool,
}

impl Compressor {
    /// Parses mkfs.erofs spellings: `lz4`, `lz4hc,12`, `lz4hc,level=12`,
    /// `lzma,level=6`, `deflate`, `zstd,15`.
    pub fn parse(s: &str) -> Result<Self> {
        let mut parts = s.split(',');
        let name = parts.next().unwrap_or_default();
        let (alg, lz4hc) = match name {
            "lz4" => (Algorithm::Lz4, false),
            "lz4hc" => (Algorithm::Lz4, true),
            "lzma" => (Algorithm::Lzma, false),
            "deflate" | "libdeflate" => (Algorithm::Deflate, false),
            "zstd" => (Algorithm::Zstd, false),
            other => return Err(BuildError::Option(format!("unknown compressor {other:?}"))),
        };
        let mut level = None;
        for p in parts {
            let v = p.strip_prefix("level=").unwrap_or(p);
            if p.starts_with("dictsize=") {
                continue;
            }
            level = Some(
                v.parse::<i32>()
                    .map_err(|_| BuildError::Option(format!("bad level in {s:?}")))?,
            );
        }
        if alg == Algorithm::Lz4 && !lz4hc && level.is_some() {
            return Err(BuildError::Option("lz4 takes no level (use lz4hc)".into()));
        }
        Ok(Self { alg, level, lz4hc })
    }

    /// An encoder for pclusters of `pcluster` bytes.
    pub(crate) fn encoder(&self, pcluster: u64) -> Result<Encoder> {
        let cfg = EncoderConfig {
            alg: self.alg,
            level: self.level,
            lz4hc: self.lz4hc,
            lzma_dict_size: lzma_dict(pcluster),
        };
        Encoder::new(cfg).map_err(|e| BuildError::Option(format!("compressor: {e}")))
    }
}

/// The MicroLZMA dictionary used for a pcluster size (the cfg record).
pub fn lzma_dict(pcluster: u64) -> u32 {
    ferrofs_codec::lzma_dict_size_for_pcluster(pcluster.min(u64::from(u32::MAX)) as u32)
}

/// A `--compress-hints` line (see [`Hints`](crate::Hints)): files whose path
/// matches use this pcluster size (0: stored uncompressed) and compressor.
#[derive(Clone, Debug)]
pub struct Hint {
    /// Pcluster size of matching files; 0 stores them uncompressed.
    pub pcluster_bytes: u64,
    /// Index into [`CompressOptions::compressors`].
    pub compressor: usize,
    /// Matched against the path relative to the source, without a
    /// leading `/`.
    pub regex: Regex,
}

/// Compression settings of a build.
#[derive(Clone, Debug)]
pub struct CompressOptions {
    /// `-z` compressors; the first is the default, hints pick others.
    pub compressors: Vec<Compressor>,
    /// `-C`: physical cluster size in bytes (a multiple of the block size).
    pub pcluster_bytes: u64,
    /// `-E ztailpacking`: inline the last pcluster after the inode.
    pub ztailpacking: bool,
    /// `-E fragments`: file tails (and files no larger than a pcluster)
    /// go to the packed inode, compressed together.
    pub fragments: bool,
    /// `-E all-fragments`: every compressed file goes whole to the packed inode.
    pub all_fragments: bool,
    /// `-E fragments=SIZE`: the packed inode's pcluster size (default `-C`).
    pub packed_pcluster: Option<u64>,
    /// `--compress-hints`: per-path pcluster sizes and compressors, the
    /// first match winning.
    pub hints: Vec<Hint>,
    /// `--max-extent-bytes`: no pcluster decodes to more than this many
    /// bytes (a multiple of the block size), bounding what a small read of
    /// very compressible data decodes.
    pub max_extent_bytes: Option<u64>,
    /// `-E legacy-compress`: full (non-compact) indexes for every
    /// compressed file, as mkfs.erofs 1.9 writes them with this option.
    pub legacy_compress: bool,
    /// `-E sparse`: runs of zeros in compressed files (holes of the
    /// source and written zeros alike) become sparse pclusters, which
    /// take no blocks (Linux 7.2 reads them as holes; older kernels
    /// decode a shared pcluster of zeros in their place).
    pub sparse: bool,
}

impl CompressOptions {
    /// One compressor at `pcluster_bytes` (`-z ALG -C BYTES`), with tail
    /// packing, fragments, hints and extent limits off.
    pub fn new(compressor: Compressor, pcluster_bytes: u64) -> Self {
        Self {
            compressors: vec![compressor],
            pcluster_bytes,
            ztailpacking: false,
            fragments: false,
            all_fragments: false,
            packed_pcluster: None,
            hints: Vec::new(),
            max_extent_bytes: None,
            legacy_compress: false,
            sparse: false,
        }
    }

    /// (pcluster bytes, compressor index) for a path relative to the root;
    /// `None` when the first hint that matches says pcluster size 0 (do
    /// not compress), as mkfs.erofs takes it.
    pub(crate) fn choose(&self, rel: &[u8]) -> Option<(u64, usize)> {
        match self.hints.iter().find(|h| h.regex.is_match(rel)) {
            Some(h) if h.pcluster_bytes == 0 => None,
            Some(h) => Some((h.pcluster_bytes, h.compressor)),
            None => Some((self.pcluster_bytes, 0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mkfs_spellings() {
        assert_eq!(
            Compressor::parse("lz4hc,12").unwrap(),
            Compressor {
                alg: Algorithm::Lz4,
                level: Some(12),
                lz4hc: true
            }
        );
        assert_eq!(Compressor::parse("lzma,level=6").unwrap().level, Some(6));
        assert_eq!(Compressor::parse("zstd").unwrap().alg, Algorithm::Zstd);
        assert!(Compressor::parse("lz4,3").is_err());
        assert!(Compressor::parse("brotli").is_err());
    }
}
