//! The `--verity` options of the commands that read images, and turning
//! them into the reader's verified source: which dm-verity tree checks
//! every block read, and where it is.

use std::path::PathBuf;

use anyhow::{Context, Result};
use ferrofs::verity::{RootHash, Verity, VerityOptions};
use ferrofs::ReadAt;
use ferrofs_verity::dm::{HashType, Params};
use ferrofs_verity::{parse_hex, Algorithm};

/// How an image's blocks are checked against a dm-verity hash tree.
#[derive(clap::Args, Clone, Default)]
pub struct VerityArgs {
    /// Check every block read (metadata and data, the superblock
    /// included) against the dm-verity hash tree with this root hash
    /// (hex, as `ferrofs verity` and `veritysetup format` print it). A
    /// block that does not match is an integrity error naming it; a wrong
    /// root hash fails at once. The tree is appended to the image (where
    /// `ferrofs verity` puts it) unless given otherwise.
    #[arg(long, value_name = "ROOT_HASH")]
    verity: Option<RootHash>,
    /// The tree is in this file (or URL), as `veritysetup format IMAGE
    /// FILE` writes it.
    #[arg(long, value_name = "FILE", requires = "verity")]
    verity_hash_file: Option<PathBuf>,
    /// The tree's verity superblock (or, with --verity-no-superblock, the
    /// tree) starts at this byte of the hash file, or of the image
    /// (`veritysetup --hash-offset`).
    #[arg(long, value_name = "BYTES", requires = "verity", value_parser = crate::size::parse_u64)]
    verity_hash_offset: Option<u64>,
    /// The tree has no verity superblock (`veritysetup format
    /// --no-superblock`): its parameters are the --verity-salt,
    /// --verity-data-block-size and --verity-hash-algorithm given (4096-byte
    /// hash blocks), covering the whole image (up to the hash offset when
    /// appended).
    #[arg(long, requires = "verity_salt")]
    verity_no_superblock: bool,
    /// With --verity-no-superblock: the tree's salt (hex; `-` for none).
    #[arg(long, value_name = "HEX", requires = "verity_no_superblock")]
    verity_salt: Option<String>,
    /// With --verity-no-superblock: the data block size.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 4096,
        requires = "verity_no_superblock"
    )]
    verity_data_block_size: u32,
    /// With --verity-no-superblock: the hash algorithm (sha256, sha512).
    #[arg(
        long,
        value_name = "NAME",
        default_value = "sha256",
        requires = "verity_no_superblock"
    )]
    verity_hash_algorithm: Algorithm,
    /// With --verity-no-superblock: the hash type (veritysetup's
    /// --format): 1, its default, or 0, Chrome OS's.
    #[arg(
        long,
        value_name = "0|1",
        default_value = "1",
        requires = "verity_no_superblock"
    )]
    verity_format: HashType,
}

/// Where a tree is read from, when not from the image's own source.
#[derive(Default)]
pub struct TreeSources {
    /// [`VerityArgs::hash_file`] opened.
    pub hash_file: Option<Box<dyn ReadAt>>,
    /// An appended tree read through this source of the image's bytes (a
    /// remote image opened again with block-sized fetches).
    pub tree_reader: Option<Box<dyn ReadAt>>,
}

impl VerityArgs {
    /// Checking against an appended tree with root hash `root`, if any.
    pub fn appended(root: Option<RootHash>) -> Self {
        VerityArgs {
            verity: root,
            ..VerityArgs::default()
        }
    }

    /// Whether `--verity` was given.
    pub fn is_on(&self) -> bool {
        self.verity.is_some()
    }

    /// `--verity-hash-file`: where the tree is when it is not appended
    /// (a file or a URL, which the caller opens).
    pub fn hash_file(&self) -> Option<&std::path::Path> {
        self.verity_hash_file.as_deref()
    }

    /// `data` (the whole image file, the image `image_offset` bytes in:
    /// `--offset`) checked as these options say, or as it is without
    /// `--verity`, its tree read from `tree`.
    pub fn wrap(
        &self,
        data: Box<dyn ReadAt>,
        image_offset: u64,
        tree: TreeSources,
    ) -> Result<Box<dyn ReadAt>> {
        let TreeSources {
            hash_file: hash_source,
            tree_reader,
        } = tree;
        let Some(root) = &self.verity else {
            return Ok(data);
        };
        let no_superblock = match &self.verity_salt {
            Some(salt) if self.verity_no_superblock => {
                let mut p = Params::new(self.verity_data_block_size, 0, parse_hex("salt", salt)?);
                p.algorithm = self.verity_hash_algorithm;
                p.hash_type = self.verity_format;
                Some(p)
            }
            _ => None,
        };
        let opts = VerityOptions {
            root_hash: root.clone(),
            hash_source,
            tree_reader,
            hash_offset: self.verity_hash_offset,
            image_offset,
            no_superblock,
        };
        let v = std::sync::Arc::new(Verity::open(data, opts).context("--verity")?);
        OPENED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(std::sync::Arc::downgrade(&v));
        Ok(Box::new(Shared(v)))
    }
}

/// Every verified source this process opened (for `fsck`, which checks
/// their unread blocks at the end).
static OPENED: std::sync::Mutex<Vec<std::sync::Weak<Verity>>> = std::sync::Mutex::new(Vec::new());

/// The verified sources still open.
pub fn opened() -> Vec<std::sync::Arc<Verity>> {
    OPENED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect()
}

/// A verified source shared with [`opened`].
struct Shared(std::sync::Arc<Verity>);

impl ReadAt for Shared {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
}
