//! Logical-to-physical mapping of an inode's data. Every layout (flat,
//! chunk-based, compressed) answers one question, "which extent holds byte
//! `x`?", with one [`Extent`] record.

pub mod chunk;
pub mod compressed;
pub mod extents;
pub mod flat;

use ferrofs_codec::Algorithm;
use ferrofs_format::zmap::{advise, MapHeader, MAP_HEADER_SIZE};

use crate::addr::MetaAddr;
use crate::error::{Error, Result};
use crate::image::Image;
use crate::inode::Inode;

/// How the bytes of a physical cluster become file bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PclusterFormat {
    /// Stored raw; logical byte `x` of the extent is at `x - logical`.
    Shifted,
    /// Stored raw, rotated inside its block (logical `x` at `x % bs`).
    Interlaced,
    /// Compressed with a codec.
    Codec(Algorithm),
}

/// Where a pcluster's stored bytes are: in blocks of the unified address
/// space, or inline after their inode (a metadata address). The two are
/// different spaces; arithmetic on a position stays in its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PclusterAt {
    /// Byte position in the unified block address space.
    Blocks(u64),
    /// Stored inline after the inode (ztailpacking).
    Inline(MetaAddr),
}

impl PclusterAt {
    /// Whether the pcluster is stored inline after its inode.
    pub fn is_inline(self) -> bool {
        matches!(self, Self::Inline(_))
    }

    /// The byte position within its space.
    pub fn offset(self) -> u64 {
        match self {
            Self::Blocks(p) => p,
            Self::Inline(a) => a.offset(),
        }
    }

    /// The position `offset` in the same space (`None` where the space
    /// cannot hold it).
    pub fn with_offset(self, offset: u64) -> Option<Self> {
        match self {
            Self::Blocks(_) => Some(Self::Blocks(offset)),
            Self::Inline(a) => MetaAddr::new(offset, a.in_metabox()).map(Self::Inline),
        }
    }

    /// The position `n` bytes further on in the same space.
    pub fn checked_add(self, n: u64) -> Option<Self> {
        self.with_offset(self.offset().checked_add(n)?)
    }

    /// The position as one number, for messages (a metabox address with
    /// [`crate::raw::METABOX_SPACE`] set).
    pub fn bits(self) -> u64 {
        match self {
            Self::Blocks(p) => p,
            Self::Inline(a) => a.bits(),
        }
    }
}

/// A physical cluster holding one compressed (or raw) extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pcluster {
    /// Where the stored bytes are.
    pub at: PclusterAt,
    /// Length in bytes (whole blocks, or the exact inline size).
    pub len: u64,
    /// How the pcluster is stored (raw, or which codec).
    pub format: PclusterFormat,
    /// The extent uses only a prefix of the pcluster's decoded data.
    pub partial: bool,
}

/// What backs one extent of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtentKind {
    /// Reads as zeros.
    Hole,
    /// Uncompressed blocks: logical start maps to `pos` on `device`
    /// (0 = unified address space).
    Raw {
        /// Device index (0: the unified address space).
        device: u16,
        /// Byte position of the extent's first byte.
        pos: u64,
    },
    /// Uncompressed bytes inline in the metadata area at `pos`.
    Inline {
        /// Metadata address of the first byte.
        pos: MetaAddr,
    },
    /// A physical cluster decoded as a whole.
    Pcluster(Pcluster),
    /// Bytes in the packed inode starting at `offset`.
    Fragment {
        /// Byte offset in the packed inode's data.
        offset: u64,
    },
}

/// One contiguous range of a file and where its bytes come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// File offset of the first byte.
    pub logical: u64,
    /// Length in bytes.
    pub len: u64,
    /// Where the bytes come from.
    pub kind: ExtentKind,
}

impl Extent {
    /// File offset just past the extent.
    pub fn end(&self) -> u64 {
        // Saturating is right: an extent overflowing 2^64 ends past any
        // inode size, which the mappers' end check then refuses.
        self.logical.saturating_add(self.len)
    }
}

/// The mapping state of one inode.
#[derive(Clone, Debug)]
pub enum DataMap {
    /// Flat: plain blocks, maybe with an inline tail.
    Flat(flat::FlatMap),
    /// Chunk-based: block map or chunk indexes.
    Chunk(chunk::ChunkMap),
    /// Compressed, mapped by lcluster indexes.
    Compressed(compressed::ZMap),
    /// A compressed inode mapped by encoded extent records (48-bit images).
    Extents(extents::ExtentMap),
}

impl DataMap {
    pub(crate) fn new(image: &Image, inode: &Inode, is_packed: bool) -> Result<Self> {
        use ferrofs_format::inode::DataLayout::*;
        Ok(match inode.layout {
            FlatPlain | FlatInline => DataMap::Flat(flat::FlatMap::new(image, inode)?),
            ChunkBased => DataMap::Chunk(chunk::ChunkMap::new(image, inode)?),
            CompressedFull | CompressedCompact => {
                let hpos = compressed::header_pos(inode)?;
                let mut hb = [0u8; MAP_HEADER_SIZE];
                image.read_raw(&mut hb, hpos)?;
                let header = MapHeader::parse(&hb);
                // A whole-file fragment is recognised before anything else;
                // extent records exist only in COMPRESSED_FULL inodes.
                if header.whole_file_fragment().is_none()
                    && inode.layout == CompressedFull
                    && header.has(advise::EXTENTS)
                {
                    DataMap::Extents(extents::ExtentMap::new(
                        image, inode, hpos, &header, is_packed,
                    )?)
                } else {
                    DataMap::Compressed(compressed::ZMap::new(image, inode, is_packed)?)
                }
            }
        })
    }

    /// The extent that holds byte `offset` (which must be < the file size).
    pub(crate) fn map(&self, image: &Image, inode: &Inode, offset: u64) -> Result<Extent> {
        let e = match self {
            DataMap::Flat(m) => m.map(image, inode, offset)?,
            DataMap::Chunk(m) => m.map(image, inode, offset)?,
            DataMap::Compressed(m) => m.map(image, inode, offset)?,
            DataMap::Extents(m) => m.map(image, inode, offset)?,
        };
        if e.len == 0 || offset < e.logical || offset >= e.end() || e.end() > inode.size {
            return Err(Error::corrupt(
                inode.loc().with_offset(offset),
                format!(
                    "extent [{}, +{}) does not cover byte {offset} of a {}-byte file",
                    e.logical, e.len, inode.size
                ),
            ));
        }
        Ok(e)
    }
}
