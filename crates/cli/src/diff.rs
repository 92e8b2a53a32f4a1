//! `ferrofs diff OLD NEW`: prints what changed between two images.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::source::RemoteArgs;
use crate::verified::VerityArgs;
use anyhow::{Context, Result};

/// Decoded-cluster cache of each image compared.
const DIFF_CACHE: usize = 256 << 20;

/// Compares the images at `old` and `new` (files or URLs) and prints the
/// report.
pub(crate) fn run(
    (old, new): (&Path, &Path),
    json: bool,
    remote: &RemoteArgs,
    [verity_old, verity_new]: &[VerityArgs; 2],
) -> Result<ExitCode> {
    // Files are hashed in directory order: a cache that holds the packed
    // inode's pclusters (decoded whole at the first fragment read) keeps
    // each from being decoded again for the next file in it.
    let open = |p: &Path, verity: &VerityArgs| {
        let opts = ferrofs::OpenOptions {
            cache_bytes: DIFF_CACHE,
            ..Default::default()
        };
        crate::source::open_image(p, &[], 0, (remote, verity), opts)
    };
    let (a, b) = (open(old, verity_old)?, open(new, verity_new)?);
    let r = ferrofs_check::diff::diff(&a, &b)
        .with_context(|| format!("comparing {} and {}", old.display(), new.display()))?;
    let shown = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
    let mut out = crate::out::stdout();
    if json {
        let changed: Vec<_> = r
            .changed
            .iter()
            .map(|c| serde_json::json!({"path": shown(&c.path), "what": c.what}))
            .collect();
        let v = serde_json::json!({
            "added": r.added.iter().map(|p| shown(p)).collect::<Vec<_>>(),
            "removed": r.removed.iter().map(|p| shown(p)).collect::<Vec<_>>(),
            "changed": changed,
            "block_size": r.block_size,
            "blocks": r.blocks,
            "blocks_differ": r.blocks_differ,
            "bytes_differ": r.blocks_differ * r.block_size,
            "errors": r.errors,
        });
        writeln!(out, "{v}")?;
    } else {
        for p in &r.added {
            writeln!(out, "+ {}", shown(p))?;
        }
        for p in &r.removed {
            writeln!(out, "- {}", shown(p))?;
        }
        for c in &r.changed {
            writeln!(out, "M {} ({})", shown(&c.path), c.what.join(", "))?;
        }
        writeln!(
            out,
            "{} added, {} removed, {} changed; {} of {} blocks of {} bytes differ on disk ({} bytes)",
            r.added.len(),
            r.removed.len(),
            r.changed.len(),
            r.blocks_differ,
            r.blocks,
            r.block_size,
            r.blocks_differ * r.block_size
        )?;
    }
    out.flush()?;
    for e in &r.errors {
        eprintln!("ferrofs diff: {e}");
    }
    let same = r.added.is_empty() && r.removed.is_empty() && r.changed.is_empty();
    Ok(if !r.errors.is_empty() {
        ExitCode::from(2)
    } else if same {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
