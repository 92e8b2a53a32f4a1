//! EROFS on-disk types and nothing else: little-endian structures with their
//! sizes, constants, feature bits, the superblock checksum and pure decoders
//! of the compressed-file indexes. No I/O happens here: every parser takes a
//! byte slice of a known length and returns a typed value or a [`FormatError`].

#![forbid(unsafe_code)]
#![warn(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

pub mod chunk;
pub mod compress;
pub mod device;
pub mod dirent;
pub mod error;
pub mod hotrange;
pub mod inode;
pub mod kernel;
mod le;
pub mod superblock;
pub mod xattr;
pub mod zmap;

pub use error::FormatError;

/// Absolute byte offset of the superblock in every image.
pub const SUPERBLOCK_OFFSET: u64 = 1024;
/// Magic number at [`SUPERBLOCK_OFFSET`].
pub const EROFS_MAGIC: u32 = 0xE0F5_E1E2;
/// Size of the inode "slot" grid: an inode's number is its slot index.
pub const INODE_SLOT_SIZE: u64 = 32;
/// Longest name a directory entry may hold.
pub const NAME_MAX: usize = 255;
/// Smallest and largest block size exponents a 4 KiB-page kernel mounts.
pub const MIN_BLKSZBITS: u8 = 9;
/// See [`MIN_BLKSZBITS`].
pub const MAX_BLKSZBITS: u8 = 12;

/// An inode number: the 32-byte slot index counted from `meta_blkaddr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Nid(pub u64);

impl Nid {
    /// The inode number Linux's EROFS driver reports for this nid (`st_ino`
    /// and readdir's `d_ino`) in an image with or without the metabox
    /// feature. Without it, the nid itself. With it, a nid below 2^31 is
    /// still its own number; above, bits 31..=62 move up by one and the
    /// metabox flag (bit 63) takes the freed bit 31, so a metabox inode's
    /// number stays small. One to one; [`Nid::from_kernel_ino`] undoes it.
    pub fn kernel_ino(self, metabox: bool) -> u64 {
        if !metabox {
            return self.0;
        }
        let low = self.0 & 0x7fff_ffff;
        let high = (self.0 << 1) & 0xffff_ffff_0000_0000;
        let flag = (self.0 >> 63) << 31;
        high | flag | low
    }

    /// The nid whose [`Nid::kernel_ino`] is `ino`.
    pub fn from_kernel_ino(ino: u64, metabox: bool) -> Nid {
        if !metabox {
            return Nid(ino);
        }
        let low = ino & 0x7fff_ffff;
        let high = (ino >> 1) & 0x7fff_ffff_8000_0000;
        let flag = ((ino >> 31) & 1) << 63;
        Nid(high | flag | low)
    }
}

impl std::fmt::Display for Nid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A block number in the unified address space of an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockAddr(pub u64);

/// A validated block size (512 ..= 4096 bytes, a power of two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSize {
    bits: u8,
}

impl BlockSize {
    /// Accepts the exponents a 4 KiB-page kernel mounts (9..=12).
    pub fn from_bits(bits: u8) -> Result<Self, FormatError> {
        if (MIN_BLKSZBITS..=MAX_BLKSZBITS).contains(&bits) {
            Ok(Self { bits })
        } else {
            Err(FormatError::BadBlockSize(bits))
        }
    }
    /// log2 of the block size.
    pub fn bits(self) -> u8 {
        self.bits
    }
    /// The block size in bytes.
    pub fn bytes(self) -> u64 {
        1u64 << self.bits
    }
    /// The block size in bytes as a `usize` (at most 4096).
    pub fn usize(self) -> usize {
        1usize << self.bits
    }
    /// Byte address of a block, or `None` on overflow.
    pub fn pos(self, blk: BlockAddr) -> Option<u64> {
        blk.0.checked_mul(self.bytes())
    }
    /// Number of blocks needed to hold `bytes`.
    pub fn blocks_for(self, bytes: u64) -> u64 {
        bytes.div_ceil(self.bytes())
    }
    /// Offset of `pos` inside its block.
    pub fn offset_in_block(self, pos: u64) -> u64 {
        pos & !(u64::MAX << self.bits)
    }
    /// Offset of `pos` inside its block, as an index.
    pub fn index_in_block(self, pos: u64) -> usize {
        // At most 4095, so the conversion cannot fail.
        usize::try_from(self.offset_in_block(pos)).unwrap_or(0)
    }
    /// The block number holding byte `pos`.
    pub fn block_of(self, pos: u64) -> u64 {
        pos >> self.bits
    }
    /// `n` bytes, but at most one block, as a length.
    pub fn at_most(self, n: u64) -> usize {
        usize::try_from(n).map_or(self.usize(), |n| n.min(self.usize()))
    }
}

/// Rounds `v` up to a multiple of the power of two `align`, `None` on overflow.
pub fn round_up(v: u64, align: u64) -> Option<u64> {
    debug_assert!(align.is_power_of_two());
    let mask = align.checked_sub(1)?;
    Some(v.checked_add(mask)? & !mask)
}

#[cfg(test)]
mod tests {
    use super::Nid;

    #[test]
    fn kernel_ino_matches_the_driver_and_round_trips() {
        // What a 6.18 loop mount's stat shows: kitchen-sink.erofs's metabox
        // root (nid 2^63) and its entry at metabox slot 2, e48.erofs's root.
        assert_eq!(Nid(1 << 63).kernel_ino(true), 2_147_483_648);
        assert_eq!(Nid((1 << 63) + 2).kernel_ino(true), 2_147_483_650);
        assert_eq!(Nid(37).kernel_ino(false), 37);
        // With metabox, bit 31 of a plain nid moves to bit 32.
        assert_eq!(Nid(1 << 31).kernel_ino(true), 1 << 32);
        assert_eq!(Nid(1 << 31).kernel_ino(false), 1 << 31);
        assert_eq!(Nid((1 << 31) - 1).kernel_ino(true), (1 << 31) - 1);
        for metabox in [false, true] {
            for n in [
                0,
                1,
                36,
                (1 << 31) - 1,
                1 << 31,
                (1 << 32) + 7,
                1 << 62,
                (1 << 63) - 1,
                1 << 63,
                (1 << 63) | (1 << 40) | 5,
                u64::MAX,
            ] {
                let ino = Nid(n).kernel_ino(metabox);
                let back = Nid::from_kernel_ino(ino, metabox);
                assert_eq!(back, Nid(n), "nid {n:#x} -> {ino:#x} ({metabox})");
            }
        }
        // Distinct nids never share a number.
        assert_ne!(Nid(1 << 31).kernel_ino(true), Nid(1 << 63).kernel_ino(true));
    }
}
