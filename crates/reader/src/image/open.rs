//! Opening an image: reading and checking everything the kernel checks at
//! mount (superblock, checksum, length, compression configuration, device
//! table), then the metabox, the packed inode and the long xattr prefixes.

use std::io;
use std::sync::Arc;

use ferrofs_format::compress::{CompressionConfig, ALG_COUNT};
use ferrofs_format::device::{parse_blob_trailer, DeviceSlot, BLOB_TRAILER_LEN, DEVICE_SLOT_SIZE};
use ferrofs_format::superblock::{
    checksum_len, compat, compute_checksum, incompat, Superblock, SB_BASE_SIZE, SB_EXT_SIZE,
};
use ferrofs_format::{round_up, BlockSize, FormatError, Nid, SUPERBLOCK_OFFSET};

use super::{read_exact, Device, Image, Inner, OpenOptions};
use crate::cache::{BlockCache, Flights, PclusterCache};
use crate::decompress::DecoderPool;
use crate::error::{Error, Location, OrCorrupt, Result};
use crate::file::FileData;
use crate::source::ReadAt;

/// Metadata blocks kept in memory (256 x 4 KiB = 1 MiB at most).
const META_CACHE_BLOCKS: usize = 256;

/// Largest number of extra devices accepted (the table lives in block 0..).
const MAX_DEVICES: u16 = 4096;

impl Image {
    /// Opens an image from a positional source with default options.
    pub fn open(source: impl ReadAt + 'static) -> Result<Self> {
        Self::open_with(Box::new(source), OpenOptions::default())
    }

    /// Opens the image file at `path` (read with pread). Every error
    /// opening it names the path.
    pub fn open_path(path: impl AsRef<std::path::Path>) -> Result<Self> {
        let path = path.as_ref();
        let f = open_file(path)?;
        Self::open(f).map_err(|e| match e {
            Error::NotAnImage { why, .. } => Error::NotAnImage {
                path: Some(path.to_owned()),
                why,
            },
            Error::Truncated { len, expected, .. } => Error::Truncated {
                path: Some(path.to_owned()),
                len,
                expected,
            },
            e => e,
        })
    }

