//! Writing compressed-file indexes: the map header, full lcluster
//! entries and compact packs (the inverse of the decoders in the parent
//! module).
//!
//! Everything here runs on the builder's own lcluster entries, never on an
//! image: sizes and positions come from a layout the builder made, and the
//! narrowing casts pack fields whose width the format fixes.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

use super::*;

/// Encodes a map header.
pub fn encode_header(h: &MapHeader) -> [u8; MAP_HEADER_SIZE] {
    let mut b = [0u8; MAP_HEADER_SIZE];
    if h.advise & advise::FRAGMENT_PCLUSTER != 0 {
        // The tail's offset in the packed inode shares its word with the
        // inline size (the two features exclude each other in one inode).
        b[0..4].copy_from_slice(&h.fragment_off.to_le_bytes());
    } else {
        b[0..2].copy_from_slice(&((h.fragment_off & 0xFFFF) as u16).to_le_bytes());
        b[2..4].copy_from_slice(&h.idata_size.to_le_bytes());
    }
    b[4..6].copy_from_slice(&h.advise.to_le_bytes());
    b[6] = h.algorithm_type;
    b[7] = h.cluster_bits;
    b
}

/// The header of a file that lives entirely in the packed inode at
/// `offset` (bit 7 of `h_clusterbits` set; the whole word is the offset).
pub fn encode_whole_fragment_header(offset: u64) -> [u8; MAP_HEADER_SIZE] {
    (offset | 1u64 << 63).to_le_bytes()
}

impl MapHeader {
    /// A header for an ordinary compressed inode.
    pub fn new(advise: u16, algorithm_type: u8, idata_size: u16) -> Self {
        Self {
            fragment_off: 0,
            idata_size,
            advise,
            algorithm_type,
            cluster_bits: 0,
            raw: 0,
        }
    }
}

fn type_bits(t: LclusterType) -> u16 {
    match t {
        LclusterType::Plain => 0,
        LclusterType::Head1 => 1,
        LclusterType::NonHead => 2,
        LclusterType::Head2 => 3,
    }
}

/// Encodes full (8-byte) index entries for lclusters in order. NONHEAD
/// entries with `compressed_blks != 0` (or `cblkcnt`) become CBLKCNT
/// entries; HEADs with `hole` get the `LI_HOLE` bit.
pub fn encode_full(entries: &[Lcluster]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * FULL_INDEX_SIZE);
    for e in entries {
        let mut b = [0u8; FULL_INDEX_SIZE];
        let mut adv = type_bits(e.ty);
        if e.ty == LclusterType::NonHead {
            let d0 = if e.compressed_blks != 0 || e.cblkcnt {
                D0_CBLKCNT | e.compressed_blks as u16
            } else {
                e.delta[0].min(u32::from(D0_CBLKCNT) - 1) as u16
            };
            b[4..6].copy_from_slice(&d0.to_le_bytes());
            b[6..8].copy_from_slice(&(e.delta[1].min(0xFFFF) as u16).to_le_bytes());
        } else {
            if e.partial_ref {
                adv |= PARTIAL_REF;
            }
            if e.hole {
                adv |= LI_HOLE;
            }
            b[2..4].copy_from_slice(&(e.clusterofs as u16).to_le_bytes());
            b[4..8].copy_from_slice(&(e.pblk as u32).to_le_bytes());
        }
        b[0..2].copy_from_slice(&adv.to_le_bytes());
        out.extend_from_slice(&b);
    }
    out
}

/// Sets bits `[pos, pos + n)` of a little-endian bit string to `v`.
fn put_bits(buf: &mut [u8], pos: usize, n: u32, v: u32) {
    for k in 0..n as usize {
        let bit = (v >> k) & 1;
        let at = pos + k;
        if bit != 0 {
            buf[at / 8] |= 1 << (at % 8);
        } else {
            buf[at / 8] &= !(1 << (at % 8));
        }
    }
}

