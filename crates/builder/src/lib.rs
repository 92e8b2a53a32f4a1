//! ferrofs-builder: turn a directory tree, a tar archive or an OCI image
//! layout into an EROFS image the Linux kernel mounts.
//!
//! The public surface is one call and what it takes: [`build_from`] with
//! an [`Input`] (a directory, a tar archive, an OCI image layout, EROFS
//! layers) and a [`Mode`] (a new image, or `--incremental`), the
//! [`BuildOptions`] and what they refer to ([`CompressOptions`],
//! [`Profile`], [`FileContexts`], [`CannedFsConfig`]…), and the [`Summary`]
//! or [`BuildError`] it returns; [`Build`] names those parts (source,
//! mode, options, progress, interruption, output), as `ferrofs mkfs` uses
//! it. [`writer::ImageWriter`] builds from entries appended one by one
//! (directories, files from readers or paths, links, devices), as
//! `tar::Builder` writes archives. [`build`] (a directory), the [`source`]
//! scanners with [`build_tree`], and [`build_incremental`] are the same
//! stages for callers that want one step at a time.
//!
//! Inside, `build.rs` is the pipeline, read top to bottom, and each folder
//! is one stage that imports only those before it: `options` (what was
//! asked, checked once) → `source` (the input becomes a tree) → `tree`
//! (the in-memory tree, relabelled) → `plan` (what each inode will be: form,
//! directory blocks, xattr bodies, chunk tables, compressed maps) →
//! `data` (file data compressed on all cores and written in order, tails
//! and small files packed into the packed inode) → `layout` (the head,
//! then every inode's nid once the data is placed) → `emit` (metadata,
//! the superblock last; into a temporary file that is fsynced and
//! renamed); `incremental` runs the same stages against an existing image;
//! `composefs` is a writer of its own, for mkcomposefs-identical images;
//! `util` holds what they share. ARCHITECTURE.md at the repository root
//! draws it.
//!
//! ```
//! use ferrofs_builder::{build, BuildOptions, CompressOptions, Compressor};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let work = std::env::temp_dir().join(format!("ferrofs-builder-doc-{}", std::process::id()));
//! std::fs::create_dir_all(work.join("tree/etc"))?;
//! let text = "a line of text\n".repeat(10_000);
//! std::fs::write(work.join("tree/etc/motd"), &text)?;
//!
//! // `ferrofs mkfs -zlz4hc,12 -C65536 image.erofs tree`
//! let mut options = BuildOptions::default();
//! options.compress = Some(CompressOptions::new(Compressor::parse("lz4hc,12")?, 65536));
//! let image_path = work.join("image.erofs");
//! let summary = build(&work.join("tree"), &image_path, &options, None, &|_progress| {})?;
//! assert_eq!(summary.compressed_files, 1);
//! assert!(summary.bytes < text.len() as u64);
//!
//! // Read it back with the reader.
//! let image = ferrofs::Image::open_path(&image_path)?;
//! assert_eq!(image.read_to_string("/etc/motd")?, text);
//! # std::fs::remove_dir_all(&work)?;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod build;
pub mod composefs;
mod data;
mod emit;
mod error;
mod incremental;
mod job;
mod layout;
mod options;
mod plan;
pub mod source;
mod summary;

mod tree;
mod util;
pub mod writer;

pub use build::{build, build_from, build_merged_images, build_tree, Mode};
pub use error::{BuildError, Result};
pub use incremental::{build as build_incremental, Layer as IncrementalLayer};
pub use job::Build;
pub use options::compress::{CompressOptions, Compressor, Hint};
pub use options::hints::Hints;
pub use options::profile::Profile;
pub use options::{BlockListOptions, BuildOptions, MetaboxOptions, TimePolicy};
pub use source::Input;
pub use summary::{BaseStats, IncrementalStats, Progress, Summary};
pub use tree::fsconfig::CannedFsConfig;
pub use tree::selabel::FileContexts;
pub use tree::Tree;
pub use util::timing::Phase;
