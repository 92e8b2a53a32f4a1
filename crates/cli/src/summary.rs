//! What `ferrofs mkfs` prints when a build is done: one line, or JSON with
//! `--json`; with `--base`, what came from the base image; with EROFS
//! layers, which files stay on them and which were copied; with
//! `--incremental`, what was kept and appended.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use ferrofs::format::kernel::KernelSupport;
use ferrofs_builder::{BaseStats, IncrementalStats, Summary};

/// Prints the summary of the build of `image` (nothing with `quiet`,
/// except notes about `--base` on standard error).
pub(crate) fn print(
    image: &Path,
    offset: u64,
    s: &Summary,
    bs: u32,
    json: bool,
    quiet: bool,
) -> Result<()> {
    let kernels = kernel_support(image, offset);
    if let Some(b) = &s.base {
        if !quiet {
            for n in &b.notes {
                eprintln!("note: --base: {n}");
            }
        }
    }
    let mut out = crate::out::stdout();
    if json {
        writeln!(out, "{}", json_summary(image, s, kernels.as_ref())?)?;
    } else if !quiet {
        write_text(&mut out, image, s, bs, kernels.as_ref())?;
    }
    out.flush()?;
    Ok(())
}

/// The summary as `mkfs --json` prints it: the build's, with the image's
/// path and the kernels that mount it.
fn json_summary(
    image: &Path,
    s: &Summary,
    kernels: Option<&KernelSupport>,
) -> Result<serde_json::Value> {
    let mut v = serde_json::to_value(s)?;
    v["image"] = image.display().to_string().into();
    if let Some(k) = kernels {
        v["linux"] = serde_json::json!({
            "oldest": format!("{}.{}", k.oldest.0, k.oldest.1),
            "because": k.because,
            "experimental": k.experimental,
        });
        if s.lcluster_sparse_files > 0 {
            v["linux"]["sparse_holes"] = SPARSE_LINUX.into();
        }
    }
    Ok(v)
}

/// The summary as text: a line for the image, then one for the kernels
/// that mount it and for each of `--incremental`, `--base` and layers
/// that applies.
fn write_text(
    out: &mut impl Write,
    image: &Path,
    s: &Summary,
    bs: u32,
    kernels: Option<&KernelSupport>,
) -> Result<()> {
    writeln!(
        out,
        "{}: {} inodes ({} compact), {} compressed files in {} pclusters, {} blocks of {} bytes ({} metadata), {} bytes",
        image.display(),
        s.inodes,
        s.compact_inodes,
        s.compressed_files,
        s.pclusters,
        s.blocks,
        bs,
        s.meta_blocks,
        s.bytes
    )?;
    if let Some(k) = kernels {
        write_kernels(out, k)?;
    }
    if s.sparse_files > 0 {
        write_sparse(out, s)?;
    }
    if let Some(v) = &s.verity {
        for l in crate::verity::lines(v) {
            writeln!(out, "verity {l}")?;
        }
    }
    if let Some(i) = &s.incremental {
        write_incremental(out, i)?;
    }
    if let Some(b) = &s.base {
        write_base(out, b)?;
    }
    write_layers(out, s)
}

/// What kernels make of the image's sparse pclusters (`-E sparse`).
fn write_sparse(out: &mut impl Write, s: &Summary) -> Result<()> {
    let n = s.lcluster_sparse_files;
    let how = match n {
        0 => "holes in extent records, read as holes by every kernel that mounts the image"
            .to_string(),
        _ if n == s.sparse_files => format!(
            "holes in lcluster indexes: Linux {SPARSE_LINUX} or later reads them as holes, \
             older kernels decode a shared pcluster of zeros"
        ),
        _ => format!(
            "{n} with holes in lcluster indexes: Linux {SPARSE_LINUX} or later reads them as \
             holes, older kernels decode a shared pcluster of zeros"
        ),
    };
    writeln!(out, "sparse files: {} ({how})", s.sparse_files)?;
    Ok(())
}

/// The Linux release that reads a hole of an lcluster index (`LI_HOLE`)
/// without decoding anything.
const SPARSE_LINUX: &str = "7.2";

