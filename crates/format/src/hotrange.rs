//! The hot-range record: which byte ranges of an image a recorded start-up
//! reads (`mkfs --profile`), so a reader of the image over a network can
//! fetch them up front in a few large requests. It lives in the boot area
//! (bytes 0..1024, before the superblock), which EROFS leaves to boot
//! loaders: kernels and fsck.erofs never read it and the superblock
//! checksum does not cover it. It is only a hint: a reader checks it (its
//! own checksum, the image length and superblock UUID it was made for,
//! ranges inside the image) and ignores it when anything is off.
//!
//! Layout (little-endian): `ferroHOT` magic; crc32c of bytes 12.. up to the
//! payload's end; payload length (u16); version (u8, 1); a zero byte; the
//! image length (u64) and superblock UUID (16 bytes) it was made for; then
//! the ranges, ascending, in units of [`UNIT`] bytes, each as two LEB128
//! numbers: the gap since the previous range's end, and the length.

use crate::error::FormatError;

/// Bytes of the boot area the record may use.
pub const AREA: usize = 1024;
/// Granularity of the recorded ranges.
pub const UNIT: u64 = 4096;
const MAGIC: &[u8; 8] = b"ferroHOT";
const VERSION: u8 = 1;
const HEADER: usize = 40;
/// Room for the ranges.
const PAYLOAD_MAX: usize = AREA - HEADER;

/// A decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HotRanges {
    /// Length of the image the ranges were recorded on.
    pub image_len: u64,
    /// The UUID of that image's superblock.
    pub uuid: [u8; 16],
    /// Byte ranges `(start, end)`, ascending, disjoint, [`UNIT`]-aligned
    /// (the last one may end at `image_len`).
    pub ranges: Vec<(u64, u64)>,
}

fn put_leb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let low = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

fn get_leb(b: &[u8], pos: &mut usize) -> Result<u64, FormatError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b
            .get(*pos)
            .ok_or(FormatError::invalid("hot-range record varint", *pos as u64))?;
        *pos = pos.saturating_add(1);
        let bits = u64::from(byte & 0x7f);
        if shift == 63 && bits > 1 {
            return Err(FormatError::invalid("hot-range record varint", *pos as u64));
        }
        v |= bits << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(FormatError::invalid("hot-range record varint", *pos as u64))
}

