//! LZ4 block encoder for the top LZ4HC level on machine code: an optimal
//! parse over the longest match at every position, filling a fixed-size
//! output.
//!
//! liblz4's level 12 searches hash chains up to 16,384 links deep at every
//! position, which makes it the builder's slowest step on machine code
//! (on text and on data that hardly compresses it is faster than this
//! encoder, so [`crate::Encoder`] uses it there). Here a binary tree
//! ([`tree`]) finds the longest match in a bounded walk, and the parse
//! prices every way to reach each position in bytes of LZ4 output (LZ4's
//! costs are exact: a token, the literals, a 2-byte offset and length
//! extension bytes), then keeps the cheapest. The parse runs forward in
//! windows that close where no match crosses, so the output is written as
//! the input is parsed and stops when the next sequence would not fit:
//! fixed-size output in one pass.
//!
//! The output is a plain LZ4 block (liblz4, the kernel and
//! [`crate::Decoder`] decode it) that obeys the block-end rules: at least 5
//! literals after the last match, which starts at least 12 bytes before the
//! end of the block.
//!
//! Encoder side only: positions come from the builder's own buffers and are
//! bounded by construction (`src` is at most 2 GB, so positions fit `u32`;
//! prices and lengths in a window by [`WINDOW`]); the arithmetic, indexing
//! and truncation lints are for the decoders.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

mod tree;

use tree::{common, Tree, MAX_OFFSET};

/// Shortest match LZ4 encodes.
const MIN_MATCH: usize = 4;
/// A block ends with at least this many literals.
const LAST_LITERALS: usize = 5;
/// The last match starts at least this many bytes before the block's end.
const MF_LIMIT: usize = 12;
/// A match this long is taken at once, without pricing the alternatives.
const SUFFICIENT: usize = 128;
/// Most positions one parse window spans.
const WINDOW: usize = 1 << 12;
/// Every match length up to this is priced; a longer match only at its
/// full length (the ends in between are priced through the same match
/// found again one position on, at most a byte dearer).
const SHORT_ENDS: usize = 19;
/// Tree nodes visited per position.
const DEPTH: u32 = 64;
/// Positions inside a taken long match that are still added to the tree
/// (the last ones; the rest are skipped to keep zero runs cheap).
const TAIL_INSERTS: usize = 4096;

/// Extension bytes of a literal run (or of a match length less 4) of `n`.
fn ext(n: usize) -> usize {
    if n < 15 {
        0
    } else {
        1 + (n - 15) / 255
    }
}

/// Output bytes of a match of `len`, including its token.
fn match_price(len: usize) -> u32 {
    (3 + ext(len - MIN_MATCH)) as u32
}

/// Bytes a sequence takes: token, `lits` literals, and a match of `len`.
fn seq_bytes(lits: usize, len: usize) -> usize {
    1 + ext(lits) + lits + 2 + ext(len - MIN_MATCH)
}

/// Most literals a final run can hold in `room` bytes (with its token).
fn lits_fitting(room: usize) -> usize {
    if room == 0 {
        return 0;
    }
    let mut n = room - 1;
    while n > 0 && 1 + ext(n) + n > room {
        n -= 1;
    }
    n
}

/// One parse position: the cheapest known way to reach it.
#[derive(Clone, Copy, Default)]
struct Node {
    /// Output bytes from the window's start (literal runs counted as they
    /// grow, a match's token with the match).
    price: u32,
    /// Literals since the last match on that way.
    lits: u32,
    /// The match that ends here (0: a literal does).
    len: u32,
    dist: u32,
}

/// The optimal LZ4 encoder with its reusable buffers.
pub(crate) struct Lz4Opt {
    tree: Tree,
    nodes: Vec<Node>,
    /// Matches of the closing window, last first.
    path: Vec<(usize, usize, usize)>,
    /// Positions the last call parsed (bounds the work; tests look at it).
    parsed: usize,
}

/// Where the output stands.
struct Out<'a> {
    dst: &'a mut [u8],
    op: usize,
    /// Start of the literals not yet written.
    anchor: usize,
}

