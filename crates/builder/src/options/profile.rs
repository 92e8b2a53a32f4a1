//! Access profiles (FPC §3.3, §4.1): which parts of which files a program
//! reads at start-up, in what order, learned from traces (`ferrofs mount
//! --trace`) and used to lay data out for that start.
//!
//! Several traces merge as FPC keeps its core set: a file stays if at
//! least half of the traces read it; its ranges are the union over them,
//! its rank the order of first access in the first trace that has it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ferrofs_trace::merge_ranges;

use crate::error::{BuildError, Result};
use crate::tree::{InodeId, Tree};

/// What a profile says about one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileFile {
    /// Order of first access (0 first).
    pub rank: usize,
    /// Byte ranges read, sorted and merged; `None`: the whole file.
    pub ranges: Option<Vec<(u64, u64)>>,
}

/// The shortest cold gap between two hot pieces of a file that is kept
/// cold. A cut costs two partly filled pclusters and a restarted
/// dictionary (some KiB of image); a gap shorter than this, read along
/// with its neighbours, costs about as much in device bytes at LZMA's
/// ratios. Measured on a traced Python start on a Debian root (exact
/// reads, the lzma dense preset): cutting at every gap cost 1.9 % of the
/// image for 0.45x mksquashfs's bytes, 32 KiB 0.4 % for 0.48x; on `go
/// list` over the Go toolchain, 1.2 % for 0.48x (bench/results/start-58.md).
pub const PIECE_GAP_MIN: u64 = 32 << 10;

impl ProfileFile {
    /// The block-aligned ranges to keep in pclusters of their own, when the
    /// file is read in small pieces (reads averaging under 64 KiB) that
    /// leave cold gaps of at least [`PIECE_GAP_MIN`]; shorter gaps, and
    /// the file's ends when that short, join the pieces beside them.
    /// `None` for files read in bulk, or whose pieces would cover all of
    /// them (they keep the build's pcluster size). With a `window`, each
    /// range is widened by half of it on both sides, as the kernel's
    /// read-around widens a page fault.
    pub fn hot_pieces(&self, size: u64, bs: u64, window: u64) -> Option<Vec<(u64, u64)>> {
        let ranges = self.ranges.as_ref()?;
        let read: u64 = ranges.iter().map(|(a, b)| b - a).sum();
        if ranges.is_empty() || read / ranges.len() as u64 >= 64 << 10 {
            return None;
        }
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &(a, b) in ranges {
            let (a, b) = (a.saturating_sub(window / 2), b.saturating_add(window / 2));
            let a = a / bs * bs;
            let b = b.div_ceil(bs).saturating_mul(bs).min(size);
            if a >= b {
                continue;
            }
            match out.last_mut() {
                Some(l) if a < l.1.saturating_add(PIECE_GAP_MIN) => l.1 = l.1.max(b),
                _ => out.push((a, b)),
            }
        }
        if let Some(first) = out.first_mut().filter(|f| f.0 < PIECE_GAP_MIN) {
            first.0 = 0;
        }
        if let Some(last) = out.last_mut().filter(|l| size - l.1 < PIECE_GAP_MIN) {
            last.1 = size;
        }
        if out.is_empty() || out == [(0, size)] {
            return None;
        }
        Some(out)
    }
}

/// A merged profile, by path relative to the image root.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    files: HashMap<Vec<u8>, ProfileFile>,
    /// Read-around of the kernel that will read the image (0: reads are
    /// exactly what the traces show).
    pub window: u64,
}

/// One trace: files in first-access order with their ranges.
type Trace = Vec<(Vec<u8>, Option<Vec<(u64, u64)>>)>;

fn read_trace(path: &Path) -> Result<Trace> {
    let text = std::fs::read_to_string(path).map_err(BuildError::io(path))?;
    let reads = ferrofs_trace::parse(&text).map_err(|e| BuildError::input(path, e.to_string()))?;
    let mut order: Vec<Vec<u8>> = Vec::new();
    let mut ranges: HashMap<Vec<u8>, Option<Vec<(u64, u64)>>> = HashMap::new();
    for r in reads {
        let entry = ranges.entry(r.path.clone()).or_insert_with(|| {
            order.push(r.path.clone());
            Some(Vec::new())
        });
        match (r.range, entry.as_mut()) {
            (Some((o, l)), Some(v)) if l > 0 => v.push((o, o.saturating_add(l))),
            (Some(_), _) => {}
            (None, _) => *entry = None,
        }
    }
    Ok(order
        .into_iter()
        .map(|p| {
            let r = ranges.remove(&p).flatten().map(merge_ranges);
            (p, r)
        })
        .collect())
}

impl Profile {
    /// Loads and merges traces.
    pub fn load(paths: &[PathBuf]) -> Result<Self> {
        let traces: Vec<Trace> = paths.iter().map(|p| read_trace(p)).collect::<Result<_>>()?;
        let need = traces.len().div_ceil(2);
        let mut count: HashMap<&[u8], usize> = HashMap::new();
        for t in &traces {
            for (p, _) in t {
                *count.entry(p.as_slice()).or_default() += 1;
            }
        }
        let mut files: HashMap<Vec<u8>, ProfileFile> = HashMap::new();
        let mut rank = 0;
        for t in &traces {
            for (p, r) in t {
                if count[p.as_slice()] < need {
                    continue;
                }
                match files.get_mut(p) {
                    Some(f) => {
                        f.ranges = match (f.ranges.take(), r) {
                            (Some(mut a), Some(b)) => {
                                a.extend_from_slice(b);
                                Some(merge_ranges(a))
                            }
                            _ => None,
                        };
                    }
                    None => {
                        files.insert(
                            p.clone(),
                            ProfileFile {
                                rank,
                                ranges: r.clone(),
                            },
                        );
                        rank += 1;
                    }
                }
            }
        }
        Ok(Self { files, window: 0 })
    }

