//! Encoded extents (48-bit images, `Z_EROFS_ADVISE_EXTENTS` on a
//! COMPRESSED_FULL inode): a table of extent records instead of lcluster
//! indexes. Records are 4, 8, 16 or 32 bytes; the two short forms hold one
//! record per logical cluster (no logical start), the two long forms hold
//! sorted records with a logical start each, found by binary search.

use super::{advise, MapHeader};

/// `plen` bits 0..20: the physical length in bytes.
pub const PLEN_MASK: u32 = 0x1F_FFFF;
/// `plen` bit 27: the extent uses only a prefix of the decoded pcluster.
pub const PLEN_PARTIAL: u32 = 1 << 27;
/// `plen` bits 28..31: 0 stored, n > 0 algorithm n - 1.
pub const PLEN_FMT_SHIFT: u32 = 28;
/// `h_advise` bits 1..2 choose the record size (`4 << value`).
pub const EXTRECSZ_SHIFT: u16 = 1;

/// How the records of an extent-mapped inode are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtentTable {
    /// Bytes per record: 4, 8, 16 or 32.
    pub recsz: u32,
    /// Number of records (forms 16 and 32 only; 0 in the short forms).
    pub count: u64,
    /// lcluster size exponent above the block size (forms 4 and 8 only).
    pub cluster_bits: u8,
    /// Uncompressed extents may be interlaced (when block-aligned).
    pub interlaced: bool,
    /// The last extent is a tail in the packed inode.
    pub fragment: bool,
}

impl ExtentTable {
    /// Reads the table description from a map header whose advise has
    /// [`advise::EXTENTS`] (the caller checks that bit and the layout).
    pub fn from_header(h: &MapHeader) -> Self {
        let recsz = 4u32 << ((h.advise >> EXTRECSZ_SHIFT) & 3);
        let raw = h.raw_bytes();
        let (count, cluster_bits) = if recsz >= 16 {
            let lo = u64::from(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]));
            let hi = u64::from(u16::from_le_bytes([raw[6], raw[7]]));
            (lo | hi << 32, 0)
        } else {
            (0, h.cluster_bits & 15)
        };
        Self {
            recsz,
            count,
            cluster_bits,
            interlaced: h.advise & advise::INTERLACED_PCLUSTER != 0,
            fragment: h.advise & advise::FRAGMENT_PCLUSTER != 0,
        }
    }

    /// Whether records carry their own logical start (forms 16 and 32).
    pub fn has_lstart(&self) -> bool {
        self.recsz >= 16
    }
}

/// One decoded extent record. Fields a short form does not store are 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtentRecord {
    /// The raw `plen` word (length, partial bit, format nibble).
    pub plen: u32,
    /// Physical byte address (forms 8 and up).
    pub pstart: u64,
    /// Logical byte offset (forms 16 and 32; form 16 keeps 32 bits).
    pub lstart: u64,
}

impl ExtentRecord {
    /// Decodes a record of `recsz` bytes from `b` (`b.len() >= recsz`);
    /// `None` if `b` is too short or `recsz` is not 4, 8, 16 or 32.
    pub fn parse(b: &[u8], recsz: u32) -> Option<Self> {
        let word = |off: usize| crate::le::get_u32(b, off).map(u64::from);
        let plen = u32::try_from(word(0)?).ok()?;
        let mut r = Self {
            plen,
            pstart: 0,
            lstart: 0,
        };
        match recsz {
            4 => {}
            8 => r.pstart = word(4)?,
            16 => {
                r.pstart = word(4)? | word(8)? << 32;
                r.lstart = word(12)?;
            }
            32 => {
                r.pstart = word(4)? | word(8)? << 32;
                r.lstart = word(12)? | word(16)? << 32;
            }
            _ => return None,
        }
        Some(r)
    }

    /// Physical length in bytes (0: a hole).
    pub fn len(&self) -> u32 {
        self.plen & PLEN_MASK
    }
    /// Whether the physical length is zero (a hole unless a fragment).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Only a prefix of the decoded pcluster belongs to this extent.
    pub fn partial(&self) -> bool {
        self.plen & PLEN_PARTIAL != 0
    }
    /// `None` for stored (uncompressed) data, else the algorithm id.
    pub fn algorithm(&self) -> Option<u8> {
        let fmt = (self.plen >> PLEN_FMT_SHIFT) as u8;
        fmt.checked_sub(1)
    }

