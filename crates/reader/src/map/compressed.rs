//! Compressed files (full and compact lcluster indexes): find the extent
//! holding a byte the way the kernel does (look back to the HEAD, forward to
//! the next HEAD), and where its pcluster lives: a block range, an inline
//! tail after the inode (ztailpacking) or the packed inode (fragments).

use ferrofs_codec::Algorithm;
use ferrofs_format::compress::MAX_PCLUSTER_BYTES;
use ferrofs_format::inode::DataLayout;
use ferrofs_format::superblock::incompat;
use ferrofs_format::zmap::{
    advise, decode_compact, decode_full, CompactLayout, Lcluster, LclusterType, MapHeader,
    FULL_INDEX_OFFSET, FULL_INDEX_SIZE, MAP_HEADER_SIZE,
};

use super::{Extent, ExtentKind, Pcluster, PclusterAt, PclusterFormat};
use crate::addr::MetaAddr;
use crate::error::{Error, Location, OrCorrupt, Result};
use crate::image::Image;
use crate::inode::Inode;

/// Largest decoded extent accepted (the kernel's limit).
pub const MAX_EXTENT_BYTES: u64 = 12 << 20;

/// The kernel's limits on one pcluster (shared by both compressed map
/// forms): at most 1 MiB stored, 12 MiB decoded, and a raw extent no
/// longer than its pcluster.
pub(crate) fn check_pcluster(
    at: Location,
    plen: u64,
    llen: u64,
    format: PclusterFormat,
) -> Result<()> {
    if plen > MAX_PCLUSTER_BYTES {
        return Err(Error::unsupported(at, format!("pcluster of {plen} bytes")));
    }
    if llen > MAX_EXTENT_BYTES {
        return Err(Error::unsupported(at, format!("extent of {llen} bytes")));
    }
    if matches!(format, PclusterFormat::Shifted | PclusterFormat::Interlaced) && llen > plen {
        return Err(Error::corrupt(
            at,
            format!("raw extent of {llen} bytes in a {plen}-byte pcluster"),
        ));
    }
    Ok(())
}

/// Metadata address of a compressed inode's map header: the inode end
/// rounded up to 8 bytes.
pub(crate) fn header_pos(inode: &Inode) -> Result<MetaAddr> {
    let end = inode.inode_end();
    end.offset()
        .checked_add(7)
        .and_then(|e| end.with_offset(e & !7))
        .ok_or_else(|| Error::corrupt(inode.loc(), "map header address overflows"))
}

/// Mapping state of a compressed inode.
#[derive(Clone, Debug)]
pub struct ZMap {
    pub(crate) header: MapHeader,
    pub(crate) full: bool,
    pub(crate) lclusterbits: u8,
    index_base: MetaAddr,
    compact: Option<CompactLayout>,
    total: u64,
    /// Whole file stored in the packed inode at this offset.
    pub(crate) whole_fragment: Option<u64>,
    pub(crate) fragment_off: u64,
    tail_head_lcn: Option<u64>,
    /// Inline tail pcluster (position, size).
    pub(crate) idata: Option<(MetaAddr, u64)>,
    big1: bool,
    big2: bool,
}

#[derive(Clone, Copy)]
struct Loaded {
    lcn: u64,
    e: Lcluster,
    next_pack: MetaAddr,
}

impl ZMap {
    /// The map header (advise flags, algorithms, fragment offset bits).
    pub fn header(&self) -> &MapHeader {
        &self.header
    }
    /// Full (not compact) lcluster indexes.
    pub fn is_full(&self) -> bool {
        self.full
    }
    /// log2 of the logical cluster size.
    pub fn lclusterbits(&self) -> u8 {
        self.lclusterbits
    }
    /// Offset in the packed inode when the whole file is a fragment.
    pub fn whole_fragment(&self) -> Option<u64> {
        self.whole_fragment
    }
    /// Offset of the file's tail fragment in the packed inode.
    pub fn fragment_off(&self) -> u64 {
        self.fragment_off
    }
    /// Inline tail pcluster (metadata position, size), with ztailpacking.
    pub fn idata(&self) -> Option<(MetaAddr, u64)> {
        self.idata
    }

