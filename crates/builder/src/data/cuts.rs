//! Content-defined segment cuts for `-E dedupe`: where a long file is split
//! into independently compressed segments, chosen by a rolling hash of its
//! bytes instead of every 4 MiB. The same run of bytes in two files (a
//! shared library and the static archive that holds the same data, a
//! resource embedded twice) is then cut at the same places once the first
//! common cut is passed; each common segment compresses to the same
//! pclusters, which the writer's pcluster dedupe stores once. Without
//! dedupe, segments stay on the fixed grid.
//!
//! A cut is the end of a 64-byte window whose gear hash falls under a
//! threshold, the first such end at least a quarter segment past the
//! previous cut (so runs of equal bytes, which hash alike, do not cut
//! often). Where there is none within two segments, the cut is the last
//! window end before that whose hash falls under a threshold sixteen times
//! looser, or two segments on when there is none either. A file's first
//! cut is the first window end past a sixteenth of a segment under the
//! looser threshold: two files that hold a common run a few KiB apart
//! from their starts then take the same first cut inside it, instead of
//! each ending its first segment where its own head says and sharing
//! nothing before the run's first strict cut. The hash depends only on
//! the window, so two files agree on every cut inside a common run after
//! the first one both take; the extents in between depend only on the
//! segment's bytes (see
//! [`Shape::by_content`](crate::data::compress::Shape::by_content)). The
//! table, the thresholds and the bounds fix where images cut: changing
//! them changes the bytes of every image built with dedupe.

use crate::error::Result;

/// The gear hash's table: 256 pseudo-random words (splitmix64 from a fixed
/// seed).
const GEAR: [u64; 256] = gear_table();

const fn gear_table() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut s: u64 = 0x6665_7272_6f66_7321;
    let mut i = 0;
    while i < 256 {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        t[i] = z ^ (z >> 31);
        i += 1;
    }
    t
}

/// The segments `(offset, length)` a file's piece `[start, end)` is
/// compressed in: every `seg` bytes, or, with `content` (dedupe, and
/// pclusters of at least four blocks: see
/// [`Shape::cut_end`](crate::data::compress::Shape::cut_end)), where its
/// bytes say, about every `seg` bytes (`read(buf, offset)` gives them).
pub(crate) fn segments(
    read: impl FnMut(&mut [u8], u64) -> Result<()>,
    (start, end): (u64, u64),
    seg: u64,
    content: bool,
) -> Result<Vec<(u64, u64)>> {
    if content && end - start > seg {
        return CutRule::new(seg).segments(read, start, end);
    }
    let mut out = Vec::new();
    let mut off = start;
    while off < end {
        let len = seg.min(end - off);
        out.push((off, len));
        off += len;
    }
    Ok(out)
}

/// Bytes the gear hash depends on: each step shifts the hash left by one,
/// so after 64 bytes earlier ones are gone.
const WINDOW: u64 = 64;

/// How many times more often [`CutRule::backup`] cuts than the threshold.
const BACKUP_DENSITY: u64 = 16;

/// Bytes read at a time while looking for a cut.
const CHUNK: usize = 1 << 20;

/// How a piece of `seg`-byte nominal segments is cut: the shortest and the
/// longest segment, and the hash threshold (a cut is expected every
/// `seg - min` bytes past the shortest, so segments average about `seg`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CutRule {
    min: u64,
    max: u64,
    threshold: u64,
    /// A looser threshold: where no window end passes [`Self::threshold`]
    /// before the longest segment, the last that passes this one is the
    /// cut; a file's first cut is the first that passes it.
    backup: u64,
    /// The shortest first segment.
    lead_min: u64,
}

impl CutRule {
    /// The rule for nominal segments of `seg` bytes.
    pub(crate) fn new(seg: u64) -> Self {
        let seg = seg.max(4 * WINDOW);
        let min = seg / 4;
        CutRule {
            min,
            max: seg.saturating_mul(2),
            threshold: u64::MAX / (seg - min),
            backup: (u64::MAX / (seg - min)).saturating_mul(BACKUP_DENSITY),
            lead_min: min / 4,
        }
    }

