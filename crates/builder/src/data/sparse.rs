//! `-E sparse`: which runs of zeros in a compressed file become holes
//! (sparse pclusters, no blocks), from what the source says are holes and
//! from zeros found in the bytes read.
//!
//! A hole covers whole lclusters (it starts a map entry of its own, at
//! offset 0 of its first block) and never the file's last lcluster, so the
//! file's tail (inline, in the packed inode, or the EOF marker) is stored
//! as without the option.

use std::collections::HashMap;

use crate::data::extent::{Extent, MAX_EXTENT_BLOCKS};
use crate::error::{BuildError, Result};
use crate::options::view::DataOptions;
use crate::plan::zmap::ZExtent;
use crate::tree::content::ContentReader;
use crate::tree::{Inode, Kind};
use crate::util::out::Writer;

/// The shortest run of zeros made a hole: a pcluster's worth at least,
/// and four blocks. A shorter run costs a few bytes inside a neighbouring
/// pcluster, while cutting the data around it costs a partly filled block.
pub(crate) fn min_hole(pcluster: u64, bs: u64) -> u64 {
    pcluster.max(4 * bs)
}

/// The longest file, in blocks, whose holes go into full lcluster indexes
/// (the classic layout): 8 bytes a block, 32 MiB of index for 16 GiB at
/// 4 KiB blocks. A longer file is stored as without `-E sparse`
/// (chunk-based when the source has holes); 48-bit images map holes by
/// extent records, one record a hole, for any length.
pub(crate) const MAX_INDEXED_BLOCKS: u64 = 1 << 22;

/// Whether a compressed file of `size` bytes may get holes: always with
/// `extent_records` (a 48-bit image without `-E legacy-compress`), else
/// up to [`MAX_INDEXED_BLOCKS`].
pub(crate) fn may_have_holes(size: u64, bs: u64, extent_records: bool) -> bool {
    extent_records || size.div_ceil(bs) <= MAX_INDEXED_BLOCKS
}

/// Where a file of `size` bytes may have holes: before its last lcluster.
pub(crate) fn hole_limit(size: u64, bs: u64) -> u64 {
    size.saturating_sub(1) / bs * bs
}

/// The holes of file `ino` (sorted `(start, end)`): the source's holes
/// (its `data` ranges' gaps, not read) and the runs of zero blocks in its
/// data, joined, in whole blocks before the last lcluster, each at least
/// `min` bytes long.
pub(crate) fn find_holes(ino: &Inode, bs: u64, min: u64) -> Result<Vec<(u64, u64)>> {
    let size = ino.data_size();
    let limit = hole_limit(size, bs);
    let dense = [(0, size)];
    let data: &[(u64, u64)] = match &ino.kind {
        Kind::File { data: Some(d), .. } => d,
        _ => &dense,
    };
    let mut zero = Runs::default();
    let mut reader = None;
    let mut buf = Vec::new();
    // Where the source's next hole starts, and the end of what was read.
    let (mut at, mut read_to) = (0u64, 0u64);
    for &(s, e) in data {
        let (s, e) = (s.max(at), e.min(limit));
        if s >= e {
            continue;
        }
        // The source's hole before the range: whole blocks of zeros.
        zero.add(at, s, bs);
        let r = match &mut reader {
            Some(r) => r,
            None => reader.insert(ContentReader::open(ino)?),
        };
        // The range's blocks (a block it shares with a hole is read
        // whole: the bytes say), a buffer at a time.
        let mut b = (s / bs * bs).max(read_to);
        let end = e.next_multiple_of(bs);
        while b < end {
            let n = (end - b).min(SCAN_BYTES);
            buf.resize(n as usize, 0);
            r.read_exact_at(&mut buf, b)?;
            for (k, block) in buf.chunks(bs as usize).enumerate() {
                let from = b + k as u64 * bs;
                match is_zero(block) {
                    true => zero.add(from, from + bs, bs),
                    false => zero.cut(),
                }
            }
            b += n;
        }
        read_to = end;
        at = e;
    }
    zero.add(at.max(read_to), limit, bs);
    if let Some(r) = reader {
        r.finish()?;
    }
    Ok(zero.done(min))
}

