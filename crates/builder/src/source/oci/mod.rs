//! An OCI image layout as a source (`oci:DIR[:REF]`): the manifest chosen
//! from `index.json`, its config and its layers read from `blobs/`, each
//! blob's size and sha256 digest checked as it is read, and the layers
//! (plain, gzip or zstd tar) applied bottom first, with their whiteouts,
//! into one tree, or each read into a tree of its own (the layers of a
//! rebuild, `mkfs --layer-images`).
//!
//! `layout` reads and chooses the JSON documents, `blob` reads and checks
//! blobs, `zstd` decodes zstd layers.

#![warn(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

use std::cell::Cell;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use crate::error::{BuildError, Result};
use crate::options::BuildOptions;
use crate::source::tar::{scan_layer, scan_stream, TarOptions};
use crate::tree::{InodeId, Kind, Tree};

mod blob;
mod layout;
#[cfg(test)]
mod tests;
mod zstd;

use blob::{blob_ref, check_file, digest_of, read_small, Hashing, Verified};

/// What the config says of the layers: the digests of their uncompressed
/// tar streams, bottom first.
#[derive(serde::Deserialize)]
struct Config {
    #[serde(default)]
    rootfs: Option<RootFs>,
}

#[derive(serde::Deserialize)]
struct RootFs {
    #[serde(default)]
    diff_ids: Vec<String>,
}

/// How a layer's tar stream is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layer {
    Tar,
    Gzip,
    Zstd,
}

fn layer_kind(media_type: &str) -> Option<Layer> {
    let base = media_type
        .strip_prefix("application/vnd.oci.image.layer.v1.")
        .or_else(|| {
            media_type.strip_prefix("application/vnd.oci.image.layer.nondistributable.v1.")
        });
    match base {
        Some("tar") => return Some(Layer::Tar),
        Some("tar+gzip") => return Some(Layer::Gzip),
        Some("tar+zstd") => return Some(Layer::Zstd),
        _ => {}
    }
    match media_type {
        "application/vnd.docker.image.rootfs.diff.tar" => Some(Layer::Tar),
        "application/vnd.docker.image.rootfs.diff.tar.gzip" => Some(Layer::Gzip),
        "application/vnd.docker.image.rootfs.diff.tar.zstd" => Some(Layer::Zstd),
        _ => None,
    }
}

/// Splits `oci:DIR[:REF]` into the layout directory and the reference;
/// `None` when `spec` does not start with `oci:`.
pub fn parse_spec(spec: &str) -> Option<(PathBuf, Option<String>)> {
    let rest = spec.strip_prefix("oci:")?;
    Some(match rest.split_once(':') {
        Some((dir, r)) if !r.is_empty() => (PathBuf::from(dir), Some(r.to_string())),
        Some((dir, _)) => (PathBuf::from(dir), None),
        None => (PathBuf::from(rest), None),
    })
}

/// Reads the image `reference` names (or the only one) from the layout at
/// `dir` into one tree. Data of compressed layers is spooled to unlinked
/// files in `spool_dir`; plain layers are referenced in place.
pub fn scan(
    dir: &Path,
    reference: Option<&str>,
    opts: &BuildOptions,
    tar_opts: &TarOptions,
    spool_dir: &Path,
) -> Result<Tree> {
    let mut tree: Option<Tree> = None;
    for_each_layer(dir, reference, &mut |r, inplace, name| {
        let t = scan_layer(r, inplace, name, tree.take(), opts, tar_opts, spool_dir)?;
        tree = Some(t);
        Ok(())
    })?;
    Ok(tree.unwrap_or_default().prune())
}

/// Reads each layer of the image `reference` names (or the only one)
/// from the layout at `dir` into a tree of its own, bottom first, its
/// whiteouts made overlayfs ones (character devices 0:0, opaque
/// directories), as `--tar --aufs` reads a layer: the layers of a rebuild.
pub fn scan_layers(
    dir: &Path,
    reference: Option<&str>,
    opts: &BuildOptions,
    tar_opts: &TarOptions,
    spool_dir: &Path,
) -> Result<Vec<Tree>> {
    let t_opts = TarOptions {
        aufs: true,
        ..tar_opts.clone()
    };
    let mut trees: Vec<Tree> = Vec::new();
    for_each_layer(dir, reference, &mut |r, inplace, name| {
        let (mut tree, implicit) = scan_stream(r, inplace, name, opts, &t_opts, spool_dir)?;
        inherit(&mut tree, &implicit, &trees);
        trees.push(tree);
        Ok(())
    })?;
    Ok(trees)
}

