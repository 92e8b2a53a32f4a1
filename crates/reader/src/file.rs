//! Reading an inode's bytes at any offset: map the extent, then copy from
//! raw blocks, inline data, the packed inode or a decoded pcluster.

use std::sync::Arc;

use crate::decompress;
use crate::error::{Error, Result};
use crate::image::Image;
use crate::inode::Inode;
use crate::map::{DataMap, Extent, ExtentKind, Pcluster, PclusterFormat};

/// An inode with its validated mapping state; holds no image handle.
#[derive(Debug)]
pub struct FileData {
    pub(crate) inode: Inode,
    pub(crate) map: DataMap,
}

impl FileData {
    pub(crate) fn new(image: &Image, inode: Inode, is_packed: bool) -> Result<Self> {
        let map = DataMap::new(image, &inode, is_packed)?;
        Ok(Self { inode, map })
    }
}

/// An open inode whose data can be read at any offset. Cheap to clone.
#[derive(Clone, Debug)]
pub struct InodeFile {
    image: Image,
    data: Arc<FileData>,
}

impl InodeFile {
    pub(crate) fn open(image: &Image, inode: Inode) -> Result<Self> {
        Ok(Self {
            image: image.clone(),
            data: Arc::new(FileData::new(image, inode, false)?),
        })
    }

    pub(crate) fn from_parts(image: Image, data: Arc<FileData>) -> Self {
        Self { image, data }
    }

    /// The inode.
    pub fn inode(&self) -> &Inode {
        &self.data.inode
    }
    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.data.inode.size
    }
    /// The image the file belongs to.
    pub fn image(&self) -> &Image {
        &self.image
    }
    /// The mapping state (layout details), for inspection.
    pub fn data_map(&self) -> &DataMap {
        &self.data.map
    }

    /// The extent holding byte `offset` (< size).
    pub fn map(&self, offset: u64) -> Result<Extent> {
        self.data.map.map(&self.image, &self.data.inode, offset)
    }

    /// The decoded bytes the cache holds of the compressed extent that
    /// contains `offset`: the file offset of the first byte and the bytes
    /// (a prefix of the extent, or all of it). Decodes nothing; `None` when
    /// the extent is not compressed or not cached.
    pub fn cached_extent(&self, offset: u64) -> Option<(u64, Arc<Vec<u8>>)> {
        let ext = self.map(offset).ok()?;
        let ExtentKind::Pcluster(pc) = ext.kind else {
            return None;
        };
        let PclusterFormat::Codec(_) = pc.format else {
            return None;
        };
        let key = crate::cache::Key::of(&pc);
        let data = self.image.inner.cache.peek(&key)?;
        // A shared pcluster may decode to more than this extent uses.
        let n = usize::try_from(ext.len).ok()?.min(data.len());
        if n < data.len() {
            return Some((ext.logical, Arc::new(data[..n].to_vec())));
        }
        Some((ext.logical, data))
    }

    /// Iterates over the extents of the file in order.
    pub fn extents(&self) -> Extents<'_> {
        Extents { file: self, pos: 0 }
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns the number read
    /// (short only at the end of the file).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        read_data(&self.image, &self.data, buf, offset)
    }

    /// Reads the whole file into memory (for small files, symlinks, dirs).
    pub fn read_all(&self) -> Result<Vec<u8>> {
        let len = usize::try_from(self.size())
            .map_err(|_| Error::corrupt(self.inode().loc(), "file too large for memory"))?;
        let avail = self.image.source_len().saturating_mul(2048).max(1 << 20);
        if self.size() > avail {
            return Err(Error::corrupt(
                self.inode().loc(),
                "size larger than the image could hold",
            ));
        }
        let mut v = vec![0u8; len];
        let n = self.read_at(&mut v, 0)?;
        v.truncate(n);
        Ok(v)
    }
}

/// Iterator over a file's extents.
pub struct Extents<'a> {
    file: &'a InodeFile,
    pos: u64,
}

impl Iterator for Extents<'_> {
    type Item = Result<Extent>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.file.size() {
            return None;
        }
        let r = self.file.map(self.pos);
        match &r {
            Ok(e) => self.pos = e.end(),
            Err(_) => self.pos = u64::MAX,
        }
        Some(r)
    }
}

pub(crate) fn read_data(
    image: &Image,
    data: &FileData,
    buf: &mut [u8],
    offset: u64,
) -> Result<usize> {
    let size = data.inode.size;
    if offset >= size || buf.is_empty() {
        return Ok(0);
    }
    let end = offset.saturating_add(buf.len() as u64).min(size);
    let total = (end - offset) as usize;
    let mut pos = offset;
    while pos < end {
        let ext = data.map.map(image, &data.inode, pos)?;
        let stop = ext.end().min(end);
        let from = (pos - offset) as usize;
        let to = (stop - offset) as usize;
        fill(image, data, &ext, pos, &mut buf[from..to])?;
        pos = stop;
    }
    Ok(total)
}

