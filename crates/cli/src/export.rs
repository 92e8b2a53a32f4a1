//! `ferrofs export`: the image, or a directory of it, as a POSIX (PAX)
//! tar stream, without root (see `ferrofs_check::export`).

use std::ffi::OsString;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use crate::{open, ImageArgs};

#[derive(clap::Args)]
pub(crate) struct ExportArgs {
    #[command(flatten)]
    img: ImageArgs,
    /// The directory to export (default: the root); the archive's names
    /// start with `./` inside it, as `tar -C DIR -cf - .` writes them.
    #[arg(value_name = "PATH")]
    path: Option<OsString>,
    /// Write the archive to FILE (replaced atomically) instead of
    /// standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Write files with holes whole (zeros), as GNU tar does without
    /// --sparse; by default they are PAX sparse members (GNU tar
    /// --sparse's format 1.0), which GNU tar, bsdtar and Python's
    /// tarfile restore with their holes.
    #[arg(long)]
    no_sparse: bool,
    /// Print a JSON summary (entries, file bytes, archive bytes) on
    /// standard error.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: &ExportArgs) -> Result<ExitCode> {
    let image = open(&a.img)?;
    let root = a
        .path
        .as_ref()
        .map(|p| p.as_bytes().to_vec())
        .unwrap_or_default();
    let root: Vec<u8> = root
        .split(|&c| c == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .collect::<Vec<_>>()
        .join(&b'/');
    let mut opts = ferrofs_check::export::ExportOptions::default();
    opts.sparse = !a.no_sparse;
    let stats = match &a.output {
        None => {
            if io::stdout().is_terminal() {
                bail!(
                    "refusing to write a tar archive to a terminal (redirect it, or give -o FILE)"
                );
            }
            let mut out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
            ferrofs_check::export::export(&image, &root, &opts, &mut out)?
        }
        Some(path) => {
            let dir = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let tmp = dir.join(format!(".{name}.ferrofs-{}.tmp", std::process::id()));
            let f = std::fs::File::create(&tmp)
                .with_context(|| format!("creating {}", tmp.display()))?;
            let mut out = BufWriter::with_capacity(1 << 20, f);
            let res = ferrofs_check::export::export(&image, &root, &opts, &mut out)
                .map_err(anyhow::Error::from)
                .and_then(|s| {
                    let f = out.into_inner().map_err(|e| e.into_error())?;
                    f.sync_all()?;
                    std::fs::rename(&tmp, path)
                        .with_context(|| format!("renaming into {}", path.display()))?;
                    Ok(s)
                });
            if res.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            res?
        }
    };
    if a.json {
        let mut err = io::stderr().lock();
        writeln!(err, "{}", serde_json::to_string_pretty(&stats)?)?;
    }
    Ok(ExitCode::SUCCESS)
}
