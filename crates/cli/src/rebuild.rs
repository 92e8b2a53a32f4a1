//! `mkfs` with EROFS images as the source (rebuild mode, mkfs.erofs 1.9's):
//! telling layers from other sources, the block size they impose, and the
//! build that merges them; and an OCI image's layers written as images
//! of their own and merged (`--layer-images`). See docs/rebuild-mode.md.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::{bail, Result};
use ferrofs_builder::source::layers::{self, DataMode};
use ferrofs_builder::{BuildError, BuildOptions, Progress, Summary};

/// The layer images of a rebuild, bottom first; empty when SOURCE is not
/// an EROFS image. Checks that only a rebuild has more than one source
/// and that `--clean` asks for something this build does.
pub(crate) fn layers(
    tar: bool,
    source: &Option<PathBuf>,
    more: &[PathBuf],
    clean: &Option<String>,
) -> Result<Vec<PathBuf>> {
    if let Some(c) = clean.as_deref().filter(|c| *c != "data") {
        bail!(
            "--clean={c}: only --clean=data (full data) is supported; mkfs.erofs's rvsp \
             (space reserved, not filled) and 0 are not"
        );
    }
    let first = match source {
        Some(s) if !tar && layers::is_image(s) => s,
        _ => {
            if let Some(m) = more.first() {
                bail!(
                    "{}: more than one SOURCE is only for rebuild mode, whose sources are \
                     EROFS images ({} is not one)",
                    m.display(),
                    source
                        .as_deref()
                        .map_or("the first".into(), |s| s.display().to_string())
                );
            }
            return Ok(Vec::new());
        }
    };
    Ok(std::iter::once(first).chain(more).cloned().collect())
}

/// The block size of the new image: the layers' (as mkfs.erofs takes
/// the first one's); `-b` may only repeat it.
pub(crate) fn block_size(given: u32, layers: &[PathBuf]) -> Result<u32> {
    let Some(first) = layers.first() else {
        return Ok(given);
    };
    let image = ferrofs::Image::open_path(first)
        .map_err(|e| anyhow::anyhow!("{}: not a readable EROFS image: {e}", first.display()))?;
    let bs = image.block_size().bytes() as u32;
    // 4096 is -b's default: then the layers decide.
    if given != bs && given != 4096 {
        bail!(
            "-b {given}: a rebuild keeps its layers' block size ({bs}, that of {})",
            first.display()
        );
    }
    Ok(bs)
}

/// Merges `layers` and writes the image at `out`: indexing the layers'
/// data (the default) or copying it (`--clean=data`).
pub(crate) fn build(
    layers: &[PathBuf],
    clean: &Option<String>,
    ovlfs_strip: bool,
    out: &Path,
    o: &mut BuildOptions,
    stop: &AtomicBool,
    tick: &dyn Fn(Progress),
) -> Result<Summary, BuildError> {
    let mode = match clean {
        Some(_) => DataMode::Full,
        None => DataMode::BlobIndex,
    };
    let merged = layers::scan(layers, o, mode, ovlfs_strip)?;
    o.devices = merged.devices;
    let mut s = ferrofs_builder::build_tree(merged.tree, out, o, Some(stop), tick)?;
    s.layers = Some(merged.stats);
    Ok(s)
}

/// `oci:DIR[:REF]` with `--layer-images OUT_DIR`: every layer becomes
/// OUT_DIR/layer-N.img (bottom first), then `out` their merge without
/// whiteouts (what `oci:` alone builds), its file data left in them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn oci_layers(
    (layout, reference): (&Path, Option<&str>),
    out_dir: &Path,
    out: &Path,
    o: &mut BuildOptions,
    topts: &ferrofs_builder::source::tar::TarOptions,
    spool: &Path,
    stop: &AtomicBool,
    tick: &dyn Fn(Progress),
) -> Result<Summary, BuildError> {
    let trees = ferrofs_builder::source::oci::scan_layers(layout, reference, o, topts, spool)?;
    std::fs::create_dir_all(out_dir).map_err(BuildError::output(out_dir))?;
    let mut paths = Vec::new();
    for (i, tree) in trees.into_iter().enumerate() {
        let p = out_dir.join(format!("layer-{}.img", i + 1));
        ferrofs_builder::build_tree(tree, &p, o, Some(stop), &|_| {})?;
        paths.push(p);
    }
    let merged = layers::scan(&paths, o, DataMode::BlobIndex, true)?;
    o.devices = merged.devices;
    let mut s = ferrofs_builder::build_tree(merged.tree, out, o, Some(stop), tick)?;
    s.layers = Some(merged.stats);
    Ok(s)
}