    pub(crate) fn new(image: &Image, inode: &Inode, is_packed: bool) -> Result<Self> {
        let at = inode.loc();
        let hpos = header_pos(inode)?;
        let mut hb = [0u8; MAP_HEADER_SIZE];
        image.read_raw(&mut hb, hpos)?;
        let header = MapHeader::parse(&hb);
        let full = inode.layout == DataLayout::CompressedFull;
        let sb = image.superblock();
        let bits = image.block_size().bits();
        let mut z = ZMap {
            header,
            full,
            lclusterbits: bits,
            index_base: hpos,
            compact: None,
            total: 0,
            whole_fragment: None,
            fragment_off: 0,
            tail_head_lcn: None,
            idata: None,
            big1: false,
            big2: false,
        };
        if let Some(off) = header.whole_file_fragment() {
            if is_packed {
                return Err(Error::corrupt(at, "the packed inode is itself a fragment"));
            }
            z.whole_fragment = Some(off);
            z.fragment_off = off;
            return Ok(z);
        }
        let adv = header.advise;
        if full && adv & advise::EXTENTS != 0 {
            return Err(Error::unsupported(at, "encoded extents (48-bit layout)"));
        }
        let [a1, a2] = header.algorithms();
        if Algorithm::from_id(a1).is_none() || Algorithm::from_id(a2).is_none() {
            return Err(Error::unsupported(
                at,
                format!("compression algorithm type {:#x}", header.algorithm_type),
            ));
        }
        z.lclusterbits = bits
            .checked_add(header.cluster_bits & 15)
            .or_corrupt(at, "lcluster size overflows")?;
        if z.lclusterbits > 30 {
            return Err(Error::corrupt(
                at,
                format!("lcluster size 2^{}", z.lclusterbits),
            ));
        }
        z.big1 = adv & advise::BIG_PCLUSTER_1 != 0;
        z.big2 = adv & advise::BIG_PCLUSTER_2 != 0;
        if (z.big1 || z.big2) && !sb.has_incompat(incompat::BIG_PCLUSTER) {
            return Err(Error::corrupt(
                at,
                "big pcluster without the superblock feature",
            ));
        }
        if !full && z.big1 != z.big2 {
            return Err(Error::corrupt(
                at,
                "compact big-pcluster bits 1 and 2 differ",
            ));
        }
        if full {
            z.total = inode.size.div_ceil(1u64 << z.lclusterbits);
        } else {
            if z.lclusterbits > 14 {
                return Err(Error::unsupported(
                    at,
                    format!("compact lcluster 2^{}", z.lclusterbits),
                ));
            }
            z.total = image.block_size().blocks_for(inode.size);
            // The layout counts in offsets of the header's space.
            let ebase = hpos
                .checked_add(MAP_HEADER_SIZE as u64)
                .or_corrupt(at, "map header address overflows")?;
            z.compact = Some(CompactLayout::new(
                ebase.offset(),
                z.total,
                adv & advise::COMPACTED_2B != 0,
            ));
        }
        let ztail = adv & advise::INLINE_PCLUSTER != 0;
        let frag = adv & advise::FRAGMENT_PCLUSTER != 0;
        if frag && is_packed {
            return Err(Error::corrupt(at, "the packed inode has a fragment tail"));
        }
        if frag {
            z.fragment_off = u64::from(header.fragment_off);
        }
        if let Some(last) = inode.size.checked_sub(1).filter(|_| ztail || frag) {
            // Find the extent holding the last byte ("FINDTAIL").
            let first = z.load(image, inode, last >> z.lclusterbits)?;
            let (head, _) = z.find_head(image, inode, first, last)?;
            z.tail_head_lcn = Some(head.lcn);
            if ztail {
                let size = u64::from(header.idata_size);
                let bs = image.block_size();
                let pos = first.next_pack;
                let tail_end = bs.offset_in_block(pos.offset()).checked_add(size);
                if size == 0 || tail_end.is_none_or(|e| e > bs.bytes()) {
                    return Err(Error::corrupt(
                        at.with_offset(pos.bits()),
                        "inline pcluster is empty or crosses a block boundary",
                    ));
                }
                z.idata = Some((pos, size));
            } else if full {
                z.fragment_off |= head.e.pblk << 32;
            }
        }
        Ok(z)
    }