/// Gives the directories a layer has no entry for (`implicit`) the
/// metadata the layers below give them, as applying the layers does (and
/// not the made-up one, which would win when the layers are stacked);
/// their overlayfs xattrs stay the layer's own.
fn inherit(tree: &mut Tree, implicit: &[InodeId], below: &[Tree]) {
    const OVL: &[u8] = b"trusted.overlay.";
    for &id in implicit {
        let rel = tree.inode(id).rel.clone();
        let found = below
            .iter()
            .rev()
            .find_map(|t| find_dir(t, &rel).map(|d| t.inode(d)));
        let Some(src) = found else { continue };
        let d = tree.inode_mut(id);
        (d.perm, d.uid, d.gid) = (src.perm, src.uid, src.gid);
        (d.mtime, d.mtime_nsec) = (src.mtime, src.mtime_nsec);
        d.xattrs.retain(|(n, _)| n.starts_with(OVL));
        let theirs = src.xattrs.iter().filter(|(n, _)| !n.starts_with(OVL));
        d.xattrs.extend(theirs.cloned());
        d.xattrs.sort();
    }
}

/// The directory at `rel` (`a/b`, empty for the root) of `tree`.
fn find_dir(tree: &Tree, rel: &[u8]) -> Option<InodeId> {
    let mut cur = tree.root;
    for c in rel.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
        let Kind::Dir { entries } = &tree.inode(cur).kind else {
            return None;
        };
        let i = entries
            .binary_search_by(|(n, _)| n.as_slice().cmp(c))
            .ok()?;
        cur = entries.get(i)?.1;
    }
    tree.inode(cur).is_dir().then_some(cur)
}

/// A layer's uncompressed tar stream, the blob itself when it is a plain
/// tar (data is then referenced there), and its name for messages.
type LayerFn<'a> = dyn FnMut(Box<dyn Read>, Option<Arc<std::fs::File>>, String) -> Result<()> + 'a;

/// Runs `each` on every layer of the chosen image, bottom first, checking
/// each blob's digest and size and its tar stream's diff_id.
fn for_each_layer(dir: &Path, reference: Option<&str>, each: &mut LayerFn) -> Result<()> {
    let index = layout::read_index(dir)?;
    let chosen = layout::choose(dir, &index, reference)?;
    let manifest = layout::resolve(dir, chosen)?;
    let config = blob_ref(dir, &manifest.config.digest, manifest.config.size)?;
    let data = read_small(&config, "config")?;
    let cfg: Config = serde_json::from_slice(&data)
        .map_err(|e| BuildError::input(&config.path, format!("config: {e}")))?;
    let diff_ids = cfg.rootfs.map(|r| r.diff_ids).unwrap_or_default();
    if !diff_ids.is_empty() && diff_ids.len() != manifest.layers.len() {
        return Err(BuildError::input(
            &config.path,
            format!(
                "config lists {} diff_ids for {} layers",
                diff_ids.len(),
                manifest.layers.len()
            ),
        ));
    }
    // Every layer's type is checked before any is read.
    let mut layers = Vec::new();
    for (i, d) in manifest.layers.iter().enumerate() {
        let b = blob_ref(dir, &d.digest, d.size)?;
        let Some(kind) = layer_kind(&d.media_type) else {
            return Err(BuildError::input(
                &b.path,
                format!(
                    "layer {} of manifest {} ({}) has the unsupported media type {:?}",
                    i.saturating_add(1),
                    manifest.digest,
                    d.digest,
                    d.media_type
                ),
            ));
        };
        layers.push((b, kind));
    }
    if layers.is_empty() {
        return Err(BuildError::input(
            dir,
            format!("manifest {} has no layers", manifest.digest),
        ));
    }
    let n = layers.len();
    for (i, (b, kind)) in layers.into_iter().enumerate() {
        let what = format!("layer {} of {n}", i.saturating_add(1));
        let path = b.path.clone();
        let check = blob_ref(dir, &b.digest, b.size)?;
        let file = blob::open(&b, &what)?;
        let inplace = match kind {
            Layer::Tar => Some(Arc::new(file.try_clone().map_err(BuildError::io(&path))?)),
            _ => None,
        };
        let done = Rc::new(Cell::new(false));
        let raw = BufReader::with_capacity(1 << 16, Verified::new(file, b, done.clone()));
        let r: Box<dyn Read> = match kind {
            Layer::Tar => Box::new(raw),
            Layer::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
            Layer::Zstd => Box::new(zstd::ZstdReader::new(raw)),
        };
        let hasher = Rc::default();
        let r = Box::new(Hashing {
            r,
            hasher: Rc::clone(&hasher),
        });
        let name = format!("{} ({what})", path.display());
        match each(r, inplace, name) {
            Ok(_) if !done.get() => {
                return Err(BuildError::input(
                    &path,
                    format!("{what}: data after the end of its compressed stream"),
                ))
            }
            Ok(()) => {
                if let Some(want) = diff_ids.get(i) {
                    let got = digest_of(&hasher);
                    if *want != got {
                        return Err(BuildError::input(
                            &path,
                            format!(
                                "{what}: its tar stream hashes to {got}, the config's diff_id is {want}"
                            ),
                        ));
                    }
                }
            }
            Err(e) => {
                // A blob that does not match its digest explains any
                // error reading it.
                return Err(match check_file(&check) {
                    Some(why) => BuildError::input(&path, format!("{what}: {why}")),
                    None => e,
                });
            }
        }
    }
    Ok(())
}

