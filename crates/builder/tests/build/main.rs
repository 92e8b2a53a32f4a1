//! The builder library through its public API (`build_from` with each
//! `Input` and `Mode`, `build`, `BuildOptions`, `Summary`, `BuildError`),
//! without the `ferrofs` binary: images are built from directories, tar
//! archives, OCI layouts and other images, read back with the reader
//! (`ferrofs::Image`) and, where the kernel mounts EROFS images (root,
//! loop devices), mounted and compared with their source by the testkit.
//! One test binary; each module is one area (its doc says what it
//! checks). Checks that need root, the kernel or a tool print
//! `skipped: REASON` without them.

mod common;

mod base;
mod density;
mod dir;
mod errors;
mod incremental;
mod layers;
mod oci;
mod profile;
mod symlink_walk;
mod tar;
mod writer;
