//! ferrofs: read EROFS images without the kernel. Opens any image
//! `mkfs.erofs` makes (and ferrofs's own) over a positional [`ReadAt`]
//! source, and answers the way `std::fs` answers on a mounted file system:
//! file contents, metadata, directory listings, symlinks and extended
//! attributes by path, decoding only the physical clusters a read needs.
//!
//! Every image is treated as hostile: damage gives an [`Error`], never a
//! panic, and no allocation is sized by a header field alone.
//!
//! ```
//! use std::io::{Read, Seek, SeekFrom};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let image = ferrofs::Image::open_path("../../testdata/lz4hc-big.erofs")?;
//! let mut names = Vec::new();
//! for entry in image.read_dir("/")? {
//!     let entry = entry?;
//!     if entry.file_type()?.is_file() {
//!         names.push(entry.file_name());
//!     }
//! }
//! assert!(!names.is_empty());
//!
//! let first = std::path::Path::new("/").join(&names[0]);
//! let meta = image.metadata(&first)?;
//! let whole = image.read(&first)?;
//! assert_eq!(whole.len() as u64, meta.len());
//!
//! // Read + Seek, decoding only the clusters that hold the bytes asked for.
//! let mut file = image.open_file(&first)?;
//! file.seek(SeekFrom::Start(meta.len() / 2))?;
//! let mut tail = Vec::new();
//! file.read_to_end(&mut tail)?;
//! assert_eq!(tail, whole[whole.len() / 2..]);
//! # Ok(())
//! # }
//! ```
//!
//! Tools that need inodes, nids, maps and raw metadata (fsck, dump, a FUSE
//! adapter) use [`Image::raw`] and the [`raw`] module.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

mod addr;
mod bounds;
pub mod bulk;
mod cache;
pub mod composefs;
mod decompress;
mod dir;
pub mod error;
mod file;
mod image;
mod inode;
pub mod lock;
pub mod map;
mod paths;
pub mod raw;
pub mod source;
pub mod verity;
mod xattr;

pub use error::{Error, ErrorKind, Location, Result};
pub use ferrofs_format as format;
pub use image::{Image, OpenOptions};
pub use paths::{DirEntry, File, FileType, Metadata, ReadDir};
pub use source::ReadAt;

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}
    #[test]
    fn image_and_file_are_send_sync() {
        assert_send_sync::<super::Image>();
        assert_send_sync::<super::File>();
        assert_send_sync::<super::raw::InodeFile>();
    }
}
