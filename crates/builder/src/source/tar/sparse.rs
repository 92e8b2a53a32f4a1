//! Regular members' data: the maps of sparse members (GNU old format in
//! the header and its extension blocks; PAX 0.0/0.1 in the extended
//! header; PAX 1.0 leading the data) and the archive segments a file's
//! bytes come from.

use super::fields::{number, parse_u64, Pax};
use super::input::Src;
use super::{BLOCK, MAX_META, MAX_SPARSE};
use crate::error::Result;
use crate::tree::content::Segment;

/// Data runs of a file: (offset, length).
pub(super) type Runs = Vec<(u64, u64)>;

/// The data runs (offset, length) of a sparse member, its real size and
/// the bytes the archive stores for it. `gnu_sparse`: a GNU `S` entry,
/// whose map is in header `h`. A PAX 1.0 map is read here from the start
/// of the member's data.
pub(super) fn map(
    src: &mut Src,
    h: &[u8; BLOCK],
    gnu_sparse: bool,
    pax: &Pax,
    size: u64,
    member: &str,
) -> Result<(Runs, u64, u64)> {
    if gnu_sparse {
        let (map, real) = gnu_map(src, h, member)?;
        return Ok((map, real, size));
    }
    let Some(major) = pax.sparse_major else {
        return Ok((Vec::new(), size, size));
    };
    let real = pax
        .sparse_realsize
        .ok_or_else(|| src.err(member, "sparse file without its size"))?;
    if major == 1 {
        let (map, stored) = pax1_map(src, size, member)?;
        return Ok((map, real, stored));
    }
    if !pax.sparse_map.len().is_multiple_of(2) {
        return Err(src.err(member, "odd sparse map"));
    }
    Ok((pairs(&pax.sparse_map), real, size))
}

/// A GNU `S` entry's map and real size: four entries in header `h`, then
/// 21 in each extension block that follows while the "more follow" flag
/// is set.
fn gnu_map(src: &mut Src, h: &[u8; BLOCK], member: &str) -> Result<(Runs, u64)> {
    let mut map: Runs = Vec::new();
    // Four 24-byte entries at byte 386 of the header.
    for entry in h.get(386..482).unwrap_or_default().chunks_exact(24) {
        add_gnu_entry(&mut map, entry).map_err(|e| src.err(member, e))?;
    }
    let real = h
        .get(483..495)
        .and_then(number)
        .ok_or_else(|| src.err(member, "bad realsize field"))?;
    let real = u64::try_from(real).map_err(|_| src.err(member, "bad realsize"))?;
    let mut extended = h.get(482).is_some_and(|&b| b != 0);
    let mut e = [0u8; BLOCK];
    while extended {
        if !src.block(&mut e)? {
            return Err(src.err(member, "truncated sparse header"));
        }
        // 21 entries, then the "more follow" flag at byte 504.
        for entry in e.get(..504).unwrap_or_default().chunks_exact(24) {
            add_gnu_entry(&mut map, entry).map_err(|e| src.err(member, e))?;
        }
        extended = e.get(504).is_some_and(|&b| b != 0);
    }
    Ok((map, real))
}

/// Adds GNU map entry `e` (offset and length, 12 bytes each) to `map`;
/// an empty entry (its first byte zero) adds nothing.
fn add_gnu_entry(map: &mut Runs, e: &[u8]) -> std::result::Result<(), &'static str> {
    let field = |r: std::ops::Range<usize>| {
        e.get(r)
            .and_then(number)
            .and_then(|v| u64::try_from(v).ok())
    };
    let (off, len) = (field(0..12), field(12..24));
    match (off, len) {
        (Some(o), Some(l)) if e.first().is_some_and(|&b| b != 0) => {
            if map.len() >= MAX_SPARSE {
                return Err("sparse map too long");
            }
            map.push((o, l));
            Ok(())
        }
        (Some(_), Some(_)) => Ok(()),
        _ => Err("bad sparse map entry"),
    }
}

