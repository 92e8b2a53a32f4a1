//! The image as it is written: a buffered stream that knows its position,
//! hashes every byte (the default uuid comes from it) and stops when the
//! build is interrupted.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use xxhash_rust::xxh3::Xxh3;

use crate::error::{BuildError, Result};

/// Writes an image (or its blob) front to back: tracks the position,
/// hashes every byte (for the default uuid), stops on an interrupt.
pub(crate) struct Writer<'a> {
    pub(crate) data: BufWriter<&'a File>,
    /// Where the image starts in the output file.
    pub(crate) base: u64,
    /// Bytes file data starts at multiples of (`--dsunit`; 0: none).
    pub(crate) align: u64,
    pub(crate) hash: Xxh3,
    pub(crate) pos: u64,
    pub(crate) output: &'a Path,
    pub(crate) stop: Option<&'a AtomicBool>,
    /// The output file as a piped archive's data was written into it
    /// during the scan (`source::tar::InPlace`), so that the data pass
    /// can tell such data and pass over it.
    pub(crate) in_place: Option<std::sync::Arc<File>>,
}

impl Writer<'_> {
    pub(crate) fn write(&mut self, b: &[u8]) -> Result<()> {
        let out = self.output;
        if b.len() >= 65536 {
            check_stop(self.stop, out)?;
        }
        self.data.write_all(b).map_err(BuildError::output(out))?;
        self.hash.update(b);
        self.pos += b.len() as u64;
        Ok(())
    }
    pub(crate) fn zeros(&mut self, n: u64) -> Result<()> {
        const Z: [u8; 4096] = [0; 4096];
        let mut left = n;
        while left > 0 {
            let k = left.min(4096) as usize;
            self.write(&Z[..k])?;
            left -= k as u64;
        }
        Ok(())
    }
    pub(crate) fn pad_to_block(&mut self, bs: u64) -> Result<()> {
        let rem = self.pos % bs;
        if rem != 0 {
            self.zeros(bs - rem)?;
        }
        Ok(())
    }
    pub(crate) fn block(&self, bs: u64) -> u64 {
        self.pos / bs
    }
    /// Pads (a block boundary) to where file data may start.
    pub(crate) fn align_data(&mut self) -> Result<()> {
        if self.align > 0 && !self.pos.is_multiple_of(self.align) {
            self.zeros(self.align - self.pos % self.align)?;
        }
        Ok(())
    }
    /// Passes over `len` bytes already at the current position (put there
    /// by the scan), hashing them as if they were written now; `buf` is
    /// scratch space.
    pub(crate) fn pass_over(&mut self, len: u64, buf: &mut [u8]) -> Result<()> {
        use std::io::{Seek, SeekFrom};
        let out = self.output;
        self.data.flush().map_err(BuildError::output(out))?;
        let mut done = 0u64;
        while done < len {
            check_stop(self.stop, out)?;
            let n = (len - done).min(buf.len() as u64) as usize;
            let at = self.base + self.pos + done;
            std::os::unix::fs::FileExt::read_exact_at(*self.data.get_ref(), &mut buf[..n], at)
                .map_err(BuildError::output(out))?;
            self.hash.update(&buf[..n]);
            done += n as u64;
        }
        self.pos += len;
        self.data
            .seek(SeekFrom::Start(self.base + self.pos))
            .map_err(BuildError::output(out))?;
        Ok(())
    }
    /// Reads back bytes written at image position `pos`.
    pub(crate) fn read_back(&mut self, buf: &mut [u8], pos: u64) -> Result<()> {
        self.data.flush().map_err(BuildError::output(self.output))?;
        std::os::unix::fs::FileExt::read_exact_at(*self.data.get_ref(), buf, self.base + pos)
            .map_err(BuildError::output(self.output))
    }
}

/// Whether the build was interrupted (`interrupted` is set).
pub(crate) fn stopped(interrupted: Option<&AtomicBool>) -> bool {
    interrupted.is_some_and(|f| f.load(Ordering::Relaxed))
}

/// Fails with [`BuildError::Interrupted`] once `interrupted` is set.
pub(crate) fn check_stop(interrupted: Option<&AtomicBool>, output: &Path) -> Result<()> {
    if stopped(interrupted) {
        return Err(BuildError::Interrupted {
            path: output.to_path_buf(),
        });
    }
    Ok(())
}

/// The build's worker threads .
pub(crate) fn worker_pool(workers: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .map_err(|e| BuildError::Option(format!("worker threads: {e}")))
}
