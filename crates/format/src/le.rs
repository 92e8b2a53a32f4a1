//! Little-endian field readers over byte slices whose length the caller has
//! already checked (every caller parses a fixed-size array).

pub(crate) fn u8_at<const N: usize>(b: &[u8; N], off: usize) -> u8 {
    b[off]
}

pub(crate) fn u16_at<const N: usize>(b: &[u8; N], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

pub(crate) fn u32_at<const N: usize>(b: &[u8; N], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

pub(crate) fn u64_at<const N: usize>(b: &[u8; N], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

/// Copies `M` bytes starting at `off` out of a fixed array.
pub(crate) fn array_at<const N: usize, const M: usize>(b: &[u8; N], off: usize) -> [u8; M] {
    let mut a = [0u8; M];
    a.copy_from_slice(&b[off..off + M]);
    a
}

/// Reads a u32 from an unsized slice, `None` when out of bounds.
pub(crate) fn get_u32(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}