/// Bytes read at a time when looking for zeros.
const SCAN_BYTES: u64 = 4 << 20;

/// Runs of whole zero blocks being collected, in order.
#[derive(Default)]
struct Runs {
    done: Vec<(u64, u64)>,
    open: Option<(u64, u64)>,
}

impl Runs {
    /// Adds the whole blocks of `[a, b)`, joining the open run when they
    /// follow it.
    fn add(&mut self, a: u64, b: u64, bs: u64) {
        let (a, b) = (a.next_multiple_of(bs), b / bs * bs);
        if a >= b {
            return;
        }
        match &mut self.open {
            Some(o) if o.1 == a => o.1 = b,
            _ => {
                self.cut();
                self.open = Some((a, b));
            }
        }
    }

    /// Ends the open run.
    fn cut(&mut self) {
        if let Some(o) = self.open.take() {
            self.done.push(o);
        }
    }

    /// The runs at least `min` long.
    fn done(mut self, min: u64) -> Vec<(u64, u64)> {
        self.cut();
        self.done.retain(|r| r.1 - r.0 >= min);
        self.done
    }
}

/// The parts of `holes` inside `[a, b)`, still whole blocks of at least
/// `min` bytes.
pub(crate) fn clip(holes: &[(u64, u64)], (a, b): (u64, u64), bs: u64, min: u64) -> Vec<(u64, u64)> {
    holes
        .iter()
        .filter_map(|&(s, e)| {
            let (s, e) = (s.max(a).next_multiple_of(bs), e.min(b) / bs * bs);
            (e > s && e - s >= min).then_some((s, e))
        })
        .collect()
}

/// Whether every byte is zero (64 bytes at a time, which vectorises).
fn is_zero(b: &[u8]) -> bool {
    let mut chunks = b.chunks_exact(64);
    let whole = chunks
        .by_ref()
        .all(|c| c.iter().fold(0u8, |acc, &x| acc | x) == 0);
    whole && chunks.remainder().iter().all(|&x| x == 0)
}

/// `[a, b)` split around `holes` (sorted, inside it): each piece with
/// whether it is a hole.
pub(crate) fn split(a: u64, b: u64, holes: &[(u64, u64)]) -> Vec<(u64, u64, bool)> {
    let mut out = Vec::new();
    let mut at = a;
    for &(s, e) in holes {
        if s > at {
            out.push((at, s, false));
        }
        out.push((s, e, true));
        at = e;
    }
    if at < b {
        out.push((at, b, false));
    }
    out
}

/// Joins adjacent holes of `extents` (sorted).
pub(crate) fn merge_holes(extents: &mut Vec<Extent>) {
    if !extents.iter().any(|e| e.hole) {
        return;
    }
    let mut out: Vec<Extent> = Vec::with_capacity(extents.len());
    for e in extents.drain(..) {
        match out.last_mut() {
            Some(p) if p.hole && e.hole && p.la + p.llen == e.la => p.llen += e.llen,
            _ => out.push(e),
        }
    }
    *extents = out;
}

/// The pclusters of zeros the build wrote, one per compressor, made on
/// first use: holes mapped by lcluster indexes name one, so that kernels
/// before 7.2, which do not know the `LI_HOLE` bit, decode zeros for them.
#[derive(Default)]
pub(crate) struct ZeroPclusters {
    made: HashMap<usize, ZeroPcluster>,
}

/// One block holding a compressed run of zeros.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ZeroPcluster {
    pblk: u64,
    /// How many zeros it decodes to (whole blocks): no hole mapped to it
    /// is longer.
    covers: u64,
}

