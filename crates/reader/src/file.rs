//! Reading an inode's bytes at any offset: map the extent, then copy from
//! raw blocks, inline data, the packed inode or a decoded pcluster.

use std::sync::Arc;

use crate::bounds::{clamp_len, take_front};
use crate::decompress;
use crate::error::{Error, Location, OrCorrupt, Result};
use crate::image::Image;
use crate::inode::Inode;
use ferrofs_format::BlockSize;

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
            return Some((ext.logical, Arc::new(data.get(..n)?.to_vec())));
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
    // A directory is read block by block, all of it: decode its extents
    // whole at the first touch rather than a prefix now and all later.
    read_span(image, data, buf, offset, data.inode.is_dir())
}

/// Reads up to `buf.len()` bytes at `offset`. `whole`: a compressed
/// extent touched is decoded (and cached) whole, because other reads will
/// want the rest of it (the packed inode, the metabox, directories).
pub(crate) fn read_span(
    image: &Image,
    data: &FileData,
    buf: &mut [u8],
    offset: u64,
    whole: bool,
) -> Result<usize> {
    let Some(left) = data.inode.size.checked_sub(offset).filter(|&l| l > 0) else {
        return Ok(0);
    };
    let total = clamp_len(left, buf.len());
    let mut rest = buf.get_mut(..total).unwrap_or_default();
    let mut pos = offset;
    while !rest.is_empty() {
        let at = data.inode.loc().with_offset(pos);
        let ext = data.map.map(image, &data.inode, pos)?;
        // The map returns an extent holding `pos`, so this is positive.
        let span = ext
            .end()
            .checked_sub(pos)
            .filter(|&n| n > 0)
            .or_corrupt(at, "extent does not hold the byte asked for")?;
        let now = take_front(&mut rest, clamp_len(span, usize::MAX));
        fill(image, data, &ext, pos, now, whole)?;
        pos = pos
            .checked_add(now.len() as u64)
            .or_corrupt(at, "file offset overflows")?;
    }
    Ok(total)
}

fn fill(
    image: &Image,
    data: &FileData,
    ext: &Extent,
    pos: u64,
    out: &mut [u8],
    whole: bool,
) -> Result<()> {
    let at = data.inode.loc().with_offset(pos);
    if let ExtentKind::Fragment { offset } = ext.kind {
        let rel = pos
            .checked_sub(ext.logical)
            .or_corrupt(at, "extent starts after the byte asked for")?;
        let packed = image
            .inner
            .packed
            .as_ref()
            .ok_or_else(|| Error::corrupt(at, "fragment without a packed inode"))?;
        let src = offset
            .checked_add(rel)
            .ok_or_else(|| Error::corrupt(at, "fragment offset overflows"))?;
        // The packed inode's pclusters hold many files' fragments, read in
        // any order: decode each whole once.
        let n = read_span(image, packed, out, src, true)?;
        if n != out.len() {
            return Err(Error::corrupt(at, "fragment runs past the packed inode"));
        }
        return Ok(());
    }
    fill_direct(image, data.inode.loc(), ext, pos, out, whole)
}

/// Fills `out` with the bytes of `ext` from file offset `pos` on, for every
/// kind but a fragment (`base`: the inode, for error locations). `whole`:
/// see [`read_span`].
pub(crate) fn fill_direct(
    image: &Image,
    base: Location,
    ext: &Extent,
    pos: u64,
    out: &mut [u8],
    whole: bool,
) -> Result<()> {
    let at = base.with_offset(pos);
    let rel = pos
        .checked_sub(ext.logical)
        .or_corrupt(at, "extent starts after the byte asked for")?;
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
            let p = p
                .checked_add(rel)
                .or_corrupt(at, "data address overflows")?;
            image.read_physical(device, p, out).map_err(eof)
        }
        ExtentKind::Inline { pos: p } => {
            let p = p
                .checked_add(rel)
                .or_corrupt(at, "inline address overflows")?;
            image.read_raw(out, p).map_err(eof)
        }
        ExtentKind::Fragment { .. } => Err(Error::corrupt(at, "a fragment inside a fragment")),
        ExtentKind::Pcluster(pc) => {
            fill_pcluster(image, ext, &pc, rel, out, at, whole).map_err(eof)
        }
    }
}

