//! `ferrofs cat`: files of an image to standard output, one after the
//! other.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use ferrofs::Image;

use crate::{open, out, ImageArgs};

/// `ferrofs cat`: the bytes of each of `paths` to standard output. A path
/// that cannot be read is reported (`ferrofs: PATH: why`) and the next is
/// written; the exit status is then 2. A closed pipe ends it at once.
pub(crate) fn cat(img: &ImageArgs, paths: &[OsString]) -> Result<ExitCode> {
    let image = open(img)?;
    let mut out = io::stdout().lock();
    let mut failed = false;
    for path in paths {
        match write_file(&image, path, &mut out) {
            Ok(()) => {}
            Err(e) if out::is_broken_pipe(&e) => return Err(e),
            Err(e) => {
                // What was written of it stays before the message.
                out.flush()?;
                eprintln!("ferrofs: {}", crate::report(&e));
                failed = true;
            }
        }
    }
    out.flush()?;
    Ok(if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// Writes the file at `path` to `out`.
fn write_file(image: &Image, path: &OsString, out: &mut impl Write) -> Result<()> {
    let name = path.to_string_lossy();
    let inode = image
        .raw()
        .lookup_path(path.as_bytes(), true)
        .map_err(|e| named(e, &name))?;
    if inode.is_dir() {
        bail!("{name}: is a directory");
    }
    let file = image.raw().open(inode).map_err(|e| named(e, &name))?;
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
    Ok(())
}

/// `e` naming the file `name`, unless its message already does.
fn named(e: ferrofs::Error, name: &str) -> anyhow::Error {
    if e.to_string().contains(name) {
        e.into()
    } else {
        anyhow::Error::new(e).context(name.to_owned())
    }
}
