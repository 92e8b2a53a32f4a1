//! `mkcomposefs` as a drop-in (the binary run under that name) and as
//! `ferrofs mkcomposefs`: mkcomposefs 1.0.8's command line, the same image
//! bytes and object store, written atomically.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use ferrofs_builder::composefs::{
    build_composefs, write_atomically, CfsOptions, CfsSource, WalkOptions,
};

/// What `--version` prints: the mkcomposefs release whose command line and
/// images this implements, then ferrofs's.
const VERSION: &str = concat!("1.0.8 (ferrofs ", env!("CARGO_PKG_VERSION"), ")");

/// mkcomposefs 1.0.8's options. As with getopt, an option given twice
/// keeps its last value.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CfsArgs {
    /// Copy every file whose data is not inline into this object store
    /// (PATH/xx/rest-of-digest), unless there already.
    #[arg(long, value_name = "PATH")]
    digest_store: Option<PathBuf>,
    /// Make all mtimes zero.
    #[arg(long)]
    use_epoch: bool,
    /// Leave out block and character devices.
    #[arg(long)]
    skip_devices: bool,
    /// Store no xattrs.
    #[arg(long)]
    skip_xattrs: bool,
    /// Store only user.* xattrs.
    #[arg(long)]
    user_xattrs: bool,
    /// Print the image's fs-verity digest.
    #[arg(long)]
    print_digest: bool,
    /// Print the image's fs-verity digest and write no image (no IMAGE).
    #[arg(long)]
    print_digest_only: bool,
    /// SOURCE is a composefs dump file (`-`: standard input), not a
    /// directory.
    #[arg(long)]
    from_file: bool,
    /// Lowest format version (default 0; 1 when the tree has whiteouts,
    /// if --max-version allows).
    #[arg(long, value_name = "N")]
    min_version: Option<u32>,
    /// Highest format version (default 1).
    #[arg(long, value_name = "N")]
    max_version: Option<u32>,
    /// Threads reading files, computing digests and copying objects
    /// (default: 8 per core, 16 to 64: the work mostly waits for the
    /// disk). The image is the same for any number.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
    /// The source directory (or dump file with --from-file).
    source: PathBuf,
    /// The image to write (`-`: standard output).
    image: Option<PathBuf>,
}

/// `ferrofs mkcomposefs`: the drop-in's options and `--json`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct MkcomposefsArgs {
    #[command(flatten)]
    cfs: CfsArgs,
    /// Print a JSON summary (on standard error when the image goes to
    /// standard output).
    #[arg(long)]
    json: bool,
}

#[derive(Parser)]
#[command(
    name = "mkcomposefs",
    version = VERSION,
    args_override_self = true,
    about = "Build a composefs image (ferrofs, mkcomposefs 1.0.8-compatible command line)"
)]
struct DropIn {
    #[command(flatten)]
    cfs: CfsArgs,
}

/// Whether the program was started as `mkcomposefs`.
pub(crate) fn invoked_as_mkcomposefs() -> bool {
    std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n == "mkcomposefs"))
        .unwrap_or(false)
}

/// Runs with mkcomposefs's command line.
pub(crate) fn dropin_main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let d = match DropIn::try_parse_from(args) {
        Ok(d) => d,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 1 } else { 0 });
        }
    };
    crate::out::finish("mkcomposefs", run(&d.cfs, false), 1)
}

/// `ferrofs mkcomposefs`.
pub(crate) fn mkcomposefs(a: &MkcomposefsArgs) -> Result<ExitCode> {
    run(&a.cfs, a.json)
}

/// The format versions asked: either flag alone leaves the other at 0, as
/// in mkcomposefs; neither gives 0..=1.
fn versions(a: &CfsArgs) -> (u32, u32) {
    match (a.min_version, a.max_version) {
        (None, None) => (0, ferrofs_builder::composefs::VERSION_MAX),
        (min, max) => (min.unwrap_or(0), max.unwrap_or(0)),
    }
}

/// Where the image goes: `None` for --print-digest-only.
fn destination(a: &CfsArgs) -> Result<Option<&Path>> {
    if a.source.as_os_str().is_empty() {
        bail!("empty source path specified");
    }
    match (&a.image, a.print_digest_only) {
        (None, false) => bail!("no destination path specified"),
        (Some(_), true) => bail!("cannot specify destination path with --print-digest-only"),
        (Some(p), false) => {
            if p.as_os_str() == "-" && std::io::stdout().is_terminal() {
                bail!("stdout is a tty; refusing to write the image to it");
            }
            Ok(Some(p.as_path()))
        }
        (None, true) => Ok(None),
    }
}

fn run(a: &CfsArgs, json: bool) -> Result<ExitCode> {
    let out = destination(a)?;
    if a.skip_xattrs && a.user_xattrs {
        bail!("--skip-xattrs and --user-xattrs cannot be used together");
    }
    let (min_version, max_version) = versions(a);
    let opts = CfsOptions {
        walk: WalkOptions {
            use_epoch: a.use_epoch,
            skip_xattrs: a.skip_xattrs,
            user_xattrs: a.user_xattrs,
            skip_devices: a.skip_devices,
        },
        min_version,
        max_version,
        digest_store: if a.from_file {
            None
        } else {
            a.digest_store.clone()
        },
        threads: a.threads.map(|t| t as usize),
    };
    let src = &a.source;
    let image = if a.from_file {
        let input: Box<dyn std::io::Read> = if src.as_os_str() == "-" {
            Box::new(std::io::stdin().lock())
        } else {
            Box::new(std::fs::File::open(src).with_context(|| format!("open `{}`", src.display()))?)
        };
        build_composefs(CfsSource::Dump(input), &opts)
    } else {
        build_composefs(CfsSource::Dir(src), &opts)
    }
    .with_context(|| format!("building from {}", src.display()))?;
    let to_stdout = out.is_some_and(|p| p.as_os_str() == "-");
    match out {
        Some(_) if to_stdout => {
            let mut so = std::io::stdout().lock();
            so.write_all(&image.bytes)
                .and_then(|()| so.flush())
                .context("writing the image to standard output")?;
        }
        Some(p) => {
            write_atomically(&image.bytes, p).with_context(|| format!("writing {}", p.display()))?
        }
        None => {}
    }
    let digest = if a.print_digest || a.print_digest_only {
        let d = ferrofs_verity::fsverity::digest(image.bytes.as_slice()).context("image digest")?;
        let hex: String = d.0.iter().map(|b| format!("{b:02x}")).collect();
        println!("{hex}");
        Some(hex)
    } else {
        None
    };
    if json {
        let summary = serde_json::json!({
            "image": out.map(|p| p.display().to_string()),
            "format_version": image.version,
            "inodes": image.inodes,
            "bytes": image.bytes.len(),
            "digest": digest,
            "objects": image.store.map(|s| s.objects),
            "objects_copied": image.store.map(|s| s.copied),
            "bytes_copied": image.store.map(|s| s.bytes),
        });
        if to_stdout {
            eprintln!("{summary}");
        } else {
            println!("{summary}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
