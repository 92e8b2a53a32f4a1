//! Shortening an LZ4 block in place: keep its whole sequences up to a
//! point and end it with the rest of the input as literals, so the block
//! decodes to a given prefix of what it decoded to before. The builder uses
//! it where an extent must end a little earlier than the encoder stopped
//! (the kernel's in-place margin), instead of compressing the shorter input
//! again.

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
    let (mut at, mut pos) = (0usize, 0usize);
    while at < block.len() {
        let token = usize::from(*block.get(at)?);
        at = at.checked_add(1)?;
        let lit = length(block, &mut at, token >> 4)?;
        at = at.checked_add(lit)?;
        pos = pos.checked_add(lit)?;
        if at >= block.len() {
            // The last sequence: literals only.
            break;
        }
        at = at.checked_add(2)?;
        let mlen = length(block, &mut at, token & 15)?.checked_add(4)?;
        let start = pos;
        pos = pos.checked_add(mlen)?;
        if pos.saturating_add(LAST_LITERALS) > keep || start.saturating_add(MF_LIMIT) > keep {
            break;
        }
        (cut_out, cut_in) = (at, pos);
    }
    let lit = keep.checked_sub(cut_in)?;
    let ext = match lit.checked_sub(15) {
        Some(over) => (over / 255).checked_add(1)?,
        None => 0,
    };
    let len = cut_out.checked_add(ext)?.checked_add(lit)?.checked_add(1)?;
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
