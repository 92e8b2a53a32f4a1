//! The superblock (128 bytes at absolute 1024, plus 16-byte extension slots),
//! its feature bits and its CRC-32C.

use crate::le::{array_at, put_at, u16_at, u32_at, u64_at, u8_at};
use crate::{BlockSize, FormatError, Nid, EROFS_MAGIC};

/// Size of the base superblock structure.
pub const SB_BASE_SIZE: usize = 128;
/// Size of the superblock with one extension slot (what current headers define).
pub const SB_EXT_SIZE: usize = 144;

/// `feature_compat` bits (unknown ones are ignored, as the kernel does).
pub mod compat {
    pub const SB_CHKSUM: u32 = 0x01;
    pub const MTIME: u32 = 0x02;
    pub const XATTR_FILTER: u32 = 0x04;
    pub const SHARED_EA_IN_METABOX: u32 = 0x08;
    pub const PLAIN_XATTR_PFX: u32 = 0x10;
    pub const ISHARE_XATTRS: u32 = 0x20;
}

/// `feature_incompat` bits.
pub mod incompat {
    pub const ZERO_PADDING: u32 = 0x001;
    /// Same bit: compression configuration records and big pclusters.
    pub const COMPR_CFGS: u32 = 0x002;
    pub const BIG_PCLUSTER: u32 = 0x002;
    pub const CHUNKED_FILE: u32 = 0x004;
    /// Same bit: device table and HEAD2 lclusters.
    pub const DEVICE_TABLE: u32 = 0x008;
    pub const ZTAILPACKING: u32 = 0x010;
    /// Same bit: fragments (packed inode) and partially referenced pclusters.
    pub const FRAGMENTS: u32 = 0x020;
    pub const XATTR_PREFIXES: u32 = 0x040;
    pub const BIT48: u32 = 0x080;
    pub const METABOX: u32 = 0x100;
    /// Every bit this reader understands.
    pub const SUPPORTED: u32 = 0x1FF;
    /// Every bit the format defines.
    pub const KNOWN: u32 = 0x1FF;

    /// Human names of the bits in `bits`, e.g. `"48bit, metabox, 0x200"`.
    pub fn names(bits: u32) -> String {
        const TABLE: [(u32, &str); 9] = [
            (ZERO_PADDING, "zero_padding"),
            (COMPR_CFGS, "compr_cfgs/big_pcluster"),
            (CHUNKED_FILE, "chunked_file"),
            (DEVICE_TABLE, "device_table"),
            (ZTAILPACKING, "ztailpacking"),
            (FRAGMENTS, "fragments/dedupe"),
            (XATTR_PREFIXES, "xattr_prefixes"),
            (BIT48, "48bit"),
            (METABOX, "metabox"),
        ];
        let mut out = Vec::new();
        let mut rest = bits;
        for (bit, name) in TABLE {
            if bits & bit != 0 {
                out.push(name.to_string());
                rest &= !bit;
            }
        }
        for i in 0..32 {
            if rest & (1 << i) != 0 {
                out.push(format!("unknown {:#x}", 1u32 << i));
            }
        }
        out.join(", ")
    }
}

/// Names of the compat bits, for the dump.
pub fn compat_names(bits: u32) -> Vec<&'static str> {
    const TABLE: [(u32, &str); 6] = [
        (compat::SB_CHKSUM, "sb_csum"),
        (compat::MTIME, "mtime"),
        (compat::XATTR_FILTER, "xattr_filter"),
        (compat::SHARED_EA_IN_METABOX, "shared_ea_in_metabox"),
        (compat::PLAIN_XATTR_PFX, "plain_xattr_pfx"),
        (compat::ISHARE_XATTRS, "ishare_xattrs"),
    ];
    TABLE
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// The decoded superblock. Raw values; [`Superblock::validate`] applies the
/// kernel's mount-time checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub magic: u32,
    pub checksum: u32,
    pub feature_compat: u32,
    pub blkszbits: u8,
    pub sb_extslots: u8,
    pub root_nid_16: u16,
    pub inos: u64,
    pub epoch: u64,
    pub fixed_nsec: u32,
    pub blocks: u32,
    pub meta_blkaddr: u32,
    pub xattr_blkaddr: u32,
    pub uuid: [u8; 16],
    pub volume_name: [u8; 16],
    pub feature_incompat: u32,
    /// `available_compr_algs` with COMPR_CFGS, else `lz4_max_distance`.
    pub u1: u16,
    pub extra_devices: u16,
    pub devt_slotoff: u16,
    pub dirblkbits: u8,
    pub xattr_prefix_count: u8,
    pub xattr_prefix_start: u32,
    pub packed_nid: u64,
    pub xattr_filter_reserved: u8,
    /// Index of the long xattr prefix that names the inode fingerprint
    /// (with COMPAT_ISHARE_XATTRS).
    pub ishare_xattr_prefix_id: u8,
    pub build_time: u32,
    pub root_nid_64: u64,
    /// The metabox inode (first extension slot; with INCOMPAT_METABOX).
    pub metabox_nid: u64,
}