    fn load(&self, image: &Image, inode: &Inode, lcn: u64) -> Result<Loaded> {
        let at = inode.loc();
        if lcn >= self.total {
            return Err(Error::corrupt(at, format!("lcluster {lcn} past the index")));
        }
        let big = self.big1 || self.big2;
        match &self.compact {
            None => {
                let pos = lcn
                    .checked_mul(FULL_INDEX_SIZE as u64)
                    .and_then(|off| off.checked_add(FULL_INDEX_OFFSET))
                    .and_then(|off| self.index_base.checked_add(off))
                    .or_corrupt(at, "lcluster index address overflows")?;
                let mut b = [0u8; FULL_INDEX_SIZE];
                image.read_raw(&mut b, pos)?;
                let e = decode_full(&b, self.lclusterbits, big)
                    .map_err(|err| Error::format(at.with_offset(pos.bits()), err))?;
                Ok(Loaded {
                    lcn,
                    e,
                    next_pack: pos
                        .checked_add(FULL_INDEX_SIZE as u64)
                        .or_corrupt(at, "lcluster index address overflows")?,
                })
            }
            Some(layout) => {
                let slot = layout
                    .locate(lcn)
                    .ok_or_else(|| Error::corrupt(at, format!("lcluster {lcn} past the index")))?;
                let mut b = [0u8; 32];
                let pack = b
                    .get_mut(..slot.pack_size)
                    .or_corrupt(at, "compact pack size")?;
                let start = self
                    .index_base
                    .with_offset(slot.pack_start)
                    .or_corrupt(at, "compact pack address overflows")?;
                image.read_raw(pack, start)?;
                let e = decode_compact(pack, slot.index, self.lclusterbits, self.big1)
                    .map_err(|err| Error::format(at.with_offset(start.bits()), err))?;
                Ok(Loaded {
                    lcn,
                    e,
                    next_pack: slot
                        .pack_end()
                        .and_then(|e| self.index_base.with_offset(e))
                        .ok_or_else(|| Error::corrupt(at, "compact pack past its space"))?,
                })
            }
        }
    }

    /// From the entry of the lcluster holding byte `la`, finds the HEAD of
    /// the extent holding it. Returns the head and, when it is already
    /// known, the exact end of the extent.
    fn find_head(
        &self,
        image: &Image,
        inode: &Inode,
        first: Loaded,
        la: u64,
    ) -> Result<(Loaded, Option<u64>)> {
        let lb = self.lclusterbits;
        let endoff = la & !(u64::MAX << lb);
        let (dist, end) = match first.e.ty {
            LclusterType::NonHead => (first.e.delta[0], None),
            _ if endoff >= u64::from(first.e.clusterofs) => return Ok((first, None)),
            _ => {
                if first.lcn == 0 {
                    return Err(Error::corrupt(inode.loc(), "invalid logical cluster 0"));
                }
                (1, Some((first.lcn << lb) | u64::from(first.e.clusterofs)))
            }
        };
        let mut lcn = first.lcn;
        let mut dist = u64::from(dist);
        // A loop bound: saturating would only loosen it (it cannot here,
        // MAX_EXTENT_BYTES >> lb is small).
        let limit = (MAX_EXTENT_BYTES >> lb).saturating_add(2);
        loop {
            // lcn only decreases from first.lcn.
            if first.lcn.checked_sub(lcn).is_none_or(|back| back > limit) {
                return Err(Error::corrupt(
                    inode.loc(),
                    "extent longer than the format allows",
                ));
            }
            lcn = match lcn.checked_sub(dist) {
                Some(back) if dist != 0 => back,
                _ => {
                    return Err(Error::corrupt(
                        inode.loc(),
                        format!("bogus lookback distance {dist} at lcluster {lcn}"),
                    ))
                }
            };
            let l = self.load(image, inode, lcn)?;
            if l.e.ty == LclusterType::NonHead {
                dist = u64::from(l.e.delta[0]);
                continue;
            }
            return Ok((l, end));
        }
    }

