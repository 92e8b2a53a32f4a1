//! Where a tree comes from: a directory on a local file system, a tar
//! archive, an OCI image layout, or EROFS images merged as layers. Each
//! `scan` returns a [`Tree`] for [`build_tree`] ([`build`] scans a
//! directory itself).
//!
//! [`Tree`]: crate::Tree
//! [`build_tree`]: crate::build_tree
//! [`build`]: crate::build

pub mod dir;
pub mod layers;
pub mod oci;
pub mod tar;