/// The oldest Linux that mounts the image, why, and what 6.18 calls
/// experimental.
fn write_kernels(out: &mut impl Write, k: &KernelSupport) -> Result<()> {
    let exp = if k.experimental.is_empty() {
        String::new()
    } else {
        format!(
            "; Linux 6.18 logs EXPERIMENTAL for its {}",
            k.experimental.join(", ")
        )
    };
    let why = if k.because.is_empty() {
        String::new()
    } else {
        format!(" (for {})", k.because)
    };
    writeln!(
        out,
        "mounts on Linux {}.{} or later{why}{exp}",
        k.oldest.0, k.oldest.1
    )?;
    Ok(())
}

/// With `--incremental`: what was appended and kept, where the root went,
/// and what a killed run had left.
fn write_incremental(out: &mut impl Write, i: &IncrementalStats) -> Result<()> {
    writeln!(
        out,
        "--incremental: {} bytes appended to {}; {} inodes kept ({} unchanged files of the layer), {} written{}",
        i.appended_bytes,
        i.old_bytes,
        i.kept_inodes,
        i.unchanged_files,
        i.new_inodes,
        match (i.root_in_place, i.rewritten_outside_block0) {
            (false, _) => String::new(),
            (true, 0) => "; root inode rewritten in block 0".into(),
            (true, n) => format!(
                "; root inode rewritten in its old place ({n} bytes outside block 0: \
                 a new root would not have a 16-bit nid; -E 48bit images avoid it)"
            ),
        }
    )?;
    if i.dead_bytes > 0 {
        writeln!(
            out,
            "--incremental: first cut off {} bytes past the image's end (left by an \
             interrupted run)",
            i.dead_bytes
        )?;
    }
    Ok(())
}

/// With `--base`: what came from the base image.
fn write_base(out: &mut impl Write, b: &BaseStats) -> Result<()> {
    writeln!(
        out,
        "--base: {} files ({} bytes) reused, {} bytes of pclusters copied; {} files ({} bytes) compressed; {} changed, {} unreadable in the base",
        b.reused_files,
        b.reused_bytes,
        b.copied_bytes,
        b.compressed_files,
        b.compressed_bytes,
        b.changed_files,
        b.unreadable_files
    )?;
    Ok(())
}

/// With EROFS layers as the source: which files stay on them and which
/// were copied, and why.
fn write_layers(out: &mut impl Write, s: &Summary) -> Result<()> {
    let Some(l) = &s.layers else {
        return Ok(());
    };
    let why: Vec<String> = l
        .copied_why
        .iter()
        .map(|(w, n)| format!("{n} {w}"))
        .collect();
    writeln!(
        out,
        "layers: {} files ({} bytes) left on the layers (extra devices; {} inline tails copied), {} files ({} bytes) copied{}",
        l.indexed_files,
        l.indexed_bytes,
        l.tails,
        l.copied_files,
        l.copied_bytes,
        if why.is_empty() { String::new() } else { format!(" ({})", why.join(", ")) }
    )?;
    Ok(())
}

/// Which kernels mount the image just written (`None` if its superblock
/// cannot be read back, which the build would have reported).
fn kernel_support(image: &Path, offset: u64) -> Option<KernelSupport> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(image).ok()?;
    let mut raw = [0u8; ferrofs::format::superblock::SB_BASE_SIZE];
    f.read_exact_at(
        &mut raw,
        offset.checked_add(ferrofs::format::SUPERBLOCK_OFFSET)?,
    )
    .ok()?;
    let sb = ferrofs::format::superblock::Superblock::parse(&raw).ok()?;
    Some(ferrofs::format::kernel::support(&sb))
}

/// Prints the build's phases on standard error (`mkfs --timings`): wall
/// and CPU seconds and the cores they kept busy, and the total.
pub(crate) fn print_timings(phases: &[ferrofs_builder::Phase]) {
    eprintln!(
        "{:<6} {:>8} {:>8} {:>6}",
        "phase", "wall s", "CPU s", "cores"
    );
    let line = |name: &str, wall: f64, cpu: f64| {
        let cores = if wall > 0.0 { cpu / wall } else { 0.0 };
        eprintln!("{name:<6} {wall:>8.2} {cpu:>8.2} {cores:>6.2}");
    };
    for p in phases {
        line(p.name, p.wall.as_secs_f64(), p.cpu.as_secs_f64());
    }
    let wall = phases.iter().map(|p| p.wall.as_secs_f64()).sum();
    let cpu = phases.iter().map(|p| p.cpu.as_secs_f64()).sum();
    line("total", wall, cpu);
}
