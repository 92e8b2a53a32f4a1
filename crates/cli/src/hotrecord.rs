//! The hot-range record of a `mkfs --profile` image: the traces replayed
//! on the image just written, the ranges read written into its boot area
//! (see `ferrofs_format::hotrange`), where readers over a network find
//! what to fetch up front and kernels and fsck.erofs never look.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use ferrofs::source::Offset;
use ferrofs_format::hotrange::AREA;
use ferrofs_trace::TraceRead;

/// Gaps between hot ranges up to this many bytes are fetched with them.
const JOIN: u64 = 64 << 10;

/// The reads of a trace file.
pub fn read_trace(t: &Path) -> Result<Vec<TraceRead>> {
    let text = std::fs::read_to_string(t).with_context(|| format!("--profile {}", t.display()))?;
    ferrofs_trace::parse(&text).with_context(|| format!("--profile {}", t.display()))
}

/// Replays `traces` on the image at `offset` in `image` and writes the
/// record of what they read into its boot area, which must be zeros (it
/// is left alone, with a warning, otherwise).
pub fn write(image: &Path, offset: u64, traces: &[PathBuf], quiet: bool) -> Result<()> {
    let mut reads = Vec::new();
    for t in traces {
        reads.extend(read_trace(t)?);
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(image)
        .with_context(|| format!("reopening {} for its hot-range record", image.display()))?;
    ferrofs::lock::try_exclusive(&f)
        .with_context(|| format!("{}: writing its hot-range record", image.display()))?;
    let mut area = [0u8; AREA];
    f.read_exact_at(&mut area, offset)
        .with_context(|| format!("{}: reading the boot area", image.display()))?;
    if area.iter().any(|&b| b != 0) {
        eprintln!(
            "warning: {}: the boot area (bytes 0..1024) is in use; no hot-range record written",
            image.display()
        );
        return Ok(());
    }
    let src = Offset::new(Box::new(f.try_clone()?), offset);
    let replay = ferrofs_check::hotrange::replay(Box::new(src), &reads, JOIN)
        .with_context(|| format!("{}: replaying the profile", image.display()))?;
    f.write_all_at(&replay.record.encode(), offset)
        .with_context(|| format!("{}: writing the hot-range record", image.display()))?;
    if !quiet {
        eprintln!(
            "hot ranges: {} bytes in {} ranges ({} traced paths not in the image)",
            replay.record.bytes(),
            replay.record.ranges.len(),
            replay.missing
        );
    }
    Ok(())
}
