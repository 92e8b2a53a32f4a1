//! Compact (32-byte) and extended (64-byte) inodes, decoded into one raw form.

use crate::le::{put_at, u16_at, u32_at, u64_at};
use crate::FormatError;

pub const COMPACT_INODE_SIZE: usize = 32;
pub const EXTENDED_INODE_SIZE: usize = 64;

/// Bytes of an on-disk inode: 64 when extended, 32 when compact.
pub fn inode_size(extended: bool) -> u64 {
    if extended {
        EXTENDED_INODE_SIZE as u64
    } else {
        COMPACT_INODE_SIZE as u64
    }
}

/// How a file's data is stored (`i_format` bits 1..3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DataLayout {
    FlatPlain,
    CompressedFull,
    FlatInline,
    CompressedCompact,
    ChunkBased,
}

impl DataLayout {
    pub fn from_bits(v: u16) -> Option<Self> {
        Some(match v {
            0 => Self::FlatPlain,
            1 => Self::CompressedFull,
            2 => Self::FlatInline,
            3 => Self::CompressedCompact,
            4 => Self::ChunkBased,
            _ => return None,
        })
    }
    pub fn bits(self) -> u16 {
        match self {
            Self::FlatPlain => 0,
            Self::CompressedFull => 1,
            Self::FlatInline => 2,
            Self::CompressedCompact => 3,
            Self::ChunkBased => 4,
        }
    }
    pub fn is_compressed(self) -> bool {
        matches!(self, Self::CompressedFull | Self::CompressedCompact)
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::FlatPlain => "flat_plain",
            Self::CompressedFull => "compressed_full",
            Self::FlatInline => "flat_inline",
            Self::CompressedCompact => "compressed_compact",
            Self::ChunkBased => "chunk_based",
        }
    }
}

/// File type from the `S_IFMT` bits of `i_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileType {
    Regular,
    Directory,
    Symlink,
    CharDevice,
    BlockDevice,
    Fifo,
    Socket,
}

pub const S_IFMT: u16 = 0o170000;

impl FileType {
    pub fn from_mode(mode: u16) -> Option<Self> {
        Some(match mode & S_IFMT {
            0o100000 => Self::Regular,
            0o040000 => Self::Directory,
            0o120000 => Self::Symlink,
            0o020000 => Self::CharDevice,
            0o060000 => Self::BlockDevice,
            0o010000 => Self::Fifo,
            0o140000 => Self::Socket,
            _ => return None,
        })
    }
    /// The dirent `file_type` code of this type.
    pub fn dirent_code(self) -> u8 {
        match self {
            Self::Regular => 1,
            Self::Directory => 2,
            Self::CharDevice => 3,
            Self::BlockDevice => 4,
            Self::Fifo => 5,
            Self::Socket => 6,
            Self::Symlink => 7,
        }
    }
    pub fn from_dirent_code(c: u8) -> Option<Self> {
        Some(match c {
            1 => Self::Regular,
            2 => Self::Directory,
            3 => Self::CharDevice,
            4 => Self::BlockDevice,
            5 => Self::Fifo,
            6 => Self::Socket,
            7 => Self::Symlink,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Regular => "file",
            Self::Directory => "dir",
            Self::Symlink => "symlink",
            Self::CharDevice => "chrdev",
            Self::BlockDevice => "blkdev",
            Self::Fifo => "fifo",
            Self::Socket => "socket",
        }
    }
}

/// `i_format` bit 4: NLINK_1 (files) / DOT_OMITTED (dirs), 48-bit era only.
pub const I_FORMAT_NLINK1_OR_DOT_OMITTED: u16 = 0x10;
/// All `i_format` bits that have a meaning.
pub const I_FORMAT_KNOWN: u16 = 0x1F;

/// An inode's fields as stored, in one shape for both on-disk forms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawInode {
    pub format: u16,
    pub extended: bool,
    pub xattr_icount: u16,
    pub mode: u16,
    pub nb: u16,
    pub size: u64,
    /// Compact: offset from the superblock epoch; extended: seconds.
    pub mtime: i64,
    /// Extended only; compact inodes take the superblock's fixed_nsec.
    pub mtime_nsec: u32,
    pub i_u: u32,
    pub ino: u32,
    pub uid: u32,
    pub gid: u32,
    /// Extended only; compact inodes keep nlink in `nb`.
    pub nlink: u32,
}

impl RawInode {
    /// Whether `i_format` says the inode is extended (64 bytes).
    pub fn is_extended_format(format: u16) -> bool {
        format & 1 != 0
    }

    /// Size of the on-disk inode given its first two bytes.
    pub fn size_for_format(format: u16) -> usize {
        if Self::is_extended_format(format) {
            EXTENDED_INODE_SIZE
        } else {
            COMPACT_INODE_SIZE
        }
    }

    pub fn parse_compact(b: &[u8; COMPACT_INODE_SIZE]) -> Self {
        Self {
            format: u16_at(b, 0),
            extended: false,
            xattr_icount: u16_at(b, 2),
            mode: u16_at(b, 4),
            nb: u16_at(b, 6),
            size: u64::from(u32_at(b, 8)),
            mtime: i64::from(u32_at(b, 12)),
            mtime_nsec: 0,
            i_u: u32_at(b, 16),
            ino: u32_at(b, 20),
            uid: u32::from(u16_at(b, 24)),
            gid: u32::from(u16_at(b, 26)),
            nlink: u32::from(u16_at(b, 6)),
        }
    }

