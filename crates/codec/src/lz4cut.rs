//! Shortening an LZ4 block in place: keep its whole sequences up to a
//! point and end it with the rest of the input as literals, so the block
//! decodes to a given prefix of what it decoded to before. The builder uses
//! it where an extent must end a little earlier than the encoder stopped
//! (the kernel's in-place margin; a file's last stream cut to whole blocks
//! for ztailpacking, or before its tail goes to the fragment), instead of
//! compressing the shorter input again.

/// LZ4's block-end rules: the last 5 bytes are literals, and the last
/// match starts at least 12 bytes before the end.
const LAST_LITERALS: usize = 5;
const MF_LIMIT: usize = 12;

/// Reads an LZ4 length: `nibble`, plus extension bytes when it is 15.
fn length(block: &[u8], at: &mut usize, nibble: usize) -> Option<usize> {
    let mut n = nibble;
    if nibble == 15 {
        loop {
            let b = *block.get(*at)?;
            *at = at.checked_add(1)?;
            n = n.checked_add(usize::from(b))?;
            if b != 255 {
                break;
            }
        }
    }
    Some(n)
}

/// A sequence of a block that has a match.
struct Sequence {
    /// Bytes of the block up to its end.
    out: usize,
    /// Where its match starts and ends in the decoded data.
    start: usize,
    end: usize,
}

/// The sequences of the LZ4 block `block` that have a match, in order
/// (the last sequence, literals only, is not one); `None` where the block
/// cannot be parsed (the iteration then stops).
fn sequences(block: &[u8]) -> impl Iterator<Item = Option<Sequence>> + '_ {
    let (mut at, mut pos) = (0usize, 0usize);
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || at >= block.len() {
            return None;
        }
        let mut step = || -> Option<Option<Sequence>> {
            let token = usize::from(*block.get(at)?);
            at = at.checked_add(1)?;
            let lit = length(block, &mut at, token >> 4)?;
            at = at.checked_add(lit)?;
            pos = pos.checked_add(lit)?;
            if at >= block.len() {
                // The last sequence: literals only.
                return Some(None);
            }
            at = at.checked_add(2)?;
            let mlen = length(block, &mut at, token & 15)?.checked_add(4)?;
            let start = pos;
            pos = pos.checked_add(mlen)?;
            Some(Some(Sequence {
                out: at,
                start,
                end: pos,
            }))
        };
        match step() {
            Some(Some(s)) => Some(Some(s)),
            Some(None) => None,
            None => {
                failed = true;
                Some(None)
            }
        }
    })
}

/// Whether a block cut to decode to `keep` bytes can keep sequence `s`
/// (LZ4's end rules).
fn keeps(s: &Sequence, keep: usize) -> bool {
    s.end.saturating_add(LAST_LITERALS) <= keep && s.start.saturating_add(MF_LIMIT) <= keep
}

/// Extra length bytes of a literal run of `lit` bytes.
fn literal_ext(lit: usize) -> Option<usize> {
    match lit.checked_sub(15) {
        Some(over) => (over / 255).checked_add(1),
        None => Some(0),
    }
}

/// Rewrites the LZ4 block `dst[..written]`, which decodes to
/// `src[..n]` for some `n >= keep`, so that it decodes to exactly
/// `src[..keep]`: the sequences that end (with LZ4's end rules) within
/// `keep` stay as they are, and one literal run carries the rest. Returns
/// the new length, or `None` when the block cannot be parsed, the result
/// would not fit in `dst` or would be longer than `written`.
pub fn truncate_block(dst: &mut [u8], written: usize, src: &[u8], keep: usize) -> Option<usize> {
    let block = dst.get(..written)?;
    if keep > src.len() || keep < LAST_LITERALS {
        return None;
    }
    // (bytes of the block, bytes decoded) after the last sequence kept.
    let (mut cut_out, mut cut_in) = (0usize, 0usize);
    for s in sequences(block) {
        let s = s?;
        if !keeps(&s, keep) {
            break;
        }
        (cut_out, cut_in) = (s.out, s.end);
    }
    let lit = keep.checked_sub(cut_in)?;
    let len = cut_out
        .checked_add(literal_ext(lit)?)?
        .checked_add(lit)?
        .checked_add(1)?;
    if len > written {
        return None;
    }
    let literals = src.get(cut_in..keep)?;
    let out = dst.get_mut(cut_out..len)?;
    let (head, body) = out.split_at_mut(out.len().checked_sub(lit)?);
    let (token, lengths) = head.split_first_mut()?;
    *token = u8::try_from(lit.min(15)).ok()? << 4;
    if let Some(mut rest) = lit.checked_sub(15) {
        for b in lengths.iter_mut() {
            let v = rest.min(255);
            *b = u8::try_from(v).ok()?;
            rest = rest.checked_sub(v)?;
        }
    }
    body.copy_from_slice(literals);
    Some(len)
}

