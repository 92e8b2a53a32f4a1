//! `ferrofs bench`: hands over to the Python benchmark runner in the repository's
//! `bench/ferrofs_bench` package (image builds, kernel mounts, fio, reports).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The directory holding the `ferrofs_bench` package: `$FERROFS_BENCH_DIR`, else
/// `../../bench` from the executable (`target/<profile>/ferrofs` in a checkout).
fn bench_dir() -> Result<PathBuf> {
    let dir = match std::env::var_os("FERROFS_BENCH_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let exe = std::env::current_exe()?.canonicalize()?;
            exe.parent()
                .and_then(|p| p.parent())
                .and_then(|p| p.parent())
                .map(|root| root.join("bench"))
                .context("cannot locate the repository from the executable's path")?
        }
    };
    if !dir.join("ferrofs_bench").join("__main__.py").is_file() {
        bail!(
            "{}: no ferrofs_bench package there; set FERROFS_BENCH_DIR to the repository's bench/ directory",
            dir.display()
        );
    }
    Ok(dir)
}

/// Replace this process with `python3 -m ferrofs_bench ARGS...`, with the bench
/// directory on PYTHONPATH and `$FERROFS` naming this executable (unless already set).
/// Returns only when python3 cannot be started; the runner's exit status then becomes
/// this process's.
pub fn run(args: Vec<OsString>) -> Result<i32> {
    let dir = bench_dir()?;
    let mut path = OsString::from(dir.as_os_str());
    if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut cmd = Command::new("python3");
    cmd.arg("-m")
        .arg("ferrofs_bench")
        .args(args)
        .env("PYTHONPATH", path);
    if std::env::var_os("FERROFS").is_none() {
        cmd.env("FERROFS", std::env::current_exe()?);
    }
    Err(cmd.exec()).context("cannot run python3 (needed by `ferrofs bench`)")
}