    /// The segments `(offset, length)` that tile `[start, end)` of a file
    /// whose bytes `read(buf, offset)` gives, cut where the bytes say. No
    /// segment is longer than two nominal ones; the first is at least a
    /// sixteenth of one, and the others but the last at least a quarter
    /// (the last is what follows the last cut, as on the fixed grid: short
    /// ones go whole to the fragment).
    pub(crate) fn segments(
        &self,
        mut read: impl FnMut(&mut [u8], u64) -> Result<()>,
        start: u64,
        end: u64,
    ) -> Result<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        let mut at = start;
        let mut buf = Vec::new();
        while end.saturating_sub(at) > self.min {
            let lead = at == start;
            let Some(next) = self.next_cut(&mut read, at, end, &mut buf, lead)? else {
                break;
            };
            out.push((at, next - at));
            at = next;
        }
        if at < end {
            out.push((at, end - at));
        }
        Ok(out)
    }

    /// The cut after the one at `at`: the first window end in
    /// `[at + min, at + max)` before `end` whose hash is under the
    /// threshold, else the last one there under the looser one, else
    /// `at + max`; `None` when `end` comes first. With `lead` (the file's
    /// first cut), the first window end past `at + lead_min` under the
    /// looser threshold.
    fn next_cut(
        &self,
        read: &mut impl FnMut(&mut [u8], u64) -> Result<()>,
        at: u64,
        end: u64,
        buf: &mut Vec<u8>,
        lead: bool,
    ) -> Result<Option<u64>> {
        let (first, threshold) = match lead {
            true => (at + self.lead_min, self.backup),
            false => (at + self.min, self.threshold),
        };
        let last = at.saturating_add(self.max).min(end);
        let mut h = 0u64;
        let mut backup = None;
        // Warm the hash up on the window before the first candidate.
        let mut off = first.saturating_sub(WINDOW).max(at);
        while off < last {
            let n = usize::try_from(last - off).map_or(CHUNK, |n| n.min(CHUNK));
            buf.resize(n, 0);
            read(buf, off)?;
            for (i, &b) in buf.iter().enumerate() {
                h = (h << 1).wrapping_add(GEAR[usize::from(b)]);
                let pos = off + i as u64 + 1;
                if pos >= first && pos < end && h < self.backup {
                    if h < threshold {
                        return Ok(Some(pos));
                    }
                    backup = Some(pos);
                }
            }
            off += n as u64;
        }
        Ok((last < end).then(|| backup.unwrap_or(last)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Incompressible bytes from a seed.
    fn noise(seed: u64, n: usize) -> Vec<u8> {
        ferrofs_testkit::corpus::random_bytes(n, seed)
    }

    /// The cuts `rule` makes in `data`.
    fn cuts_of(rule: &CutRule, data: &[u8]) -> Vec<(u64, u64)> {
        let read = |buf: &mut [u8], off: u64| {
            let o = off as usize;
            buf.copy_from_slice(&data[o..o + buf.len()]);
            Ok(())
        };
        rule.segments(read, 0, data.len() as u64).unwrap()
    }

    #[test]
    fn a_shared_run_is_cut_at_the_same_bytes_in_both_files() {
        let rule = CutRule::new(64 << 10);
        let shared = noise(7, 3 << 20);
        let mut a = noise(1, 100_003);
        a.extend_from_slice(&shared);
        a.extend_from_slice(&noise(2, 50_000));
        let mut b = noise(3, 777_777);
        b.extend_from_slice(&shared);
        let (sa, sb) = (cuts_of(&rule, &a), cuts_of(&rule, &b));
        for s in [&sa, &sb] {
            // The segments tile the file, within the bounds.
            let mut at = 0;
            for (k, &(o, l)) in s.iter().enumerate() {
                assert_eq!(o, at);
                assert!(l <= rule.max, "segment {k} of {l} bytes");
                assert!(l >= rule.min || k + 1 == s.len() || (k == 0 && l >= rule.lead_min));
                assert!(l > 0);
                at += l;
            }
        }
        assert_eq!(at_end(&sa), a.len() as u64);
        assert_eq!(at_end(&sb), b.len() as u64);
        // Cuts inside the shared run, relative to its start.
        let inner = |s: &[(u64, u64)], base: u64| -> Vec<u64> {
            s.iter()
                .map(|&(o, _)| o)
                .filter(|&o| o > base && o < base + shared.len() as u64)
                .map(|o| o - base)
                .collect()
        };
        let (ia, ib) = (inner(&sa, 100_003), inner(&sb, 777_777));
        assert!(ia.len() > 20, "{} cuts", ia.len());
        // After the first few, every cut of one file is a cut of the other.
        let common = ia.iter().filter(|c| ib.contains(c)).count();
        assert!(common + 3 >= ia.len().min(ib.len()), "{ia:?} vs {ib:?}");
    }

    /// Where no window passes the strict threshold, the looser one cuts a
    /// common run alike in both files (the files' first cuts included,
    /// when the run starts near their heads); cut every two segments
    /// instead, the copies never line up.
    #[test]
    fn a_run_without_strict_cuts_is_cut_alike_by_the_looser_threshold() {
        let strict = CutRule::new(64 << 10);
        let shared = noise(8, 2 << 20);
        let mut a = noise(4, 300);
        a.extend_from_slice(&shared);
        let mut b = noise(5, 500);
        b.extend_from_slice(&shared);
        let inner = |s: &[(u64, u64)], base: u64| -> Vec<u64> {
            s.iter()
                .map(|&(o, _)| o)
                .filter(|&o| o > base)
                .map(|o| o - base)
                .collect()
        };
        let common = |rule: &CutRule| {
            let (ia, ib) = (
                inner(&cuts_of(rule, &a), 300),
                inner(&cuts_of(rule, &b), 500),
            );
            assert!(ia.len() > 10, "{} cuts", ia.len());
            (ia.iter().filter(|c| ib.contains(c)).count(), ia.len())
        };
        // No window passes a zero threshold. The looser one passes one
        // every 3 KiB or so, far more than the 200 bytes between the
        // copies.
        let looser = CutRule {
            threshold: 0,
            ..strict
        };
        let (shared_cuts, n) = common(&looser);
        assert!(shared_cuts + 1 >= n, "{shared_cuts} of {n} cuts common");
        let grid = CutRule {
            threshold: 0,
            backup: 0,
            ..strict
        };
        assert_eq!(common(&grid).0, 0);
    }

    fn at_end(s: &[(u64, u64)]) -> u64 {
        s.last().map_or(0, |&(o, l)| o + l)
    }

    #[test]
    fn equal_bytes_and_short_pieces_cut_within_bounds() {
        let rule = CutRule::new(64 << 10);
        // A run of zeros: the hash is constant, so either every point
        // past the minimum is a cut or none is.
        let zeros = vec![0u8; 1 << 20];
        let s = cuts_of(&rule, &zeros);
        assert!(s.len() > 1);
        assert!(s.iter().all(|&(_, l)| l <= rule.max));
        assert!(s[0].1 >= rule.lead_min);
        assert!(s[1..s.len() - 1].iter().all(|&(_, l)| l >= rule.min));
        assert_eq!(at_end(&s), 1 << 20);
        // A piece of at most the minimum is one segment.
        assert_eq!(cuts_of(&rule, &zeros[..16_000]), vec![(0, 16_000)]);
    }
}
