//! Reader values in FUSE's terms: attributes, times, device numbers, file
//! types and errno values.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferrofs::format::inode::FileType as Ft;
use ferrofs::{raw::Inode, Error};
use fuser::{Errno, FileAttr, FileType, INodeNo};

/// The attributes the kernel's EROFS driver would report for `i`, as
/// FUSE inode `ino` of an image with blocks of 2^`bits` bytes.
pub(crate) fn attr(i: &Inode, ino: INodeNo, bits: u8) -> FileAttr {
    let t = time(i.mtime(), i.mtime_nsec());
    let (major, minor) = i.rdev();
    FileAttr {
        ino,
        size: i.size(),
        blocks: i.st_blocks(bits),
        atime: t,
        mtime: t,
        ctime: t,
        crtime: t,
        kind: kind(i.file_type()),
        perm: i.permissions(),
        nlink: i.nlink(),
        uid: i.uid(),
        gid: i.gid(),
        rdev: makedev(major, minor),
        blksize: 1 << u32::from(bits),
        flags: 0,
    }
}

/// An on-disk time (seconds may be negative) as a `SystemTime`.
fn time(sec: i64, nsec: u32) -> SystemTime {
    let ns = Duration::from_nanos(u64::from(nsec.min(999_999_999)));
    if sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(sec.unsigned_abs()) + ns
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_secs(sec.unsigned_abs()))
            .map_or(UNIX_EPOCH, |t| t + ns)
    }
}

/// Linux `dev_t` encoding (32 bits as FUSE carries it: 12-bit major, 20-bit
/// minor, the minor's low byte in bits 0..8).
fn makedev(major: u32, minor: u32) -> u32 {
    ((major & 0xfff) << 8) | (minor & 0xff) | ((minor & 0xfff00) << 12)
}

pub(crate) fn kind(t: Ft) -> FileType {
    match t {
        Ft::Regular => FileType::RegularFile,
        Ft::Directory => FileType::Directory,
        Ft::Symlink => FileType::Symlink,
        Ft::CharDevice => FileType::CharDevice,
        Ft::BlockDevice => FileType::BlockDevice,
        Ft::Fifo => FileType::NamedPipe,
        Ft::Socket => FileType::Socket,
    }
}

/// Maps reader errors to errno values: damage is EIO, features the reader
/// refuses are EOPNOTSUPP. A block that fails its dm-verity check
/// (`mount --verity`) is EIO too, and logged on stderr naming the block.
pub(crate) fn errno(e: Error) -> Errno {
    if let Error::Verity(v) = &e {
        eprintln!("ferrofs mount: EIO: {v}");
    }
    match e {
        Error::NotFound { .. } => Errno::ENOENT,
        Error::NotADirectory { .. } => Errno::ENOTDIR,
        Error::Unsupported { .. } => Errno::EOPNOTSUPP,
        Error::WrongType { .. } => Errno::EINVAL,
        _ => Errno::EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makedev_matches_linux() {
        assert_eq!(makedev(1, 3), 0x103);
        assert_eq!(makedev(8, 1), 0x801);
        // A minor above 255 moves its high bits above the major.
        assert_eq!(
            makedev(4095, 0x12345),
            (0x45) | (0xfff << 8) | (0x123 << 20)
        );
    }

    #[test]
    fn times_before_the_epoch() {
        let t = time(-2, 500_000_000);
        assert_eq!(
            UNIX_EPOCH.duration_since(t).unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(
            time(5, 7).duration_since(UNIX_EPOCH).unwrap(),
            Duration::new(5, 7)
        );
    }
}