/// `ranges` in units: rounded out to [`UNIT`], sorted, and overlapping or
/// touching ones joined.
fn in_units(ranges: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut units: Vec<(u64, u64)> = ranges
        .iter()
        .filter(|(a, b)| a < b)
        .map(|&(a, b)| (a / UNIT, b.div_ceil(UNIT)))
        .collect();
    units.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(units.len());
    for (a, b) in units {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn payload(units: &[(u64, u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev = 0u64;
    for &(a, b) in units {
        put_leb(&mut out, a.saturating_sub(prev));
        put_leb(&mut out, b.saturating_sub(a));
        prev = b;
    }
    out
}

/// Joins the two ranges with the smallest gap between them.
fn merge_closest(units: &mut Vec<(u64, u64)>) {
    let best = units
        .windows(2)
        .enumerate()
        .min_by_key(|(_, w)| match w {
            [x, y] => y.0.saturating_sub(x.1),
            _ => u64::MAX,
        })
        .map(|(i, _)| i);
    if let Some(i) = best {
        if let Some(next) = units.get(i.saturating_add(1)).copied() {
            if let Some(cur) = units.get_mut(i) {
                cur.1 = next.1;
            }
            units.remove(i.saturating_add(1));
        }
    }
}

impl HotRanges {
    /// A record of `ranges` (any order, overlaps allowed) for an image of
    /// `image_len` bytes with superblock UUID `uuid`: ranges rounded out
    /// to [`UNIT`], gaps of at most `join` bytes closed, and then the
    /// closest ranges joined until the record fits the boot area (so the
    /// record covers at least what was asked, in fewer, larger ranges).
    pub fn new(ranges: &[(u64, u64)], join: u64, image_len: u64, uuid: [u8; 16]) -> Self {
        let mut units = in_units(ranges);
        let join = join / UNIT;
        let mut joined: Vec<(u64, u64)> = Vec::with_capacity(units.len());
        for (a, b) in units.drain(..) {
            match joined.last_mut() {
                Some(l) if a.saturating_sub(l.1) <= join => l.1 = b,
                _ => joined.push((a, b)),
            }
        }
        while payload(&joined).len() > PAYLOAD_MAX {
            merge_closest(&mut joined);
        }
        let ranges = joined
            .into_iter()
            .map(|(a, b)| {
                let end = b.saturating_mul(UNIT).min(image_len);
                (a.saturating_mul(UNIT), end)
            })
            .filter(|(a, b)| a < b)
            .collect();
        HotRanges {
            image_len,
            uuid,
            ranges,
        }
    }

    /// Bytes the ranges cover.
    pub fn bytes(&self) -> u64 {
        self.ranges
            .iter()
            .fold(0u64, |s, (a, b)| s.saturating_add(b.saturating_sub(*a)))
    }

    /// The boot area holding the record.
    pub fn encode(&self) -> [u8; AREA] {
        let units: Vec<(u64, u64)> = self
            .ranges
            .iter()
            .map(|&(a, b)| (a / UNIT, b.div_ceil(UNIT)))
            .collect();
        let mut p = payload(&units);
        p.truncate(PAYLOAD_MAX);
        let mut head = Vec::with_capacity(AREA);
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&[0; 4]);
        let plen = u16::try_from(p.len()).unwrap_or(0);
        head.extend_from_slice(&plen.to_le_bytes());
        head.extend_from_slice(&[VERSION, 0]);
        head.extend_from_slice(&self.image_len.to_le_bytes());
        head.extend_from_slice(&self.uuid);
        head.extend_from_slice(&p);
        let crc = crc32c::crc32c(head.get(12..).unwrap_or_default());
        if let Some(c) = head.get_mut(8..12) {
            c.copy_from_slice(&crc.to_le_bytes());
        }
        let mut area = [0u8; AREA];
        if let Some(dst) = area.get_mut(..head.len()) {
            dst.copy_from_slice(&head);
        }
        area
    }

    /// The record in a boot area: `Ok(None)` when there is none (no
    /// magic), an error when one is there but damaged. The ranges are
    /// checked to be ascending and disjoint and to end within the
    /// recorded image length; the caller compares that length and the
    /// UUID with the image it reads.
    pub fn decode(area: &[u8]) -> Result<Option<Self>, FormatError> {
        if area.get(..8) != Some(MAGIC.as_slice()) {
            return Ok(None);
        }
        let field = |r: std::ops::Range<usize>| {
            area.get(r).ok_or(FormatError::Truncated {
                need: HEADER,
                have: area.len(),
            })
        };
        let le = |r: std::ops::Range<usize>| -> Result<u64, FormatError> {
            let mut v = [0u8; 8];
            let s = field(r)?;
            v.get_mut(..s.len())
                .ok_or(FormatError::invalid("hot-range record field", 0u64))?
                .copy_from_slice(s);
            Ok(u64::from_le_bytes(v))
        };
        let stored = le(8..12)?;
        let len = usize::try_from(le(12..14)?).unwrap_or(usize::MAX);
        let version = le(14..15)?;
        if version != u64::from(VERSION) {
            return Err(FormatError::invalid("hot-range record version", version));
        }
        if len > PAYLOAD_MAX {
            return Err(FormatError::invalid("hot-range record length", len as u64));
        }
        let end = HEADER.saturating_add(len);
        let body = field(12..end)?;
        let computed = crc32c::crc32c(body);
        if u64::from(computed) != stored {
            return Err(FormatError::invalid("hot-range record checksum", stored));
        }
        let image_len = le(16..24)?;
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(field(24..40)?);
        let p = field(HEADER..end)?;
        let mut pos = 0usize;
        let mut prev = 0u64;
        let mut ranges = Vec::new();
        while pos < p.len() {
            let gap = get_leb(p, &mut pos)?;
            let n = get_leb(p, &mut pos)?;
            let bad = |v| FormatError::invalid("hot-range record range", v);
            let start = prev.checked_add(gap).ok_or(bad(gap))?;
            let stop = start.checked_add(n).ok_or(bad(n))?;
            if n == 0 || (gap == 0 && !ranges.is_empty()) {
                return Err(bad(start));
            }
            let (a, b) = (
                start.checked_mul(UNIT).ok_or(bad(start))?,
                stop.checked_mul(UNIT).ok_or(bad(stop))?.min(image_len),
            );
            if a >= b {
                return Err(bad(start));
            }
            ranges.push((a, b));
            prev = stop;
        }
        Ok(Some(HotRanges {
            image_len,
            uuid,
            ranges,
        }))
    }
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_rounds_out_and_joins() {
        let r = HotRanges::new(
            &[
                (5000, 6000),
                (0, 100),
                (8192, 9000),
                (1 << 20, (1 << 20) + 1),
            ],
            0,
            10 << 20,
            [3; 16],
        );
        assert_eq!(r.ranges, vec![(0, 12288), (1 << 20, (1 << 20) + 4096)]);
        let area = r.encode();
        assert_eq!(HotRanges::decode(&area).unwrap(), Some(r));
        // A gap of 64 KiB joined, one of 1 MiB not.
        let r = HotRanges::new(
            &[(0, 4096), (69632, 73728), (2 << 20, 3 << 20)],
            65536,
            4 << 20,
            [0; 16],
        );
        assert_eq!(r.ranges, vec![(0, 73728), (2 << 20, 3 << 20)]);
        // The last range stops at the image's end.
        let r = HotRanges::new(&[(4096, 5000)], 0, 5000, [0; 16]);
        assert_eq!(r.ranges, vec![(4096, 5000)]);
        assert_eq!(HotRanges::decode(&r.encode()).unwrap(), Some(r));
    }

    #[test]
    fn too_many_ranges_are_joined_to_fit() {
        let ranges: Vec<(u64, u64)> = (0..2000u64)
            .map(|i| (i * 40960 + i * 4096, i * 40960 + i * 4096 + 4096))
            .collect();
        let r = HotRanges::new(&ranges, 0, 1 << 40, [0; 16]);
        assert!(r.ranges.len() < 2000);
        for &(a, b) in &ranges {
            assert!(
                r.ranges.iter().any(|&(x, y)| x <= a && b <= y),
                "{a}..{b} covered"
            );
        }
        let d = HotRanges::decode(&r.encode()).unwrap().unwrap();
        assert_eq!(d, r);
    }

    #[test]
    fn absent_or_damaged_records() {
        assert_eq!(HotRanges::decode(&[0u8; AREA]).unwrap(), None);
        assert_eq!(HotRanges::decode(b"ferro").unwrap(), None);
        let r = HotRanges::new(&[(0, 4096), (1 << 20, 2 << 20)], 0, 4 << 20, [1; 16]);
        let good = r.encode();
        // Every flipped bit of the used part is caught (checksum, magic).
        for i in 0..HEADER + 6 {
            let mut a = good;
            a[i] ^= 0x10;
            assert_ne!(
                HotRanges::decode(&a).ok().flatten(),
                Some(r.clone()),
                "byte {i}"
            );
        }
        // Truncated area.
        assert!(HotRanges::decode(&good[..20]).is_err());
        // A payload that is not LEB128 pairs, or a zero-length range, with
        // a correct checksum.
        for p in [
            &[0x80u8][..],
            &[0, 0][..],
            &[0xff; 12][..],
            &[1, 1, 0, 1][..],
        ] {
            let mut a = good;
            a[12..14].copy_from_slice(&(p.len() as u16).to_le_bytes());
            a[HEADER..HEADER + p.len()].copy_from_slice(p);
            let crc = crc32c::crc32c(&a[12..HEADER + p.len()]);
            a[8..12].copy_from_slice(&crc.to_le_bytes());
            assert!(HotRanges::decode(&a).is_err(), "{p:?}");
        }
    }
}