impl Lz4Opt {
    pub fn new() -> Self {
        Self {
            tree: Tree::new(DEPTH),
            nodes: vec![Node::default(); WINDOW + 1],
            path: Vec::new(),
            parsed: 0,
        }
    }

    /// Encode as much of `src` as fits in `dst`; returns (consumed,
    /// written), (0, 0) when not even one literal fits.
    pub fn compress_fill(&mut self, src: &[u8], dst: &mut [u8]) -> (usize, usize) {
        if src.is_empty() || dst.len() < 2 {
            return (0, 0);
        }
        self.tree.reset();
        self.parsed = 0;
        let mut out = Out {
            dst,
            op: 0,
            anchor: 0,
        };
        // Matches may start up to here, and end up to `src.len() - 5`.
        let last_start = src.len().saturating_sub(MF_LIMIT);
        let mut pos = 0;
        'parse: while pos < last_start {
            // Literals that cannot all be written end the block: no later
            // match could follow them (incompressible input stops here
            // instead of being parsed to its end).
            let pending = pos - out.anchor;
            if 1 + ext(pending) + pending >= out.dst.len() - out.op {
                break;
            }
            let end = self.parse_window(src, pos, out.anchor, last_start);
            self.parsed += end - pos;
            while let Some((start, len, dist)) = self.path.pop() {
                if !out.sequence(src, start, len, dist) {
                    break 'parse;
                }
            }
            pos = end;
        }
        out.finish(src)
    }

    /// Parse from `start` (literals pending since `anchor`) to where no
    /// match crosses; leaves the chosen matches in `path` (last first) and
    /// returns the window's end.
    fn parse_window(
        &mut self,
        src: &[u8],
        start: usize,
        anchor: usize,
        last_start: usize,
    ) -> usize {
        let nodes = &mut self.nodes;
        nodes[0] = Node {
            price: 0,
            lits: (start - anchor) as u32,
            len: 0,
            dist: 0,
        };
        let mut filled = 0; // nodes[..=filled] are set
        let mut reach = 0; // furthest match end seen
        let mut cur = 0;
        let close = loop {
            let pos = start + cur;
            if cur > 0 && cur >= reach {
                break cur;
            }
            if pos >= last_start || cur >= WINDOW {
                break cur;
            }
            let here = nodes[cur];
            // A literal to cur + 1.
            let lit_price =
                here.price + 1 + (ext(here.lits as usize + 1) - ext(here.lits as usize)) as u32;
            let lit = Node {
                price: lit_price,
                lits: here.lits + 1,
                len: 0,
                dist: 0,
            };
            if cur + 1 > filled {
                nodes[cur + 1] = lit;
                filled = cur + 1;
            } else if lit_price < nodes[cur + 1].price {
                nodes[cur + 1] = lit;
            }
            let limit = (src.len() - LAST_LITERALS - pos).min(SUFFICIENT);
            let m = self.tree.insert_find(src, pos, limit);
            if m.len >= MIN_MATCH {
                if m.len >= SUFFICIENT || cur + m.len > WINDOW {
                    // Take it now: the best way to `cur`, then this match.
                    let full = if m.len == limit {
                        common(
                            src,
                            pos - m.dist,
                            pos,
                            m.len,
                            src.len() - LAST_LITERALS - pos,
                        )
                    } else {
                        m.len
                    };
                    self.skip_inside(src, pos, full, last_start);
                    self.path.clear();
                    self.path.push((pos, full, m.dist));
                    self.trace_back(start, cur);
                    return pos + full;
                }
                let base = here.price;
                let short = m.len.min(SHORT_ENDS);
                for len in (MIN_MATCH..=short).chain((short + 1).max(m.len)..=m.len) {
                    let at = cur + len;
                    let node = Node {
                        price: base + match_price(len),
                        lits: 0,
                        len: len as u32,
                        dist: m.dist as u32,
                    };
                    if at > filled {
                        for n in &mut nodes[filled + 1..at] {
                            n.price = u32::MAX;
                        }
                        nodes[at] = node;
                        filled = at;
                    } else if node.price < nodes[at].price {
                        nodes[at] = node;
                    }
                }
                reach = reach.max(cur + m.len);
            }
            cur += 1;
        };
        self.path.clear();
        self.trace_back(start, close);
        start + close
    }

    /// Push the matches of the cheapest way from the window start to
    /// `at` onto `path`, last first.
    fn trace_back(&mut self, start: usize, mut at: usize) {
        while at > 0 {
            let n = self.nodes[at];
            if n.len == 0 {
                at -= 1;
            } else {
                let len = n.len as usize;
                at -= len;
                self.path.push((start + at, len, n.dist as usize));
            }
        }
    }

    /// Add the last positions inside a taken match at `pos` to the tree.
    fn skip_inside(&mut self, src: &[u8], pos: usize, len: usize, last_start: usize) {
        let from = (pos + 1).max((pos + len).saturating_sub(TAIL_INSERTS));
        for p in from..(pos + len).min(last_start) {
            let limit = (src.len() - LAST_LITERALS - p).min(SUFFICIENT);
            self.tree.insert_find(src, p, limit);
        }
    }
}

