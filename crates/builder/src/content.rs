//! Reading a regular file's bytes while the image is written: from the
//! local file system (checked for changes), from ranges of an archive
//! (tar input), where gaps between the stored ranges read as zeros, or
//! from a file of an EROFS image (rebuild mode), decoded by the reader.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::error::{BuildError, Result};
use crate::tree::Inode;

/// One stored range of a file inside an archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Offset in the file.
    pub logical: u64,
    pub len: u64,
    /// Offset in the archive.
    pub physical: u64,
}

/// Where a regular file's bytes come from.
#[derive(Clone, Debug, Default)]
pub enum Content {
    /// The file at [`Inode::source`] on the local file system.
    #[default]
    Local,
    /// Ranges of an archive; bytes outside every segment are zeros.
    Archive {
        archive: Arc<File>,
        /// Sorted by `logical`, not overlapping.
        segments: Arc<[Segment]>,
    },
    /// A regular file of an EROFS image (a layer of rebuild mode). With
    /// `external`, its data is not written: the new image's chunk indexes
    /// point at it on an extra device.
    Image {
        file: ferrofs::raw::InodeFile,
        external: Option<Arc<External>>,
    },
}

/// A file whose data stays on extra devices: per chunk of `bs <<
/// bits_extra` bytes, its (device id, first block) there, `None` a hole.
/// With `tail`, the last chunk is a tail the layer kept inline: it is
/// written to a block of the new image (its entry is a placeholder).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct External {
    pub bits_extra: u8,
    pub chunks: Vec<Option<(u16, u64)>>,
    pub tail: bool,
}

impl Content {
    /// The chunks of a file whose data stays on extra devices.
    pub fn external(&self) -> Option<&External> {
        match self {
            Content::Image {
                external: Some(x), ..
            } => Some(x),
            _ => None,
        }
    }
}

/// An open file's contents, read at offsets.
pub struct ContentReader<'a> {
    path: &'a Path,
    size: u64,
    file: Source<'a>,
}

enum Source<'a> {
    Local(File),
    Archive(&'a File, &'a [Segment]),
    Image(&'a ferrofs::raw::InodeFile),
}

impl<'a> ContentReader<'a> {
    /// Opens the contents of a regular file (or the data of any inode whose
    /// bytes live in a file), checking that a local file still has `size` bytes.
    pub fn open(ino: &'a Inode) -> Result<Self> {
        let size = ino.data_size();
        let path = ino.source.as_path();
        let file = match &ino.content {
            Content::Local => {
                let f = File::open(path).map_err(BuildError::io(path))?;
                let now = f.metadata().map_err(BuildError::io(path))?.len();
                if now != size {
                    return Err(BuildError::Changed {
                        path: path.to_path_buf(),
                        reason: format!("size was {size}, is now {now}"),
                    });
                }
                Source::Local(f)
            }
            Content::Archive { archive, segments } => Source::Archive(archive, segments),
            Content::Image { file, .. } => Source::Image(file),
        };
        Ok(Self { path, size, file })
    }

    /// Fills `buf` with the bytes at `off`.
    pub fn read_exact_at(&self, buf: &mut [u8], off: u64) -> Result<()> {
        let end = off.checked_add(buf.len() as u64);
        if end.is_none_or(|e| e > self.size) {
            return Err(BuildError::input(
                self.path,
                format!("read of {} bytes at {off} beyond its size", buf.len()),
            ));
        }
        match &self.file {
            Source::Local(f) => f.read_exact_at(buf, off).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    BuildError::Changed {
                        path: self.path.to_path_buf(),
                        reason: "it became shorter".into(),
                    }
                } else {
                    BuildError::io(self.path)(e)
                }
            }),
            Source::Archive(f, segs) => {
                buf.fill(0);
                let end = off + buf.len() as u64;
                // First segment that ends after `off`.
                let first = segs.partition_point(|s| s.logical + s.len <= off);
                for s in &segs[first..] {
                    if s.logical >= end {
                        break;
                    }
                    let a = s.logical.max(off);
                    let b = (s.logical + s.len).min(end);
                    let dst = &mut buf[(a - off) as usize..(b - off) as usize];
                    f.read_exact_at(dst, s.physical + (a - s.logical))
                        .map_err(BuildError::io(self.path))?;
                }
                Ok(())
            }
            Source::Image(f) => {
                let mut done = 0;
                while done < buf.len() {
                    let n = f
                        .read_at(&mut buf[done..], off + done as u64)
                        .map_err(|e| BuildError::input(self.path, e.to_string()))?;
                    if n == 0 {
                        return Err(BuildError::input(
                            self.path,
                            format!("the image gave no bytes at {}", off + done as u64),
                        ));
                    }
                    done += n;
                }
                Ok(())
            }
        }
    }

    /// Checks that a local file did not grow while it was read.
    pub fn finish(&self) -> Result<()> {
        if let Source::Local(f) = &self.file {
            let mut probe = [0u8; 1];
            let mut fr = f;
            fr.seek(SeekFrom::Start(self.size))
                .map_err(BuildError::io(self.path))?;
            if fr.read(&mut probe).map_err(BuildError::io(self.path))? != 0 {
                return Err(BuildError::Changed {
                    path: self.path.to_path_buf(),
                    reason: "it grew".into(),
                });
            }
        }
        Ok(())
    }
}