    /// Walks forward from the head to the next HEAD (or the end of file).
    fn extent_end(&self, image: &Image, inode: &Inode, head_lcn: u64) -> Result<u64> {
        let lb = self.lclusterbits;
        let mut lcn = head_lcn;
        // A loop bound: saturating would only loosen it (it cannot here,
        // MAX_EXTENT_BYTES >> lb is small).
        let limit = (MAX_EXTENT_BYTES >> lb).saturating_add(2);
        loop {
            // lcn only grows from head_lcn.
            if lcn.checked_sub(head_lcn).is_none_or(|ahead| ahead > limit) {
                return Err(Error::unsupported(inode.loc(), "extent longer than 12 MiB"));
            }
            if lcn
                .checked_shl(u32::from(lb))
                .is_none_or(|p| p >= inode.size)
            {
                return Ok(inode.size);
            }
            let l = self.load(image, inode, lcn)?;
            let step = if l.e.ty == LclusterType::NonHead {
                u64::from(l.e.delta[1]).max(1)
            } else if lcn != head_lcn {
                return Ok(((lcn << lb) | u64::from(l.e.clusterofs)).min(inode.size));
            } else {
                1
            };
            lcn = lcn.saturating_add(step);
        }
    }

    /// Size in bytes of the pcluster whose HEAD is at `head`; `None` for a
    /// hole pcluster marked by a CBLKCNT of 0 blocks (Linux 7.2).
    fn pcluster_len(&self, image: &Image, inode: &Inode, head: &Loaded) -> Result<Option<u64>> {
        let bs = image.block_size().bytes();
        let big = match head.e.ty {
            LclusterType::Head1 => self.big1,
            _ => self.big2,
        };
        let next = head
            .lcn
            .checked_add(1)
            .or_corrupt(inode.loc(), "lcluster number overflows")?;
        if !big || (next << self.lclusterbits) >= inode.size {
            return Ok(Some(bs));
        }
        let l = self.load(image, inode, next)?;
        let blks = match l.e.ty {
            LclusterType::NonHead => {
                if l.e.delta[0] != 1 {
                    return Err(Error::corrupt(
                        inode.loc(),
                        format!("bogus CBLKCNT at lcluster {next}"),
                    ));
                }
                if !l.e.cblkcnt {
                    return Err(Error::corrupt(
                        inode.loc(),
                        format!("no CBLKCNT at lcluster {next}"),
                    ));
                }
                if l.e.compressed_blks == 0 {
                    return Ok(None);
                }
                u64::from(l.e.compressed_blks)
            }
            _ => 1,
        };
        blks.checked_mul(bs)
            .or_corrupt(inode.loc(), "pcluster size overflows")
            .map(Some)
    }