impl Out<'_> {
    /// Write the literals up to `start` and the match; false when the
    /// output is full: the match was shortened to fit, or (when not even
    /// 4 bytes of it fit) nothing was written. Either way room is left for
    /// the block's last literals.
    fn sequence(&mut self, src: &[u8], start: usize, len: usize, dist: usize) -> bool {
        debug_assert!((1..=MAX_OFFSET).contains(&dist) && start >= dist);
        let lits = start - self.anchor;
        // After the match: a token and the literals the block-end rules need.
        let tail = 1 + LAST_LITERALS.max(MF_LIMIT.saturating_sub(len));
        if self.op + seq_bytes(lits, len) + tail <= self.dst.len() {
            self.write(src, start, len, dist);
            return true;
        }
        // A long match costs a byte per 255: keep what fits of it.
        let worst_tail = 1 + MF_LIMIT - MIN_MATCH;
        let fixed = self.op + seq_bytes(lits, MIN_MATCH) + worst_tail;
        if let Some(room) = self.dst.len().checked_sub(fixed) {
            let longest = if room == 0 { 14 } else { 255 * room + 14 };
            let len = len.min(longest + MIN_MATCH);
            if len >= MIN_MATCH {
                self.write(src, start, len, dist);
            }
        }
        false
    }

    fn write(&mut self, src: &[u8], start: usize, len: usize, dist: usize) {
        let lits = start - self.anchor;
        let ml = len - MIN_MATCH;
        let token = (lits.min(15) << 4 | ml.min(15)) as u8;
        self.put(token);
        self.length_ext(lits);
        self.dst[self.op..self.op + lits].copy_from_slice(&src[self.anchor..start]);
        self.op += lits;
        self.dst[self.op..self.op + 2].copy_from_slice(&(dist as u16).to_le_bytes());
        self.op += 2;
        self.length_ext(ml);
        self.anchor = start + len;
    }

    /// The final literal run: as much input as fits.
    fn finish(mut self, src: &[u8]) -> (usize, usize) {
        let lits = lits_fitting(self.dst.len() - self.op).min(src.len() - self.anchor);
        if lits == 0 && self.anchor == 0 {
            return (0, 0);
        }
        self.put((lits.min(15) << 4) as u8);
        self.length_ext(lits);
        self.dst[self.op..self.op + lits].copy_from_slice(&src[self.anchor..self.anchor + lits]);
        self.op += lits;
        (self.anchor + lits, self.op)
    }

    fn put(&mut self, b: u8) {
        self.dst[self.op] = b;
        self.op += 1;
    }

    /// The extension bytes of a length whose token nibble is `n.min(15)`.
    fn length_ext(&mut self, n: usize) {
        if n < 15 {
            return;
        }
        let mut rest = n - 15;
        while rest >= 255 {
            self.put(255);
            rest -= 255;
        }
        self.put(rest as u8);
    }
}

#[cfg(test)]
mod tests;
