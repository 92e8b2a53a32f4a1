//! Typed metadata positions. A metadata address names a byte either of the
//! primary device (inodes, xattrs, inline tails, indexes outside a
//! metabox) or of the metabox data (2025 images); a pcluster's position in
//! the unified block address space is something else again. [`MetaAddr`]
//! keeps the two spaces apart, and its arithmetic never lets a primary
//! address grow into the metabox space or the other way round.

use std::fmt;

/// Bit 63 of a metadata address: the byte lies in the metabox data, not on
/// the primary device. Primary-device addresses never reach it (48-bit
/// block numbers times at most 4 KiB stay below 2^60).
pub const METABOX_SPACE: u64 = 1 << 63;

/// A byte of metadata: on the primary device, or in the metabox data.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MetaAddr(u64);

impl MetaAddr {
    /// Byte `pos` of the primary device; `None` past 2^63.
    pub const fn primary(pos: u64) -> Option<Self> {
        if pos & METABOX_SPACE == 0 {
            Some(Self(pos))
        } else {
            None
        }
    }

    /// Byte `pos` of the metabox data; `None` past 2^63.
    pub const fn metabox(pos: u64) -> Option<Self> {
        if pos & METABOX_SPACE == 0 {
            Some(Self(pos | METABOX_SPACE))
        } else {
            None
        }
    }

    /// Byte `pos` of the metabox data when `in_metabox`, else of the
    /// primary device.
    pub const fn new(pos: u64, in_metabox: bool) -> Option<Self> {
        if in_metabox {
            Self::metabox(pos)
        } else {
            Self::primary(pos)
        }
    }

    /// Byte `pos` of the same space as `self`.
    pub const fn with_offset(self, pos: u64) -> Option<Self> {
        Self::new(pos, self.in_metabox())
    }

    /// Whether the byte lies in the metabox data.
    pub const fn in_metabox(self) -> bool {
        self.0 & METABOX_SPACE != 0
    }

    /// The byte's position within its space (the primary device, or the
    /// metabox data).
    pub const fn offset(self) -> u64 {
        self.0 & !METABOX_SPACE
    }

    /// The address `n` bytes further on in the same space; `None` where
    /// that leaves the space.
    pub const fn checked_add(self, n: u64) -> Option<Self> {
        match self.offset().checked_add(n) {
            Some(o) => self.with_offset(o),
            None => None,
        }
    }

    /// The address rounded up to a multiple of `align` bytes (counted in
    /// its space), `None` where that leaves the space.
    pub fn round_up(self, align: u64) -> Option<Self> {
        ferrofs_format::round_up(self.offset(), align).and_then(|o| self.with_offset(o))
    }

    /// The encoded form: the offset, with [`METABOX_SPACE`] set for the
    /// metabox (as error locations and dumps print it).
    pub const fn bits(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for MetaAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for MetaAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.in_metabox() {
            true => write!(f, "metabox+{:#x}", self.offset()),
            false => write!(f, "{:#x}", self.offset()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_spaces_stay_apart() {
        let p = MetaAddr::primary(4096).unwrap();
        let m = MetaAddr::metabox(4096).unwrap();
        assert_ne!(p, m);
        assert!(!p.in_metabox() && m.in_metabox());
        assert_eq!((p.offset(), m.offset()), (4096, 4096));
        assert_eq!(m.bits(), 4096 | METABOX_SPACE);
        assert_eq!(p.checked_add(32).unwrap().offset(), 4128);
        assert!(m.checked_add(32).unwrap().in_metabox());
        // Neither space can be left by arithmetic or by construction.
        let top = MetaAddr::primary(METABOX_SPACE - 4).unwrap();
        assert_eq!(top.checked_add(4), None);
        assert_eq!(
            MetaAddr::metabox(METABOX_SPACE - 1).unwrap().checked_add(1),
            None
        );
        assert_eq!(MetaAddr::primary(METABOX_SPACE), None);
        assert_eq!(MetaAddr::metabox(u64::MAX), None);
        assert_eq!(format!("{m} {p:?}"), "metabox+0x1000 0x1000");
    }
}
