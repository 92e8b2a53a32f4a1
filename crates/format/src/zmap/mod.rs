//! Compressed-file indexes: the 8-byte map header, full (8-byte) lcluster
//! entries and compact 4B/2B packs, decoded into one [`Lcluster`] record.

use crate::le::{get_u32, u16_at, u32_at, u64_at, u8_at};
use crate::FormatError;

pub const MAP_HEADER_SIZE: usize = 8;
pub const FULL_INDEX_SIZE: usize = 8;
/// Full indexes start this far after the (8-aligned) map header.
pub const FULL_INDEX_OFFSET: u64 = 16;
/// Largest lcluster size exponent the compact format allows.
pub const MAX_COMPACT_LCLUSTERBITS: u8 = 14;

/// `h_advise` bits.
pub mod advise {
    pub const COMPACTED_2B: u16 = 0x01;
    pub const EXTENTS: u16 = 0x01;
    pub const BIG_PCLUSTER_1: u16 = 0x02;
    pub const BIG_PCLUSTER_2: u16 = 0x04;
    pub const INLINE_PCLUSTER: u16 = 0x08;
    pub const INTERLACED_PCLUSTER: u16 = 0x10;
    pub const FRAGMENT_PCLUSTER: u16 = 0x20;
}

/// Bit of `di_advise` marking a partially referenced pcluster.
pub const PARTIAL_REF: u16 = 0x8000;
/// Bit of a NONHEAD's `delta[0]` marking the compressed-block-count entry.
pub const D0_CBLKCNT: u16 = 0x800;
/// Bit 7 of `h_clusterbits`: the whole file is one fragment.
pub const FRAGMENT_INODE_BIT: u8 = 7;

/// The 8-byte header in front of a compressed inode's indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapHeader {
    pub fragment_off: u32,
    pub idata_size: u16,
    pub advise: u16,
    pub algorithm_type: u8,
    pub cluster_bits: u8,
    raw: u64,
}

impl MapHeader {
    pub fn parse(b: &[u8; MAP_HEADER_SIZE]) -> Self {
        Self {
            fragment_off: u32_at(b, 0),
            idata_size: u16_at(b, 2),
            advise: u16_at(b, 4),
            algorithm_type: u8_at(b, 6),
            cluster_bits: u8_at(b, 7),
            raw: u64_at(b, 0),
        }
    }
    /// With bit 7 of `h_clusterbits`, the whole file lives in the packed
    /// inode at the returned offset.
    pub fn whole_file_fragment(&self) -> Option<u64> {
        (self.cluster_bits >> FRAGMENT_INODE_BIT != 0).then_some(self.raw & !(1u64 << 63))
    }
    /// The eight header bytes as stored.
    pub fn raw_bytes(&self) -> [u8; MAP_HEADER_SIZE] {
        self.raw.to_le_bytes()
    }
    pub fn has(&self, bit: u16) -> bool {
        self.advise & bit != 0
    }
    /// Algorithm of HEAD1 (index 0) and HEAD2 (index 1) lclusters.
    pub fn algorithms(&self) -> [u8; 2] {
        [self.algorithm_type & 15, self.algorithm_type >> 4]
    }
}

/// Kind of one logical cluster's index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LclusterType {
    /// An extent stored uncompressed starts here.
    Plain,
    /// An extent compressed with the HEAD1 algorithm starts here.
    Head1,
    /// No extent starts here.
    NonHead,
    /// An extent compressed with the HEAD2 algorithm starts here.
    Head2,
}

impl LclusterType {
    fn from_bits(v: u32) -> Self {
        match v & 3 {
            0 => Self::Plain,
            1 => Self::Head1,
            2 => Self::NonHead,
            _ => Self::Head2,
        }
    }
    pub fn is_head(self) -> bool {
        self != Self::NonHead
    }
}

/// One decoded lcluster index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lcluster {
    pub ty: LclusterType,
    /// HEAD/PLAIN: where the extent starts inside the lcluster.
    pub clusterofs: u32,
    /// NONHEAD: distance back to the head, distance forward to the next head.
    pub delta: [u32; 2],
    /// HEAD/PLAIN: block address of the pcluster.
    pub pblk: u64,
    /// HEAD/PLAIN (full indexes): the extent uses only a prefix of the pcluster.
    pub partial_ref: bool,
    /// NONHEAD with CBLKCNT: pcluster size in blocks of the preceding head.
    pub compressed_blks: u32,
}

impl Lcluster {
    /// An entry of type `ty` with every other field zero.
    fn of_type(ty: LclusterType) -> Self {
        Self {
            ty,
            clusterofs: 0,
            delta: [0, 0],
            pblk: 0,
            partial_ref: false,
            compressed_blks: 0,
        }
    }
}

