//! The unit the data pass produces for compressed files: one extent (its
//! logical range and its stream, or raw), and the rules every stage that
//! cuts or reuses extents shares: how long an extent may be, when a stream
//! saves a block, how long a file's independently compressed segment is.

/// One extent of a compressed file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Logical start and length.
    pub la: u64,
    pub llen: u64,
    /// Compressed stream, or `None` when the extent is stored raw (or is
    /// a hole).
    pub compressed: Option<Vec<u8>>,
    /// A run of zeros stored as a sparse pcluster (`-E sparse`): no
    /// blocks of its own.
    pub hole: bool,
    /// The stream decodes to more than `llen` bytes, of which the extent
    /// takes the first `llen` (a partial reference: a page end made
    /// without compressing again).
    pub partial: bool,
}

impl Extent {
    /// An extent of `llen` bytes from `la` holding `stream` (`None`: raw).
    pub fn new(la: u64, llen: u64, stream: Option<Vec<u8>>) -> Self {
        Self {
            la,
            llen,
            compressed: stream,
            hole: false,
            partial: false,
        }
    }

    /// A hole of `llen` bytes from `la`.
    pub fn hole(la: u64, llen: u64) -> Self {
        Self {
            la,
            llen,
            compressed: None,
            hole: true,
            partial: false,
        }
    }

    /// Blocks the writer gives the extent: its stream's when that saves a
    /// block, else its raw bytes' (a stream that saves none is stored raw).
    pub fn stored_blocks(&self, bs: u64) -> u64 {
        if self.hole {
            return 0;
        }
        match &self.compressed {
            Some(c) if (c.len() as u64).div_ceil(bs) < self.llen.div_ceil(bs) => {
                (c.len() as u64).div_ceil(bs)
            }
            _ => self.llen.div_ceil(bs),
        }
    }

    /// Blocks the pcluster takes (raw: the data rounded up; compressed: the
    /// stream rounded up).
    pub fn blocks(&self, bs: u64) -> u64 {
        if self.hole {
            return 0;
        }
        match &self.compressed {
            Some(c) => (c.len() as u64).div_ceil(bs),
            None => self.llen.div_ceil(bs),
        }
    }
}

/// Longest extent, in blocks: compact indexes reach at most 2047
/// lclusters back to a head, and the kernel takes at most 12 MiB.
pub const MAX_EXTENT_BLOCKS: u64 = 2000;

/// Whether `written` compressed bytes take fewer blocks than `consumed`.
pub(crate) fn saves_a_block(consumed: usize, written: usize, bs: u64) -> bool {
    consumed > 0 && written > 0 && (written as u64).div_ceil(bs) < (consumed as u64).div_ceil(bs)
}

/// Input bytes per independently compressed segment of a file (segments
/// of one file compress on several cores at once).
pub(crate) fn segment_len(pcl: u64) -> u64 {
    (pcl * 16).max(4 << 20)
}

/// Input bytes per segment of an inode compressed alone (the packed inode,
/// the metabox), when nothing else is compressed meanwhile: its segments
/// are all that keeps the cores busy. Small pclusters (the metabox's 4 KiB)
/// get segments of 128 pclusters' input, at least 512 KiB, instead of
/// 4 MiB: a 4 MiB metabox compresses on 8 cores, not one, for the tail of
/// one partial pcluster per segment. From 32 KiB pclusters up this is
/// [`segment_len`].
pub(crate) fn alone_segment_len(pcl: u64) -> u64 {
    segment_len(pcl).min((pcl * 128).max(512 << 10))
}
