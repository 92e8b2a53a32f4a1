//! ferrofs-verity: integrity trees over images, independent of EROFS.
//!
//! - [`dm`]: dm-verity hash trees in `veritysetup`'s format (hash type 1:
//!   the salt hashed before each block, every digest padded to a power of
//!   two, every level padded to a hash block, the top level first): the
//!   512-byte on-disk superblock ([`dm::Params::parse_superblock`],
//!   [`dm::Params::superblock`]), the tree [`dm::Geometry`], building a
//!   tree ([`dm::build`], [`dm::append`]) and reading data through one
//!   ([`dm::Verified`]), hash blocks verified once and cached.
//! - [`fsverity`]: a file's fs-verity digest as `fsverity digest` prints it.
//!
//! Every input is hostile: a superblock, a tree or a root hash from a file
//! gives a typed [`Error`], never a panic, and no allocation is sized by an
//! unchecked field.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

pub mod dm;
mod error;
pub mod fsverity;
mod hash;
mod source;

pub use error::{Error, Result};
pub use hash::{parse_hex, to_hex, Algorithm};
pub use source::Bytes;
