//! Verified reads: a [`ReadAt`] over an image that checks every block
//! against a dm-verity hash tree (veritysetup's format, see
//! [`ferrofs_verity::dm`]) before returning a byte of it. Hash blocks are
//! read only on the paths of the blocks read, verified once from the root
//! down and kept in a bounded cache, so over a lazily fetched source (the
//! HTTP source) the tree is fetched lazily too.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use ferrofs::verity::{Verity, VerityOptions};
//! let file = std::fs::File::open("image.erofs")?;
//! // The tree appended after the image (`ferrofs verity image.erofs`).
//! let opts = VerityOptions::appended("4f6c...".parse()?);
//! let image = ferrofs::Image::open(Verity::open(Box::new(file), opts)?)?;
//! # Ok(()) }
//! ```

use std::io;
use std::sync::Arc;

use ferrofs_format::superblock::{Superblock, SB_BASE_SIZE};
use ferrofs_format::SUPERBLOCK_OFFSET;
use ferrofs_verity::dm::{self, Params, Verified, SUPERBLOCK_LEN, SUPERBLOCK_MAGIC};
use ferrofs_verity::Bytes;

use crate::error::{Error, Result};
use crate::source::ReadAt;

pub use ferrofs_verity::Error as VerityError;

/// A root hash given as hex text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootHash(pub Vec<u8>);

impl std::str::FromStr for RootHash {
    type Err = VerityError;
    fn from_str(s: &str) -> Result<Self, VerityError> {
        let bytes = ferrofs_verity::parse_hex("root hash", s)?;
        if bytes.is_empty() {
            return Err(VerityError::BadHex {
                what: "root hash",
                text: s.into(),
                why: "empty",
            });
        }
        Ok(RootHash(bytes))
    }
}

/// Where the tree is and what it is.
pub struct VerityOptions {
    /// The root hash the tree must have.
    pub root_hash: RootHash,
    /// The hash device: `None`, the image's own source (an appended tree).
    pub hash_source: Option<Box<dyn ReadAt>>,
    /// For an appended tree (`hash_source` `None`): read the tree through
    /// this source of the same bytes instead of the image's own. A remote
    /// image opened a second time with block-sized fetches: a read then
    /// brings the few hash blocks on its path, not a whole cache chunk
    /// around each.
    pub tree_reader: Option<Box<dyn ReadAt>>,
    /// Byte of the hash device where the verity superblock (or, without
    /// one, the tree) starts. `None`: 0 in a separate hash device; in the
    /// image's own source, the end of the EROFS image (its superblock's
    /// block count times its block size) rounded up to 4096, else to 512
    /// bytes: where `ferrofs verity` and `mkfs --verity` put it.
    pub hash_offset: Option<u64>,
    /// Where the EROFS image starts in the data (`mkfs --offset`): the
    /// default hash offset is counted from the image's end there.
    pub image_offset: u64,
    /// The tree's parameters for a tree without a superblock
    /// (`veritysetup format --no-superblock`); `data_blocks` 0 means all
    /// of the data (up to the hash offset when the tree is appended).
    pub no_superblock: Option<Params>,
}

impl VerityOptions {
    /// A tree with a superblock, appended to the image where `ferrofs
    /// verity` puts it.
    pub fn appended(root_hash: RootHash) -> Self {
        VerityOptions {
            root_hash,
            hash_source: None,
            tree_reader: None,
            hash_offset: None,
            image_offset: 0,
            no_superblock: None,
        }
    }
}

/// A reader source adapted to the verity crate's.
#[derive(Clone)]
struct Src(Arc<dyn ReadAt>);

impl Bytes for Src {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        self.0.len()
    }
}

/// An image source whose every byte is checked against a dm-verity tree.
/// Its length is the bytes the tree covers; a read of a block that does
/// not match fails with an error whose inner error is a
/// [`VerityError::DataMismatch`] naming the block (the reader reports it
/// as [`Error::Verity`]).
pub struct Verity {
    inner: Verified<Src, Src>,
}

impl Verity {
    /// Opens `data` under `opts`: finds and parses the tree's superblock,
    /// and checks the root hash (a wrong one fails here).
    pub fn open(data: Box<dyn ReadAt>, opts: VerityOptions) -> Result<Self> {
        let data = Src(Arc::from(data));
        let appended = opts.hash_source.is_none();
        let hash = match (opts.hash_source, opts.tree_reader) {
            (Some(h), _) | (None, Some(h)) => Src(Arc::from(h)),
            (None, None) => data.clone(),
        };
        let superblock = opts.no_superblock.is_none();
        let offset = match opts.hash_offset {
            Some(o) => o,
            None if appended => default_hash_offset(&data, &hash, opts.image_offset, superblock)?,
            None => 0,
        };
        let params = match opts.no_superblock {
            Some(mut p) => {
                if p.data_blocks == 0 {
                    let len = if appended { offset } else { io_len(&data)? };
                    p.data_blocks = len.div_ceil(u64::from(p.data_block_size.max(1)));
                }
                p
            }
            None => read_superblock(&hash, offset)?,
        };
        let tree = dm::tree_offset(offset, params.hash_block_size, superblock).map_err(verity)?;
        let inner = Verified::open(data, hash, tree, params, &opts.root_hash.0).map_err(verity)?;
        Ok(Verity { inner })
    }