/// Decodes a full (legacy) 8-byte index entry.
pub fn decode_full(
    b: &[u8; FULL_INDEX_SIZE],
    lclusterbits: u8,
    big_pcluster: bool,
) -> Result<Lcluster, FormatError> {
    let di_advise = u16_at(b, 0);
    let ty = LclusterType::from_bits(u32::from(di_advise));
    let mut l = Lcluster::of_type(ty);
    if ty == LclusterType::NonHead {
        l.clusterofs = 1u32 << lclusterbits;
        let mut d0 = u16_at(b, 4);
        if d0 & D0_CBLKCNT != 0 {
            if !big_pcluster {
                return Err(FormatError::invalid("CBLKCNT without big pcluster", d0));
            }
            l.compressed_blks = u32::from(d0 & !D0_CBLKCNT);
            d0 = 1;
        }
        l.delta = [u32::from(d0), u32::from(u16_at(b, 6))];
    } else {
        l.partial_ref = di_advise & PARTIAL_REF != 0;
        l.clusterofs = u32::from(u16_at(b, 2));
        if l.clusterofs >= 1u32 << lclusterbits {
            return Err(FormatError::invalid("clusterofs", l.clusterofs));
        }
        l.pblk = u64::from(u32_at(b, 4));
    }
    Ok(l)
}

/// Where the compact entries of an inode are and how they are grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactLayout {
    ebase: u64,
    total: u64,
    init4: u64,
    n2b: u64,
}

/// Position of one compact entry: its pack and its index inside the pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactSlot {
    pub pack_start: u64,
    pub pack_size: usize,
    pub index: usize,
}

impl CompactSlot {
    /// End of the pack (the kernel's "nextpackoff").
    pub fn pack_end(&self) -> u64 {
        self.pack_start + self.pack_size as u64
    }
}

impl CompactLayout {
    /// `ebase` is the absolute position right after the map header, `total`
    /// the number of lclusters.
    pub fn new(ebase: u64, total: u64, compacted_2b: bool) -> Self {
        let init4 = ((32 - ebase % 32) / 4) & 7;
        let n2b = if compacted_2b && init4 < total {
            (total - init4) / 16 * 16
        } else {
            0
        };
        Self {
            ebase,
            total,
            init4,
            n2b,
        }
    }

    /// Locates the entry of lcluster `lcn`, `None` if it is past the end.
    pub fn locate(&self, lcn: u64) -> Option<CompactSlot> {
        if lcn >= self.total {
            return None;
        }
        let (pos, amortized) = if lcn < self.init4 {
            (self.ebase + 4 * lcn, 4)
        } else if lcn - self.init4 < self.n2b {
            (self.ebase + 4 * self.init4 + 2 * (lcn - self.init4), 2)
        } else {
            (
                self.ebase + 4 * self.init4 + 2 * self.n2b + 4 * (lcn - self.init4 - self.n2b),
                4,
            )
        };
        let pack_size: u64 = if amortized == 4 { 8 } else { 32 };
        let pack_start = pos - pos % pack_size;
        Some(CompactSlot {
            pack_start,
            pack_size: pack_size as usize,
            index: ((pos - pack_start) / amortized) as usize,
        })
    }

    /// End of the whole index area.
    pub fn end(&self) -> u64 {
        let rest = self.total.saturating_sub(self.init4 + self.n2b);
        let init = self.init4.min(self.total);
        round8(self.ebase + 4 * init + 2 * self.n2b + 4 * rest)
    }
}

fn round8(v: u64) -> u64 {
    (v + 7) & !7
}

/// One field of a compact pack: (lo, type) of entry `i`.
fn field(pack: &[u8], lobits: u32, encodebits: u32, i: usize) -> (u32, LclusterType) {
    let bitpos = encodebits as usize * i;
    let v = get_u32(pack, bitpos / 8).unwrap_or(0) >> (bitpos % 8);
    let lo = v & ((1u32 << lobits) - 1);
    (lo, LclusterType::from_bits(v >> lobits))
}

/// Decodes entry `index` of a compact pack (8 bytes for 4B, 32 for 2B).
pub fn decode_compact(
    pack: &[u8],
    index: usize,
    lclusterbits: u8,
    big_pcluster: bool,
) -> Result<Lcluster, FormatError> {
    let (vcnt, pack_size) = match pack.len() {
        8 if lclusterbits <= 14 => (2usize, 8usize),
        32 if lclusterbits <= 12 => (16, 32),
        _ => return Err(FormatError::invalid("compact lclusterbits", lclusterbits)),
    };
    if index >= vcnt {
        return Err(FormatError::invalid("compact entry index", index as u64));
    }
    let lobits = u32::from(lclusterbits).max(12);
    let encodebits = ((pack_size - 4) * 8 / vcnt) as u32;
    let (lo, ty) = field(pack, lobits, encodebits, index);
    let mut l = Lcluster::of_type(ty);
    let cblkcnt = u32::from(D0_CBLKCNT);
    if ty == LclusterType::NonHead {
        l.clusterofs = 1u32 << lclusterbits;
        l.delta[1] = lookahead_distance(pack, lobits, encodebits, vcnt, index);
        if lo & cblkcnt != 0 {
            if !big_pcluster {
                return Err(FormatError::invalid("CBLKCNT without big pcluster", lo));
            }
            l.compressed_blks = lo & !cblkcnt;
            l.delta[0] = 1;
        } else if index + 1 != vcnt {
            l.delta[0] = lo;
        } else {
            // The last entry keeps delta[1]; delta[0] comes from its neighbour.
            let (plo, pty) = field(pack, lobits, encodebits, index - 1);
            let prev = if pty != LclusterType::NonHead {
                0
            } else if plo & cblkcnt != 0 {
                1
            } else {
                plo
            };
            l.delta[0] = prev + 1;
        }
        return Ok(l);
    }
    l.clusterofs = lo;
    // Count the blocks of the pclusters of earlier heads in this pack.
    let mut i = index as isize;
    let mut nblk: u64 = if big_pcluster { 0 } else { 1 };
    while i > 0 {
        i -= 1;
        let (lo, ty) = field(pack, lobits, encodebits, i as usize);
        if !big_pcluster {
            if ty == LclusterType::NonHead {
                i -= lo as isize;
            }
            if i >= 0 {
                nblk += 1;
            }
        } else if ty == LclusterType::NonHead {
            if lo & cblkcnt != 0 {
                i -= 1;
                nblk += u64::from(lo & !cblkcnt);
                continue;
            }
            if lo <= 1 {
                return Err(FormatError::invalid("big-pcluster delta[0]", lo));
            }
            i -= lo as isize - 2;
        } else {
            nblk += 1;
        }
    }
    let base = u64::from(get_u32(pack, pack_size - 4).unwrap_or(0));
    l.pblk = base + nblk;
    Ok(l)
}