impl ZeroPclusters {
    /// The pcluster of zeros of compressor `comp`, written at the next
    /// block of `w` the first time it is asked for.
    pub(crate) fn get(
        &mut self,
        w: &mut Writer,
        opts: &DataOptions<'_>,
        comp: usize,
    ) -> Result<ZeroPcluster> {
        if let Some(z) = self.made.get(&comp) {
            return Ok(*z);
        }
        let bs = opts.block_size();
        let c = opts
            .compress
            .ok_or_else(|| BuildError::Option("sparse pclusters without -z".into()))?;
        let compressor = c
            .compressors
            .get(comp)
            .ok_or_else(|| BuildError::Option(format!("no compressor {comp}")))?;
        // As long as an extent may be (the kernel decodes at most 12 MiB).
        let cap = c
            .max_extent_bytes
            .unwrap_or(u64::MAX)
            .min(MAX_EXTENT_BLOCKS * bs);
        let mut enc = compressor.encoder(c.pcluster_bytes)?;
        let zeros = vec![0u8; cap as usize];
        let mut dst = vec![0u8; bs as usize];
        let (consumed, written) = enc
            .compress_fixed_output(&zeros, &mut dst)
            .map_err(|e| BuildError::Option(format!("a pcluster of zeros: {e}")))?;
        let covers = consumed as u64 / bs * bs;
        if covers <= bs || written == 0 {
            return Err(BuildError::Option(format!(
                "{:?} does not compress {} zeros into a block",
                compressor.alg, cap
            )));
        }
        w.align_data()?;
        let pblk = w.block(bs);
        // Zero padding in front, as every compressed pcluster has it.
        w.zeros(bs - written as u64)?;
        w.write(&dst[..written])?;
        let z = ZeroPcluster { pblk, covers };
        self.made.insert(comp, z);
        Ok(z)
    }
}

impl ZeroPcluster {
    /// `zext` with every hole pointing at this pcluster (one block, a
    /// partial reference) and cut to what it decodes.
    pub(crate) fn map_holes(&self, zext: Vec<ZExtent>) -> Vec<ZExtent> {
        let mut out = Vec::with_capacity(zext.len());
        for z in zext {
            if !z.hole {
                out.push(z);
                continue;
            }
            let end = z.la + z.llen;
            let mut at = z.la;
            while at < end {
                let n = (end - at).min(self.covers);
                out.push(ZExtent {
                    la: at,
                    llen: n,
                    pblk: self.pblk,
                    blocks: 1,
                    ..z.clone()
                });
                at += n;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_join_whole_blocks_and_drop_short_ones() {
        let bs = 4096;
        let mut r = Runs::default();
        // A hole ending inside a block, then the rest of that block and
        // the next read as zeros: one run of whole blocks.
        r.add(1000, 3 * bs + 5, bs);
        r.add(3 * bs, 4 * bs, bs);
        r.add(4 * bs, 5 * bs, bs);
        r.cut();
        r.add(7 * bs, 8 * bs, bs);
        r.cut();
        r.add(9 * bs, 20 * bs, bs);
        assert_eq!(r.done(2 * bs), vec![(bs, 5 * bs), (9 * bs, 20 * bs)]);
    }

    #[test]
    fn clipped_holes_stay_whole_blocks() {
        let bs = 4096;
        let holes = [(bs, 10 * bs), (20 * bs, 30 * bs)];
        assert_eq!(
            clip(&holes, (3 * bs + 7, 25 * bs + 1), bs, 4 * bs),
            vec![(4 * bs, 10 * bs), (20 * bs, 25 * bs)]
        );
        assert_eq!(
            clip(&holes, (7 * bs, 24 * bs), bs, 4 * bs),
            vec![(20 * bs, 24 * bs)]
        );
        assert!(is_zero(&[0u8; 200]) && !is_zero(&[[0u8; 130].as_slice(), &[1]].concat()));
    }

    #[test]
    fn a_range_splits_around_its_holes() {
        let s = split(0, 100, &[(10, 20), (50, 100)]);
        assert_eq!(
            s,
            vec![
                (0, 10, false),
                (10, 20, true),
                (20, 50, false),
                (50, 100, true)
            ]
        );
        let mut e = vec![Extent::hole(0, 4), Extent::hole(4, 6)];
        e.push(Extent::new(10, 5, None));
        e.push(Extent::hole(15, 5));
        merge_holes(&mut e);
        let got: Vec<_> = e.iter().map(|e| (e.la, e.llen, e.hole)).collect();
        assert_eq!(got, vec![(0, 10, true), (10, 5, false), (15, 5, true)]);
    }
}
