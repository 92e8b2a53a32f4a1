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

/// A source whose image starts `base` bytes into another one (an image
/// written with `mkfs --offset`, or inside a larger file).
pub struct Offset<R> {
    inner: R,
    base: u64,
}

impl<R: ReadAt> Offset<R> {
    /// `inner` seen from byte `base` on (`--offset`).
    pub fn new(inner: R, base: u64) -> Self {
        Self { inner, base }
    }
}

impl<R: ReadAt> ReadAt for Offset<R> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let at = offset.checked_add(self.base).ok_or_else(|| {
            io::Error::new(io::ErrorKind::UnexpectedEof, "read beyond 2^64 bytes")
        })?;
        self.inner.read_exact_at(buf, at)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.inner.len()?.saturating_sub(self.base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_source_shifts_reads_and_length() {
        let data: Vec<u8> = (0..100u8).collect();
        let s = Offset::new(data, 40);
        assert_eq!(s.len().unwrap(), 60);
        let mut b = [0u8; 3];
        s.read_exact_at(&mut b, 2).unwrap();
        assert_eq!(b, [42, 43, 44]);
        assert!(s.read_exact_at(&mut b, 58).is_err());
        assert!(s.read_exact_at(&mut b, u64::MAX - 1).is_err());
        assert_eq!(Offset::new(vec![0u8; 10], 20).len().unwrap(), 0);
    }
}
