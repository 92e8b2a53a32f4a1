//! composefs images, byte for byte as mkcomposefs 1.0.8 writes them: an
//! EROFS image holding only metadata, whose regular files point (through
//! `trusted.overlay.redirect` and `trusted.overlay.metacopy`) at objects
//! named by their fs-verity digest in a store directory.
//!
//! The stages, one module each: `walk` (a source directory) or `dump` (a
//! dump file) gives the `node` tree; `rewrite` adds what overlayfs needs;
//! `layout` orders and places every inode; `emit` writes the bytes;
//! `store` fills the object store.

mod dump;
mod emit;
mod layout;
mod node;
mod rewrite;
mod store;
#[cfg(test)]
mod tests;
mod walk;

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{BuildError, Result};

pub use rewrite::VERSION_MAX;
pub use store::StoreStats;
pub use walk::WalkOptions;

/// Where the tree comes from.
pub enum CfsSource<'a> {
    /// A directory, read as mkcomposefs reads one.
    Dir(&'a Path),
    /// A composefs dump file (`--from-file`).
    Dump(Box<dyn Read + 'a>),
}

/// mkcomposefs's options.
#[derive(Clone, Debug, Default)]
pub struct CfsOptions {
    /// How a source directory is read.
    pub walk: WalkOptions,
    /// `--min-version`.
    pub min_version: u32,
    /// `--max-version`.
    pub max_version: u32,
    /// `--digest-store`: the object store to fill (directory input only,
    /// as mkcomposefs does).
    pub digest_store: Option<PathBuf>,
    /// Threads reading files, computing digests and copying objects
    /// (default: [`default_threads`]).
    pub threads: Option<usize>,
}

/// A composefs image built in memory.
#[derive(Clone, Debug)]
pub struct CfsImage {
    /// The image bytes.
    pub bytes: Vec<u8>,
    /// The format version written (the header's `composefs_version`).
    pub version: u32,
    /// Inodes in the image.
    pub inodes: u64,
    /// What filling the store did (`None` without a store).
    pub store: Option<StoreStats>,
}

/// The default thread count: 8 per core, 16 to 64. Reading a tree is
/// mostly waiting for the disk (the CPU work, sha256, is a fraction of
/// it on a cold cache), so more reads in flight than cores pay: on a
/// 2-core VM, 16 threads build a Debian rootfs in 0.4 of the time 2 take.
pub fn default_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.saturating_mul(8).clamp(16, 64)
}

/// Builds the image of `source` (and fills the store if asked).
pub fn build_composefs(source: CfsSource<'_>, opts: &CfsOptions) -> Result<CfsImage> {
    let (mut tree, stats) = match source {
        CfsSource::Dir(dir) => read_dir_source(dir, opts)?,
        CfsSource::Dump(input) => (dump::parse(input)?, None),
    };
    let version = rewrite::choose_version(&tree, opts.min_version, opts.max_version)?;
    rewrite::rewrite(&mut tree, version)?;
    let plan = layout::plan(&mut tree)?;
    let bytes = emit::emit(&tree, &plan, version);
    Ok(CfsImage {
        bytes,
        version,
        inodes: plan.order.len() as u64,
        store: stats,
    })
}

/// Reads a directory (and fills the store) on a pool of `opts.threads`.
fn read_dir_source(dir: &Path, opts: &CfsOptions) -> Result<(node::Tree, Option<StoreStats>)> {
    let threads = opts
        .threads
        .filter(|&t| t > 0)
        .unwrap_or_else(default_threads);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| BuildError::Option(format!("cannot start {threads} threads: {e}")))?;
    pool.install(|| {
        let (tree, sources) = walk::scan(dir, &opts.walk)?;
        let stats = match &opts.digest_store {
            Some(store) => Some(store::fill(&tree, &sources, store)?),
            None => None,
        };
        Ok((tree, stats))
    })
}

/// Writes `bytes` to `target` atomically: a temporary file beside it,
/// synced, then renamed onto it.
pub fn write_atomically(bytes: &[u8], target: &Path) -> Result<()> {
    use std::io::Write;
    let mut staged = crate::util::staged::Staged::new(target)?;
    staged
        .file
        .write_all(bytes)
        .map_err(BuildError::output(target))?;
    staged.sync()?;
    staged.commit()
}
