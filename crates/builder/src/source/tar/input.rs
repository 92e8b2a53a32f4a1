//! The archive as a byte stream: opening it (a file read in place, or a
//! pipe), decompressing it, and where member data ends up (the archive
//! itself, a copy of it, or a spool file).

use std::fs::{self, File};
use std::io::{BufRead, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use super::fields::checksum_ok;
use super::{Compressed, TarInput, TarOptions, BLOCK, MAX_META};
use crate::error::{BuildError, Result};

/// The archive being read: sequential access, plus where data ends up.
pub(super) struct Src {
    pub(super) r: Box<dyn Read>,
    pub(super) pos: u64,
    /// The archive itself when it can be read at offsets.
    pub(super) file: Option<Arc<File>>,
    /// Otherwise data is copied here.
    pub(super) spool: Option<Spool>,
    /// The directory the spool file is in (for messages).
    spool_dir: PathBuf,
    pub(super) name: String,
    /// Tar index mode: member data is left where it is in the archive
    /// (its offset is all that is kept), neither referenced nor spooled.
    pub(super) index: bool,
}

/// Where the data of an archive that cannot be read at offsets goes: the
/// file, the offset the next member's data goes to, and the multiple of
/// bytes each member's data starts at.
pub(super) struct Spool {
    file: Arc<File>,
    next: u64,
    align: u64,
}

/// Where a build wants member data of an archive read from a pipe: its
/// image file (staged), from byte `at` on, each file's data starting on a
/// multiple of `align` bytes, as the data pass would put it there. The
/// data pass then finds it in place and does not copy it.
#[derive(Clone, Debug)]
pub struct InPlace {
    pub(crate) file: Arc<File>,
    pub(crate) at: u64,
    pub(crate) align: u64,
}

impl Src {
    /// A stream read from its start; data goes to `file` when there is
    /// one, else into `in_place` when given, else to an unlinked spool
    /// file in `spool_dir`; in tar `index` mode nowhere.
    pub(super) fn new(
        r: Box<dyn Read>,
        file: Option<Arc<File>>,
        name: String,
        spool_dir: &std::path::Path,
        (index, in_place): (bool, Option<InPlace>),
    ) -> Result<Src> {
        let spool = match (&file, index, in_place) {
            (Some(_), _, _) | (None, true, _) => None,
            (None, false, Some(p)) => Some(Spool {
                file: p.file,
                next: p.at,
                align: p.align.max(1),
            }),
            (None, false, None) => Some(Spool {
                file: Arc::new(crate::util::spool::unlinked_file(spool_dir, "tar")?),
                next: 0,
                align: 1,
            }),
        };
        Ok(Src {
            r,
            pos: 0,
            file,
            spool,
            spool_dir: spool_dir.to_path_buf(),
            name,
            index,
        })
    }

    pub(super) fn err(&self, member: &str, reason: impl Into<String>) -> BuildError {
        let path = if member.is_empty() {
            PathBuf::from(&self.name)
        } else {
            PathBuf::from(format!("{}: {member}", self.name))
        };
        BuildError::Input {
            path,
            reason: reason.into(),
        }
    }

    pub(super) fn io(&self) -> impl FnOnce(std::io::Error) -> BuildError + '_ {
        move |e| BuildError::Io {
            path: PathBuf::from(&self.name),
            source: e,
        }
    }

    /// Reads a whole block; `false` at a clean end of input.
    pub(super) fn block(&mut self, b: &mut [u8; BLOCK]) -> Result<bool> {
        let mut got = 0usize;
        while let Some(rest) = b.get_mut(got..).filter(|r| !r.is_empty()) {
            match self.r.read(rest) {
                Ok(0) => break,
                Ok(n) => got = got.saturating_add(n).min(BLOCK),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io()(e)),
            }
        }
        self.pos = self.pos.saturating_add(got as u64);
        match got {
            0 => Ok(false),
            BLOCK => Ok(true),
            // A short compressed archive is shorter than a header block.
            _ => match super::fields::compressed_hint(b.get(..got).unwrap_or_default())
                .filter(|_| self.pos == got as u64)
            {
                Some(hint) => Err(self.err("", format!("not a tar archive: {hint}"))),
                None => Err(self.err("", "truncated archive (partial header block)")),
            },
        }
    }

    pub(super) fn exact(&mut self, buf: &mut [u8], member: &str) -> Result<()> {
        match self.r.read_exact(buf) {
            Ok(()) => {
                self.pos = self.pos.saturating_add(buf.len() as u64);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                Err(self.err(member, "truncated archive (data ends early)"))
            }
            Err(e) => Err(self.io()(e)),
        }
    }

    /// Skips `n` bytes.
    pub(super) fn skip(&mut self, n: u64, member: &str) -> Result<()> {
        let copied =
            std::io::copy(&mut (&mut self.r).take(n), &mut std::io::sink()).map_err(|e| {
                BuildError::Io {
                    path: PathBuf::from(&self.name),
                    source: e,
                }
            })?;
        self.pos = self.pos.saturating_add(copied);
        if copied != n {
            return Err(self.err(member, "truncated archive (data ends early)"));
        }
        Ok(())
    }

    /// Skips a member's `n` bytes of data and the padding after them.
    pub(super) fn skip_data(&mut self, n: u64, member: &str) -> Result<()> {
        let total = n
            .checked_add(Self::padding(n))
            .ok_or_else(|| self.err(member, "member size out of range"))?;
        self.skip(total, member)
    }

    pub(super) fn padding(len: u64) -> u64 {
        // The distance to the next multiple of 512 (a power of two): the
        // low bits of -len.
        const MASK: u64 = BLOCK as u64 - 1;
        len.wrapping_neg() & MASK
    }

    /// Reads a small member body (long name, PAX records).
    pub(super) fn small(&mut self, size: u64, member: &str) -> Result<Vec<u8>> {
        if size > MAX_META {
            return Err(self.err(
                member,
                format!("metadata entry of {size} bytes is too large"),
            ));
        }
        // At most MAX_META (checked above).
        let mut v = vec![0u8; usize::try_from(size).unwrap_or(0)];
        self.exact(&mut v, member)?;
        self.skip(Self::padding(size), member)?;
        Ok(v)
    }

    /// Skips `size` bytes of file data (plus padding) that stay in the
    /// archive (tar index mode); returns their offset there.
    pub(super) fn data_in_place(&mut self, size: u64, member: &str) -> Result<u64> {
        let at = self.pos;
        self.skip_data(size, member)?;
        Ok(at)
    }

    /// Takes `size` bytes of file data (plus padding); returns the file
    /// they can be read from and their offset there.
    pub(super) fn data(&mut self, size: u64, member: &str) -> Result<(Arc<File>, u64)> {
        let pad = Self::padding(size);
        if let Some(f) = self.file.clone() {
            let at = self.pos;
            let total = size
                .checked_add(pad)
                .ok_or_else(|| self.err(member, "member size out of range"))?;
            self.skip(total, member)?;
            return Ok((f, at));
        }
        let (spool, at, align) = match &self.spool {
            Some(s) => (s.file.clone(), s.next, s.align),
            None => return Err(self.err(member, "no place for file data")),
        };
        let mut buf = vec![0u8; usize::try_from(size.min(1 << 20)).unwrap_or(1 << 20)];
        let mut done = 0u64;
        while let Some(left) = size.checked_sub(done).filter(|&l| l > 0) {
            let n = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
            let chunk = buf.get_mut(..n).unwrap_or_default();
            self.exact(chunk, member)?;
            let to = at
                .checked_add(done)
                .ok_or_else(|| self.err(member, "spool offset out of range"))?;
            spool
                .write_all_at(chunk, to)
                .map_err(|source| BuildError::Output {
                    path: PathBuf::from(format!(
                        "the scratch file in {} that holds the file data of {}",
                        self.spool_dir.display(),
                        self.name
                    )),
                    source,
                })?;
            done = done.saturating_add(n as u64);
        }
        self.skip(pad, member)?;
        let taken = size.div_ceil(align).saturating_mul(align);
        if let Some(s) = self.spool.as_mut() {
            s.next = s.next.saturating_add(taken);
        }
        Ok((spool, at))
    }
}

