//! Longest-match finder for the LZ4 optimal parser: a binary tree of the
//! last 64 KiB of positions, keyed by the bytes that follow each one.
//!
//! LZ4 prices every offset alike (two bytes), so of all earlier positions
//! only the one sharing the longest prefix with the current position
//! matters. Each position is inserted as the new root of its 4-byte hash's
//! tree; walking down splits the old tree into the parts that sort before
//! and after it, meeting the longest common prefixes on the way. The walk
//! stops after [`Tree::depth`] nodes, so its cost is bounded per position.
//!
//! Positions are `u32` offsets into the caller's input (at most
//! `crate::lz4`'s 2 GB input limit). A returned match is always checked
//! against the bytes, so a tree made inexact by a cut-off walk can cost
//! ratio, never correctness.

/// No position (an empty tree or child).
const NONE: u32 = u32::MAX;
/// LZ4's largest match offset.
pub(super) const MAX_OFFSET: usize = 65_535;
/// The tree keeps one node pair per position of the last 64 KiB.
const WINDOW_MASK: usize = (1 << 16) - 1;
/// Bits of the 4-byte hash that selects a tree.
const HASH_LOG: u32 = 16;

/// The binary-tree match finder's state, reused across calls.
pub(super) struct Tree {
    /// Root (latest position) of each hash's tree.
    head: Vec<u32>,
    /// Children of each position in the window: `[2p]` smaller, `[2p+1]`
    /// larger suffixes.
    son: Vec<u32>,
    /// Most nodes one walk visits.
    depth: u32,
}

/// A match: `len` bytes at distance `dist` back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Match {
    pub len: usize,
    pub dist: usize,
}

impl Tree {
    pub fn new(depth: u32) -> Self {
        Self {
            head: vec![NONE; 1 << HASH_LOG],
            son: vec![NONE; 2 * (WINDOW_MASK + 1)],
            depth,
        }
    }

    /// Forget every position (a new, independent input).
    pub fn reset(&mut self) {
        self.head.fill(NONE);
    }

    /// Insert `pos` and return the longest earlier match of at most
    /// `limit` bytes (`len` 0 when there is none of 4 bytes or more).
    /// `pos + 4 <= src.len()` and `pos + limit <= src.len()`.
    pub fn insert_find(&mut self, src: &[u8], pos: usize, limit: usize) -> Match {
        let h = hash4(src, pos);
        let mut cand = self.head[h];
        self.head[h] = pos as u32;
        let slot = 2 * (pos & WINDOW_MASK);
        // Where the next smaller / larger node is to be linked.
        let mut lo_link = slot;
        let mut hi_link = slot + 1;
        let (mut lo_len, mut hi_len) = (0usize, 0usize);
        let mut best = Match::default();
        let mut left = self.depth;
        loop {
            if cand == NONE || left == 0 || pos - cand as usize > MAX_OFFSET {
                self.son[lo_link] = NONE;
                self.son[hi_link] = NONE;
                break;
            }
            left -= 1;
            let c = cand as usize;
            let pair = 2 * (c & WINDOW_MASK);
            let from = lo_len.min(hi_len);
            let len = if from + 8 <= limit {
                let x = word(src, c + from) ^ word(src, pos + from);
                if x != 0 {
                    from + (x.trailing_zeros() / 8) as usize
                } else {
                    common(src, c, pos, from + 8, limit)
                }
            } else {
                common(src, c, pos, from, limit)
            };
            if len > best.len {
                best = Match { len, dist: pos - c };
            }
            if len == limit {
                // Equal as far as we look: `pos` takes over the node's place.
                self.son[lo_link] = self.son[pair];
                self.son[hi_link] = self.son[pair + 1];
                break;
            }
            if src[c + len] < src[pos + len] {
                self.son[lo_link] = cand;
                lo_link = pair + 1;
                cand = self.son[pair + 1];
                lo_len = len;
            } else {
                self.son[hi_link] = cand;
                hi_link = pair;
                cand = self.son[pair];
                hi_len = len;
            }
        }
        // The walk's prefix bookkeeping can be off after cut-offs: trust
        // only what the bytes say.
        if best.len >= 4 {
            let real = common(src, pos - best.dist, pos, 0, best.len);
            best.len = real;
        }
        if best.len < 4 {
            best = Match::default();
        }
        best
    }
}

#[inline]
fn hash4(src: &[u8], pos: usize) -> usize {
    let mut w = [0u8; 4];
    w.copy_from_slice(&src[pos..pos + 4]);
    (u32::from_le_bytes(w).wrapping_mul(2_654_435_761) >> (32 - HASH_LOG)) as usize
}

#[inline]
fn word(src: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&src[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Length of the common prefix of `src[a..]` and `src[b..]` (`a < b`),
/// known to be at least `from`, counted up to `limit`
/// (`b + limit <= src.len()`).
#[inline]
pub(super) fn common(src: &[u8], a: usize, b: usize, from: usize, limit: usize) -> usize {
    let mut i = from;
    while i + 8 <= limit {
        let x = word(src, a + i) ^ word(src, b + i);
        if x != 0 {
            return i + (x.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < limit && src[a + i] == src[b + i] {
        i += 1;
    }
    i
}
