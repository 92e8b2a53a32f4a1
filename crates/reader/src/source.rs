//! Positional byte sources an image is read from: a file (pread), a byte
//! buffer, or a memory map. `&self` methods, so one source serves many
//! threads without a seek position or a lock.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// A positional, thread-safe, read-only byte source.
pub trait ReadAt: Send + Sync {
    /// Fills `buf` from byte `offset`; reading past the end is an error of
    /// kind `UnexpectedEof`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Total length of the source in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the source is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

impl ReadAt for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

fn slice_read(data: &[u8], buf: &mut [u8], offset: u64) -> io::Result<()> {
    let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
    let end = start
        .checked_add(buf.len())
        .ok_or(io::ErrorKind::UnexpectedEof)?;
    let src = data.get(start..end).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "read of {} bytes at {offset} past the end ({})",
                buf.len(),
                data.len()
            ),
        )
    })?;
    buf.copy_from_slice(src);
    Ok(())
}

impl ReadAt for [u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        slice_read(self, buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(<[u8]>::len(self) as u64)
    }
}

impl ReadAt for Vec<u8> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        slice_read(self, buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(Vec::len(self) as u64)
    }
}

impl ReadAt for Arc<[u8]> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        slice_read(self, buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(<[u8]>::len(self) as u64)
    }
}

impl ReadAt for memmap2::Mmap {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        slice_read(self, buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(<[u8]>::len(self) as u64)
    }
}

impl<T: ReadAt + ?Sized> ReadAt for Box<T> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_exact_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        (**self).len()
    }
}
