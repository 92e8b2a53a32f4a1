//! The positional byte sources trees are built over and read from.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// A positional, thread-safe, read-only byte source (a data or hash
/// device).
pub trait Bytes: Send + Sync {
    /// Fills `buf` from byte `offset`; past the end is an `UnexpectedEof`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Total length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the source holds no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

impl Bytes for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

impl Bytes for [u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(buf.len())?))
            .and_then(|r| self.get(r))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(<[u8]>::len(self) as u64)
    }
}

impl Bytes for Vec<u8> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.as_slice().read_exact_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(Vec::len(self) as u64)
    }
}

impl<T: Bytes + ?Sized> Bytes for &T {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_exact_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        (**self).len()
    }
}

impl<T: Bytes + ?Sized> Bytes for Box<T> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_exact_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        (**self).len()
    }
}