/// delta[1] of a NONHEAD compact entry, derived from its pack.
fn lookahead_distance(pack: &[u8], lobits: u32, encodebits: u32, vcnt: usize, mut i: usize) -> u32 {
    let mut d1 = 0u32;
    let mut lo = 0;
    while i < vcnt {
        let (l, ty) = field(pack, lobits, encodebits, i);
        if ty != LclusterType::NonHead {
            return d1;
        }
        lo = l;
        d1 += 1;
        i += 1;
    }
    if lo & u32::from(D0_CBLKCNT) == 0 {
        d1 += lo.saturating_sub(1);
    }
    d1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example_compact_4b() {
        // big.bin of the format notes: packs at 0x528 for a 3-lcluster file.
        let layout = CompactLayout::new(0x528, 3, true);
        let s0 = layout.locate(0).unwrap();
        assert_eq!((s0.pack_start, s0.index), (0x528, 0));
        let pack0 = [0x00, 0x10, 0x01, 0x20, 0, 0, 0, 0];
        let e0 = decode_compact(&pack0, 0, 12, false).unwrap();
        assert_eq!((e0.ty, e0.clusterofs, e0.pblk), (LclusterType::Head1, 0, 1));
        let e1 = decode_compact(&pack0, 1, 12, false).unwrap();
        assert_eq!((e1.ty, e1.delta), (LclusterType::NonHead, [1, 1]));
        let pack1 = [0x00, 0x08, 0, 0, 0x01, 0, 0, 0];
        let s2 = layout.locate(2).unwrap();
        assert_eq!((s2.pack_start, s2.index), (0x530, 0));
        let e2 = decode_compact(&pack1, 0, 12, false).unwrap();
        assert_eq!((e2.ty, e2.clusterofs), (LclusterType::Plain, 2048));
        assert!(layout.locate(3).is_none());
    }

    #[test]
    fn full_entry_cblkcnt_and_partial_ref() {
        let e = decode_full(&[2, 0, 0, 0, 0x10, 0x08, 3, 0], 12, true).unwrap();
        assert_eq!(
            (e.ty, e.compressed_blks, e.delta),
            (LclusterType::NonHead, 16, [1, 3])
        );
        assert!(decode_full(&[2, 0, 0, 0, 0x10, 0x08, 3, 0], 12, false).is_err());
        let h = decode_full(&[1, 0x80, 5, 0, 9, 0, 0, 0], 12, false).unwrap();
        assert!(h.partial_ref);
        assert_eq!((h.clusterofs, h.pblk), (5, 9));
        assert!(decode_full(&[1, 0, 0, 0x10, 9, 0, 0, 0], 12, false).is_err());
    }

    #[test]
    fn fragment_headers_round_trip() {
        let b = encode_whole_fragment_header(89014);
        let h = MapHeader::parse(&b);
        assert_eq!(h.whole_file_fragment(), Some(89014));
        let mut t = MapHeader::new(advise::FRAGMENT_PCLUSTER | advise::COMPACTED_2B, 1, 0);
        t.fragment_off = 0x1234_5678;
        let h = MapHeader::parse(&encode_header(&t));
        assert_eq!(h.fragment_off, 0x1234_5678);
        assert!(h.has(advise::FRAGMENT_PCLUSTER));
        assert_eq!(h.whole_file_fragment(), None);
        assert_eq!(h.algorithm_type, 1);
    }

    #[test]
    fn whole_file_fragment_header() {
        let h = MapHeader::parse(&[0xb6, 0x5b, 0x01, 0x00, 0, 0, 0, 0x80]);
        assert_eq!(h.whole_file_fragment(), Some(89014));
    }
}

mod encode;
pub mod extent;
pub use encode::*;