    pub fn parse_extended(b: &[u8; EXTENDED_INODE_SIZE]) -> Self {
        Self {
            format: u16_at(b, 0),
            extended: true,
            xattr_icount: u16_at(b, 2),
            mode: u16_at(b, 4),
            nb: u16_at(b, 6),
            size: u64_at(b, 8),
            mtime: u64_at(b, 32) as i64,
            mtime_nsec: u32_at(b, 40),
            i_u: u32_at(b, 16),
            ino: u32_at(b, 20),
            uid: u32_at(b, 24),
            gid: u32_at(b, 28),
            nlink: u32_at(b, 44),
        }
    }

    /// Encodes a compact inode (the caller has checked the fields fit).
    // why: the builder checks that nlink, size, mtime, uid and gid fit the
    // compact inode before choosing it; this writer only narrows them.
    #[allow(clippy::cast_possible_truncation)]
    pub fn to_compact_bytes(&self) -> [u8; COMPACT_INODE_SIZE] {
        let mut b = [0u8; COMPACT_INODE_SIZE];
        let mut put = |off: usize, v: &[u8]| put_at(&mut b, off, v);
        put(0, &(self.format & !1).to_le_bytes());
        put(2, &self.xattr_icount.to_le_bytes());
        put(4, &self.mode.to_le_bytes());
        put(6, &(self.nlink as u16).to_le_bytes());
        put(8, &(self.size as u32).to_le_bytes());
        put(12, &(self.mtime as u32).to_le_bytes());
        put(16, &self.i_u.to_le_bytes());
        put(20, &self.ino.to_le_bytes());
        put(24, &(self.uid as u16).to_le_bytes());
        put(26, &(self.gid as u16).to_le_bytes());
        b
    }

    /// Encodes an extended inode.
    pub fn to_extended_bytes(&self) -> [u8; EXTENDED_INODE_SIZE] {
        let mut b = [0u8; EXTENDED_INODE_SIZE];
        let mut put = |off: usize, v: &[u8]| put_at(&mut b, off, v);
        put(0, &(self.format | 1).to_le_bytes());
        put(2, &self.xattr_icount.to_le_bytes());
        put(4, &self.mode.to_le_bytes());
        put(6, &self.nb.to_le_bytes());
        put(8, &self.size.to_le_bytes());
        put(16, &self.i_u.to_le_bytes());
        put(20, &self.ino.to_le_bytes());
        put(24, &self.uid.to_le_bytes());
        put(28, &self.gid.to_le_bytes());
        put(32, &self.mtime.to_le_bytes());
        put(40, &self.mtime_nsec.to_le_bytes());
        put(44, &self.nlink.to_le_bytes());
        b
    }

    /// The data layout, or an error for the reserved values 5..7.
    pub fn layout(&self) -> Result<DataLayout, FormatError> {
        let v = (self.format >> 1) & 7;
        DataLayout::from_bits(v).ok_or(FormatError::invalid("data layout", v))
    }

    /// Bytes of the inline xattr body that follows the inode.
    pub fn xattr_isize(&self) -> usize {
        if self.xattr_icount == 0 {
            0
        } else {
            // why: xattr_icount is a u16, so 12 + 4 * 65534 fits any usize.
            #[allow(clippy::arithmetic_side_effects)]
            let size = 12 + 4 * (usize::from(self.xattr_icount) - 1);
            size
        }
    }
}

/// Decodes a device number from the kernel's "new" 32-bit encoding.
pub fn decode_rdev(v: u32) -> (u32, u32) {
    let major = (v & 0xfff00) >> 8;
    let minor = (v & 0xff) | ((v >> 12) & 0xfff00);
    (major, minor)
}

/// Encodes (major, minor) into the kernel's "new" 32-bit encoding.
pub fn encode_rdev(major: u32, minor: u32) -> u32 {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdev_examples_from_the_format() {
        assert_eq!(encode_rdev(1, 3), 0x103);
        assert_eq!(encode_rdev(8, 17), 0x811);
        assert_eq!(decode_rdev(0x811), (8, 17));
        assert_eq!(decode_rdev(encode_rdev(259, 70000)), (259, 70000));
    }

    #[test]
    fn inode_encodings_round_trip() {
        let raw = RawInode {
            format: DataLayout::FlatInline.bits() << 1,
            extended: true,
            xattr_icount: 3,
            mode: 0o104755,
            nb: 0,
            size: 5 << 32,
            mtime: -86400,
            mtime_nsec: 999_999_999,
            i_u: 0xffff_ffff,
            ino: 9,
            uid: 100_000,
            gid: 200_000,
            nlink: 70_000,
        };
        let back = RawInode::parse_extended(&raw.to_extended_bytes());
        assert_eq!(
            back,
            RawInode {
                format: raw.format | 1,
                ..raw.clone()
            }
        );
        let compact = RawInode {
            extended: false,
            size: 12345,
            mtime: 0,
            mtime_nsec: 0,
            uid: 1000,
            gid: 1000,
            nlink: 2,
            nb: 2,
            ..raw
        };
        assert_eq!(
            RawInode::parse_compact(&compact.to_compact_bytes()),
            compact
        );
    }

    #[test]
    fn compact_inode_fields() {
        // Root inode of the worked example in the format notes.
        let mut b = [0u8; 32];
        b[..16].copy_from_slice(&[0x04, 0, 0, 0, 0xed, 0x41, 2, 0, 0x53, 0, 0, 0, 0, 0, 0, 0]);
        b[16..20].copy_from_slice(&[0xff; 4]);
        let i = RawInode::parse_compact(&b);
        assert_eq!(i.layout().unwrap(), DataLayout::FlatInline);
        assert_eq!(i.mode, 0o40755);
        assert_eq!(i.nlink, 2);
        assert_eq!(i.size, 83);
        assert_eq!(FileType::from_mode(i.mode), Some(FileType::Directory));
    }
}