    /// Opens an image, validating everything the kernel checks at mount.
    pub fn open_with(source: Box<dyn ReadAt>, mut opts: OpenOptions) -> Result<Self> {
        let source: Box<dyn ReadAt> = match opts.verity.take() {
            Some(v) => Box::new(crate::verity::Verity::open(source, v)?),
            None => source,
        };
        let source_len = source.len().map_err(|source| Error::Io {
            offset: 0,
            len: 0,
            source,
        })?;
        let sb_end = SUPERBLOCK_OFFSET.saturating_add(SB_BASE_SIZE as u64);
        if source_len < sb_end {
            return Err(Error::NotAnImage {
                path: None,
                why: format!(
                    "{source_len} bytes, too few for a superblock at byte {SUPERBLOCK_OFFSET}"
                ),
            });
        }
        let mut raw = [0u8; SB_BASE_SIZE];
        read_exact(&*source, &mut raw, SUPERBLOCK_OFFSET)?;
        let at = Location::at(SUPERBLOCK_OFFSET);
        let mut sb = Superblock::parse(&raw).map_err(|e| match e {
            FormatError::BadMagic(_) => Error::NotAnImage {
                path: None,
                why: format!("no superblock magic at byte {SUPERBLOCK_OFFSET}"),
            },
            e => Error::format(at, e),
        })?;
        if sb.sb_extslots >= 1 {
            let mut ext = [0u8; SB_EXT_SIZE - SB_BASE_SIZE];
            read_exact(&*source, &mut ext, SB_EXT_OFFSET)?;
            sb.parse_ext(&ext);
        }
        // The checksum comes first, as in the kernel: a flipped feature bit
        // is damage, while a feature bit under a valid checksum is one this
        // reader may not know.
        let bs = BlockSize::from_bits(sb.blkszbits).map_err(|e| Error::format(at, e))?;
        if opts.verify_checksum && sb.has_compat(compat::SB_CHKSUM) {
            // Too short to checksum: say it is truncated, if it is.
            if source_len < SUPERBLOCK_OFFSET.saturating_add(checksum_len(bs) as u64) {
                check_length(&sb, bs, source_len)?;
            }
            let mut region = vec![0u8; checksum_len(bs)];
            read_exact(&*source, &mut region, SUPERBLOCK_OFFSET)?;
            let computed = compute_checksum(&region);
            if computed != sb.checksum {
                return Err(Error::format(
                    at,
                    FormatError::BadChecksum {
                        stored: sb.checksum,
                        computed,
                    },
                ));
            }
        }
        let bs = sb.validate().map_err(|e| match e {
            // A feature this reader does not know is not damage: refuse it
            // as unsupported, naming the bits.
            FormatError::UnknownIncompat { .. } => Error::unsupported(at, e.to_string()),
            e => Error::format(at, e),
        })?;

        check_length(&sb, bs, source_len)?;
        let cfg = read_compression_config(&*source, &sb)?;
        let devices = read_device_table(&*source, &sb)?;
        if !opts.devices.is_empty() && opts.devices.len() != devices.len() {
            return Err(Error::unsupported(
                Location::default(),
                format!(
                    "the image has {} extra devices but {} were given",
                    devices.len(),
                    opts.devices.len()
                ),
            ));
        }
        check_devices(&devices, &opts.devices, bs.bytes())?;
        let slots: Vec<_> = devices.iter().map(|d| d.slot.clone()).collect();
        let mapped_bytes = ferrofs_format::device::mapped_end(sb.total_blocks(), &slots)
            .and_then(|b| b.checked_mul(bs.bytes()));
        let inner = Inner {
            source,
            device_sources: opts.devices,
            sb,
            bs,
            cfg,
            devices,
            prefixes: Vec::new(),
            packed: None,
            metabox: None,
            cache: PclusterCache::new(opts.cache_bytes),
            whole_extents: opts.whole_extents,
            cache_whole_reads: opts.cache_whole_reads,
            flights: Flights::default(),
            blocks: BlockCache::new(META_CACHE_BLOCKS),
            decoders: DecoderPool::new(cfg),
            source_len,
            mapped_bytes,
        };
        let mut image = Image {
            inner: Arc::new(inner),
        };

        // The metabox, the packed inode (fragments) and the long xattr
        // prefixes need a working image to be read. None keeps a handle on
        // the image, so the Arc is still unique and can be completed in
        // place. The metabox inode and the packed inode both live on the
        // primary device (the superblock checks refuse a metabox nid), so
        // neither depends on the other to be found.
        if image.inner.sb.has_incompat(incompat::METABOX) {
            let inode = image.inode(Nid(image.inner.sb.metabox_nid))?;
            if !inode.is_reg() {
                return Err(Error::corrupt(
                    Location::nid(inode.nid.0),
                    "the metabox inode is not a regular file",
                ));
            }
            let data = FileData::new(&image, inode, false)?;
            unique(&mut image)?.metabox = Some(Arc::new(data));
        }
        if image.inner.sb.has_incompat(incompat::FRAGMENTS) && image.inner.sb.packed_nid != 0 {
            let inode = image.inode(Nid(image.inner.sb.packed_nid))?;
            let data = FileData::new(&image, inode, true)?;
            unique(&mut image)?.packed = Some(Arc::new(data));
        }
        let prefixes = crate::xattr::read_prefix_table(&image)?;
        let sb = &image.inner.sb;
        if sb.has_compat(compat::ISHARE_XATTRS)
            && usize::from(sb.ishare_xattr_prefix_id) >= prefixes.len()
        {
            return Err(Error::corrupt(
                Location::at(SUPERBLOCK_OFFSET + 0x69),
                format!(
                    "inode fingerprint prefix {} is not in the {}-entry prefix table",
                    sb.ishare_xattr_prefix_id,
                    prefixes.len()
                ),
            ));
        }
        unique(&mut image)?.prefixes = prefixes;
        Ok(image)
    }
}

fn unique(image: &mut Image) -> Result<&mut Inner> {
    Arc::get_mut(&mut image.inner)
        .ok_or_else(|| Error::corrupt(Location::default(), "internal: image shared while opening"))
}

/// Where the superblock's extension slots start.
const SB_EXT_OFFSET: u64 = SUPERBLOCK_OFFSET + SB_BASE_SIZE as u64;

/// Refuses a partial copy or download: an image that ends before its last
/// block starts. (A last block cut short is tolerated, as some writers
/// leave it so; bytes after the image are allowed: devices or a tar may
/// follow.)
fn check_length(sb: &Superblock, bs: BlockSize, source_len: u64) -> Result<()> {
    let expected = sb.total_blocks().saturating_mul(bs.bytes());
    if sb.total_blocks() > 0 && source_len <= expected.saturating_sub(bs.bytes()) {
        return Err(Error::Truncated {
            path: None,
            len: source_len,
            expected,
        });
    }
    Ok(())
}

/// Opens an image file for reading, refusing a directory by name.
fn open_file(path: &std::path::Path) -> Result<std::fs::File> {
    let err = |source| Error::Open {
        path: path.to_owned(),
        source,
    };
    let f = std::fs::File::open(path).map_err(err)?;
    match f.metadata() {
        Ok(m) if m.is_dir() => Err(err(io::Error::from(io::ErrorKind::IsADirectory))),
        _ => Ok(f),
    }
}

