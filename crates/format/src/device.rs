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

/// The blocks of the unified address space an image of `total_blocks`
/// blocks and extra devices `slots` spans: past its own blocks and every
/// device at its mapped address (where a device appended to the image file
/// ends, as a tar index's archive is). `None` on overflow.
pub fn mapped_end(total_blocks: u64, slots: &[DeviceSlot]) -> Option<u64> {
    slots.iter().try_fold(total_blocks, |end, d| {
        Some(end.max(d.uniaddr.checked_add(d.blocks)?))
    })
}

/// How ferrofs binds an image to its `--blobdev` blob, which has no header
/// of its own: the blob's slot tag is `ferrofs-blob:` and 32 hex digits of
/// an id (a hash of the blob's bytes), and one block after the blob's
/// recorded blocks holds [`BLOB_TRAILER_MAGIC`], the same id and the block
/// count. Kernels and other tools read neither (they map the device's
/// first `blocks` blocks); ferrofs's readers refuse a device given for
/// such a slot whose trailer does not match, so an image is never read
/// with the blob of another build.
pub const BLOB_TAG_PREFIX: &[u8] = b"ferrofs-blob:";

/// The first bytes of a blob's trailer block.
pub const BLOB_TRAILER_MAGIC: [u8; 16] = *b"ferrofs blob id\n";

/// Bytes of a blob trailer's record (magic, id, block count); the rest of
/// its block is zeros.
pub const BLOB_TRAILER_LEN: usize = 40;

/// The slot tag for a blob with id `id`.
pub fn blob_tag(id: u128) -> [u8; 64] {
    let mut tag = [0u8; 64];
    for (d, s) in tag
        .iter_mut()
        .zip(format!("ferrofs-blob:{id:032x}").bytes())
    {
        *d = s;
    }
    tag
}

/// The record at the start of a blob's trailer block.
pub fn blob_trailer(id: u128, blocks: u64) -> [u8; BLOB_TRAILER_LEN] {
    let mut t = [0u8; BLOB_TRAILER_LEN];
    let (id, blocks) = (id.to_le_bytes(), blocks.to_le_bytes());
    let fields = BLOB_TRAILER_MAGIC.iter().chain(&id).chain(&blocks);
    for (d, s) in t.iter_mut().zip(fields) {
        *d = *s;
    }
    t
}

/// The id and block count a trailer record holds, if `b` is one.
pub fn parse_blob_trailer(b: &[u8; BLOB_TRAILER_LEN]) -> Option<(u128, u64)> {
    if !b.starts_with(&BLOB_TRAILER_MAGIC) {
        return None;
    }
    let id = u128::from_le_bytes(array_at(b, 16));
    let blocks = u64::from_le_bytes(array_at(b, 32));
    Some((id, blocks))
}

impl DeviceSlot {
    /// The blob id a ferrofs `--blobdev` slot's tag holds (see
    /// [`BLOB_TAG_PREFIX`]); `None` for other tags.
    pub fn blob_id(&self) -> Option<u128> {
        let rest = self.tag.strip_prefix(BLOB_TAG_PREFIX)?;
        let hex = rest.get(..32)?;
        if rest.get(32..)?.iter().any(|&b| b != 0) {
            return None;
        }
        u128::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    }
}

#[cfg(test)]
mod blob_tests {
    use super::*;

    #[test]
    fn blob_tags_and_trailers_round_trip_and_other_tags_are_not_ids() {
        let id = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128;
        let slot = DeviceSlot {
            tag: blob_tag(id),
            blocks: 7,
            uniaddr: 9,
        };
        assert_eq!(slot.blob_id(), Some(id));
        assert_eq!(parse_blob_trailer(&blob_trailer(id, 7)), Some((id, 7)));
        let mut bad = blob_trailer(id, 7);
        bad[3] = b'X';
        assert_eq!(parse_blob_trailer(&bad), None);
        let mut other = slot.clone();
        other.tag = [0; 64];
        assert_eq!(other.blob_id(), None);
        for (d, s) in other.tag.iter_mut().zip(b"sha256:abcde") {
            *d = *s;
        }
        assert_eq!(other.blob_id(), None);
        let mut long = blob_tag(id);
        if let Some(b) = long.get_mut(46) {
            *b = b'x';
        }
        other.tag = long;
        assert_eq!(other.blob_id(), None);
    }
}
