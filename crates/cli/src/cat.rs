//! `ferrofs cat`: one file of an image to standard output.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use anyhow::{bail, Result};

use crate::{open, ImageArgs};

/// `ferrofs cat`: a file's bytes to standard output.
pub(crate) fn cat(img: &ImageArgs, path: &OsString) -> Result<ExitCode> {
    let image = open(img)?;
    let inode = image.raw().lookup_path(path.as_bytes(), true)?;
    if inode.is_dir() {
        bail!("{}: is a directory", path.to_string_lossy());
    }
    let file = image.raw().open(inode)?;
    let mut out = io::stdout().lock();
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0u64;
    loop {
        let n = file.read_at(&mut buf, pos)?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])?;
        pos += n as u64;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
