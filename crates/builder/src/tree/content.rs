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
    /// Data left in place on an extra device (a tar index: the archive
    /// appended to the image). Nothing is read or written; the new image's
    /// chunk indexes point at it.
    Placed(Arc<External>),
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
            }
            | Content::Placed(x) => Some(x),
            _ => None,
        }
    }
}

/// What says a local file is unchanged: its size, modification and
/// status-change times (as GNU tar checks for "file changed as we read
/// it"). Taken when the tree is scanned; a file's data is read only while
/// its stamp still holds, checked when it is opened and after its bytes
/// are read, so an image never holds a state the file did not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// The stamp of a file with metadata `m`.
    pub fn of(m: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            size: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// What differs in `now`, in words; `None` when nothing does.
    fn differs(&self, now: &Stamp) -> Option<String> {
        let t = |(s, ns): (i64, i64)| format!("{s}.{ns:09}");
        if now.size != self.size {
            Some(format!("size was {}, is now {}", self.size, now.size))
        } else if now.mtime != self.mtime {
            Some(format!(
                "modified at {} after it was scanned at {}",
                t(now.mtime),
                t(self.mtime)
            ))
        } else if now.ctime != self.ctime {
            Some(format!(
                "its inode changed at {} after it was scanned at {}",
                t(now.ctime),
                t(self.ctime)
            ))
        } else {
            None
        }
    }
}

/// An open file's contents, read at offsets.
pub struct ContentReader<'a> {
    path: &'a Path,
    size: u64,
    file: Source<'a>,
    stamp: Option<Stamp>,
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
            Content::Placed(_) => {
                return Err(BuildError::input(
                    path,
                    "its data stays in the archive (a tar index) and is not read",
                ))
            }
        };
        let stamp = match &file {
            Source::Local(_) => ino.stamp,
            _ => None,
        };
        let r = Self {
            path,
            size,
            file,
            stamp,
        };
        r.unchanged()?;
        Ok(r)
    }

    /// Checks that a local file still has the size and times it had when
    /// it was scanned (a no-op for other sources). Called on opening and
    /// by [`ContentReader::finish`]; readers of parts of a file call it
    /// after each part.
    pub fn unchanged(&self) -> Result<()> {
        let (Source::Local(f), Some(then)) = (&self.file, &self.stamp) else {
            return Ok(());
        };
        let now = Stamp::of(&f.metadata().map_err(BuildError::io(self.path))?);
        match then.differs(&now) {
            None => Ok(()),
            Some(reason) => Err(BuildError::Changed {
                path: self.path.to_path_buf(),
                reason,
            }),
        }
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

    /// Checks that a local file did not change while it was read.
    pub fn finish(&self) -> Result<()> {
        self.unchanged()?;
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
