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
/// Bit of a HEAD/PLAIN `di_advise` (full indexes) marking the pcluster as
/// a hole (Linux 7.2): it reads as zeros; older kernels decode the
/// pcluster at its block address instead, so a writer points it at one
/// that decodes to zeros.
pub const LI_HOLE: u16 = 0x4000;
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
    /// HEAD/PLAIN (full indexes): the `LI_HOLE` bit.
    pub hole: bool,
    /// NONHEAD: `delta[0]` was a CBLKCNT entry (a count of 0 marks a hole
    /// pcluster, Linux 7.2).
    pub cblkcnt: bool,
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
            hole: false,
            cblkcnt: false,
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
            l.cblkcnt = true;
            d0 = 1;
        }
        l.delta = [u32::from(d0), u32::from(u16_at(b, 6))];
    } else {
        l.partial_ref = di_advise & PARTIAL_REF != 0;
        l.hole = di_advise & LI_HOLE != 0;
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
    /// End of the pack (the kernel's "nextpackoff"), `None` past 2^64.
    pub fn pack_end(&self) -> Option<u64> {
        self.pack_start
            .checked_add(u64::try_from(self.pack_size).ok()?)
    }
}

impl CompactLayout {
    /// `ebase` is the absolute position right after the map header, `total`
    /// the number of lclusters.
    pub fn new(ebase: u64, total: u64, compacted_2b: bool) -> Self {
        // 4-byte entries up to the next 32-byte boundary: the distance to
        // it is -ebase mod 32 (modular on purpose, no overflow to hide).
        let init4 = (ebase.wrapping_neg() % 32) / 4;
        let n2b = match total.checked_sub(init4) {
            Some(rest) if compacted_2b => rest & !15,
            _ => 0,
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
        let head4 = self.init4.checked_mul(4)?;
        let (off, two_byte) = match lcn.checked_sub(self.init4) {
            None => (lcn.checked_mul(4)?, false),
            Some(r) if r < self.n2b => (head4.checked_add(r.checked_mul(2)?)?, true),
            Some(r) => {
                let tail = r.checked_sub(self.n2b)?.checked_mul(4)?;
                let mid = self.n2b.checked_mul(2)?;
                (head4.checked_add(mid)?.checked_add(tail)?, false)
            }
        };
        let pos = self.ebase.checked_add(off)?;
        let (pack_start, pack_size, index) = if two_byte {
            (pos & !31, 32, (pos & 31) / 2)
        } else {
            (pos & !7, 8, (pos & 7) / 4)
        };
        let slot = CompactSlot {
            pack_start,
            pack_size,
            index: usize::try_from(index).ok()?,
        };
        slot.pack_end()?;
        Some(slot)
    }

    /// End of the whole index area, `None` past 2^64.
    pub fn end(&self) -> Option<u64> {
        // Saturating: with fewer lclusters than the 4- and 2-byte runs
        // there is no 4-byte tail, which is what 0 says.
        let rest = self.total.saturating_sub(self.init4.checked_add(self.n2b)?);
        let init = self.init4.min(self.total);
        let end = self
            .ebase
            .checked_add(init.checked_mul(4)?)?
            .checked_add(self.n2b.checked_mul(2)?)?
            .checked_add(rest.checked_mul(4)?)?;
        crate::round_up(end, 8)
    }
}

/// One field of a compact pack: (lo, type) of entry `i`.
fn field(pack: &[u8], lobits: u32, encodebits: u32, i: usize) -> (u32, LclusterType) {
    let v = usize::try_from(encodebits)
        .ok()
        .and_then(|bits| bits.checked_mul(i))
        .and_then(|bitpos| Some(get_u32(pack, bitpos / 8)? >> (bitpos % 8)))
        .unwrap_or(0);
    let lo = u32::MAX.checked_shl(lobits).map_or(v, |high| v & !high);
    (
        lo,
        LclusterType::from_bits(v.checked_shr(lobits).unwrap_or(0)),
    )
}

/// Decodes entry `index` of a compact pack (8 bytes for 4B, 32 for 2B).
pub fn decode_compact(
    pack: &[u8],
    index: usize,
    lclusterbits: u8,
    big_pcluster: bool,
) -> Result<Lcluster, FormatError> {
    // Entries per pack, bits per entry, offset of the pack's base block.
    let (vcnt, encodebits, base_off) = match pack.len() {
        8 if lclusterbits <= 14 => (2usize, 16u32, 4usize),
        32 if lclusterbits <= 12 => (16, 14, 28),
        _ => return Err(FormatError::invalid("compact lclusterbits", lclusterbits)),
    };
    if index >= vcnt {
        return Err(FormatError::invalid("compact entry index", index as u64));
    }
    let lobits = u32::from(lclusterbits).max(12);
    let (lo, ty) = field(pack, lobits, encodebits, index);
    let mut l = Lcluster::of_type(ty);
    let cblkcnt = u32::from(D0_CBLKCNT);
    if ty == LclusterType::NonHead {
        l.clusterofs = 1u32 << lclusterbits;
        l.delta[1] = lookahead_distance(pack, lobits, encodebits, vcnt, index)?;
        if lo & cblkcnt != 0 {
            if !big_pcluster {
                return Err(FormatError::invalid("CBLKCNT without big pcluster", lo));
            }
            l.compressed_blks = lo & !cblkcnt;
            l.cblkcnt = true;
            l.delta[0] = 1;
        } else if let Some(prev_i) = index
            .checked_sub(1)
            .filter(|_| index.checked_add(1) == Some(vcnt))
        {
            // The last entry keeps delta[1]; delta[0] comes from its neighbour.
            let (plo, pty) = field(pack, lobits, encodebits, prev_i);
            let prev = if pty != LclusterType::NonHead {
                0
            } else if plo & cblkcnt != 0 {
                1
            } else {
                plo
            };
            l.delta[0] = prev
                .checked_add(1)
                .ok_or(FormatError::invalid("compact delta[0]", prev))?;
        } else {
            l.delta[0] = lo;
        }
        return Ok(l);
    }
    l.clusterofs = lo;
    let nblk = earlier_blocks(pack, lobits, encodebits, index, big_pcluster)?;
    let base = u64::from(get_u32(pack, base_off).unwrap_or(0));
    l.pblk = base
        .checked_add(nblk)
        .ok_or(FormatError::invalid("compact pblk", base))?;
    Ok(l)
}

/// Blocks of the pclusters of the heads before entry `index` of a pack.
// why: `field` yields `lo` below 2^14 (lobits <= 14), and `index` < 16 is
// checked first, so `i` stays within -(2^14 + 2)..16 and
// `nblk` below 16 * 2^14; no operation here can overflow.
#[allow(clippy::arithmetic_side_effects, clippy::cast_possible_truncation)]
fn earlier_blocks(
    pack: &[u8],
    lobits: u32,
    encodebits: u32,
    index: usize,
    big_pcluster: bool,
) -> Result<u64, FormatError> {
    let cblkcnt = u32::from(D0_CBLKCNT);
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
    Ok(nblk)
}

/// delta[1] of a NONHEAD compact entry, derived from its pack.
fn lookahead_distance(
    pack: &[u8],
    lobits: u32,
    encodebits: u32,
    vcnt: usize,
    first: usize,
) -> Result<u32, FormatError> {
    let mut d1 = 0u32;
    let mut lo = 0;
    for i in first..vcnt {
        let (l, ty) = field(pack, lobits, encodebits, i);
        if ty != LclusterType::NonHead {
            return Ok(d1);
        }
        lo = l;
        d1 = d1
            .checked_add(1)
            .ok_or(FormatError::invalid("compact delta[1]", d1))?;
    }
    if lo & u32::from(D0_CBLKCNT) == 0 {
        // saturating: a last delta[0] of 0 or 1 adds nothing, as in the kernel.
        d1 = d1
            .checked_add(lo.saturating_sub(1))
            .ok_or(FormatError::invalid("compact delta[1]", d1))?;
    }
    Ok(d1)
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
    fn compact_index_at_the_end_of_the_address_space_is_refused() {
        // A hostile map header position: entries would lie past 2^64.
        let layout = CompactLayout::new(u64::MAX - 40, 1 << 20, true);
        assert!(layout.end().is_none());
        assert!(layout.locate(1 << 19).is_none());
        // The first entries still fit and are found; their pack end does not.
        let s = layout.locate(0).unwrap();
        assert_eq!(s.pack_start, (u64::MAX - 40) & !7);
        assert_eq!(s.pack_end(), Some(((u64::MAX - 40) & !7) + 8));
        assert!(CompactLayout::new(u64::MAX - 3, 4, false)
            .locate(0)
            .is_none());
    }

    #[test]
    fn compact_entry_index_past_the_pack_is_an_error() {
        let pack = [0u8; 8];
        assert!(decode_compact(&pack, 2, 12, false).is_err());
        assert!(decode_compact(&pack, 0, 15, false).is_err());
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
