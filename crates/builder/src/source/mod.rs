//! Where a tree comes from: a directory on a local file system, a tar
//! archive, an OCI image layout, or EROFS images merged as layers.

pub mod dir;
pub mod layers;
pub mod oci;
pub mod tar;
