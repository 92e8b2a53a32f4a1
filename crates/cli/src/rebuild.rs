//! `mkfs` with EROFS images as the source (rebuild mode, mkfs.erofs 1.9's):
//! telling layers from other sources and the block size they impose (the
//! merge itself is the builder's, `Input::Layers`). See
//! docs/rebuild-mode.md.

use std::path::PathBuf;

use anyhow::{bail, Result};
use ferrofs_builder::source::layers;

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
