//! Loading an inode by nid and validating it into a domain struct, so raw
//! on-disk values never leak past this module.

use ferrofs_format::inode::{
    decode_rdev, DataLayout, FileType, RawInode, COMPACT_INODE_SIZE, EXTENDED_INODE_SIZE,
    I_FORMAT_KNOWN, I_FORMAT_NLINK1_OR_DOT_OMITTED,
};
use ferrofs_format::{Nid, INODE_SLOT_SIZE};

use crate::addr::{MetaAddr, METABOX_SPACE};
use crate::error::{Error, Location, OrCorrupt, Result};
use crate::image::Image;

/// A validated inode, made only by this crate (fields are read through
/// methods, so a caller cannot hand a forged inode to a read path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    pub(crate) nid: Nid,
    pub(crate) file_type: FileType,
    /// Full `st_mode` (type and permission bits).
    pub(crate) mode: u16,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) nlink: u32,
    pub(crate) size: u64,
    pub(crate) mtime: i64,
    pub(crate) mtime_nsec: u32,
    /// Device number (major, minor) for character and block devices.
    pub(crate) rdev: (u32, u32),
    pub(crate) layout: DataLayout,
    pub(crate) extended: bool,
    /// The 32-bit serial stored on disk (informational).
    pub(crate) ino: u32,
    /// The raw `i_u` word (start block, compressed block count, chunk format).
    pub(crate) i_u: u32,
    /// Flat layouts: the first data block (`i_u` plus the 16 high bits of
    /// 48-bit images); `None` for a FLAT_PLAIN file that is all hole.
    pub(crate) startblk: Option<u64>,
    /// A directory stored without its "." entry (48-bit images).
    pub(crate) dot_omitted: bool,
    /// A compact non-directory with the NLINK_1 bit: nlink is 1 and the
    /// nlink field holds address bits 32..47 (48-bit images).
    pub(crate) nlink1: bool,
    pub(crate) xattr_icount: u16,
    /// Metadata address of the inode (on the primary device or in the
    /// metabox), and of the byte right after it and its xattr body.
    pub(crate) pos: MetaAddr,
    pub(crate) end: MetaAddr,
}

/// Low 48 bits: the widest block address the format stores.
const ADDR48_MASK: u64 = (1 << 48) - 1;
/// Low 32 bits: block addresses of compact inodes without NLINK_1.
const ADDR32_MASK: u64 = (1 << 32) - 1;

impl Inode {
    /// Loads inode `nid` from the metadata area.
    pub fn load(image: &Image, nid: Nid) -> Result<Self> {
        let at = Location::nid(nid.0);
        let pos = Self::position(image, nid)?;
        let mut head = [0u8; COMPACT_INODE_SIZE];
        image
            .read_raw(&mut head, pos)
            .map_err(|e| relocate(e, at))?;
        let format = u16::from_le_bytes([head[0], head[1]]);
        let raw = if RawInode::is_extended_format(format) {
            let mut b = [0u8; EXTENDED_INODE_SIZE];
            b[..COMPACT_INODE_SIZE].copy_from_slice(&head);
            image
                .read_raw(
                    &mut b[COMPACT_INODE_SIZE..],
                    pos.checked_add(COMPACT_INODE_SIZE as u64)
                        .or_corrupt(at, "inode address overflows")?,
                )
                .map_err(|e| relocate(e, at))?;
            RawInode::parse_extended(&b)
        } else {
            RawInode::parse_compact(&head)
        };
        Self::validate(image, nid, pos, raw)
    }

    /// The metadata address of inode `nid`: its 32-byte slot counted from
    /// `meta_blkaddr` on the primary device, or (bit 63 set) in the
    /// metabox data.
    pub fn position(image: &Image, nid: Nid) -> Result<MetaAddr> {
        let at = Location::nid(nid.0);
        if nid.0 & METABOX_SPACE != 0 {
            if image.inner.metabox.is_none() {
                return Err(Error::corrupt(
                    at,
                    "metabox nid in an image without a metabox",
                ));
            }
            return (nid.0 & !METABOX_SPACE)
                .checked_mul(INODE_SLOT_SIZE)
                .and_then(MetaAddr::metabox)
                .ok_or_else(|| Error::corrupt(at, "inode address overflows"));
        }
        u64::from(image.inner.sb.meta_blkaddr)
            .checked_mul(image.inner.bs.bytes())
            .and_then(|base| base.checked_add(nid.0.checked_mul(INODE_SLOT_SIZE)?))
            .and_then(MetaAddr::primary)
            .ok_or_else(|| Error::corrupt(at, "inode address overflows"))
    }

