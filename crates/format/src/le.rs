//! Little-endian field readers over fixed-size arrays at constant offsets
//! (every caller parses a fixed-size on-disk record), and one over unsized
//! slices that reports out-of-bounds as `None`.

/// Copies `M` bytes starting at `off` out of a fixed array.
///
/// Offsets are constants of the on-disk layout, so a field outside the
/// array is a bug of ours: tests catch it through the `debug_assert!`, and
/// a release build reads zeros rather than panicking.
pub(crate) fn bytes_at<const N: usize, const M: usize>(b: &[u8; N], off: usize) -> [u8; M] {
    let field = off.checked_add(M).and_then(|end| b.get(off..end));
    debug_assert!(field.is_some(), "field {off}+{M} outside a {N}-byte record");
    let mut a = [0u8; M];
    if let Some(s) = field {
        a.copy_from_slice(s);
    }
    a
}

pub(crate) fn u8_at<const N: usize>(b: &[u8; N], off: usize) -> u8 {
    u8::from_le_bytes(bytes_at(b, off))
}

pub(crate) fn u16_at<const N: usize>(b: &[u8; N], off: usize) -> u16 {
    u16::from_le_bytes(bytes_at(b, off))
}

pub(crate) fn u32_at<const N: usize>(b: &[u8; N], off: usize) -> u32 {
    u32::from_le_bytes(bytes_at(b, off))
}

pub(crate) fn u64_at<const N: usize>(b: &[u8; N], off: usize) -> u64 {
    u64::from_le_bytes(bytes_at(b, off))
}

/// Copies `M` bytes starting at `off` out of a fixed array.
pub(crate) fn array_at<const N: usize, const M: usize>(b: &[u8; N], off: usize) -> [u8; M] {
    bytes_at(b, off)
}

/// Reads a u32 from an unsized slice, `None` when out of bounds.
pub(crate) fn get_u32(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes(s.try_into().ok()?))
}

/// Writes `v` into a fixed record at the constant offset `off`; like
/// [`bytes_at`], a field outside the record is a bug of ours (debug
/// assertion) and is dropped in release builds rather than panicking.
pub(crate) fn put_at<const N: usize>(b: &mut [u8; N], off: usize, v: &[u8]) {
    let field = off.checked_add(v.len()).and_then(|end| b.get_mut(off..end));
    debug_assert!(
        field.is_some(),
        "field {off}+{} outside a {N}-byte record",
        v.len()
    );
    if let Some(d) = field {
        d.copy_from_slice(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_and_write_little_endian() {
        let mut b = [0u8; 12];
        put_at(&mut b, 2, &0x1122_3344u32.to_le_bytes());
        put_at(&mut b, 8, &0xABCDu16.to_le_bytes());
        assert_eq!(u32_at(&b, 2), 0x1122_3344);
        assert_eq!(u16_at(&b, 8), 0xABCD);
        assert_eq!(u8_at(&b, 3), 0x33);
        assert_eq!(array_at::<12, 2>(&b, 4), [0x22, 0x11]);
        assert_eq!(get_u32(&b, 8), Some(0xABCD));
        assert_eq!(get_u32(&b, 9), None);
        assert_eq!(get_u32(&b, usize::MAX), None);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "outside a 4-byte record")]
    fn a_field_outside_the_record_is_caught_in_tests() {
        let b = [0u8; 4];
        let _ = u32_at(&b, 2);
    }
}