    pub(crate) fn map(&self, image: &Image, inode: &Inode, la: u64) -> Result<Extent> {
        let at: Location = inode.loc().with_offset(la);
        if let Some(off) = self.whole_fragment {
            return Ok(Extent {
                logical: 0,
                len: inode.size,
                kind: ExtentKind::Fragment { offset: off },
            });
        }
        let frag = self.header.has(advise::FRAGMENT_PCLUSTER);
        if frag && self.tail_head_lcn == Some(0) {
            return Ok(Extent {
                logical: 0,
                len: inode.size,
                kind: ExtentKind::Fragment {
                    offset: self.fragment_off,
                },
            });
        }
        let first = self.load(image, inode, la >> self.lclusterbits)?;
        let (head, end) = self.find_head(image, inode, first, la)?;
        let m_la = (head.lcn << self.lclusterbits) | u64::from(head.e.clusterofs);
        let end = match end {
            Some(e) => e,
            None => self.extent_end(image, inode, head.lcn)?,
        };
        if end <= m_la || la < m_la || la >= end {
            return Err(Error::corrupt(at, format!("bad extent [{m_la}, {end})")));
        }
        let llen = end.checked_sub(m_la).or_corrupt(at, "extent end")?;
        let tail = self.tail_head_lcn == Some(head.lcn);
        if head.e.hole {
            // The kernel would read a tail-packed or fragment tail as data
            // whatever the bit says: an image that sets it there was not
            // made by a writer that meant a hole.
            if tail && (frag || self.idata.is_some()) {
                return Err(Error::corrupt(
                    at,
                    "a HOLE lcluster heads the inline or fragment tail",
                ));
            }
            // Linux 7.2 keeps the hole's block count while it looks back
            // from a HOLE lcluster to the extent before it: a hole that does
            // not start its lcluster makes the kernel read that extent as
            // zeros too. No reading of such an image is right.
            if head.e.clusterofs != 0 {
                return Err(Error::corrupt(
                    at,
                    "a HOLE lcluster does not start at its lcluster's start",
                ));
            }
            return Ok(Extent {
                logical: m_la,
                len: llen,
                kind: ExtentKind::Hole,
            });
        }
        if frag && tail {
            return Ok(Extent {
                logical: m_la,
                len: llen,
                kind: ExtentKind::Fragment {
                    offset: self.fragment_off,
                },
            });
        }
        let format = match head.e.ty {
            LclusterType::Plain => {
                if self.header.has(advise::INTERLACED_PCLUSTER) {
                    PclusterFormat::Interlaced
                } else {
                    PclusterFormat::Shifted
                }
            }
            ty => {
                let [a1, a2] = self.header.algorithms();
                let id = if ty == LclusterType::Head2 { a2 } else { a1 };
                if image.compression_config().available & (1 << id) == 0 {
                    return Err(Error::corrupt(
                        at,
                        format!("algorithm {id} is not enabled in the superblock"),
                    ));
                }
                // from_id succeeded in new() for both nibbles.
                PclusterFormat::Codec(
                    Algorithm::from_id(id)
                        .ok_or_else(|| Error::unsupported(at, format!("algorithm {id}")))?,
                )
            }
        };
        let (pos, plen) = match self.idata {
            Some((pos, size)) if self.tail_head_lcn == Some(head.lcn) => {
                (PclusterAt::Inline(pos), size)
            }
            _ => {
                let Some(plen) = self.pcluster_len(image, inode, &head)? else {
                    return Ok(Extent {
                        logical: m_la,
                        len: llen,
                        kind: ExtentKind::Hole,
                    });
                };
                let pos = head
                    .e
                    .pblk
                    .checked_mul(image.block_size().bytes())
                    .ok_or_else(|| Error::corrupt(at, "pcluster address overflows"))?;
                (PclusterAt::Blocks(pos), plen)
            }
        };
        check_pcluster(at, plen, llen, format)?;
        Ok(Extent {
            logical: m_la,
            len: llen,
            kind: ExtentKind::Pcluster(Pcluster {
                at: pos,
                len: plen,
                format,
                partial: head.e.partial_ref,
            }),
        })
    }

    /// Number of lclusters of the file.
    pub fn lclusters(&self) -> u64 {
        self.total
    }
}
