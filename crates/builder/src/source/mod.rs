//! Where a tree comes from. For now: a directory on a local file system.

pub mod dir;
