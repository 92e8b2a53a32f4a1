//! An open image: the validated superblock, compression configuration,
//! device table, long xattr prefixes, the packed inode and the shared
//! caches, and the reads every layer above goes through (metadata blocks,
//! stored pclusters, device data). Cheap to clone (`Arc`), `Send + Sync`.
//! Opening and its checks are in `open`.

use std::sync::Arc;

use ferrofs_format::compress::CompressionConfig;
use ferrofs_format::device::DeviceSlot;
use ferrofs_format::superblock::Superblock;
use ferrofs_format::{BlockAddr, BlockSize, Nid};

use crate::addr::{MetaAddr, METABOX_SPACE};
use crate::bounds::{copy_prefix, take_front};
use crate::cache::{BlockCache, Flights, PclusterCache};
use crate::decompress::DecoderPool;
use crate::error::{Error, Location, OrCorrupt, Result};
use crate::file::{FileData, InodeFile};
use crate::inode::Inode;
use crate::source::ReadAt;

mod open;

/// Options for [`Image::open_with`].
pub struct OpenOptions {
    /// Sources of the extra devices, in device-table order. Empty means
    /// "flat mode": the devices are concatenated into the primary source.
    pub devices: Vec<Box<dyn ReadAt>>,
    /// Byte budget of the decompressed-pcluster cache.
    pub cache_bytes: usize,
    /// Verify the superblock checksum when the image has one (default on).
    pub verify_checksum: bool,
    /// Decode whole extents even for small reads (default off: a small
    /// read decodes only the prefix it needs). For a caller that keeps what
    /// was decoded, like the FUSE mount storing it in the page cache.
    pub whole_extents: bool,
    /// Keep a copy in the cache of an extent that a read decoded whole
    /// into its own buffer (default on), for the readers that come next.
    /// Off for a caller whose own cache keeps what it read, like the FUSE
    /// mount (the kernel's page cache); readers waiting on that very
    /// decode still get a copy.
    pub cache_whole_reads: bool,
    /// Verified reads: check every block of the source given to
    /// [`Image::open_with`] against this dm-verity tree (see
    /// [`crate::verity`]); a wrong root hash fails the open, a block that
    /// does not match fails its read with [`Error::Verity`].
    pub verity: Option<crate::verity::VerityOptions>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            devices: Vec::new(),
            cache_bytes: 16 << 20,
            verify_checksum: true,
            whole_extents: false,
            cache_whole_reads: true,
            verity: None,
        }
    }
}

/// One extra device from the device table.
#[derive(Clone, Debug)]
pub struct Device {
    /// The slot as stored (tag, blocks, mapped start).
    pub slot: DeviceSlot,
}

pub(crate) struct Inner {
    pub(crate) source: Box<dyn ReadAt>,
    pub(crate) device_sources: Vec<Box<dyn ReadAt>>,
    pub(crate) sb: Superblock,
    pub(crate) bs: BlockSize,
    pub(crate) cfg: CompressionConfig,
    pub(crate) devices: Vec<Device>,
    /// Long xattr prefixes: (short base index, infix).
    pub(crate) prefixes: Vec<(u8, Vec<u8>)>,
    pub(crate) packed: Option<Arc<FileData>>,
    /// The metabox inode (a second metadata space), if the image has one.
    pub(crate) metabox: Option<Arc<FileData>>,
    pub(crate) cache: PclusterCache,
    /// See [`OpenOptions::whole_extents`].
    pub(crate) whole_extents: bool,
    /// See [`OpenOptions::cache_whole_reads`].
    pub(crate) cache_whole_reads: bool,
    /// Pcluster decodes in progress (single-flight).
    pub(crate) flights: Flights,
    pub(crate) blocks: BlockCache,
    pub(crate) decoders: DecoderPool,
    pub(crate) source_len: u64,
    /// [`Image::mapped_bytes`].
    pub(crate) mapped_bytes: Option<u64>,
}

/// An open EROFS image.
#[derive(Clone)]
pub struct Image {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image")
            .field("block_size", &self.inner.bs.bytes())
            .field("root", &self.inner.sb.root_nid())
            .finish()
    }
}