impl Superblock {
    /// Decodes the base 128 bytes at absolute offset 1024.
    pub fn parse(b: &[u8; SB_BASE_SIZE]) -> Result<Self, FormatError> {
        let magic = u32_at(b, 0x00);
        if magic != EROFS_MAGIC {
            return Err(FormatError::BadMagic(magic));
        }
        Ok(Self {
            magic,
            checksum: u32_at(b, 0x04),
            feature_compat: u32_at(b, 0x08),
            blkszbits: u8_at(b, 0x0C),
            sb_extslots: u8_at(b, 0x0D),
            root_nid_16: u16_at(b, 0x0E),
            inos: u64_at(b, 0x10),
            epoch: u64_at(b, 0x18),
            fixed_nsec: u32_at(b, 0x20),
            blocks: u32_at(b, 0x24),
            meta_blkaddr: u32_at(b, 0x28),
            xattr_blkaddr: u32_at(b, 0x2C),
            uuid: array_at(b, 0x30),
            volume_name: array_at(b, 0x40),
            feature_incompat: u32_at(b, 0x50),
            u1: u16_at(b, 0x54),
            extra_devices: u16_at(b, 0x56),
            devt_slotoff: u16_at(b, 0x58),
            dirblkbits: u8_at(b, 0x5A),
            xattr_prefix_count: u8_at(b, 0x5B),
            xattr_prefix_start: u32_at(b, 0x5C),
            packed_nid: u64_at(b, 0x60),
            xattr_filter_reserved: u8_at(b, 0x68),
            ishare_xattr_prefix_id: u8_at(b, 0x69),
            build_time: u32_at(b, 0x6C),
            root_nid_64: u64_at(b, 0x70),
            metabox_nid: 0,
        })
    }

    /// Decodes the first extension slot (the 16 bytes after the base
    /// structure), present when `sb_extslots >= 1`.
    pub fn parse_ext(&mut self, slot: &[u8; SB_EXT_SIZE - SB_BASE_SIZE]) {
        self.metabox_nid = u64_at(slot, 0);
    }

    /// Encodes the first extension slot.
    pub fn ext_to_bytes(&self) -> [u8; SB_EXT_SIZE - SB_BASE_SIZE] {
        let mut b = [0u8; SB_EXT_SIZE - SB_BASE_SIZE];
        b[..8].copy_from_slice(&self.metabox_nid.to_le_bytes());
        b
    }

    /// Encodes the base 128 bytes (the checksum field as stored in `self`).
    pub fn to_bytes(&self) -> [u8; SB_BASE_SIZE] {
        let mut b = [0u8; SB_BASE_SIZE];
        let mut put = |off: usize, v: &[u8]| put_at(&mut b, off, v);
        put(0x00, &self.magic.to_le_bytes());
        put(0x04, &self.checksum.to_le_bytes());
        put(0x08, &self.feature_compat.to_le_bytes());
        put(0x0C, &[self.blkszbits, self.sb_extslots]);
        put(0x0E, &self.root_nid_16.to_le_bytes());
        put(0x10, &self.inos.to_le_bytes());
        put(0x18, &self.epoch.to_le_bytes());
        put(0x20, &self.fixed_nsec.to_le_bytes());
        put(0x24, &self.blocks.to_le_bytes());
        put(0x28, &self.meta_blkaddr.to_le_bytes());
        put(0x2C, &self.xattr_blkaddr.to_le_bytes());
        put(0x30, &self.uuid);
        put(0x40, &self.volume_name);
        put(0x50, &self.feature_incompat.to_le_bytes());
        put(0x54, &self.u1.to_le_bytes());
        put(0x56, &self.extra_devices.to_le_bytes());
        put(0x58, &self.devt_slotoff.to_le_bytes());
        put(0x5A, &[self.dirblkbits, self.xattr_prefix_count]);
        put(0x5C, &self.xattr_prefix_start.to_le_bytes());
        put(0x60, &self.packed_nid.to_le_bytes());
        put(
            0x68,
            &[self.xattr_filter_reserved, self.ishare_xattr_prefix_id],
        );
        put(0x6C, &self.build_time.to_le_bytes());
        put(0x70, &self.root_nid_64.to_le_bytes());
        b
    }

