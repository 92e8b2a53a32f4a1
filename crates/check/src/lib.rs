//! Inspection tools over the ferrofs reader: `fsck` (verify every inode,
//! dirent and pcluster), `extract` (write an image's tree to a directory)
//! and `dump` (superblock, inode and whole-image statistics).

#![forbid(unsafe_code)]

pub mod diff;
pub mod digest;
pub mod dump;
pub mod export;
pub mod extract;
pub mod fsck;
pub mod hotrange;
pub mod walk;