impl Image {
    /// Bytes `offset..offset + buf.len()` of the primary source as they
    /// are stored (for tools that compare images block by block).
    pub fn read_source(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        read_exact(&*self.inner.source, buf, offset)
    }

    /// The validated superblock.
    pub fn superblock(&self) -> &Superblock {
        &self.inner.sb
    }
    /// The block size.
    pub fn block_size(&self) -> BlockSize {
        self.inner.bs
    }
    /// Per-algorithm settings from the superblock and its config records.
    pub fn compression_config(&self) -> &CompressionConfig {
        &self.inner.cfg
    }
    /// Bytes of the unified address space: the image's own blocks and
    /// every extra device at its mapped address (the length of an image
    /// file its devices are appended to, like a tar index with its
    /// archive). `None` on overflow.
    pub fn mapped_bytes(&self) -> Option<u64> {
        // Worked out once at open: every flat and chunk map checks against it.
        self.inner.mapped_bytes
    }
    /// The extra devices of the device table (blobs), in slot order.
    pub fn devices(&self) -> &[Device] {
        &self.inner.devices
    }
    /// Long xattr name prefixes as (short index, infix).
    pub fn xattr_prefixes(&self) -> &[(u8, Vec<u8>)] {
        &self.inner.prefixes
    }
    /// The root directory's nid.
    pub fn root_nid(&self) -> Nid {
        self.inner.sb.root_nid()
    }
    /// Size of the primary source in bytes.
    pub fn source_len(&self) -> u64 {
        self.inner.source_len
    }
    /// The packed (fragments) inode, if the image has one.
    pub(crate) fn packed_file(&self) -> Option<InodeFile> {
        self.inner
            .packed
            .as_ref()
            .map(|d| InodeFile::from_parts(self.clone(), d.clone()))
    }

    /// The metabox inode (the metadata space of metabox images), if any.
    pub(crate) fn metabox_file(&self) -> Option<InodeFile> {
        self.inner
            .metabox
            .as_ref()
            .map(|d| InodeFile::from_parts(self.clone(), d.clone()))
    }

    /// Reads `buf.len()` bytes of metadata at `at` through the metadata
    /// block cache (reads larger than a block go straight to the source):
    /// a byte of the primary device, or of the metabox data.
    pub(crate) fn read_raw(&self, buf: &mut [u8], at: MetaAddr) -> Result<()> {
        let bs = self.inner.bs;
        if at.in_metabox() {
            return self.read_metabox(buf, at.offset());
        }
        let offset = at.offset();
        if buf.len() as u64 > bs.bytes() {
            return read_exact(&*self.inner.source, buf, offset);
        }
        let mut pos = offset;
        let mut rest = buf;
        while !rest.is_empty() {
            let block = self.meta_block(bs.block_of(pos))?;
            let avail = block.get(bs.index_in_block(pos)..).unwrap_or_default();
            if avail.is_empty() {
                // The block is short: the image ends here.
                return read_exact(&*self.inner.source, rest, pos);
            }
            let n = copy_prefix(take_front(&mut rest, avail.len()), avail);
            pos = pos
                .checked_add(n as u64)
                .or_corrupt(Location::at(offset), "address overflows")?;
        }
        Ok(())
    }

    /// Reads metabox data at `offset` (through the block cache, keyed by
    /// the block's metadata address).
    fn read_metabox(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let at = Location::at(offset);
        let data =
            self.inner.metabox.as_ref().ok_or_else(|| {
                Error::corrupt(at, "metabox address in an image without a metabox")
            })?;
        let past = || Error::corrupt(at, "metadata lies beyond the end of the metabox");
        let bs = self.inner.bs;
        let mut pos = offset;
        let mut rest = buf;
        while !rest.is_empty() {
            let start = bs.block_of(pos) << bs.bits();
            // Keyed by block number, in a space apart from the image's.
            let key = bs.block_of(start | METABOX_SPACE);
            let block = match self.inner.blocks.get(key) {
                Some(b) => b,
                None => {
                    // Saturating: a block past the metabox's end holds nothing.
                    let len = bs.at_most(data.inode.size.saturating_sub(start));
                    let mut v = vec![0u8; len];
                    // Inodes are loaded in any order: decode the metabox's
                    // extents whole, once.
                    let n = crate::file::read_span(self, data, &mut v, start, true)?;
                    v.truncate(n);
                    let b: Arc<[u8]> = v.into();
                    self.inner.blocks.insert(key, b.clone());
                    b
                }
            };
            let avail = block.get(bs.index_in_block(pos)..).unwrap_or_default();
            if avail.is_empty() {
                return Err(past());
            }
            let n = copy_prefix(take_front(&mut rest, avail.len()), avail);
            pos = pos.checked_add(n as u64).ok_or_else(past)?;
        }
        Ok(())
    }

