//! Loading an inode by nid and validating it into a domain struct, so raw
//! on-disk values never leak past this module.

use ferrofs_format::inode::{
    decode_rdev, DataLayout, FileType, RawInode, COMPACT_INODE_SIZE, EXTENDED_INODE_SIZE,
    I_FORMAT_KNOWN, I_FORMAT_NLINK1_OR_DOT_OMITTED,
};
use ferrofs_format::{Nid, INODE_SLOT_SIZE};

use crate::error::{Error, Location, Result};
use crate::image::Image;

/// A validated inode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    pub nid: Nid,
    pub file_type: FileType,
    /// Full `st_mode` (type and permission bits).
    pub mode: u16,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: u32,
    /// Device number (major, minor) for character and block devices.
    pub rdev: (u32, u32),
    pub layout: DataLayout,
    pub extended: bool,
    /// The 32-bit serial stored on disk (informational).
    pub ino: u32,
    /// The raw `i_u` word (start block, compressed block count, chunk format).
    pub i_u: u32,
    pub xattr_icount: u16,
    /// Absolute byte position of the inode.
    pub pos: u64,
}

impl Inode {
    /// Loads inode `nid` from the metadata area.
    pub fn load(image: &Image, nid: Nid) -> Result<Self> {
        let at = Location::nid(nid.0);
        if nid.0 >> 63 != 0 {
            return Err(Error::unsupported(at, "metabox inodes"));
        }
        let sb = &image.inner.sb;
        let pos = u64::from(sb.meta_blkaddr)
            .checked_mul(image.inner.bs.bytes())
            .and_then(|base| base.checked_add(nid.0.checked_mul(INODE_SLOT_SIZE)?))
            .ok_or_else(|| Error::corrupt(at, "inode address overflows"))?;
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
                    pos + COMPACT_INODE_SIZE as u64,
                )
                .map_err(|e| relocate(e, at))?;
            RawInode::parse_extended(&b)
        } else {
            RawInode::parse_compact(&head)
        };
        Self::validate(image, nid, pos, raw)
    }

    fn validate(image: &Image, nid: Nid, pos: u64, raw: RawInode) -> Result<Self> {
        let at = Location::nid(nid.0).with_offset(pos);
        if raw.format & !I_FORMAT_KNOWN != 0 {
            return Err(Error::unsupported(
                at,
                format!("inode format bits {:#x}", raw.format),
            ));
        }
        if raw.format & I_FORMAT_NLINK1_OR_DOT_OMITTED != 0 {
            return Err(Error::unsupported(
                at,
                "48-bit inode flags (nlink_1/dot_omitted)",
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
            // Compact inodes: the superblock epoch plus the stored offset.
            let epoch = i64::try_from(sb.epoch).unwrap_or(i64::MAX);
            (epoch.saturating_add(raw.mtime), sb.fixed_nsec)
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
        Ok(Self {
            nid,
            file_type,
            mode: raw.mode,
            uid: raw.uid,
            gid: raw.gid,
            nlink: raw.nlink,
            size,
            mtime,
            mtime_nsec,
            rdev,
            layout,
            extended: raw.extended,
            ino: raw.ino,
            i_u: raw.i_u,
            xattr_icount: raw.xattr_icount,
            pos,
        })
    }

    /// Size of the on-disk inode structure (32 or 64).
    pub fn inode_size(&self) -> u64 {
        ferrofs_format::inode::inode_size(self.extended)
    }
    /// Bytes of the inline xattr body.
    pub fn xattr_isize(&self) -> u64 {
        if self.xattr_icount == 0 {
            0
        } else {
            12 + 4 * (u64::from(self.xattr_icount) - 1)
        }
    }
    /// Absolute position right after the inode and its xattr body.
    pub fn inode_end(&self) -> u64 {
        self.pos + self.inode_size() + self.xattr_isize()
    }
    /// Permission bits (including setuid, setgid, sticky).
    pub fn permissions(&self) -> u16 {
        self.mode & 0o7777
    }
    pub fn is_dir(&self) -> bool {
        self.file_type == FileType::Directory
    }
    pub fn is_reg(&self) -> bool {
        self.file_type == FileType::Regular
    }
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