/// An opened archive: its sequential reader, the file when it can be read
/// at offsets, and its name for messages.
pub(super) type Opened = (Box<dyn Read>, Option<Arc<File>>, String);

/// `r` read sequentially through a buffer; `at` the file data can be
/// read from at offsets.
fn buffered(r: File, at: Option<Arc<File>>, name: String) -> Opened {
    (
        Box::new(std::io::BufReader::with_capacity(1 << 16, r)),
        at,
        name,
    )
}

pub(super) fn open_input(input: &TarInput) -> Result<Opened> {
    match input {
        TarInput::Path(p) => {
            let f = File::open(p).map_err(BuildError::io(p))?;
            let meta = f.metadata().map_err(BuildError::io(p))?;
            let name = p.display().to_string();
            if meta.is_file() {
                let shared = Arc::new(f);
                let r = File::open(p).map_err(BuildError::io(p))?;
                Ok(buffered(r, Some(shared), name))
            } else {
                Ok(buffered(f, None, name))
            }
        }
        TarInput::Stdin => {
            use std::os::fd::AsFd;
            let name = "standard input".to_string();
            let fd = std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .map_err(BuildError::io(&name))?;
            let f = File::from(fd);
            let meta = f.metadata().map_err(BuildError::io(&name))?;
            if meta.is_file() {
                // Redirected from a file: read it at offsets from where it stands.
                let mut r = f.try_clone().map_err(BuildError::io(&name))?;
                let start = r.stream_position().map_err(BuildError::io(&name))?;
                if start != 0 {
                    return Err(BuildError::input(
                        &name,
                        "standard input is not at its start",
                    ));
                }
                r.seek(SeekFrom::Start(0)).map_err(BuildError::io(&name))?;
                Ok(buffered(r, Some(Arc::new(f)), name))
            } else {
                Ok(buffered(f, None, name))
            }
        }
    }
}

