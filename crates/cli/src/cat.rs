//! `ferrofs cat`: one file of an image to standard output.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use crate::{open, ImageArgs};

/// `ferrofs cat`: a file's bytes to standard output.
pub(crate) fn cat(img: &ImageArgs, path: &OsString) -> Result<ExitCode> {
    let image = open(img)?;
    let name = path.to_string_lossy();
    let inode = image
        .raw()
        .lookup_path(path.as_bytes(), true)
        .map_err(|e| named(e, &name))?;
    if inode.is_dir() {
        bail!("{name}: is a directory");
    }
    let file = image.raw().open(inode).map_err(|e| named(e, &name))?;
    let mut out = io::stdout().lock();
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0u64;
    loop {
        let n = file
            .read_at(&mut buf, pos)
            .with_context(|| format!("{name}: reading byte {pos}"))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])?;
        pos += n as u64;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `e` naming the file `name`, unless its message already does.
fn named(e: ferrofs::Error, name: &str) -> anyhow::Error {
    if e.to_string().contains(name) {
        e.into()
    } else {
        anyhow::Error::new(e).context(name.to_owned())
    }
}
