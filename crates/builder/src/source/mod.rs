//! Where a tree comes from: a directory on a local file system, or a tar
//! archive.

pub mod dir;
pub mod tar;
