//! Device table slots (128 bytes each) describing extra devices.

use crate::le::{array_at, u16_at, u32_at};

pub const DEVICE_SLOT_SIZE: usize = 128;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSlot {
    pub tag: [u8; 64],
    pub blocks: u64,
    pub uniaddr: u64,
}

impl DeviceSlot {
    pub fn parse(b: &[u8; DEVICE_SLOT_SIZE], bit48: bool) -> Self {
        let hi = |off| {
            if bit48 {
                u64::from(u16_at(b, off)) << 32
            } else {
                0
            }
        };
        Self {
            tag: array_at(b, 0),
            blocks: u64::from(u32_at(b, 64)) | hi(72),
            uniaddr: u64::from(u32_at(b, 68)) | hi(74),
        }
    }

    /// The tag up to its first NUL.
    pub fn tag_str(&self) -> String {
        let tag = self.tag.split(|&c| c == 0).next().unwrap_or_default();
        String::from_utf8_lossy(tag).into_owned()
    }
}