    fn meta_block(&self, blk: u64) -> Result<Arc<[u8]>> {
        if let Some(b) = self.inner.blocks.get(blk) {
            return Ok(b);
        }
        let bs = self.inner.bs;
        let start = bs
            .pos(BlockAddr(blk))
            .or_corrupt(Location::default(), "block address overflows")?;
        // The last block of a truncated image may be partial (saturating:
        // a block past the end holds nothing).
        let len = bs.at_most(self.inner.source_len.saturating_sub(start));
        let mut v = vec![0u8; len];
        read_exact(&*self.inner.source, &mut v, start)?;
        let b: Arc<[u8]> = v.into();
        self.inner.blocks.insert(blk, b.clone());
        Ok(b)
    }

    /// The stored bytes of a pcluster (see [`crate::raw::Raw::read_pcluster`]).
    pub(crate) fn read_pcluster(&self, pc: &crate::map::Pcluster) -> Result<Vec<u8>> {
        // A map never yields more than the kernel's limit; a hand-made
        // `Pcluster` must not size an allocation either.
        if pc.len > ferrofs_format::compress::MAX_PCLUSTER_BYTES {
            return Err(Error::corrupt(
                Location::at(pc.at.bits()),
                format!("pcluster of {} bytes (the limit is 1 MiB)", pc.len),
            ));
        }
        let len = usize::try_from(pc.len)
            .map_err(|_| Error::corrupt(Location::at(pc.at.bits()), "pcluster length overflows"))?;
        let mut v = vec![0u8; len];
        self.read_stored(pc.at, &mut v)?;
        Ok(v)
    }

    /// Reads stored pcluster bytes at `at` (metadata or unified space).
    pub(crate) fn read_stored(&self, at: crate::map::PclusterAt, buf: &mut [u8]) -> Result<()> {
        match at {
            crate::map::PclusterAt::Blocks(pos) => self.read_physical(0, pos, buf),
            crate::map::PclusterAt::Inline(a) => self.read_raw(buf, a),
        }
    }

    /// Reads bytes at a block address of the unified address space
    /// (`device == 0`) or of extra device `device`.
    pub(crate) fn read_physical(&self, device: u16, pos: u64, buf: &mut [u8]) -> Result<()> {
        let bs = self.inner.bs;
        let at = Location::at(pos);
        let (src, pos): (&dyn ReadAt, u64) = if device == 0 {
            // Unified space: find the device whose range holds the block.
            let blk = bs.block_of(pos);
            let found = self.inner.devices.iter().enumerate().find(|(_, d)| {
                blk.checked_sub(d.slot.uniaddr)
                    .is_some_and(|r| r < d.slot.blocks)
            });
            match found {
                Some((i, d)) if self.inner.device_sources.is_empty() => {
                    self.check_concatenated(i, d, pos, buf.len(), at)?;
                    (&*self.inner.source, pos)
                }
                Some((i, d)) => {
                    let src = self.device_source(i, at)?;
                    let base = bs
                        .pos(BlockAddr(d.slot.uniaddr))
                        .or_corrupt(at, "device uniaddr overflows")?;
                    // base <= pos: the device's range holds pos's block.
                    (src, pos.checked_sub(base).or_corrupt(at, "device base")?)
                }
                _ => (&*self.inner.source, pos),
            }
        } else {
            let i = usize::from(device)
                .checked_sub(1)
                .or_corrupt(at, "device id 0")?;
            let d =
                self.inner.devices.get(i).ok_or_else(|| {
                    Error::corrupt(at, format!("device id {device} out of range"))
                })?;
            if self.inner.device_sources.is_empty() {
                // Flat mode: the device is concatenated at its uniaddr.
                let base = bs
                    .pos(BlockAddr(d.slot.uniaddr))
                    .or_corrupt(at, "device uniaddr overflows")?;
                let p = base.checked_add(pos).or_corrupt(at, "address overflows")?;
                self.check_concatenated(i, d, p, buf.len(), at)?;
                (&*self.inner.source, p)
            } else {
                (self.device_source(i, at)?, pos)
            }
        };
        read_exact(src, buf, pos)
    }

