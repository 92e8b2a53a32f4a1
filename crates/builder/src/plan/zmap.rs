//! A compressed inode as written: its extents, where their pclusters went,
//! the optional inline tail pcluster or tail fragment (in the packed inode),
//! and the encoded map header + indexes.

use ferrofs_format::zmap::{
    advise, encode_compact, encode_full, encode_header, encode_whole_fragment_header, Lcluster,
    LclusterType, MapHeader, FULL_INDEX_SIZE,
};

/// One extent with its pcluster's place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZExtent {
    pub la: u64,
    pub llen: u64,
    /// Stored raw (a PLAIN lcluster) rather than compressed.
    pub plain: bool,
    pub pblk: u64,
    pub blocks: u64,
    /// Compressed size in bytes (raw: the extent length).
    pub csize: u64,
    /// A sparse pcluster (`-E sparse`): with lcluster indexes, `pblk` and
    /// `blocks` name a pcluster of zeros that kernels before 7.2 decode
    /// instead (a partial reference to it); extent records store none.
    pub hole: bool,
    /// The pcluster decodes to more than the extent takes (a partial
    /// reference; full indexes or extent records only).
    pub partial: bool,
}

/// Everything the metadata writer needs about a compressed inode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZInode {
    pub alg: u8,
    pub extents: Vec<ZExtent>,
    /// The last extent's pcluster stored inline after the indexes.
    pub inline: Option<Vec<u8>>,
    /// Header, optional reserved word and index entries.
    pub index: Vec<u8>,
    pub compact: bool,
    /// Blocks of pclusters (the inode's `i_u`).
    pub blocks: u64,
    /// Data in the packed inode: the fragment's index in the build's
    /// fragment table and where in the file it starts (0: the whole file).
    pub fragment: Option<(usize, u64)>,
}

impl ZInode {
    /// Bytes after the inode and its xattrs (padding to 8, header,
    /// indexes, inline pcluster), given the inode+xattr length.
    pub fn tail_len(&self, inode_and_xattrs: u64) -> u64 {
        let pad = inode_and_xattrs.div_ceil(8) * 8 - inode_and_xattrs;
        pad + self.index.len() as u64 + self.inline.as_ref().map_or(0, |v| v.len() as u64)
    }
}

/// Builds the lcluster entries of a file of `size` bytes from its extents.
/// When the last extent starts before the last lcluster and the size is not
/// block-aligned, the last lcluster gets a PLAIN "EOF marker" whose
/// clusterofs is where the file ends: the kernel maps a read in that
/// lcluster to an extent ending there instead of at the lcluster's end.
pub fn lclusters(extents: &[ZExtent], size: u64, bs: u64, big: bool) -> Vec<Lcluster> {
    let n = size.div_ceil(bs) as usize;
    let mut out: Vec<Option<Lcluster>> = vec![None; n];
    let mut heads: Vec<(usize, Option<usize>)> = Vec::new(); // (lcn, extent)
    let head = |ty, ofs: u64, pblk| Lcluster {
        ty,
        clusterofs: ofs as u32,
        delta: [0, 0],
        pblk,
        partial_ref: false,
        compressed_blks: 0,
        hole: false,
        cblkcnt: false,
    };
    for (k, e) in extents.iter().enumerate() {
        let lcn = (e.la / bs) as usize;
        let ty = if e.plain {
            LclusterType::Plain
        } else {
            LclusterType::Head1
        };
        let mut h = head(ty, e.la % bs, e.pblk);
        h.partial_ref = e.partial;
        if e.hole {
            // Linux 7.2 reads no data; older kernels decode the pcluster
            // of zeros `pblk` names, taking the hole's length of it.
            (h.hole, h.partial_ref) = (true, true);
        }
        out[lcn] = Some(h);
        heads.push((lcn, Some(k)));
    }
    if let Some(last) = extents.last() {
        if !size.is_multiple_of(bs) && ((last.la / bs) as usize) < n - 1 {
            // The marker's block address is never read; it is the one
            // compact indexes imply: after the last pcluster, which counts
            // as one block there when it takes none (inline, or in the
            // packed inode), so that such files keep compact indexes.
            out[n - 1] = Some(head(
                LclusterType::Plain,
                size % bs,
                last.pblk + last.blocks.max(1),
            ));
            heads.push((n - 1, None));
        }
    }
    for (i, &(h, k)) in heads.iter().enumerate() {
        let next = heads.get(i + 1).map_or(n, |x| x.0);
        for (lcn, slot) in out.iter_mut().enumerate().take(next).skip(h + 1) {
            let first = lcn == h + 1;
            let cblk = match k {
                Some(k) if big && first => (extents[k].blocks as u32).max(1),
                _ => 0,
            };
            *slot = Some(Lcluster {
                ty: LclusterType::NonHead,
                clusterofs: 0,
                delta: [(lcn - h) as u32, (next - lcn) as u32],
                pblk: 0,
                partial_ref: false,
                compressed_blks: cblk,
                hole: false,
                cblkcnt: false,
            });
        }
    }
    out.into_iter()
        .map(|e| e.expect("every lcluster covered"))
        .collect()
}