    /// The tree's parameters.
    pub fn params(&self) -> &Params {
        self.inner.params()
    }

    /// Reads and checks every data block (as `veritysetup verify` does).
    pub fn verify_all(&self) -> Result<()> {
        self.inner.verify_all().map_err(verity)
    }

    /// Reads and checks every data block no read through this source has
    /// checked yet (what a walk of the file system never reads: free
    /// space, padding); returns how many. After a full walk (`fsck`), every
    /// block the tree covers has then been checked once.
    pub fn verify_rest(&self) -> Result<u64> {
        self.inner.verify_rest().map_err(verity)
    }
}

impl ReadAt for Verity {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner
            .read_exact_at(buf, offset)
            .map_err(io::Error::from)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.inner.len())
    }
}

fn verity(e: VerityError) -> Error {
    Error::Verity(Arc::new(e))
}

fn io_len(src: &Src) -> Result<u64> {
    src.len().map_err(|source| Error::Io {
        offset: 0,
        len: 0,
        source,
    })
}

/// Reads the verity superblock at `offset` of `hash`.
fn read_superblock(hash: &Src, offset: u64) -> Result<Params> {
    let mut sb = [0u8; SUPERBLOCK_LEN];
    hash.read_exact_at(&mut sb, offset).map_err(|e| {
        verity(VerityError::BadSuperblock {
            offset,
            why: format!("cannot read it: {e}"),
        })
    })?;
    Params::parse_superblock(&sb, offset).map_err(verity)
}

/// The blocks of the image's unified address space (its own and its
/// extra devices' at their mapped addresses), read from its device table
/// unverified (only a place to look for the tree's superblock); `None`
/// without extra devices or when the table cannot be read.
fn mapped_blocks(data: &Src, sb: &Superblock, image_offset: u64) -> Option<u64> {
    use ferrofs_format::device::{mapped_end, DeviceSlot, DEVICE_SLOT_SIZE};
    use ferrofs_format::superblock::incompat;
    if sb.extra_devices == 0 {
        return None;
    }
    let bit48 = sb.has_incompat(incompat::BIT48);
    let start = u64::from(sb.devt_slotoff).checked_mul(DEVICE_SLOT_SIZE as u64)?;
    let mut slots = Vec::new();
    for k in 0..u64::from(sb.extra_devices) {
        let mut raw = [0u8; DEVICE_SLOT_SIZE];
        let at = k
            .checked_mul(DEVICE_SLOT_SIZE as u64)?
            .checked_add(start)?
            .checked_add(image_offset)?;
        data.read_exact_at(&mut raw, at).ok()?;
        slots.push(DeviceSlot::parse(&raw, bit48));
    }
    mapped_end(sb.total_blocks(), &slots)
}

/// Where an appended tree starts by default: the EROFS image's end (at
/// `image_offset` in the data; read
/// unverified: the tree, checked against the root hash, then covers that
/// superblock too) rounded up to 4096, or to 512 bytes, whichever holds a
/// verity superblock (4096 without a superblock to look for). The
/// candidates are probed through `tree`, the source the tree is read from.
fn default_hash_offset(data: &Src, tree: &Src, image_offset: u64, superblock: bool) -> Result<u64> {
    let mut raw = [0u8; SB_BASE_SIZE];
    let at = SUPERBLOCK_OFFSET.saturating_add(image_offset);
    data.read_exact_at(&mut raw, at)
        .map_err(|source| Error::Io {
            offset: at,
            len: SB_BASE_SIZE,
            source,
        })?;
    let not_found = |why: String| {
        verity(VerityError::BadSuperblock {
            offset: SUPERBLOCK_OFFSET,
            why,
        })
    };
    let sb = Superblock::parse(&raw)
        .map_err(|e| not_found(format!("no EROFS superblock to find the tree after: {e}")))?;
    let bytes = |blocks: u64| {
        blocks
            .checked_shl(u32::from(sb.blkszbits))
            .filter(|_| sb.blkszbits < 32)
            .and_then(|e| e.checked_add(image_offset))
    };
    let end = bytes(sb.total_blocks())
        .ok_or_else(|| not_found("the EROFS image's size overflows".into()))?;
    // Extra devices appended to the image (a tar index's archive): the
    // tree follows them.
    let len = data.len().unwrap_or(0);
    let mapped = mapped_blocks(data, &sb, image_offset).and_then(bytes);
    let ends: Vec<u64> = mapped
        .into_iter()
        .filter(|&m| m > end && m <= len)
        .chain([end])
        .collect();
    let candidates = ends.iter().flat_map(|e| {
        [4096u64, 512]
            .into_iter()
            .filter_map(move |a| e.checked_next_multiple_of(a))
    });
    if !superblock {
        return ends
            .first()
            .and_then(|e| e.checked_next_multiple_of(4096))
            .ok_or_else(|| not_found("hash offset overflows".into()));
    }
    for at in candidates {
        let mut magic = [0u8; 8];
        if tree.read_exact_at(&mut magic, at).is_ok() && &magic == SUPERBLOCK_MAGIC {
            return Ok(at);
        }
    }
    Err(verity(VerityError::BadSuperblock {
        offset: end.checked_next_multiple_of(4096).unwrap_or(end),
        why: format!(
            "no verity superblock after the EROFS image (it ends at byte {end}); \
             give the tree's place (--verity-hash-offset, --verity-hash-file)"
        ),
    }))
}
