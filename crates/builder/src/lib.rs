//! ferrofs-builder: turn a directory tree into an EROFS image the Linux
//! kernel mounts. The pipeline reads top to bottom: `source` scans the tree
//! into an in-memory `tree`; `plan` encodes what each inode needs
//! (directory blocks, xattr bodies, data layout); `layout` gives every inode
//! its nid and every data run its blocks before a byte is written; `zpass`
//! compresses file data on all cores; `fragments` packs tails and small
//! files into the packed inode; `emit` writes a temporary file, superblock
//! last, fsyncs and renames it.

#![forbid(unsafe_code)]

pub mod base;
mod cnum;
pub mod compress;
pub mod content;
pub mod dedupe;
pub mod emit;
pub mod error;
mod fragments;
pub mod fsconfig;
pub mod hints;
pub mod incremental;
pub mod layout;
pub mod options;
pub mod plan;
pub mod profile;
pub mod selabel;
mod similarity;
pub mod source;
mod spool;
pub mod tree;
pub mod xattrs;
pub mod zinode;
mod zpass;

pub use base::BaseStats;
pub use emit::{build, build_tree, Progress, Summary};
pub use error::BuildError;
pub use options::{BlockListOptions, BuildOptions, MetaboxOptions, TimePolicy};