fn fill_pcluster(
    image: &Image,
    ext: &Extent,
    pc: &Pcluster,
    rel: u64,
    out: &mut [u8],
    at: Location,
    whole: bool,
) -> Result<()> {
    let read = |buf: &mut [u8], off: u64| -> Result<()> {
        let p = pc
            .at
            .checked_add(off)
            .or_corrupt(at, "pcluster address overflows")?;
        image.read_stored(p, buf)
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
            let (first, head_abs) =
                interlaced_head(image.block_size(), ext.logical, pc.at.offset(), pc.len)
                    .and_then(|(first, head)| Some((first, pc.at.with_offset(head)?)))
                    .or_corrupt(at, "interlaced pcluster address overflows")?;
            let mut rest = out;
            let mut r = rel;
            while !rest.is_empty() {
                let n = if let Some(left) = first.checked_sub(r).filter(|&l| l > 0) {
                    let buf = take_front(&mut rest, clamp_len(left, usize::MAX));
                    let p = head_abs
                        .checked_add(r)
                        .or_corrupt(at, "interlaced pcluster address overflows")?;
                    image.read_stored(p, buf)?;
                    buf.len()
                } else {
                    // r >= first here.
                    let off = r.checked_sub(first).or_corrupt(at, "interlaced offset")?;
                    let left = pc
                        .len
                        .checked_sub(off)
                        .filter(|&l| l > 0)
                        .or_corrupt(at, "interlaced pcluster too short")?;
                    let buf = take_front(&mut rest, clamp_len(left, usize::MAX));
                    read(buf, off)?;
                    buf.len()
                };
                r = r
                    .checked_add(n as u64)
                    .or_corrupt(at, "interlaced offset overflows")?;
            }
            Ok(())
        }
        PclusterFormat::Codec(_) => {
            if rel == 0 && out.len() as u64 == ext.len {
                // The request covers the whole extent: decode in place.
                return decompress::decode_into(image, pc, out, at);
            }
            let want = rel
                .checked_add(out.len() as u64)
                .or_corrupt(at, "read past 2^64")?;
            let streaming =
                whole || image.inner.whole_extents || out.len() >= decompress::STREAMING_READ;
            let dec = decompress::decoded(image, pc, ext.len, want, streaming, at)?;
            let range = usize::try_from(rel).ok().zip(usize::try_from(want).ok());
            let src = range
                .and_then(|(from, to)| dec.get(from..to))
                .ok_or_else(|| Error::corrupt(at, "decoded pcluster too short"))?;
            out.copy_from_slice(src);
            Ok(())
        }
    }
}

/// Where an interlaced pcluster's first run starts: the length of that run
/// (up to the end of the logical block) and its absolute address, which is
/// `(pageofs_in + plen - run) mod PAGE_SIZE` into the input's last page.
/// `None` when an address overflows.
fn interlaced_head(bs: BlockSize, logical: u64, pos: u64, len: u64) -> Option<(u64, u64)> {
    let first = bs.bytes().checked_sub(bs.offset_in_block(logical))?;
    let last_byte = pos.checked_add(len.max(1))?.checked_sub(1)?;
    let last_page = last_byte & !(PAGE_SIZE - 1);
    let pageofs_in = pos % PAGE_SIZE;
    // All terms are below PAGE_SIZE, reduced before adding.
    let wrapped = pageofs_in
        .checked_add(len % PAGE_SIZE)?
        .checked_add(PAGE_SIZE)?
        .checked_sub(first % PAGE_SIZE)?
        % PAGE_SIZE;
    Some((first, last_page.checked_add(wrapped)?))
}

/// Page size the kernel's interlaced arithmetic works in (x86-64, arm64 4K).
const PAGE_SIZE: u64 = 4096;