    /// In flat mode (no device sources), that the `len` bytes at `pos`,
    /// which lie on extra device `i`, are in the primary source: else the
    /// device was simply not given.
    fn check_concatenated(
        &self,
        i: usize,
        d: &Device,
        pos: u64,
        len: usize,
        at: Location,
    ) -> Result<()> {
        let end = pos.saturating_add(len as u64);
        let have = self.inner.source_len;
        if end <= have {
            return Ok(());
        }
        let device = u16::try_from(i).unwrap_or(u16::MAX).saturating_add(1);
        let start = self
            .inner
            .bs
            .pos(BlockAddr(d.slot.uniaddr))
            .unwrap_or(u64::MAX);
        if have > start {
            // Something is appended where the device starts: it is there,
            // but cut short (a truncated copy of an image and its archive).
            return Err(Error::corrupt(
                at,
                format!(
                    "extra device {device} (tag {:?}), appended to the image at byte {start}, \
                     is cut short: the file ends at byte {have}, this data needs up to byte {end}",
                    d.slot.tag_str()
                ),
            ));
        }
        Err(Error::MissingDevice {
            at,
            device,
            tag: d.slot.tag_str(),
        })
    }

    /// The source of extra device `i` (0-based) when devices are separate.
    fn device_source(&self, i: usize, at: Location) -> Result<&dyn ReadAt> {
        match self.inner.device_sources.get(i) {
            Some(src) => Ok(&**src),
            None => Err(Error::corrupt(at, "block on a device without a source")),
        }
    }

    /// Loads and validates the inode `nid`.
    pub(crate) fn inode(&self, nid: Nid) -> Result<Inode> {
        Inode::load(self, nid)
    }

    /// The root directory's inode.
    pub(crate) fn root(&self) -> Result<Inode> {
        let root = self.inode(self.root_nid())?;
        if !root.is_dir() {
            return Err(Error::corrupt(
                Location::nid(root.nid.0),
                "the root inode is not a directory",
            ));
        }
        Ok(root)
    }

    /// Opens an inode's data for reading.
    pub(crate) fn open_inode(&self, inode: Inode) -> Result<InodeFile> {
        InodeFile::open(self, inode)
    }

    /// Statistics of the decompressed-pcluster cache.
    pub fn cache_stats(&self) -> crate::cache::CacheStats {
        self.inner.cache.stats()
    }
}

pub(crate) fn read_exact(src: &dyn ReadAt, buf: &mut [u8], offset: u64) -> Result<()> {
    src.read_exact_at(buf, offset).map_err(|source| {
        // A verified source's mismatch is an integrity error, not I/O.
        if source
            .get_ref()
            .is_some_and(|e| e.is::<ferrofs_verity::Error>())
        {
            let kind = source.kind();
            if let Some(Ok(e)) = source
                .into_inner()
                .map(|e| e.downcast::<ferrofs_verity::Error>())
            {
                return match *e {
                    // The source under the tree failed: an I/O error still.
                    ferrofs_verity::Error::Io { source, .. } => Error::Io {
                        offset,
                        len: buf.len(),
                        source,
                    },
                    e => Error::Verity(Arc::new(e)),
                };
            }
            return Error::Io {
                offset,
                len: buf.len(),
                source: kind.into(),
            };
        }
        Error::Io {
            offset,
            len: buf.len(),
            source,
        }
    })
}
