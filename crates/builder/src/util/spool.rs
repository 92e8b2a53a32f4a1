//! Scratch files (spooled archive data, fragments on their way to the
//! packed inode): created in a given directory without a name
//! (`O_TMPFILE`), or where the file system cannot do that, unlinked at
//! once, so nothing is left behind whatever happens next.

use std::fs::{self, File};
use std::path::Path;

use crate::error::{BuildError, Result};

/// A new read-write file in `dir` that no longer has a name. `what` goes
/// into the short-lived name (`.ferrofs-WHAT-PID`); errors name that path.
pub(crate) fn unlinked_file(dir: &Path, what: &str) -> Result<File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
    if let Ok(fd) = rustix::fs::open(dir, flags, Mode::from_raw_mode(0o600)) {
        return Ok(File::from(fd));
    }
    let path = dir.join(format!(".ferrofs-{what}-{}", std::process::id()));
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(BuildError::io(&path))?;
    fs::remove_file(&path).map_err(BuildError::io(&path))?;
    Ok(f)
}
