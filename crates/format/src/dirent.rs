//! Directory entries: 12-byte records at the start of each directory block,
//! followed by their names.

use crate::le::{u16_at, u64_at, u8_at};
use crate::Nid;

pub const DIRENT_SIZE: usize = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawDirent {
    pub nid: Nid,
    pub nameoff: u16,
    pub file_type: u8,
}

impl RawDirent {
    pub fn parse(b: &[u8; DIRENT_SIZE]) -> Self {
        Self {
            nid: Nid(u64_at(b, 0)),
            nameoff: u16_at(b, 8),
            file_type: u8_at(b, 10),
        }
    }

    pub fn to_bytes(&self) -> [u8; DIRENT_SIZE] {
        let mut b = [0u8; DIRENT_SIZE];
        b[0..8].copy_from_slice(&self.nid.0.to_le_bytes());
        b[8..10].copy_from_slice(&self.nameoff.to_le_bytes());
        b[10] = self.file_type;
        b
    }

    /// Reads entry `i` of a directory block, `None` if it lies outside `block`.
    pub fn at(block: &[u8], i: usize) -> Option<Self> {
        let start = i.checked_mul(DIRENT_SIZE)?;
        let s = block.get(start..start.checked_add(DIRENT_SIZE)?)?;
        let mut a = [0u8; DIRENT_SIZE];
        a.copy_from_slice(s);
        Some(Self::parse(&a))
    }
}