fn fill(image: &Image, data: &FileData, ext: &Extent, pos: u64, out: &mut [u8]) -> Result<()> {
    let rel = pos - ext.logical;
    let at = data.inode.loc().with_offset(pos);
    let eof = |e: Error| match e {
        Error::Io { offset, source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof => {
            Error::corrupt(
                at,
                format!("data at byte {offset} lies beyond the end of the image"),
            )
        }
        other => other,
    };
    match ext.kind {
        ExtentKind::Hole => {
            out.fill(0);
            Ok(())
        }
        ExtentKind::Raw { device, pos: p } => {
            image.read_physical(device, p + rel, out).map_err(eof)
        }
        ExtentKind::Inline { pos: p } => image.read_raw(out, p + rel).map_err(eof),
        ExtentKind::Fragment { offset } => {
            let packed = image
                .inner
                .packed
                .as_ref()
                .ok_or_else(|| Error::corrupt(at, "fragment without a packed inode"))?;
            let src = offset
                .checked_add(rel)
                .ok_or_else(|| Error::corrupt(at, "fragment offset overflows"))?;
            let n = read_data(image, packed, out, src)?;
            if n != out.len() {
                return Err(Error::corrupt(at, "fragment runs past the packed inode"));
            }
            Ok(())
        }
        ExtentKind::Pcluster(pc) => fill_pcluster(image, ext, &pc, rel, out, at).map_err(eof),
    }
}

fn fill_pcluster(
    image: &Image,
    ext: &Extent,
    pc: &Pcluster,
    rel: u64,
    out: &mut [u8],
    at: crate::error::Location,
) -> Result<()> {
    let read = |buf: &mut [u8], off: u64| -> Result<()> {
        if pc.inline {
            image.read_raw(buf, pc.pos + off)
        } else {
            image.read_physical(0, pc.pos + off, buf)
        }
    };
    match pc.format {
        PclusterFormat::Shifted => read(out, rel),
        PclusterFormat::Interlaced => {
            // As the kernel does it: the first run (up to the end of the
            // logical block) is taken from the last page of the input at
            // `(pageofs_in + plen - run) mod PAGE_SIZE`; the rest from the
            // start of the input. For a whole-block pcluster this is the
            // byte at `x % bs`. (For inline tails mkfs 1.8.6 writes bytes
            // unrotated, and the kernel and erofsfuse both read them
            // rotated; we return what the kernel returns.)
            let bs = image.block_size().bytes();
            let first = bs - ext.logical % bs;
            let last_byte = pc.pos + pc.len.max(1) - 1;
            let last_page = last_byte - last_byte % PAGE_SIZE;
            let pageofs_in = pc.pos % PAGE_SIZE;
            let wrapped = (pageofs_in + pc.len + PAGE_SIZE - first % PAGE_SIZE) % PAGE_SIZE;
            let head_abs = last_page + wrapped;
            let mut done = 0usize;
            let mut r = rel;
            while done < out.len() {
                let n;
                if r < first {
                    n = ((first - r) as usize).min(out.len() - done);
                    let buf = &mut out[done..done + n];
                    if pc.inline {
                        image.read_raw(buf, head_abs + r)?;
                    } else {
                        image.read_physical(0, head_abs + r, buf)?;
                    }
                } else {
                    let off = r - first;
                    if off >= pc.len {
                        return Err(Error::corrupt(at, "interlaced pcluster too short"));
                    }
                    n = ((pc.len - off) as usize).min(out.len() - done);
                    read(&mut out[done..done + n], off)?;
                }
                done += n;
                r += n as u64;
            }
            Ok(())
        }
        PclusterFormat::Codec(_) => {
            if rel == 0 && out.len() as u64 == ext.len {
                // The request covers the whole extent: decode in place.
                return decompress::decode_into(image, pc, out, at);
            }
            let want = rel + out.len() as u64;
            let streaming = image.inner.whole_extents || out.len() >= decompress::STREAMING_READ;
            let dec = decompress::decoded(image, pc, ext.len, want, streaming, at)?;
            let src = dec
                .get(rel as usize..want as usize)
                .ok_or_else(|| Error::corrupt(at, "decoded pcluster too short"))?;
            out.copy_from_slice(src);
            Ok(())
        }
    }
}

/// Page size the kernel's interlaced arithmetic works in (x86-64, arm64 4K).
const PAGE_SIZE: u64 = 4096;
