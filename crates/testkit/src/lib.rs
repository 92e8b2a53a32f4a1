//! Test support for ferrofs integration tests.
//!
//! The pieces fit together like this: [`corpus::make_corner_tree`] writes a directory tree that
//! holds every corner case we know of (file sizes around block boundaries, sparse files,
//! hardlinks, devices, odd names, odd modes, owners and timestamps, xattrs and ACLs);
//! [`tools`] finds the reference `mkfs.erofs`/`fsck.erofs` binaries (Debian's 1.5 and upstream
//! 1.8.6) and builds images from the tree with every interesting option; [`mount::LoopMount`]
//! loop-mounts an image with the kernel's own EROFS driver, which serves as the oracle; and
//! [`compare::compare_trees`] checks two trees entry by entry (contents, metadata, xattrs,
//! hardlink groups) and reports every difference. [`containerd::Containerd`] runs a private
//! containerd with the EROFS snapshotter and differ, whose `mkfs.erofs` is the one under test.
//!
//! [`tmp::TempDir`] is a small self-cleaning temporary directory used by the others,
//! [`process::run_with_timeout`] runs the binary under test with a time limit, and
//! [`copy::copy_tree_reversed`] copies a tree creating every entry in the reverse order (for
//! determinism tests), and [`verify`] holds the checks every test of a ferrofs-built image
//! makes (same bytes at any thread count; kernel, extract and both fscks agree with the source).
//!
//! Most of this needs root (devices, foreign owners, `trusted.*` xattrs, loop mounts); callers
//! check [`mount::can_mount`] and skip when it fails.

pub mod compare;
pub mod containerd;
pub mod copy;
pub mod corpus;
pub mod faults;
pub mod fuse;
pub mod kernels;
pub mod mount;
pub mod nginx;
pub mod process;
pub mod proxy;
pub mod registry;
pub mod s3;
pub mod tmp;
pub mod tools;
pub mod verify;

pub use compare::{compare_trees, hash_file, CompareOptions, Difference};
pub use corpus::{make_corner_tree, make_corner_tree_with, CornerOptions};
pub use mount::{can_mount, LoopMount};
pub use tmp::TempDir;
pub use tools::{build_image, option_matrix, Mkfs};
/// Re-exported so tests can read xattrs without depending on the crate themselves.
pub use xattr;

/// Whether the current process runs with effective uid 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