/// How a compressed file's last extent is stored, when not in blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tail {
    /// In a pcluster like the others.
    Blocks,
    /// Inline after the indexes (ztailpacking), this many bytes.
    Inline(u16),
    /// In the packed inode at this offset (the last extent is the fragment).
    Fragment(u64),
}

/// Encodes header and indexes: compact when possible (and `compact_ok`),
/// else full. `inode_and_xattrs` is the inode plus xattr length (the inode
/// itself is 32-aligned, which is all the compact layout depends on).
pub fn encode_index(
    extents: &[ZExtent],
    size: u64,
    bs: u64,
    alg: u8,
    tail: Tail,
    inode_and_xattrs: u64,
    compact_ok: bool,
) -> (Vec<u8>, bool) {
    let big = extents.iter().any(|e| e.blocks > 1);
    let mut entries = lclusters(extents, size, bs, big);
    let lbits = bs.trailing_zeros() as u8;
    let mut adv = 0u16;
    if big {
        adv |= advise::BIG_PCLUSTER_1 | advise::BIG_PCLUSTER_2;
    }
    let (idata, fragoff) = match tail {
        Tail::Blocks => (0, None),
        Tail::Inline(n) => {
            adv |= advise::INLINE_PCLUSTER;
            (n, None)
        }
        Tail::Fragment(off) => {
            adv |= advise::FRAGMENT_PCLUSTER;
            (0, Some(off))
        }
    };
    let header = |adv: u16| {
        let mut h = MapHeader::new(adv, alg, idata);
        h.fragment_off = fragoff.unwrap_or(0) as u32;
        encode_header(&h).to_vec()
    };
    let hpos = inode_and_xattrs.div_ceil(8) * 8;
    let ebase = hpos + 8;
    let compact_2b = lbits <= 12;
    // Compact indexes hold only 32 bits of a fragment's offset.
    let fits32 = fragoff.is_none_or(|o| o >> 32 == 0);
    if fits32 && compact_ok {
        if let Some(ix) = encode_compact(&entries, ebase, lbits, compact_2b, big) {
            let mut v = header(adv | if compact_2b { advise::COMPACTED_2B } else { 0 });
            v.extend_from_slice(&ix);
            return (v, true);
        }
    }
    if let (Some(off), Some(last)) = (fragoff, extents.last()) {
        // Full indexes keep the offset's high half in the fragment's head.
        let lcn = (last.la / bs) as usize;
        if let Some(e) = entries.get_mut(lcn) {
            e.pblk = off >> 32;
        }
    }
    let mut v = header(adv);
    v.extend_from_slice(&[0u8; 8]);
    v.extend_from_slice(&encode_full(&entries));
    debug_assert_eq!(v.len(), 16 + entries.len() * FULL_INDEX_SIZE);
    (v, false)
}

