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

use std::path::{Path, PathBuf};

/// What a build reads, for [`crate::build_from`].
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// A directory tree.
    Dir(&'a Path),
    /// A tar archive (a file or a pipe), read as `opts` says.
    Tar {
        /// The archive.
        input: &'a tar::TarInput,
        /// How it is read.
        opts: &'a tar::TarOptions,
    },
    /// An OCI image layout's image (`oci:DIR[:REF]`), its layers merged.
    Oci {
        /// The layout's directory.
        layout: &'a Path,
        /// The image's reference (`None`: the only one).
        reference: Option<&'a str>,
        /// How its layers are read.
        opts: &'a tar::TarOptions,
        /// `--layer-images DIR`: each layer becomes `DIR/layer-N.img` and
        /// the image indexes their data (rebuild mode) instead of holding
        /// it.
        layer_images: Option<&'a Path>,
    },
    /// EROFS images merged as overlayfs layers (rebuild mode), bottom
    /// first.
    Layers {
        /// The images.
        images: &'a [PathBuf],
        /// Whether the new image indexes their data or copies it.
        mode: layers::DataMode,
        /// Leave out the layers' overlayfs xattrs (`--ovlfs-strip`).
        strip_overlay: bool,
    },
}