    fn validate(image: &Image, nid: Nid, pos: MetaAddr, raw: RawInode) -> Result<Self> {
        let at = Location::nid(nid.0).with_offset(pos.bits());
        if raw.format & !I_FORMAT_KNOWN != 0 {
            return Err(Error::unsupported(
                at,
                format!("inode format bits {:#x}", raw.format),
            ));
        }
        let layout = raw.layout().map_err(|_| {
            Error::unsupported(at, format!("data layout {}", (raw.format >> 1) & 7))
        })?;
        let file_type = FileType::from_mode(raw.mode)
            .ok_or_else(|| Error::corrupt(at, format!("bad file type in mode {:#o}", raw.mode)))?;
        if raw.extended && raw.size > i64::MAX as u64 {
            return Err(Error::corrupt(at, "negative file size"));
        }
        let sb = &image.inner.sb;
        let (mtime, mtime_nsec) = if raw.extended {
            (raw.mtime, raw.mtime_nsec)
        } else {
            // Compact inodes: the (signed) superblock epoch plus the stored
            // unsigned offset.
            (sb.epoch().saturating_add(raw.mtime), sb.fixed_nsec)
        };
        // Bit 4 of i_format: NLINK_1 on compact non-directories (nlink is 1
        // and i_nb holds address bits 32..47), DOT_OMITTED on directories.
        let bit4 = raw.format & I_FORMAT_NLINK1_OR_DOT_OMITTED != 0;
        let is_dir = file_type == FileType::Directory;
        let nlink1 = bit4 && !is_dir && !raw.extended;
        let dot_omitted = bit4 && is_dir;
        // (The kernel reads the bit whatever the superblock says.)
        let nlink = if nlink1 { 1 } else { raw.nlink };
        // Extended inodes always carry the high address bits in i_nb (0 in
        // images older than the 48-bit layout); compact ones only with
        // NLINK_1. An all-ones address under the applicable mask marks a
        // FLAT_PLAIN file without blocks.
        let (addr, mask) = if raw.extended || nlink1 {
            (u64::from(raw.i_u) | (u64::from(raw.nb) << 32), ADDR48_MASK)
        } else {
            (u64::from(raw.i_u), ADDR32_MASK)
        };
        let startblk = if layout == DataLayout::FlatPlain && (addr ^ u64::MAX) & mask == 0 {
            None
        } else {
            Some(addr)
        };
        let rdev = match file_type {
            FileType::CharDevice | FileType::BlockDevice => decode_rdev(raw.i_u),
            _ => (0, 0),
        };
        let size = match file_type {
            FileType::Regular | FileType::Directory | FileType::Symlink => raw.size,
            _ => 0,
        };
        if layout == DataLayout::ChunkBased
            && !sb.has_incompat(ferrofs_format::superblock::incompat::CHUNKED_FILE)
        {
            // The kernel accepts it; nothing to refuse, but note it for fsck.
        }
        let end = end_of(pos, raw.extended, raw.xattr_icount)
            .ok_or_else(|| Error::corrupt(at, "inode xattr body ends past its space"))?;
        Ok(Self {
            nid,
            file_type,
            mode: raw.mode,
            uid: raw.uid,
            gid: raw.gid,
            nlink,
            size,
            mtime,
            mtime_nsec,
            rdev,
            layout,
            extended: raw.extended,
            ino: raw.ino,
            i_u: raw.i_u,
            startblk,
            dot_omitted,
            nlink1,
            xattr_icount: raw.xattr_icount,
            pos,
            end,
        })
    }