    /// A superblock with the magic set and every other field zero.
    pub fn empty() -> Self {
        Self {
            magic: EROFS_MAGIC,
            checksum: 0,
            feature_compat: 0,
            blkszbits: 12,
            sb_extslots: 0,
            root_nid_16: 0,
            inos: 0,
            epoch: 0,
            fixed_nsec: 0,
            blocks: 0,
            meta_blkaddr: 0,
            xattr_blkaddr: 0,
            uuid: [0; 16],
            volume_name: [0; 16],
            feature_incompat: 0,
            u1: 0,
            extra_devices: 0,
            devt_slotoff: 0,
            dirblkbits: 0,
            xattr_prefix_count: 0,
            xattr_prefix_start: 0,
            packed_nid: 0,
            xattr_filter_reserved: 0,
            ishare_xattr_prefix_id: 0,
            build_time: 0,
            root_nid_64: 0,
            metabox_nid: 0,
        }
    }

    /// Applies the checks the kernel makes at mount time that need only the
    /// superblock itself, and returns the block size.
    pub fn validate(&self) -> Result<BlockSize, FormatError> {
        let bs = BlockSize::from_bits(self.blkszbits)?;
        let unknown = self.feature_incompat & !incompat::KNOWN;
        let unsupported = self.feature_incompat & !incompat::SUPPORTED;
        if unknown != 0 || unsupported != 0 {
            return Err(FormatError::UnknownIncompat {
                bits: unsupported,
                names: incompat::names(unsupported),
            });
        }
        if self.dirblkbits != 0 {
            return Err(FormatError::invalid("dirblkbits", self.dirblkbits));
        }
        if self.sb_size() > 4096 - 1024 {
            return Err(FormatError::invalid("sb_extslots", self.sb_extslots));
        }
        if self.has_incompat(incompat::METABOX) {
            if self.sb_extslots == 0 {
                return Err(FormatError::invalid("metabox without sb_extslots", 0u8));
            }
            if self.metabox_nid >> 63 != 0 {
                return Err(FormatError::invalid("metabox nid", self.metabox_nid));
            }
        }
        Ok(bs)
    }

    /// The signed epoch compact inodes count their mtime from.
    pub fn epoch(&self) -> i64 {
        // The field is a two's-complement s64 on disk.
        i64::from_le_bytes(self.epoch.to_le_bytes())
    }

    /// Blocks of the primary device: `blocks` plus, in 48-bit images that
    /// store the root nid in `root_nid_64`, bits 32..47 from `root_nid_16`.
    pub fn total_blocks(&self) -> u64 {
        if self.has_incompat(incompat::BIT48) && self.root_nid_64 != 0 {
            u64::from(self.blocks) | (u64::from(self.root_nid_16) << 32)
        } else {
            u64::from(self.blocks)
        }
    }

    /// Size of the superblock on disk: 128 + 16 per extension slot.
    // why: sb_extslots is a u8, so 128 + 16 * 255 fits any usize.
    #[allow(clippy::arithmetic_side_effects)]
    pub fn sb_size(&self) -> usize {
        SB_BASE_SIZE + 16 * usize::from(self.sb_extslots)
    }

    pub fn has_compat(&self, bit: u32) -> bool {
        self.feature_compat & bit != 0
    }

    pub fn has_incompat(&self, bit: u32) -> bool {
        self.feature_incompat & bit != 0
    }

    /// The inode number Linux's driver reports for `nid` in this image
    /// (see [`Nid::kernel_ino`]; it depends on the metabox feature).
    pub fn kernel_ino(&self, nid: Nid) -> u64 {
        nid.kernel_ino(self.has_incompat(incompat::METABOX))
    }

    /// The nid whose [`Superblock::kernel_ino`] is `ino`.
    pub fn nid_of_kernel_ino(&self, ino: u64) -> Nid {
        Nid::from_kernel_ino(ino, self.has_incompat(incompat::METABOX))
    }

    /// The root directory's nid.
    pub fn root_nid(&self) -> Nid {
        if self.has_incompat(incompat::BIT48) && self.root_nid_64 != 0 {
            Nid(self.root_nid_64)
        } else {
            Nid(u64::from(self.root_nid_16))
        }
    }

    /// Bitmap of the algorithms the image may use (bit n = algorithm n).
    pub fn available_algorithms(&self) -> u16 {
        if self.has_incompat(incompat::COMPR_CFGS) {
            self.u1
        } else {
            1
        }
    }

    /// The volume label up to its first NUL.
    pub fn label(&self) -> &[u8] {
        self.volume_name
            .split(|&c| c == 0)
            .next()
            .unwrap_or_default()
    }

