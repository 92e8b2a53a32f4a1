//! Extended attributes: the inline body header, entry headers, the short
//! prefix table, long-prefix records and the name bloom filter.

use crate::le::{u16_at, u32_at, u8_at};

pub const XATTR_BODY_HEADER_SIZE: usize = 12;
pub const XATTR_ENTRY_HEADER_SIZE: usize = 4;
/// `e_name_index` bit that selects a long prefix.
pub const LONG_PREFIX_FLAG: u8 = 0x80;
/// Seed of the name filter hash (plus the short prefix index).
pub const NAME_FILTER_SEED: u32 = 0x25BB_E08F;

/// Header of an inode's inline xattr body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XattrBodyHeader {
    pub name_filter: u32,
    pub shared_count: u8,
}

impl XattrBodyHeader {
    pub fn parse(b: &[u8; XATTR_BODY_HEADER_SIZE]) -> Self {
        Self {
            name_filter: u32_at(b, 0),
            shared_count: u8_at(b, 4),
        }
    }
}

/// Header of one xattr entry (inline or shared).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XattrEntryHeader {
    pub name_len: u8,
    pub name_index: u8,
    pub value_size: u16,
}

impl XattrEntryHeader {
    pub fn parse(b: &[u8; XATTR_ENTRY_HEADER_SIZE]) -> Self {
        Self {
            name_len: u8_at(b, 0),
            name_index: u8_at(b, 1),
            value_size: u16_at(b, 2),
        }
    }
    /// Size of the whole entry, padded to 4 bytes.
    // why: a u8 name length plus a u16 value size plus 7 fits any usize.
    #[allow(clippy::arithmetic_side_effects)]
    pub fn entry_size(&self) -> usize {
        (XATTR_ENTRY_HEADER_SIZE + usize::from(self.name_len) + usize::from(self.value_size) + 3)
            & !3
    }
}

/// Encodes one xattr entry (header, name suffix, value, zero padding).
// why: runs on the builder's own values only, which has checked that the
// suffix fits a u8 and the value a u16; nothing here reads an image.
#[allow(clippy::arithmetic_side_effects, clippy::cast_possible_truncation)]
pub fn encode_entry(out: &mut Vec<u8>, name_index: u8, suffix: &[u8], value: &[u8]) {
    let start = out.len();
    out.push(suffix.len() as u8);
    out.push(name_index);
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(suffix);
    out.extend_from_slice(value);
    let padded = start + ((out.len() - start + 3) & !3);
    out.resize(padded, 0);
}

/// Encodes the 12-byte header of an inline xattr body.
pub fn encode_body_header(name_filter: u32, shared_count: u8) -> [u8; XATTR_BODY_HEADER_SIZE] {
    let mut b = [0u8; XATTR_BODY_HEADER_SIZE];
    b[0..4].copy_from_slice(&name_filter.to_le_bytes());
    b[4] = shared_count;
    b
}

/// The short prefix of a name index (1..=6), `None` for unknown indexes.
pub fn short_prefix(index: u8) -> Option<&'static [u8]> {
    Some(match index {
        1 => b"user.",
        2 => b"system.posix_acl_access",
        3 => b"system.posix_acl_default",
        4 => b"trusted.",
        5 => b"lustre.",
        6 => b"security.",
        _ => return None,
    })
}

/// Splits a full name into (short index, suffix) using the longest short
/// prefix it starts with.
pub fn split_short_prefix(name: &[u8]) -> Option<(u8, &[u8])> {
    let mut best: Option<(u8, &[u8])> = None;
    for idx in 1..=6u8 {
        if idx == 5 {
            continue;
        }
        let p = short_prefix(idx)?;
        if let Some(rest) = name.strip_prefix(p) {
            if best.is_none_or(|(_, r)| rest.len() < r.len()) {
                best = Some((idx, rest));
            }
        }
    }
    best
}

/// The filter bit of an attribute: `suffix` is the name after its short
/// prefix (a long prefix's infix included), `base_index` its short index.
pub fn name_filter_bit(base_index: u8, suffix: &[u8]) -> u32 {
    let seed = NAME_FILTER_SEED.wrapping_add(u32::from(base_index));
    xxhash_rust::xxh32::xxh32(suffix, seed) & 31
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_bits_of_the_documented_example() {
        // user.comment -> bit 19, user.mime -> bit 18 (filter 0xFFF3FFFF).
        assert_eq!(name_filter_bit(1, b"comment"), 19);
        assert_eq!(name_filter_bit(1, b"mime"), 18);
    }

    #[test]
    fn longest_short_prefix_wins() {
        assert_eq!(
            split_short_prefix(b"system.posix_acl_default"),
            Some((3, &b""[..]))
        );
        assert_eq!(split_short_prefix(b"user.x"), Some((1, &b"x"[..])));
        assert_eq!(split_short_prefix(b"foo.x"), None);
    }

    #[test]
    fn entry_size_pads_to_four() {
        let h = XattrEntryHeader {
            name_len: 3,
            name_index: 1,
            value_size: 2,
        };
        assert_eq!(h.entry_size(), 12);
    }
}
