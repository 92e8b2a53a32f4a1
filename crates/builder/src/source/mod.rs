//! Where a tree comes from: a directory on a local file system, a tar
//! archive, or an OCI image layout.

pub mod dir;
pub mod oci;
pub mod tar;
