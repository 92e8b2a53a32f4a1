//! The hot ranges of an image for recorded start-ups: the traces are
//! replayed on the image through the reader (each traced file looked up and
//! its traced bytes read, each directory on the way listed with its
//! entries' inodes) and every byte
//! range the reader asks of the image is kept, giving the
//! [`HotRanges`] record `mkfs --profile` writes into the boot area.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use ferrofs::{Image, OpenOptions, ReadAt};
use ferrofs_format::hotrange::HotRanges;
use ferrofs_trace::TraceRead;

/// A source that notes every range read from it.
struct Recording {
    inner: Box<dyn ReadAt>,
    log: Arc<Mutex<Vec<(u64, u64)>>>,
}

impl ReadAt for Recording {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((offset, offset.saturating_add(buf.len() as u64)));
        self.inner.read_exact_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

/// What a replay found.
pub struct Replay {
    pub record: HotRanges,
    /// Traced paths the image does not have (or could not read).
    pub missing: usize,
}

/// Replays `reads` on the image in `source` and returns the record of
/// the ranges read, with gaps up to `join` bytes closed.
pub fn replay(source: Box<dyn ReadAt>, reads: &[TraceRead], join: u64) -> io::Result<Replay> {
    let image_len = source.len()?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let rec = Recording {
        inner: source,
        log: log.clone(),
    };
    let image =
        Image::open_with(Box::new(rec), OpenOptions::default()).map_err(io::Error::other)?;
    let uuid = image.superblock().uuid;
    let mut listed = std::collections::HashSet::new();
    let mut missing = 0;
    let mut buf = vec![0u8; 1 << 20];
    for r in reads {
        let path = Path::new(std::ffi::OsStr::from_bytes(&r.path));
        // The directories on the way: a start lists some (a FUSE mount
        // then reads every entry's inode, for READDIRPLUS) and looks up
        // names that are absent, reading their blocks.
        for dir in path.ancestors().skip(1) {
            if listed.insert(dir.to_path_buf()) {
                if let Ok(entries) = image.read_dir(Path::new("/").join(dir)) {
                    for e in entries.flatten() {
                        let _ = e.metadata();
                    }
                }
            }
        }
        let Ok(file) = image.open_file(Path::new("/").join(path)) else {
            missing += 1;
            continue;
        };
        let size = file.len();
        let (off, len) = r.range.unwrap_or((0, size));
        let end = off.saturating_add(len).min(size);
        let mut pos = off;
        while pos < end {
            let n = usize::try_from(end - pos).map_or(buf.len(), |n| n.min(buf.len()));
            match file.read_at(&mut buf[..n], pos) {
                Ok(0) | Err(_) => break,
                Ok(k) => pos += k as u64,
            }
        }
    }
    let ranges = std::mem::take(&mut *log.lock().unwrap_or_else(PoisonError::into_inner));
    Ok(Replay {
        record: HotRanges::new(&ranges, join, image_len, uuid),
        missing,
    })
}