/// Encodes the map of a compressed inode: lcluster indexes
/// ([`encode_index`], compact when `compact_ok`), or, in a 48-bit image
/// (`allow_extents`), encoded extent records ([`encode_extents`]; one
/// 16-byte record per pcluster instead of an entry per logical block, so
/// they win from 8 KiB pclusters up) where they are smaller and either the
/// inode is one the build makes itself (`internal`: the packed inode, the
/// metabox) or its blocks lie past what lcluster indexes address. Files'
/// own data keeps lcluster indexes: Linux 6.18 reads more around a file
/// mapped by extent records (a Debian rootfs's python start read 7 % more
/// device bytes from the 2025-format lzma image with them, 0.13 % larger
/// without them, nearly all of it the packed inode's index). Returns the
/// bytes and whether they are compact indexes.
#[allow(clippy::too_many_arguments)]
pub fn encode_map(
    extents: &[ZExtent],
    size: u64,
    bs: u64,
    alg: u8,
    tail: Tail,
    inode_and_xattrs: u64,
    compact_ok: bool,
    allow_extents: bool,
    internal: bool,
) -> (Vec<u8>, bool) {
    let holes = extents.iter().any(|e| e.hole);
    if holes && allow_extents && compact_ok {
        // A sparse file: one record per extent instead of eight bytes per
        // block of its holes.
        if let Some(e) = encode_extents(extents, size, bs, alg, tail, inode_and_xattrs) {
            return (e, false);
        }
    }
    let (index, compact) = encode_index(extents, size, bs, alg, tail, inode_and_xattrs, compact_ok);
    let beyond_32 = extents
        .iter()
        .any(|e| e.pblk.saturating_add(e.blocks) > u64::from(u32::MAX));
    // (-E legacy-compress asks for full lcluster indexes: no extents.)
    if allow_extents && compact_ok && (internal || beyond_32) {
        if let Some(e) = encode_extents(extents, size, bs, alg, tail, inode_and_xattrs) {
            if e.len() < index.len() {
                return (e, false);
            }
        }
    }
    (index, compact)
}

/// Encoded extents (48-bit images): the map header, padding to the record
/// size, then one record per extent sorted by logical start: the pcluster's
/// byte address and length (whole blocks: the stream keeps its zero
/// padding in front, as the lcluster form stores it) and its format, or,
/// for a tail in the packed inode, the fragment's offset. `None` with an
/// inline tail (extents have no inline pcluster).
pub fn encode_extents(
    extents: &[ZExtent],
    size: u64,
    bs: u64,
    alg: u8,
    tail: Tail,
    inode_and_xattrs: u64,
) -> Option<Vec<u8>> {
    use ferrofs_format::zmap::extent::{encode_extent_header, ExtentRecord, ExtentTable};
    if matches!(tail, Tail::Inline(_)) {
        return None;
    }
    let last_la = extents.last().map_or(0, |e| e.la);
    let recsz: u32 = if size > u64::from(u32::MAX) || last_la > u64::from(u32::MAX) {
        32
    } else {
        16
    };
    let table = ExtentTable {
        recsz,
        count: extents.len() as u64,
        cluster_bits: 0,
        interlaced: false,
        fragment: matches!(tail, Tail::Fragment(_)),
    };
    let mut v = encode_extent_header(&table).to_vec();
    let hpos = inode_and_xattrs.div_ceil(8) * 8;
    let start = (hpos + 8).next_multiple_of(u64::from(recsz));
    v.resize((start - hpos) as usize, 0);
    let mut rec = [0u8; 32];
    for (k, e) in extents.iter().enumerate() {
        let r = match tail {
            Tail::Fragment(off) if k + 1 == extents.len() => ExtentRecord {
                plen: off as u32,
                pstart: off >> 32,
                lstart: e.la,
            },
            // A hole: no pcluster (Linux reads an empty record as zeros).
            _ if e.hole => ExtentRecord {
                plen: 0,
                pstart: 0,
                lstart: e.la,
            },
            _ => {
                let plen = u32::try_from(e.blocks * bs).ok()?;
                let alg = (!e.plain).then_some(alg);
                ExtentRecord {
                    plen: ExtentRecord::plen_word(plen, alg, e.partial),
                    pstart: e.pblk * bs,
                    lstart: e.la,
                }
            }
        };
        r.encode(recsz, &mut rec);
        v.extend_from_slice(&rec[..recsz as usize]);
    }
    Some(v)
}

/// Header and (empty) index of a file stored whole in the packed inode.
pub fn encode_whole_fragment(offset: u64) -> Vec<u8> {
    let mut v = encode_whole_fragment_header(offset).to_vec();
    v.extend_from_slice(&[0u8; 8]);
    v
}