    /// The profile of a path relative to the root.
    pub(crate) fn get(&self, rel: &[u8]) -> Option<&ProfileFile> {
        self.files.get(rel)
    }

    /// How many files the profile names.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// The nid order of a profiled build: the root, then every file the
    /// start reads, in first-access order, each right after those of its
    /// ancestor directories not placed yet; the rest keeps `base` order.
    /// A start's lookups then read few metadata blocks (hot inodes share
    /// them) and the hot directories' blocks sit together.
    pub(crate) fn hot_first(&self, tree: &Tree, base: &[InodeId]) -> Vec<InodeId> {
        let mut hot: Vec<(usize, InodeId)> = base
            .iter()
            .filter_map(|&id| self.get(&tree.inodes[id].rel).map(|f| (f.rank, id)))
            .collect();
        hot.sort();
        let mut placed = vec![false; tree.inodes.len()];
        let mut order = Vec::with_capacity(base.len());
        placed[tree.root] = true;
        order.push(tree.root);
        let mut chain = Vec::new();
        for (_, id) in hot {
            chain.clear();
            let mut cur = id;
            // Parents form a tree rooted at `root`; the bound only guards
            // against a malformed one.
            for _ in 0..tree.inodes.len() {
                if placed[cur] {
                    break;
                }
                chain.push(cur);
                cur = tree.inodes[cur].parent;
            }
            for &c in chain.iter().rev() {
                if !placed[c] {
                    placed[c] = true;
                    order.push(c);
                }
            }
        }
        order.extend(base.iter().copied().filter(|&id| !placed[id]));
        order
    }

    /// Whether the profile names no file.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_cold_gaps_join_the_pieces_beside_them() {
        let f = |ranges: &[(u64, u64)]| ProfileFile {
            rank: 0,
            ranges: Some(ranges.to_vec()),
        };
        const M: u64 = 1 << 20;
        // A 16 KiB gap is read along; a 64 KiB one stays cold.
        assert_eq!(
            f(&[(40960, 45056), (61440, 65536), (131072, 135168)]).hot_pieces(M, 4096, 0),
            Some(vec![(40960, 65536), (131072, 135168)])
        );
        // Ends closer than PIECE_GAP_MIN to the file's are joined to them.
        assert_eq!(
            f(&[(8192, 12288), (M - 20480, M - 16384)]).hot_pieces(M, 4096, 0),
            Some(vec![(0, 12288), (M - 20480, M)])
        );
        // Most of a file read in small reads, one long cold gap: cut there.
        let most: Vec<(u64, u64)> = (0..200u64)
            .map(|i| (i * 4096, i * 4096 + 2048))
            .chain((0..40u64).map(|i| (M - 65536 + i * 1024, M - 65536 + i * 1024 + 512)))
            .collect();
        assert_eq!(
            f(&most).hot_pieces(M, 4096, 0),
            Some(vec![(0, 200 * 4096), (M - 65536, M)])
        );
        // Pieces that would cover the whole file: none.
        let dense: Vec<(u64, u64)> = (0..256u64).map(|i| (i * 4096, i * 4096 + 100)).collect();
        assert_eq!(f(&dense).hot_pieces(M, 4096, 0), None);
        // Bulk reads: none.
        assert_eq!(
            f(&[(0, 65536), (M - 65536, M)]).hot_pieces(4 * M, 4096, 0),
            None
        );
    }

    #[test]
    fn traces_merge_into_a_core_set() {
        let dir = std::env::temp_dir().join(format!("ferrofs-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a");
        let b = dir.join("b");
        let c = dir.join("c");
        std::fs::write(
            &a,
            "lib/x.so\t0\t4096\nbin/p\t0\t100\nlib/x.so\t65536\t4096\nrare\t0\t1\n",
        )
        .unwrap();
        std::fs::write(&b, "bin/p\t0\t100\nlib/x.so\t4096\t4096\n").unwrap();
        std::fs::write(&c, "# list\nbin/p\netc/conf\n").unwrap();
        let p = Profile::load(&[a, b, c]).unwrap();
        assert!(p.get(b"rare").is_none(), "read by one trace of three");
        assert!(p.get(b"etc/conf").is_none());
        let x = p.get(b"lib/x.so").unwrap();
        assert_eq!(x.rank, 0);
        assert_eq!(x.ranges, Some(vec![(0, 8192), (65536, 69632)]));
        let bin = p.get(b"bin/p").unwrap();
        assert_eq!((bin.rank, bin.ranges.clone()), (1, None));
        assert_eq!(
            x.hot_pieces(1 << 20, 4096, 0),
            Some(vec![(0, 8192), (65536, 69632)])
        );
        assert_eq!(
            x.hot_pieces(10_000, 4096, 0),
            None,
            "the cold end is too short to cut"
        );
        assert_eq!(
            x.hot_pieces(1 << 20, 4096, 16384),
            Some(vec![(0, 16384), (57344, 77824)]),
            "widened by 8 KiB on each side"
        );
        assert_eq!(
            x.hot_pieces(1 << 20, 4096, 32768),
            Some(vec![(0, 86016)]),
            "widened by 16 KiB on each side, the 24 KiB gap left is joined"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