    /// The uuid in its usual text form.
    pub fn uuid_string(&self) -> String {
        let u = &self.uuid;
        let hex = |r: &[u8]| -> String { r.iter().map(|b| format!("{b:02x}")).collect() };
        format!(
            "{}-{}-{}-{}-{}",
            hex(&u[0..4]),
            hex(&u[4..6]),
            hex(&u[6..8]),
            hex(&u[8..10]),
            hex(&u[10..16])
        )
    }
}

/// Length of the range the superblock checksum covers, starting at 1024.
pub fn checksum_len(bs: BlockSize) -> usize {
    match bs.usize().checked_sub(1024) {
        Some(rest) if rest > 0 => rest,
        _ => bs.usize(),
    }
}

/// CRC-32C of the superblock region `region` (starting at absolute 1024,
/// [`checksum_len`] bytes), with the stored checksum field counted as zero.
/// Seeded with all ones and without the final inversion, as the kernel does.
pub fn compute_checksum(region: &[u8]) -> u32 {
    let (first, rest) = region.split_at_checked(8).unwrap_or((region, &[]));
    // Bytes 4..8 hold the checksum itself and count as zero.
    let head: Vec<u8> = first
        .iter()
        .enumerate()
        .map(|(i, &b)| if i < 4 { b } else { 0 })
        .collect();
    // crc32c() applies the standard pre- and post-inversion; undoing the
    // post-inversion gives the raw register the kernel stores.
    let crc = crc32c::crc32c(&head);
    let crc = crc32c::crc32c_append(crc, rest);
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_parse_round_trips() {
        let mut sb = Superblock::empty();
        sb.feature_compat = compat::SB_CHKSUM | compat::MTIME;
        sb.root_nid_16 = 36;
        sb.inos = 7;
        sb.epoch = 1_700_000_000;
        sb.fixed_nsec = 5;
        sb.blocks = 99;
        sb.uuid = [7; 16];
        sb.volume_name[..3].copy_from_slice(b"abc");
        sb.feature_incompat = incompat::CHUNKED_FILE;
        sb.ishare_xattr_prefix_id = 2;
        let b = sb.to_bytes();
        assert_eq!(&b[..4], &[0xe2, 0xe1, 0xf5, 0xe0]);
        assert_eq!(Superblock::parse(&b).unwrap(), sb);
        sb.metabox_nid = 38;
        let mut back = Superblock::parse(&b).unwrap();
        back.parse_ext(&sb.ext_to_bytes());
        assert_eq!(back, sb);
    }

    #[test]
    fn bit48_fields() {
        let mut sb = Superblock::empty();
        sb.epoch = (-5i64) as u64;
        assert_eq!(sb.epoch(), -5);
        sb.feature_incompat = incompat::BIT48;
        sb.blocks = 7;
        sb.root_nid_16 = 2;
        assert_eq!(sb.total_blocks(), 7);
        assert_eq!(sb.root_nid(), Nid(2));
        sb.root_nid_64 = 1 << 63;
        assert_eq!(sb.total_blocks(), (2 << 32) | 7);
        assert_eq!(sb.root_nid(), Nid(1 << 63));
        sb.feature_incompat |= incompat::METABOX;
        assert!(sb.validate().is_err(), "metabox needs an extension slot");
        sb.sb_extslots = 1;
        sb.metabox_nid = 38;
        assert!(sb.validate().is_ok());
        sb.metabox_nid |= 1 << 63;
        assert!(sb.validate().is_err(), "metabox inode in the metabox");
    }

    #[test]
    fn incompat_names_cover_unknown_bits() {
        assert_eq!(incompat::names(0x280), "48bit, unknown 0x200".to_string());
        let mut sb = Superblock::empty();
        sb.feature_incompat = 0x380;
        sb.sb_extslots = 1;
        match sb.validate() {
            Err(FormatError::UnknownIncompat { bits, .. }) => assert_eq!(bits, 0x200),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn checksum_matches_reference_vector() {
        // CRC-32C("123456789") = 0xe3069283 with the standard inversions; the
        // raw form (no final inversion) is its complement. The stored-field
        // zeroing touches bytes 4..8, so build a region whose bytes 4..8 are 0.
        let mut region = b"1234\0\0\0\0".to_vec();
        region.extend_from_slice(b"56789");
        let mut expect = crc32c::crc32c(&region);
        expect = !expect;
        assert_eq!(compute_checksum(&region), expect);
        assert_eq!(!crc32c::crc32c(b"123456789"), !0xe306_9283u32);
    }
}