/// Encodes compact indexes for `entries` (one per lcluster) whose entry
/// area starts at absolute position `ebase`. Returns `None` when the
/// entries cannot be expressed compactly (non-contiguous pclusters, deltas
/// too long, partial references, holes); the caller then uses full indexes. The
/// result is checked by decoding it back.
pub fn encode_compact(
    entries: &[Lcluster],
    ebase: u64,
    lclusterbits: u8,
    compacted_2b: bool,
    big_pcluster: bool,
) -> Option<Vec<u8>> {
    if lclusterbits > MAX_COMPACT_LCLUSTERBITS
        || entries
            .iter()
            .any(|e| e.partial_ref || e.hole || (e.cblkcnt && e.compressed_blks == 0))
    {
        return None;
    }
    let use_2b = compacted_2b && lclusterbits <= 12;
    let layout = CompactLayout::new(ebase, entries.len() as u64, use_2b);
    let end = layout.end()?;
    let mut out = vec![0u8; (end - ebase) as usize];
    let lobits = u32::from(lclusterbits).max(12);
    let cblk = u32::from(D0_CBLKCNT);
    // Pass 1: the 16- or 14-bit fields.
    for (k, e) in entries.iter().enumerate() {
        let slot = layout.locate(k as u64)?;
        let vcnt = if slot.pack_size == 8 { 2 } else { 16 };
        let encodebits = ((slot.pack_size - 4) * 8 / vcnt) as u32;
        let lo = match e.ty {
            LclusterType::NonHead if e.compressed_blks != 0 => {
                if e.compressed_blks >= cblk {
                    return None;
                }
                cblk | e.compressed_blks
            }
            LclusterType::NonHead if slot.index + 1 == vcnt => e.delta[1].min(cblk - 1),
            LclusterType::NonHead => {
                if e.delta[0] >= cblk {
                    return None;
                }
                e.delta[0]
            }
            _ => e.clusterofs,
        };
        let v = lo | (u32::from(type_bits(e.ty)) << lobits);
        let pack_off = (slot.pack_start - ebase) as usize;
        put_bits(
            &mut out[pack_off..],
            slot.index * encodebits as usize,
            encodebits,
            v,
        );
    }
    // Pass 2: each pack's base, from its first head's block address.
    let mut k = 0u64;
    while k < entries.len() as u64 {
        let slot = layout.locate(k)?;
        let vcnt = if slot.pack_size == 8 { 2u64 } else { 16 };
        let first = k - slot.index as u64;
        let pack_off = (slot.pack_start - ebase) as usize;
        let pack_entries = first..(first + vcnt).min(entries.len() as u64);
        if let Some(h) = pack_entries
            .clone()
            .find(|&i| entries[i as usize].ty.is_head())
        {
            let pack = &out[pack_off..pack_off + slot.pack_size];
            let probe =
                decode_compact(pack, (h - first) as usize, lclusterbits, big_pcluster).ok()?;
            // `probe.pblk` is base(0) + nblk.
            let base = entries[h as usize].pblk.checked_sub(probe.pblk)?;
            let base = u32::try_from(base).ok()?;
            let at = pack_off + slot.pack_size - 4;
            out[at..at + 4].copy_from_slice(&base.to_le_bytes());
        }
        k = first + vcnt;
    }
    // Verify every entry decodes back.
    for (k, e) in entries.iter().enumerate() {
        let slot = layout.locate(k as u64)?;
        let pack_off = (slot.pack_start - ebase) as usize;
        let d = decode_compact(
            &out[pack_off..pack_off + slot.pack_size],
            slot.index,
            lclusterbits,
            big_pcluster,
        )
        .ok()?;
        let ok = match e.ty {
            LclusterType::NonHead if e.compressed_blks != 0 => {
                d.ty == e.ty && d.compressed_blks == e.compressed_blks
            }
            LclusterType::NonHead => d.ty == e.ty && d.delta[0] == e.delta[0],
            _ => d.ty == e.ty && d.clusterofs == e.clusterofs && d.pblk == e.pblk,
        };
        if !ok {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
mod encode_tests {
    use super::*;

    fn head(ty: LclusterType, ofs: u32, pblk: u64) -> Lcluster {
        Lcluster {
            ty,
            clusterofs: ofs,
            delta: [0, 0],
            pblk,
            partial_ref: false,
            compressed_blks: 0,
            hole: false,
            cblkcnt: false,
        }
    }
    fn non(d0: u32, d1: u32, cblk: u32) -> Lcluster {
        Lcluster {
            ty: LclusterType::NonHead,
            clusterofs: 0,
            delta: [d0, d1],
            pblk: 0,
            partial_ref: false,
            compressed_blks: cblk,
            hole: false,
            cblkcnt: cblk != 0,
        }
    }

    #[test]
    fn hole_heads_and_empty_cblkcnt_round_trip_in_full_indexes_only() {
        let mut h = head(LclusterType::Head1, 0, 7);
        h.hole = true;
        h.partial_ref = true;
        let mut n = non(1, 1, 0);
        n.cblkcnt = true;
        let b = encode_full(&[h, n]);
        // HEAD1 | PARTIAL_REF | LI_HOLE, the block address kept.
        assert_eq!(&b[..8], &[0x01, 0xC0, 0, 0, 7, 0, 0, 0]);
        // NONHEAD; delta[0] a CBLKCNT with a count of 0.
        assert_eq!(&b[8..10], &[0x02, 0]);
        assert_eq!(&b[12..14], &[0x00, 0x08]);
        let d0 = decode_full(b[..8].try_into().unwrap(), 12, true).unwrap();
        let d1 = decode_full(b[8..].try_into().unwrap(), 12, true).unwrap();
        assert!(d0.hole && d0.partial_ref && d0.pblk == 7);
        assert!(d1.cblkcnt && d1.compressed_blks == 0 && d1.delta[0] == 1);
        assert_eq!(encode_compact(&[h, n], 64, 12, false, true), None);
        assert_eq!(
            encode_compact(&[head(LclusterType::Head1, 0, 7), n], 64, 12, false, true),
            None
        );
    }

    #[test]
    fn worked_example_encodes_to_the_documented_bytes() {
        // big.bin of the format notes: HEAD1 pblk 1, NONHEAD, PLAIN EOF marker.
        let e = [
            head(LclusterType::Head1, 0, 1),
            non(1, 1, 0),
            head(LclusterType::Plain, 2048, 2),
        ];
        let out = encode_compact(&e, 0x528, 12, true, false).unwrap();
        assert_eq!(&out[..8], &[0x00, 0x10, 0x01, 0x20, 0, 0, 0, 0]);
        assert_eq!(&out[8..10], &[0x00, 0x08]);
    }

    #[test]
    fn big_pclusters_with_2b_packs_round_trip() {
        // 40 lclusters: heads every 5 with 3-block pclusters, contiguous.
        let mut e = Vec::new();
        let mut pblk = 100;
        for k in 0..40u32 {
            if k % 5 == 0 {
                e.push(head(LclusterType::Head1, (k * 37) % 4096, pblk));
                pblk += 3;
            } else if k % 5 == 1 {
                e.push(non(1, 4, 3));
            } else {
                e.push(non(k % 5, 5 - k % 5, 0));
            }
        }
        for ebase in [0x1008u64, 0x1010, 0x1018, 0x1020] {
            assert!(
                encode_compact(&e, ebase, 12, true, true).is_some(),
                "ebase {ebase:#x}"
            );
        }
        // Non-contiguous pclusters cannot be compact.
        e[10].pblk += 1;
        assert!(encode_compact(&e, 0x1008, 12, true, true).is_none());
    }

    #[test]
    fn full_entries_round_trip() {
        let e = [
            head(LclusterType::Head1, 5, 77),
            non(1, 2, 4),
            non(2, 1, 0),
            head(LclusterType::Plain, 0, 90),
        ];
        let b = encode_full(&e);
        for (k, want) in e.iter().enumerate() {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[k * 8..k * 8 + 8]);
            let d = decode_full(&a, 12, true).unwrap();
            assert_eq!(d.ty, want.ty);
            if want.ty.is_head() {
                assert_eq!((d.clusterofs, d.pblk), (want.clusterofs, want.pblk));
            }
        }
    }
}
