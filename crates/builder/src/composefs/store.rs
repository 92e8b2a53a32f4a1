//! The object store (`--digest-store=DIR`): every file whose data is not
//! inline copied to `DIR/xx/rest-of-digest` (its fs-verity digest), as
//! mkcomposefs writes it (mode 0644, directories 0755, existing objects
//! kept). Copies run on all threads of the pool, reflinked where the file
//! system can and with `copy_file_range` otherwise, into temporary names;
//! one `syncfs` makes them durable before they are renamed into place, and
//! one more after, instead of an fsync per object.

use std::collections::BTreeMap;
use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use super::node::{Tree, S_IFREG};
use crate::error::{BuildError, Result};

/// What filling the store did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Objects the image refers to.
    pub objects: u64,
    /// Objects copied now (the others were there already).
    pub copied: u64,
    /// Bytes copied.
    pub bytes: u64,
}

/// The objects of a tree: store path → source file, one per digest.
fn objects(tree: &Tree, sources: &[PathBuf]) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for (i, n) in tree.nodes.iter().enumerate() {
        if n.file_type() != S_IFREG || n.content.is_some() || n.link_to.is_some() {
            continue;
        }
        let (Some(p), Some(src)) = (&n.payload, sources.get(i)) else {
            continue;
        };
        out.entry(String::from_utf8_lossy(p).into_owned())
            .or_insert_with(|| src.clone());
    }
    out
}

/// Copies the tree's objects into `store`.
pub(crate) fn fill(tree: &Tree, sources: &[PathBuf], store: &Path) -> Result<StoreStats> {
    let objs = objects(tree, sources);
    let mut dirs = DirBuilder::new();
    dirs.recursive(true).mode(0o755);
    dirs.create(store).map_err(BuildError::output(store))?;
    let seq = AtomicU64::new(0);
    let staged: Vec<Option<(PathBuf, PathBuf, u64)>> = objs
        .par_iter()
        .map(|(name, src)| {
            let target = store.join(name);
            if fs::symlink_metadata(&target).is_ok() {
                return Ok(None);
            }
            if let Some(parent) = target.parent() {
                dirs.create(parent).map_err(BuildError::output(parent))?;
            }
            let n = seq.fetch_add(1, Ordering::Relaxed);
            let tmp = store.join(format!(".tmp-ferrofs-{}-{n}", std::process::id()));
            let bytes = copy_object(src, &tmp).inspect_err(|_| {
                let _ = fs::remove_file(&tmp);
            })?;
            Ok(Some((tmp, target, bytes)))
        })
        .collect::<Result<_>>()?;
    let staged: Vec<_> = staged.into_iter().flatten().collect();
    let mut stats = StoreStats {
        objects: objs.len() as u64,
        ..StoreStats::default()
    };
    if staged.is_empty() {
        return Ok(stats);
    }
    sync_store(store)?;
    for (tmp, target, bytes) in &staged {
        fs::rename(tmp, target).map_err(BuildError::output(target))?;
        stats.copied += 1;
        stats.bytes = stats.bytes.saturating_add(*bytes);
    }
    sync_store(store)?;
    Ok(stats)
}

fn sync_store(store: &Path) -> Result<()> {
    let dir = File::open(store).map_err(BuildError::output(store))?;
    rustix::fs::syncfs(&dir)
        .map_err(io::Error::from)
        .map_err(BuildError::output(store))
}

/// Copies `src` to the new file `tmp` (a reflink when possible); its size.
fn copy_object(src: &Path, tmp: &Path) -> Result<u64> {
    let mut from = File::open(src).map_err(BuildError::io(src))?;
    let mut to = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(tmp)
        .map_err(BuildError::output(tmp))?;
    let size = from.metadata().map_err(BuildError::io(src))?.len();
    if rustix::fs::ioctl_ficlone(&to, &from).is_err() {
        io::copy(&mut from, &mut to).map_err(BuildError::output(tmp))?;
    }
    to.set_permissions(Permissions::from_mode(0o644))
        .map_err(BuildError::output(tmp))?;
    Ok(size)
}