    /// Encodes the record into the first `recsz` bytes of `out`.
    // why: builder-side writer of its own records into a buffer it sized to
    // `recsz`; the casts keep the low and high halves on purpose.
    #[allow(clippy::indexing_slicing, clippy::cast_possible_truncation)]
    pub fn encode(&self, recsz: u32, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.plen.to_le_bytes());
        if recsz >= 8 {
            out[4..8].copy_from_slice(&(self.pstart as u32).to_le_bytes());
        }
        if recsz >= 16 {
            out[8..12].copy_from_slice(&((self.pstart >> 32) as u32).to_le_bytes());
            out[12..16].copy_from_slice(&(self.lstart as u32).to_le_bytes());
        }
        if recsz >= 32 {
            out[16..20].copy_from_slice(&((self.lstart >> 32) as u32).to_le_bytes());
            out[20..32].fill(0);
        }
    }

    /// A `plen` word: `len` bytes, `alg` (`None`: stored), partial or not.
    pub fn plen_word(len: u32, alg: Option<u8>, partial: bool) -> u32 {
        let fmt = alg.map_or(0, |a| u32::from(a) + 1);
        (len & PLEN_MASK) | (fmt << PLEN_FMT_SHIFT) | if partial { PLEN_PARTIAL } else { 0 }
    }
}

/// Encodes the map header of an extent-mapped inode. `count` goes into the
/// header only for the long forms; `cluster_bits` only for the short ones.
// why: the count is split into its low 32 and next 16 bits on purpose (the
// builder never makes 2^48 extents).
#[allow(clippy::cast_possible_truncation)]
pub fn encode_extent_header(table: &ExtentTable) -> [u8; super::MAP_HEADER_SIZE] {
    let mut b = [0u8; super::MAP_HEADER_SIZE];
    let recsz_code: u16 = match table.recsz {
        4 => 0,
        8 => 1,
        16 => 2,
        _ => 3,
    };
    let mut adv = advise::EXTENTS | recsz_code << EXTRECSZ_SHIFT;
    if table.interlaced {
        adv |= advise::INTERLACED_PCLUSTER;
    }
    if table.fragment {
        adv |= advise::FRAGMENT_PCLUSTER;
    }
    b[4..6].copy_from_slice(&adv.to_le_bytes());
    if table.recsz >= 16 {
        b[0..4].copy_from_slice(&(table.count as u32).to_le_bytes());
        b[6..8].copy_from_slice(&((table.count >> 32) as u16).to_le_bytes());
    } else {
        b[7] = table.cluster_bits & 15;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_examples_from_the_format_notes() {
        // e48z big.bin: advise 0x1 -> recsz 4, clusterbits 5.
        let h = MapHeader::parse(&[0, 0, 0, 0, 1, 0, 0, 5]);
        let t = ExtentTable::from_header(&h);
        assert_eq!((t.recsz, t.cluster_bits, t.count), (4, 5, 0));
        let r = ExtentRecord::parse(&[0xe8, 0x35, 0, 0x40], 4).unwrap();
        assert_eq!((r.len(), r.algorithm()), (13800, Some(3)));
        // e48hc big.bin: 5 extents, advise 0x5 -> recsz 16.
        let h = MapHeader::parse(&[5, 0, 0, 0, 5, 0, 0, 0]);
        let t = ExtentTable::from_header(&h);
        assert_eq!((t.recsz, t.count), (16, 5));
        let rec = [0, 0, 1, 0x10, 0, 0x10, 0, 0, 0, 0, 0, 0, 0xff, 0x83, 7, 0];
        let r = ExtentRecord::parse(&rec, 16).unwrap();
        assert_eq!(
            (r.len(), r.algorithm(), r.pstart, r.lstart),
            (65536, Some(0), 0x1000, 0x783ff)
        );
        // dd b.bin: recsz 8 zstd 13990 bytes at byte 31603.
        let r = ExtentRecord::parse(&[0xa6, 0x36, 0, 0x40, 0x73, 0x7b, 0, 0], 8).unwrap();
        assert_eq!((r.len(), r.pstart), (13990, 31603));
    }

    #[test]
    fn records_and_headers_round_trip() {
        for recsz in [4u32, 8, 16, 32] {
            let r = ExtentRecord {
                plen: ExtentRecord::plen_word(12345, Some(3), true),
                pstart: if recsz >= 16 {
                    (7 << 32) | 99
                } else if recsz == 8 {
                    99
                } else {
                    0
                },
                lstart: match recsz {
                    32 => (1 << 32) | 5,
                    16 => 5,
                    _ => 0,
                },
            };
            let mut b = [0u8; 32];
            r.encode(recsz, &mut b);
            assert_eq!(ExtentRecord::parse(&b, recsz), Some(r), "recsz {recsz}");
            assert!(r.partial());
            let t = ExtentTable {
                recsz,
                count: if recsz >= 16 { (3 << 32) | 17 } else { 0 },
                cluster_bits: if recsz >= 16 { 0 } else { 5 },
                interlaced: true,
                fragment: recsz == 8,
            };
            let h = MapHeader::parse(&encode_extent_header(&t));
            assert!(h.has(advise::EXTENTS));
            assert_eq!(ExtentTable::from_header(&h), t);
        }
        assert_eq!(ExtentRecord::parse(&[0; 8], 12), None);
        assert_eq!(ExtentRecord::parse(&[0; 8], 16), None);
    }
}
