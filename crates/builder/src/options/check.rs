//! Checking a [`BuildOptions`] once, before anything is read or written:
//! values out of range and combinations that cannot work are refused with
//! the option's name.

use ferrofs_format::BlockSize;

use crate::error::{BuildError, Result};
use crate::options::BuildOptions;

impl BuildOptions {
    /// Refuses values out of range and options that do not go together.
    pub(crate) fn validate(&self) -> Result<()> {
        let opts = self;
        BlockSize::from_bits(opts.blkszbits).map_err(|_| {
            BuildError::Option(format!("block size 2^{} (use 512..4096)", opts.blkszbits))
        })?;
        let bs = opts.block_size();
        if opts.label.len() > 15 {
            return Err(BuildError::Option(
                "volume label longer than 15 bytes".into(),
            ));
        }
        // An image is at most 2^32 blocks of 4 KiB; file offsets end at 2^63.
        if opts.offset > (i64::MAX as u64) - (1 << 44) {
            return Err(BuildError::Option(format!(
                "--offset {}: leaves no room for an image before the largest file offset",
                opts.offset
            )));
        }
        if let Some(bl) = &opts.block_list {
            if bl.path.is_dir() {
                return Err(BuildError::Output {
                    path: bl.path.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::IsADirectory,
                        "the block list file is a directory",
                    ),
                });
            }
        }
        if opts.blobdev.is_some() && opts.chunk_size.is_none() {
            return Err(BuildError::Option(
                "--blobdev needs --chunksize (the blob holds chunks)".into(),
            ));
        }
        if opts.dsunit > 1 << 20 {
            return Err(BuildError::Option(format!(
                "--dsunit {}: more than 2^20 blocks",
                opts.dsunit
            )));
        }
        if let Some(cs) = opts.chunk_size {
            if !cs.is_power_of_two() || cs < bs {
                return Err(BuildError::Option(format!(
                    "chunk size {cs} is not a power of two >= the block size"
                )));
            }
        }
        if let Some(c) = &opts.compress {
            if c.compressors.is_empty() {
                return Err(BuildError::Option("no compressor given".into()));
            }
            for p in std::iter::once(c.pcluster_bytes)
                .chain(c.packed_pcluster)
                .chain(c.hints.iter().map(|h| h.pcluster_bytes).filter(|p| *p != 0))
            {
                if p < bs || !p.is_multiple_of(bs) || p > 1 << 20 {
                    return Err(BuildError::Option(format!(
                        "pcluster size {p} must be a multiple of the block size ({bs}) up to 1 MiB"
                    )));
                }
            }
        }
        Ok(())
    }
}