/// A PAX 1.0 map, read from the start of the member's data (`size`
/// bytes): decimal numbers, one per line, in whole blocks. Also returns
/// the bytes of data after the map.
fn pax1_map(src: &mut Src, size: u64, member: &str) -> Result<(Runs, u64)> {
    let mut text = Vec::new();
    let mut block = [0u8; BLOCK];
    let mut used = 0u64;
    let nums = loop {
        if !src.block(&mut block)? {
            return Err(src.err(member, "truncated sparse map"));
        }
        used = used.saturating_add(BLOCK as u64);
        if used > MAX_META {
            return Err(src.err(member, "sparse map too long"));
        }
        text.extend_from_slice(&block);
        if let Some(nums) = pax1_numbers(&text).map_err(|e| src.err(member, e))? {
            break nums;
        }
    };
    let stored = size
        .checked_sub(used)
        .ok_or_else(|| src.err(member, "sparse map larger than the entry"))?;
    Ok((pairs(&nums), stored))
}

/// The numbers of a PAX 1.0 map (after its count of runs) once `text`'s
/// complete lines hold them all, `None` while more are to come.
fn pax1_numbers(text: &[u8]) -> std::result::Result<Option<Vec<u64>>, &'static str> {
    let mut needed: Option<u64> = None;
    let mut nums: Vec<u64> = Vec::new();
    let mut complete = 0;
    for (i, &c) in text.iter().enumerate() {
        if c != b'\n' {
            continue;
        }
        let line = text.get(complete..i).unwrap_or_default();
        complete = i.saturating_add(1);
        let v = parse_u64(line).ok_or("bad sparse map")?;
        let Some(n) = needed else {
            if v > MAX_SPARSE as u64 {
                return Err("sparse map too long");
            }
            // At most MAX_SPARSE: no overflow.
            needed = Some(v.saturating_mul(2));
            continue;
        };
        nums.push(v);
        if nums.len() as u64 == n {
            break;
        }
    }
    Ok(needed
        .is_some_and(|n| nums.len() as u64 >= n)
        .then_some(nums))
}

/// (offset, length) pairs of a flat list of numbers (a trailing odd one
/// is left out; callers check the count).
fn pairs(nums: &[u64]) -> Runs {
    nums.chunks_exact(2)
        .filter_map(|p| Some((*p.first()?, *p.get(1)?)))
        .collect()
}

/// Where a member's bytes are in the archive (its stored data starts at
/// `base`), and for a sparse file whose runs do not cover it whole, the
/// ranges that hold data.
pub(super) fn segments(
    map: &[(u64, u64)],
    sparse: bool,
    real: u64,
    stored: u64,
    size: u64,
    base: u64,
) -> std::result::Result<(Vec<Segment>, Option<Runs>), &'static str> {
    let mut segments = Vec::new();
    let mut ranges = Vec::new();
    if sparse {
        let mut phys = 0u64;
        let mut last_end = 0u64;
        for &(off, len) in map {
            let end = off
                .checked_add(len)
                .filter(|&e| e <= real && off >= last_end)
                .ok_or("sparse map out of order or beyond the file")?;
            if len > 0 {
                segments.push(Segment {
                    logical: off,
                    len,
                    physical: base
                        .checked_add(phys)
                        .ok_or("sparse map beyond the archive")?,
                });
                ranges.push((off, end));
            }
            phys = phys
                .checked_add(len)
                .filter(|&p| p <= stored)
                .ok_or("sparse map larger than its data")?;
            last_end = end;
        }
    } else if size > 0 {
        segments.push(Segment {
            logical: 0,
            len: size,
            physical: base,
        });
    }
    let data = if sparse && ranges.as_slice() != [(0, real)] {
        Some(ranges)
    } else {
        None
    };
    Ok((segments, data))
}
