//! ferrofs: read EROFS images. Opens any image `mkfs.erofs` makes (and ours)
//! over a positional [`ReadAt`] source, resolves paths, lists directories,
//! reads xattrs and reads file bytes at any offset, decoding only the
//! physical clusters a read needs. Every image is treated as hostile:
//! errors, never panics, and no allocation a header alone can inflate.

#![forbid(unsafe_code)]

pub mod cache;
mod decompress;
pub mod dir;
pub mod error;
pub mod file;
mod fs;
pub mod image;
pub mod inode;
pub mod map;
pub mod source;
pub mod xattr;

pub use dir::DirEntry;
pub use error::{Error, Location, Result};
pub use ferrofs_format as format;
pub use file::{File, FileReader};
pub use fs::{MAX_SYMLINK_FOLLOWS, MAX_SYMLINK_LEN};
pub use image::{Image, OpenOptions};
pub use inode::Inode;
pub use source::ReadAt;
pub use xattr::Xattr;

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}
    #[test]
    fn image_and_file_are_send_sync() {
        assert_send_sync::<super::Image>();
        assert_send_sync::<super::File>();
    }
}