/// Whether a layer media type is one [`unpack_layer`] reads (a plain,
/// gzip or zstd tar stream, OCI or Docker spelling).
pub fn is_tar_layer(media_type: &str) -> bool {
    layer_kind(media_type).is_some()
}

/// Writes the uncompressed tar stream of the layer blob of `digest` and
/// `size` in the layout at `dir` (its media type `media_type`) to `out`,
/// checking the blob's size and digest as it is read and that its
/// compressed stream ends where the blob does, and returns the sha256
/// digest of the tar stream (`sha256:…`): the layer's diff_id.
pub fn unpack_layer(
    dir: &Path,
    digest: &str,
    size: u64,
    media_type: &str,
    out: &mut dyn std::io::Write,
) -> Result<String> {
    let b = blob_ref(dir, digest, size)?;
    let path = b.path.clone();
    let Some(kind) = layer_kind(media_type) else {
        return Err(BuildError::input(
            &path,
            format!("layer {digest} has the unsupported media type {media_type:?}"),
        ));
    };
    let check = blob_ref(dir, digest, size)?;
    let file = blob::open(&b, "layer")?;
    let done = Rc::new(Cell::new(false));
    let raw = BufReader::with_capacity(1 << 16, Verified::new(file, b, done.clone()));
    let r: Box<dyn Read> = match kind {
        Layer::Tar => Box::new(raw),
        Layer::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
        Layer::Zstd => Box::new(zstd::ZstdReader::new(raw)),
    };
    let hasher = Rc::default();
    let mut r = Hashing {
        r,
        hasher: Rc::clone(&hasher),
    };
    let copied = std::io::copy(&mut r, out);
    // Drain what a decoder left unread (padding after the last frame).
    let mut rest = [0u8; 4096];
    let drained = copied.and_then(|_| loop {
        match r.read(&mut rest) {
            Ok(0) => break Ok(()),
            Ok(_) => continue,
            Err(e) => break Err(e),
        }
    });
    if let Err(e) = drained {
        return Err(match check_file(&check) {
            Some(why) => BuildError::input(&path, format!("layer: {why}")),
            None => BuildError::input(&path, format!("layer {digest}: {e}")),
        });
    }
    if !done.get() {
        let mut raw_rest = Vec::new();
        let _ = r.r.read_to_end(&mut raw_rest);
        if !done.get() {
            return Err(BuildError::input(
                &path,
                format!("layer {digest}: data after the end of its compressed stream"),
            ));
        }
    }
    Ok(digest_of(&hasher))
}