    /// The inode's nid (its number in the image; also `st_ino`).
    pub fn nid(&self) -> Nid {
        self.nid
    }
    /// File type from the mode.
    pub fn file_type(&self) -> FileType {
        self.file_type
    }
    /// Full `st_mode` (type and permission bits).
    pub fn mode(&self) -> u16 {
        self.mode
    }
    /// Owner user id.
    pub fn uid(&self) -> u32 {
        self.uid
    }
    /// Owner group id.
    pub fn gid(&self) -> u32 {
        self.gid
    }
    /// Hard link count.
    pub fn nlink(&self) -> u32 {
        self.nlink
    }
    /// Size in bytes (data of files, entries of directories, target of symlinks).
    pub fn size(&self) -> u64 {
        self.size
    }
    /// Modification time, seconds since the Unix epoch (may be negative).
    pub fn mtime(&self) -> i64 {
        self.mtime
    }
    /// Nanoseconds of the modification time.
    pub fn mtime_nsec(&self) -> u32 {
        self.mtime_nsec
    }
    /// Device number (major, minor) of character and block devices.
    pub fn rdev(&self) -> (u32, u32) {
        self.rdev
    }
    /// How the data is laid out on disk.
    pub fn layout(&self) -> DataLayout {
        self.layout
    }
    /// Whether the on-disk inode is the 64-byte extended form.
    pub fn is_extended(&self) -> bool {
        self.extended
    }
    /// The 32-bit serial stored on disk (informational).
    pub fn serial(&self) -> u32 {
        self.ino
    }
    /// The raw `i_u` word (start block, compressed block count, chunk format).
    pub fn i_u(&self) -> u32 {
        self.i_u
    }
    /// Flat layouts: the first data block; `None` for an all-hole file.
    pub fn startblk(&self) -> Option<u64> {
        self.startblk
    }
    /// A directory stored without its "." entry (48-bit images).
    pub fn dot_omitted(&self) -> bool {
        self.dot_omitted
    }
    /// A compact inode with the NLINK_1 bit (48-bit images).
    pub fn nlink1(&self) -> bool {
        self.nlink1
    }
    /// Number of 4-byte units of the inline xattr body (0: none).
    pub fn xattr_icount(&self) -> u16 {
        self.xattr_icount
    }
    /// Metadata address of the inode (on the primary device or in the metabox).
    pub fn pos(&self) -> MetaAddr {
        self.pos
    }
    /// Size of the on-disk inode structure (32 or 64).
    pub fn inode_size(&self) -> u64 {
        ferrofs_format::inode::inode_size(self.extended)
    }
    /// Bytes of the inline xattr body.
    pub fn xattr_isize(&self) -> u64 {
        xattr_isize(self.xattr_icount)
    }
    /// Metadata address right after the inode and its xattr body.
    pub fn inode_end(&self) -> MetaAddr {
        self.end
    }
    /// `st_blocks` as the kernel reports it (512-byte units) in an image
    /// of 2^`blkszbits`-byte blocks: compressed files count their stored
    /// blocks (none when all the data is inline or in the packed inode),
    /// others their size rounded up to whole blocks.
    pub fn st_blocks(&self, blkszbits: u8) -> u64 {
        let shift = u32::from(blkszbits.saturating_sub(9));
        let blocks = match self.layout {
            DataLayout::CompressedFull | DataLayout::CompressedCompact => u64::from(self.i_u),
            _ => self.size.div_ceil(1u64 << blkszbits.min(63)),
        };
        blocks.checked_shl(shift).unwrap_or(u64::MAX)
    }
    /// Permission bits (including setuid, setgid, sticky).
    pub fn permissions(&self) -> u16 {
        self.mode & 0o7777
    }
    /// A directory.
    pub fn is_dir(&self) -> bool {
        self.file_type == FileType::Directory
    }
    /// A regular file.
    pub fn is_reg(&self) -> bool {
        self.file_type == FileType::Regular
    }
    /// A symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.file_type == FileType::Symlink
    }
    pub(crate) fn loc(&self) -> Location {
        Location::nid(self.nid.0)
    }
}

/// Re-labels an I/O error of an inode read with the inode's location.
fn relocate(e: Error, at: Location) -> Error {
    match e {
        Error::Io { offset, source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof => {
            Error::corrupt(
                at.with_offset(offset),
                "inode lies beyond the end of the image",
            )
        }
        other => other,
    }
}

/// Bytes of the inline xattr body for `icount` (0: none).
// why: icount is a u16, so 12 + 4 * 65534 cannot overflow a u64.
#[allow(clippy::arithmetic_side_effects)]
fn xattr_isize(icount: u16) -> u64 {
    match icount {
        0 => 0,
        n => 12 + 4 * (u64::from(n) - 1),
    }
}

/// Address right after an inode at `pos` and its xattr body, `None` past
/// the end of its space.
fn end_of(pos: MetaAddr, extended: bool, icount: u16) -> Option<MetaAddr> {
    pos.checked_add(ferrofs_format::inode::inode_size(extended))?
        .checked_add(xattr_isize(icount))
}