fn read_compression_config(src: &dyn ReadAt, sb: &Superblock) -> Result<CompressionConfig> {
    if !sb.has_incompat(incompat::COMPR_CFGS) {
        return Ok(CompressionConfig::legacy(sb.u1));
    }
    let at = Location::at(SUPERBLOCK_OFFSET + 0x54);
    CompressionConfig::check_available(sb.u1).map_err(|e| Error::format(at, e))?;
    let mut cfg = CompressionConfig {
        available: sb.u1,
        ..CompressionConfig::default()
    };
    let mut pos = SUPERBLOCK_OFFSET
        .checked_add(sb.sb_size() as u64)
        .or_corrupt(at, "superblock size")?;
    for alg in 0..ALG_COUNT {
        if sb.u1 & (1 << alg) == 0 {
            continue;
        }
        pos = round_up(pos, 4).or_corrupt(Location::at(pos), "compression record overflows")?;
        let body = pos
            .checked_add(2)
            .or_corrupt(Location::at(pos), "compression record overflows")?;
        let mut len = [0u8; 2];
        read_exact(src, &mut len, pos)?;
        let len = match u16::from_le_bytes(len) {
            0 => 65536usize,
            n => usize::from(n),
        };
        let mut payload = vec![0u8; len];
        read_exact(src, &mut payload, body)?;
        cfg.apply_record(alg, &payload)
            .map_err(|e| Error::format(Location::at(pos), e))?;
        if alg == ferrofs_format::compress::ALG_LZ4 {
            check_lz4_pclusterblks(cfg.lz4_max_pclusterblks, sb, Location::at(pos))?;
        }
        pos = body
            .checked_add(len as u64)
            .or_corrupt(Location::at(pos), "compression record overflows")?;
    }
    Ok(cfg)
}

/// Refuses extra devices that are not the ones the image was built with:
/// shorter than the blocks their slot maps, or, for a ferrofs `--blobdev`
/// slot, without the trailer that carries the slot's blob id (see
/// `ferrofs_format::device::blob_tag`). Devices of other tags are taken
/// as they are (the format has nothing more to check them by).
fn check_devices(devices: &[Device], sources: &[Box<dyn ReadAt>], bs: u64) -> Result<()> {
    for (k, (dev, src)) in devices.iter().zip(sources).enumerate() {
        let wrong = |why: String| Error::WrongDevice {
            device: k.saturating_add(1),
            why,
        };
        let mapped =
            dev.slot.blocks.checked_mul(bs).ok_or_else(|| {
                Error::corrupt(Location::default(), "device block count overflows")
            })?;
        let len = src.len().map_err(|e| wrong(format!("its length: {e}")))?;
        if len < mapped {
            return Err(wrong(format!(
                "it has {len} bytes, the image maps {mapped} on it"
            )));
        }
        let Some(id) = dev.slot.blob_id() else {
            continue;
        };
        let mut rec = [0u8; BLOB_TRAILER_LEN];
        let found = match src.read_exact_at(&mut rec, mapped) {
            Ok(()) => parse_blob_trailer(&rec),
            Err(_) => None,
        };
        match found {
            Some((i, b)) if i == id && b == dev.slot.blocks => {}
            Some((i, _)) => {
                return Err(wrong(format!(
                    "it is the blob of another build (id {i:032x}, the image wants {id:032x}); \
                     was its build interrupted between writing the blob and the image?"
                )))
            }
            None => {
                return Err(wrong(format!(
                    "no blob trailer where the image expects one, after {} blocks: it is the \
                     blob of another build, or not a ferrofs blob (the image wants blob \
                     {id:032x})",
                    dev.slot.blocks
                )))
            }
        }
    }
    Ok(())
}

/// The kernel refuses to mount an image whose LZ4 record allows
/// pclusters larger than 1 MiB (`max_pclusterblks` blocks of the image's
/// block size; 0 means 1).
fn check_lz4_pclusterblks(blocks: u16, sb: &Superblock, at: Location) -> Result<()> {
    let limit = ferrofs_format::compress::MAX_PCLUSTER_BYTES >> sb.blkszbits.min(63);
    if u64::from(blocks) > limit {
        return Err(Error::corrupt(
            at,
            format!(
                "lz4 max_pclusterblks {blocks} allows pclusters past 1 MiB \
                 (at most {limit} blocks of {} bytes; Linux refuses to mount it)",
                1u64 << sb.blkszbits.min(63)
            ),
        ));
    }
    Ok(())
}

fn read_device_table(src: &dyn ReadAt, sb: &Superblock) -> Result<Vec<Device>> {
    if !sb.has_incompat(incompat::DEVICE_TABLE) || sb.extra_devices == 0 {
        return Ok(Vec::new());
    }
    if sb.extra_devices > MAX_DEVICES {
        return Err(Error::unsupported(
            Location::at(SUPERBLOCK_OFFSET + 0x56),
            format!("{} extra devices", sb.extra_devices),
        ));
    }
    let bit48 = sb.has_incompat(incompat::BIT48);
    let mut out = Vec::with_capacity(usize::from(sb.extra_devices));
    let at = Location::at(SUPERBLOCK_OFFSET + 0x58);
    let mut pos = u64::from(sb.devt_slotoff)
        .checked_mul(DEVICE_SLOT_SIZE as u64)
        .or_corrupt(at, "device table offset")?;
    for _ in 0..sb.extra_devices {
        let mut b = [0u8; DEVICE_SLOT_SIZE];
        read_exact(src, &mut b, pos)?;
        out.push(Device {
            slot: DeviceSlot::parse(&b, bit48),
        });
        pos = pos
            .checked_add(DEVICE_SLOT_SIZE as u64)
            .or_corrupt(at, "device table overflows")?;
    }
    Ok(out)
}