/// A reader that also writes what it reads to a file.
pub(super) struct Tee<R> {
    pub(super) r: R,
    pub(super) out: File,
    /// The copy's path, where `tmp` is renamed at the stream's end.
    pub(super) path: PathBuf,
    pub(super) tmp: PathBuf,
    pub(super) done: bool,
}

impl<R: Read> Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.r.read(buf)?;
        let named = |e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("{}: {e}", self.path.display()))
        };
        self.out
            .write_all(buf.get(..n).unwrap_or_default())
            .map_err(named)?;
        if n == 0 && !buf.is_empty() && !self.done {
            // The whole stream (its checksums verified by the decoder).
            self.out.sync_all().map_err(named)?;
            fs::rename(&self.tmp, &self.path).map_err(named)?;
            self.done = true;
        }
        Ok(n)
    }
}

impl<R> Drop for Tee<R> {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Whether the first bytes of a stream are a tar header.
pub(super) fn looks_like_tar(head: &[u8]) -> bool {
    head.get(..BLOCK)
        .and_then(|h| <&[u8; BLOCK]>::try_from(h).ok())
        .is_some_and(|h| h.iter().any(|&b| b != 0) && checksum_ok(h))
}

/// Puts the decompressor `opts` asks for in front of the archive when its
/// first bytes show that compression (a plain archive is read as it is,
/// as mkfs.erofs does), and the copy to `opts.raw_copy` behind it.
/// Returns the reader and the file data can be read from at offsets.
pub(super) fn filtered(opened: Opened, opts: &TarOptions, input: &TarInput) -> Result<Opened> {
    let (r, file, name) = opened;
    if opts.compressed == Compressed::No && opts.raw_copy.is_none() {
        return Ok((r, file, name));
    }
    let io = |e| BuildError::Io {
        path: PathBuf::from(&name),
        source: e,
    };
    let mut r = std::io::BufReader::with_capacity(1 << 16, r);
    let head = r.fill_buf().map_err(io)?;
    let lzip = head.starts_with(b"LZIP");
    let decode = match opts.compressed {
        Compressed::No => false,
        Compressed::Gzip => head.starts_with(&[0x1f, 0x8b]),
        Compressed::Xz => {
            head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) || lzip || !looks_like_tar(head)
        }
    };
    let r: Box<dyn Read> = match (decode, opts.compressed) {
        (true, Compressed::Gzip) => Box::new(flate2::bufread::MultiGzDecoder::new(r)),
        (true, Compressed::Xz) => {
            use liblzma::stream::{Stream, CONCATENATED};
            // liblzma's automatic choice covers .xz and .lzma; .lz has
            // its own decoder.
            let stream = if lzip {
                Stream::new_lzip_decoder(u64::MAX, CONCATENATED)
            } else {
                Stream::new_auto_decoder(u64::MAX, CONCATENATED)
            }
            .map_err(|e| BuildError::input(&name, format!("xz decoder: {e}")))?;
            Box::new(liblzma::bufread::XzDecoder::new_stream(r, stream))
        }
        _ => Box::new(r),
    };
    let Some(copy) = &opts.raw_copy else {
        // Decompressed data has no offsets to refer to: spool it.
        let file = if decode { None } else { file };
        return Ok((r, file, name));
    };
    if let (Ok(a), TarInput::Path(p)) = (fs::metadata(copy), input) {
        use std::os::unix::fs::MetadataExt;
        if let Ok(b) = fs::metadata(p) {
            if (a.dev(), a.ino()) == (b.dev(), b.ino()) {
                return Err(BuildError::input(
                    copy,
                    "is the archive itself: it would be overwritten while read",
                ));
            }
        }
    }
    // Written under a temporary name and renamed once the stream has
    // ended well: a broken stream or a full disk leaves no partial copy.
    let name_of = copy
        .file_name()
        .ok_or_else(|| BuildError::input(copy, "is not a file path"))?;
    let tmp = crate::util::staged::temp_beside(copy, name_of);
    let out = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(BuildError::io(copy))?;
    let _ = out.try_lock();
    let data = fs::File::open(&tmp).map_err(BuildError::io(copy))?;
    let tee = Tee {
        r,
        out,
        path: copy.clone(),
        tmp,
        done: false,
    };
    Ok((
        Box::new(std::io::BufReader::with_capacity(1 << 20, tee)),
        Some(Arc::new(data)),
        name,
    ))
}
