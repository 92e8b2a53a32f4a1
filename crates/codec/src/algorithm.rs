//! The four EROFS compression algorithms and their on-disk ids.

use std::fmt;

/// A compression algorithm as numbered in the EROFS superblock's
/// `available_compr_algs` bitmap and in the per-inode algorithm fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Raw LZ4 block (id 0).
    Lz4,
    /// MicroLZMA: raw LZMA1 without end marker, byte 0 = `!props` (id 1).
    Lzma,
    /// Raw DEFLATE, RFC 1951, no zlib/gzip wrapper (id 2).
    Deflate,
    /// One Zstandard frame (id 3).
    Zstd,
}

impl Algorithm {
    /// All algorithms, in id order.
    pub const ALL: [Algorithm; 4] = [Self::Lz4, Self::Lzma, Self::Deflate, Self::Zstd];

    /// The algorithm with on-disk id `id`, if EROFS defines one.
    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(Self::Lz4),
            1 => Some(Self::Lzma),
            2 => Some(Self::Deflate),
            3 => Some(Self::Zstd),
            _ => None,
        }
    }

    /// The on-disk id.
    pub fn id(self) -> u8 {
        match self {
            Self::Lz4 => 0,
            Self::Lzma => 1,
            Self::Deflate => 2,
            Self::Zstd => 3,
        }
    }

    /// Short lowercase name, as `mkfs.erofs -z` spells it: "lz4", "lzma", "deflate", "zstd".
    pub fn name(self) -> &'static str {
        match self {
            Self::Lz4 => "lz4",
            Self::Lzma => "lzma",
            Self::Deflate => "deflate",
            Self::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::Algorithm;

    #[test]
    fn ids_round_trip_and_unknown_ids_are_rejected() {
        for alg in Algorithm::ALL {
            assert_eq!(Algorithm::from_id(alg.id()), Some(alg));
        }
        for id in 4..=u8::MAX {
            assert_eq!(Algorithm::from_id(id), None);
        }
        let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(names, ["lz4", "lzma", "deflate", "zstd"]);
    }
}
