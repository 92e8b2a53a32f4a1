//! Bounded copies and length clamps for buffers filled from the image.

/// Copies as many bytes as both slices hold from `src` to the start of
/// `dst`; returns how many.
pub(crate) fn copy_prefix(dst: &mut [u8], src: &[u8]) -> usize {
    let n = dst.len().min(src.len());
    if let (Some(d), Some(s)) = (dst.get_mut(..n), src.get(..n)) {
        d.copy_from_slice(s);
    }
    n
}

/// `n` bytes, but at most `max`, as a length.
pub(crate) fn clamp_len(n: u64, max: usize) -> usize {
    usize::try_from(n).map_or(max, |n| n.min(max))
}

/// Splits off the first `n` bytes of `*rest` (all of it if shorter),
/// leaving the remainder in `*rest`.
pub(crate) fn take_front<'a>(rest: &mut &'a mut [u8], n: usize) -> &'a mut [u8] {
    let whole = std::mem::take(rest);
    let n = n.min(whole.len());
    let (front, back) = whole.split_at_mut_checked(n).unwrap_or_default();
    *rest = back;
    front
}
