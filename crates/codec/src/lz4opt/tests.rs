//! The optimal encoder's blocks decode (with liblz4) to exactly the
//! consumed input, obey the block-end rules, and fill their output about as
//! well as liblz4's level 12.

use super::*;
use ferrofs_testkit::corpus::XorShift64;
use lzzzz::{lz4, lz4_hc};

/// A generator with `below`.
struct Rng(XorShift64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Records of repeated fields with small variations, binary stretches,
/// zero runs and random bytes: every kind of match length and distance.
fn corpus(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(XorShift64::new(seed));
    let mut out = Vec::with_capacity(len + 4096);
    while out.len() < len {
        match rng.below(6) {
            0 => {
                let n = 1 + rng.below(2000);
                out.extend((0..n).map(|_| rng.next() as u8));
            }
            1 => out.resize(out.len() + 1 + rng.below(5000), 0),
            2 if out.len() > 10 => {
                // A copy from up to 100 KiB back (some beyond LZ4's reach).
                let back = 1 + rng.below(out.len().min(100_000));
                let n = 1 + rng.below(3000);
                let from = out.len() - back;
                for i in 0..n {
                    out.push(out[from + i]);
                }
            }
            _ => {
                let n = 1 + rng.below(400);
                for i in 0..n {
                    let field = format!("key{} = value{};\n", rng.below(40), i % 7);
                    out.extend_from_slice(field.as_bytes());
                }
            }
        }
    }
    out.truncate(len);
    out
}

/// Check one block and return the decoded length.
fn check(src: &[u8], cap: usize, what: &str) -> (usize, usize) {
    let mut enc = Lz4Opt::new();
    let mut dst = vec![0u8; cap];
    let (consumed, written) = enc.compress_fill(src, &mut dst);
    assert!(written <= cap, "{what}: wrote {written} > {cap}");
    if consumed == 0 {
        assert_eq!(written, 0, "{what}");
        return (0, 0);
    }
    assert_ne!(dst[0], 0, "{what}: first byte is zero");
    let mut out = vec![0u8; consumed];
    let n = lz4::decompress(&dst[..written], &mut out)
        .unwrap_or_else(|e| panic!("{what}: liblz4 refuses the block: {e:?}"));
    assert_eq!(n, consumed, "{what}: decoded length");
    assert!(out == src[..consumed], "{what}: decoded bytes differ");
    check_block_end(&dst[..written], consumed, what);
    (consumed, written)
}

/// A token nibble's length with its extension bytes at `block[*ip..]`.
fn length(block: &[u8], ip: &mut usize, nibble: usize) -> usize {
    let mut n = nibble;
    if nibble == 15 {
        loop {
            let b = block[*ip];
            *ip += 1;
            n += usize::from(b);
            if b != 255 {
                break;
            }
        }
    }
    n
}

/// Walk the sequences: the last match starts at least 12 bytes before
/// the end, and at least 5 literals follow it.
fn check_block_end(block: &[u8], decoded: usize, what: &str) {
    let (mut ip, mut op) = (0usize, 0usize);
    let mut last_match: Option<(usize, usize)> = None;
    loop {
        let token = block[ip];
        ip += 1;
        let lits = length(block, &mut ip, usize::from(token >> 4));
        ip += lits;
        op += lits;
        if ip == block.len() {
            break;
        }
        ip += 2;
        let ml = length(block, &mut ip, usize::from(token & 15)) + MIN_MATCH;
        last_match = Some((op, op + ml));
        op += ml;
    }
    assert_eq!(op, decoded, "{what}: walk length");
    if let Some((start, end)) = last_match {
        assert!(
            start + MF_LIMIT <= decoded,
            "{what}: last match starts at {start} of {decoded}"
        );
        assert!(
            end + LAST_LITERALS <= decoded,
            "{what}: last match ends at {end} of {decoded}"
        );
    }
}

#[test]
fn blocks_decode_to_the_consumed_input() {
    for seed in 1..=12u64 {
        let src = corpus(600_000, seed);
        for cap in [7, 20, 100, 4096, 65_536, 131_072] {
            check(&src, cap, &format!("seed {seed} cap {cap}"));
        }
    }
}

#[test]
fn short_and_edge_inputs() {
    for len in 0..64 {
        let src: Vec<u8> = (0..len).map(|i| (i % 3) as u8).collect();
        for cap in [0, 1, 2, 3, 6, 13, 64] {
            let (consumed, _) = check(&src, cap, &format!("len {len} cap {cap}"));
            if cap >= len + 2 {
                assert_eq!(consumed, len, "len {len} cap {cap}");
            }
        }
    }
    // A zero run far longer than one output can describe.
    let zeros = vec![0u8; 20 << 20];
    let (consumed, written) = check(&zeros, 4096, "zeros");
    assert!(
        consumed > 900_000,
        "zeros: consumed only {consumed} in {written}"
    );
    // Incompressible bytes fill the output almost one to one.
    let mut rng = Rng(XorShift64::new(7));
    let random: Vec<u8> = (0..200_000).map(|_| rng.next() as u8).collect();
    let (consumed, _) = check(&random, 65_536, "random");
    assert!(consumed >= 65_536 - 300, "random: consumed {consumed}");
    // ... and parsing stops where the output is full, not at the input's
    // end, also where no match turns up (distinct 4-byte words).
    let big: Vec<u8> = (0u32..2 << 20)
        .flat_map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes())
        .collect();
    let mut enc = Lz4Opt::new();
    let mut dst = vec![0u8; 65_536];
    let (consumed, _) = enc.compress_fill(&big, &mut dst);
    assert!(consumed >= 60_000, "8 MiB: consumed {consumed}");
    assert!(
        enc.parsed <= 2 * 65_536,
        "8 MiB: parsed {} positions",
        enc.parsed
    );
}

#[test]
fn fills_about_as_much_as_liblz4_level_12() {
    let mut ours = 0usize;
    let mut theirs = 0usize;
    for seed in 20..26u64 {
        let src = corpus(2 << 20, seed);
        let mut pos = 0;
        while pos < src.len() {
            let (c, _) = check(&src[pos..], 65_536, &format!("seed {seed} at {pos}"));
            let mut dst = vec![0u8; 65_536];
            let (r, _) = lz4_hc::compress_fill(&src[pos..], &mut dst, 12).expect("liblz4");
            ours += c;
            theirs += r;
            pos += c;
        }
    }
    // Consumed input per full output: within 1 % of liblz4's best.
    assert!(ours * 100 >= theirs * 99, "ours {ours} vs liblz4 {theirs}");
}