/// The longest prefix of the `decoded` bytes the LZ4 block `block`
/// decodes to that [`truncate_block`] makes a block of at most `limit`
/// bytes of: what compressing into `limit` bytes would consume, found
/// without compressing again. `None` when there is none or the block
/// cannot be parsed.
pub fn longest_prefix_within(block: &[u8], decoded: usize, limit: usize) -> Option<usize> {
    // The most literals after a cut at `cut_out` block bytes: the token,
    // the length bytes and the literals fit in what is left.
    let most = |cut_out: usize| -> Option<usize> {
        let budget = limit.checked_sub(cut_out)?.checked_sub(1)?;
        let mut lit = budget.checked_sub(literal_ext(budget)?)?;
        while lit
            .checked_add(1)?
            .checked_add(literal_ext(lit.checked_add(1)?)?)?
            <= budget
        {
            lit = lit.checked_add(1)?;
        }
        Some(lit)
    };
    let mut best = most(0).map(|l| l.min(decoded));
    for s in sequences(block) {
        let s = s?;
        if s.out >= limit {
            break;
        }
        // Cut after `s`: it stays only for a prefix that keeps it.
        if let Some(keep) = most(s.out).and_then(|l| s.end.checked_add(l)) {
            let keep = keep.min(decoded);
            if keeps(&s, keep) && best.is_none_or(|b| keep > b) {
                best = Some(keep);
            }
        }
    }
    best.filter(|&k| k >= LAST_LITERALS)
}

// Test code builds its own inputs; the hostile-input lints are for the
// library paths.
#[cfg(test)]
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]
mod tests {
    use super::*;

    fn mixed(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 4 {
                // A run, a copy from earlier, text, noise.
                0 => out.extend(std::iter::repeat_n(x as u8, (x >> 8) as usize % 300)),
                1 if out.len() > 1000 => {
                    let from = (x >> 8) as usize % (out.len() - 500);
                    out.extend_from_within(from..from + (x >> 20) as usize % 400);
                }
                2 => out.extend_from_slice(format!("line {} of some text\n", x % 97).as_bytes()),
                _ => out.extend((0..(x >> 8) % 40).map(|i| (x >> (i % 56)) as u8)),
            }
        }
        out.truncate(len);
        out
    }

    #[test]
    fn truncated_blocks_decode_to_exactly_the_prefix() {
        let mut checked = 0;
        for seed in 1..8u64 {
            let src = mixed(300_000, seed);
            for (level, cap) in [(12, 65536usize), (9, 16384), (12, 4096)] {
                let mut dst = vec![0u8; cap];
                let (consumed, written) =
                    lzzzz::lz4_hc::compress_fill(&src, &mut dst, level).unwrap();
                for keep in [
                    5,
                    12,
                    13,
                    100,
                    consumed / 2,
                    consumed - 4096,
                    consumed - 300,
                    consumed - 17,
                    consumed - 1,
                    consumed,
                ] {
                    let mut d = dst.clone();
                    let Some(n) = truncate_block(&mut d, written, &src, keep) else {
                        continue;
                    };
                    assert!(n <= written);
                    let mut out = vec![0u8; keep];
                    let got = lzzzz::lz4::decompress(&d[..n], &mut out)
                        .unwrap_or_else(|e| panic!("seed {seed} keep {keep}: {e}"));
                    assert_eq!(got, keep);
                    assert!(out == src[..keep], "seed {seed} keep {keep}: wrong bytes");
                    checked += 1;
                }
            }
        }
        assert!(checked > 100, "{checked}");
    }

    #[test]
    fn the_longest_prefix_within_a_limit_is_found_without_compressing() {
        let mut checked = 0;
        for seed in 1..5u64 {
            let src = mixed(40_000, seed);
            let mut dst = vec![0u8; 8192];
            let (consumed, written) = lzzzz::lz4_hc::compress_fill(&src, &mut dst, 12).unwrap();
            for limit in [16, 100, 1000, 4096, written - 1, written] {
                let keep = longest_prefix_within(&dst[..written], consumed, limit).unwrap();
                let mut d = dst.clone();
                let n = truncate_block(&mut d, written, &src, keep).unwrap();
                assert!(n <= limit, "seed {seed} limit {limit}: {n} bytes");
                let mut out = vec![0u8; keep];
                assert_eq!(lzzzz::lz4::decompress(&d[..n], &mut out).unwrap(), keep);
                assert!(out == src[..keep]);
                // No longer prefix fits (every one is tried).
                let longer = (keep + 1..=consumed).find(|&k| {
                    let mut d = dst.clone();
                    truncate_block(&mut d, written, &src, k).is_some_and(|n| n <= limit)
                });
                assert_eq!(longer, None, "seed {seed} limit {limit}: {keep}");
                checked += 1;
            }
        }
        assert_eq!(checked, 24);
    }

    #[test]
    fn refuses_what_it_cannot_do() {
        let src = mixed(50_000, 3);
        let mut dst = vec![0u8; 4096];
        let (consumed, written) = lzzzz::lz4_hc::compress_fill(&src, &mut dst, 12).unwrap();
        let mut d = dst.clone();
        // Past what the block holds, or shorter than the end rules allow.
        assert_eq!(truncate_block(&mut d, written, &src, src.len() + 1), None);
        assert_eq!(truncate_block(&mut d, written, &src, 4), None);
        // A damaged block is refused, not misread.
        let mut bad = dst.clone();
        bad[0] = 0xF0;
        bad[1..written].fill(255);
        assert_eq!(truncate_block(&mut bad, written, &src, consumed - 10), None);
    }
}
