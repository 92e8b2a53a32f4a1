//! `ferrofs digest FILE...`: files' fs-verity digests (sha256, 4 KiB
//! blocks), printed as `fsverity digest` prints them.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::out;

#[derive(clap::Args)]
pub struct DigestArgs {
    /// The files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print a JSON array of {"file", "digest"}.
    #[arg(long)]
    json: bool,
}

/// Prints each file's digest, `sha256:HEX FILE`; a file that cannot be
/// read is reported and makes the exit status 1.
pub fn run(a: &DigestArgs) -> Result<ExitCode> {
    let mut out = out::stdout();
    let mut failed = false;
    let mut all = Vec::new();
    for f in &a.files {
        let d = std::fs::File::open(f)
            .map_err(anyhow::Error::from)
            .and_then(|file| {
                Ok(ferrofs_verity::fsverity::digest(std::io::BufReader::new(
                    file,
                ))?)
            });
        match d {
            Ok(d) if a.json => all.push(serde_json::json!({
                "file": f.display().to_string(),
                "digest": d.to_string(),
            })),
            Ok(d) => writeln!(out, "{d} {}", f.display())?,
            Err(e) => {
                out.flush()?;
                eprintln!("ferrofs: {}: {}", f.display(), crate::report(&e));
                failed = true;
            }
        }
    }
    if a.json {
        writeln!(out, "{}", serde_json::Value::Array(all))?;
    }
    out.flush()?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
