//! Which LZ4HC level-12 encoder takes a pcluster of one file's bytes that
//! are not machine code: liblz4's optimal parser, which finds matches by
//! walking hash chains (up to 16,384 candidates a position), or ferrofs's
//! own (`lz4opt`), which keeps a binary tree. Both make about the same
//! bytes; their speed differs by the input. liblz4 is faster on most text,
//! but where the same 4-byte strings recur hundreds of times within LZ4's
//! 64 KiB window (generated tables, test vectors, Unicode data files) its
//! chains grow long and the tree is up to 7x faster.
//!
//! The choice is made from the next 128 KiB alone, so it is the same for
//! the same bytes whatever compressed them before: how often, on average,
//! a position's 4-byte string occurs in its 64 KiB window, and how far
//! fast LZ4 shrinks the sample. Long chains that fast LZ4 cannot fold into
//! long matches (under 4:1) are where the chains are walked in full.
//! Measured per pcluster over the large text files of four trees (Rust
//! sources, /usr/share, a Debian root file system, a validation set), the
//! rule takes liblz4's time on those files to 0.73x, 0.92x, 0.99x and
//! 0.93x. It misjudges a run of many small files (the packed inode), whose
//! common keywords recur without long chains of equal bytes, so the
//! caller asks only for one file's bytes. Whole densest lz4hc builds
//! (bench/results/densest-32.md, session 26): the Rust sources in 0.87x
//! the wall time for 0.29 % more bytes, /usr/share 0.93x (+0.02 %), the Go
//! toolchain 0.95x (-0.03 %), a Debian root 0.97x (+0.01 %).

use lzzzz::lz4;

/// Bytes of the input the choice looks at.
const SAMPLE: usize = 128 << 10;

/// LZ4's window: recurrences are counted within each 64 KiB of the sample.
const WINDOW: usize = 64 << 10;

/// 4-byte strings are counted in this many hash buckets (log2).
const HASH_BITS: u32 = 16;

/// A count above liblz4's chain limit costs it no more.
const CHAIN_LIMIT: u32 = 16_384;

/// Mean recurrence from which the tree may be faster.
const MIN_RECURRENCE: u64 = 384;

/// Fast LZ4's ratio (input over output) under which it is.
const MAX_FAST_RATIO: usize = 4;

/// Samples shorter than this go to liblz4 (too short for long chains).
const MIN_SAMPLE: usize = 16 << 10;

/// The counting table and fast LZ4's output, kept between calls.
#[derive(Default)]
pub(crate) struct Picker {
    counts: Vec<u32>,
    out: Vec<u8>,
}

impl Picker {
    /// Whether ferrofs's tree encoder should take the pcluster that
    /// starts `src`.
    pub(crate) fn tree_is_faster(&mut self, src: &[u8]) -> bool {
        let sample = src.get(..SAMPLE).unwrap_or(src);
        if sample.len() < MIN_SAMPLE {
            return false;
        }
        if self.mean_recurrence(sample) < MIN_RECURRENCE {
            return false;
        }
        self.out.resize(lz4::max_compressed_size(sample.len()), 0);
        match lz4::compress(sample, &mut self.out, 1) {
            Ok(n) => n.saturating_mul(MAX_FAST_RATIO) > sample.len(),
            Err(_) => false,
        }
    }

    /// The mean, over the sample's positions, of how many times the
    /// position's 4-byte string (its hash) occurs in its 64 KiB window.
    fn mean_recurrence(&mut self, sample: &[u8]) -> u64 {
        self.counts.resize(1 << HASH_BITS, 0);
        let mut sum = 0u64;
        let mut n = 0u64;
        for window in sample.chunks(WINDOW) {
            self.counts.fill(0);
            for w in window.windows(4) {
                if let Some(c) = self.counts.get_mut(bucket(w)) {
                    *c = c.saturating_add(1);
                }
            }
            for w in window.windows(4) {
                let c = self.counts.get(bucket(w)).copied().unwrap_or(0);
                sum = sum.saturating_add(u64::from(c.min(CHAIN_LIMIT)));
                n = n.saturating_add(1);
            }
        }
        sum.checked_div(n).unwrap_or(0)
    }
}

/// The hash bucket of a 4-byte string.
fn bucket(w: &[u8]) -> usize {
    let v = match w {
        [a, b, c, d, ..] => u32::from_le_bytes([*a, *b, *c, *d]),
        _ => 0,
    };
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::{Algorithm, DecodeMode, Decoder, DecoderConfig, Encoder, EncoderConfig};

    /// A generated table: few distinct row shapes recurring hundreds of
    /// times in every window, with varying numbers that keep fast LZ4
    /// under 4:1.
    fn table(len: usize) -> Vec<u8> {
        let mut table = Vec::new();
        let mut x = 12_345u32;
        while table.len() < len {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let row = format!(
                "    (0x{:05x}, 0x{:05x}, {}),\n",
                x >> 12 & 0xfffff,
                x & 0xfff,
                x >> 30
            );
            table.extend_from_slice(row.as_bytes());
        }
        table
    }

    #[test]
    fn repetitive_tables_go_to_the_tree_and_prose_does_not() {
        let mut p = Picker::default();
        let table = table(SAMPLE);
        assert!(p.mean_recurrence(&table) >= MIN_RECURRENCE);
        assert!(p.tree_is_faster(&table));
        // Letters with no recurring strings: short chains.
        let mut text = Vec::new();
        let mut y = 7u32;
        while text.len() < SAMPLE {
            y = y.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            text.push(b'a' + (y >> 24) as u8 % 26);
        }
        assert!(p.mean_recurrence(&text) < 8);
        assert!(!p.tree_is_faster(&text));
        // Too short to matter, and one byte repeated (fast LZ4 folds it).
        assert!(!p.tree_is_faster(table.get(..MIN_SAMPLE - 1).unwrap()));
        assert!(!p.tree_is_faster(&vec![b'a'; SAMPLE]));
    }

    /// One file's table goes to the tree encoder (the bytes the
    /// machine-code path makes), the same bytes in a run of many files to
    /// liblz4; both streams decode to their input.
    #[test]
    fn the_encoder_asks_the_picker_only_for_one_files_bytes() {
        let data = table(3 * SAMPLE);
        let mut cfg = EncoderConfig::new(Algorithm::Lz4);
        cfg.lz4hc = true;
        cfg.level = Some(12);
        let run = |one_file: bool, machine_code: bool| {
            let mut enc = Encoder::new(cfg).unwrap();
            enc.set_one_file(one_file);
            enc.set_machine_code(machine_code);
            let mut out = vec![0u8; 131_072];
            let (consumed, written) = enc.compress_fixed_output(&data, &mut out).unwrap();
            out.truncate(written);
            (consumed, out)
        };
        let picked = run(true, false);
        let tree = run(false, true);
        let liblz4 = run(false, false);
        assert_eq!(picked, tree);
        assert_ne!(picked, liblz4);
        let mut dec = Decoder::new(DecoderConfig::default());
        for (consumed, stream) in [picked, liblz4] {
            assert!(consumed > SAMPLE);
            let mut out = vec![0u8; consumed];
            dec.decompress(Algorithm::Lz4, &stream, &mut out, DecodeMode::Exact)
                .unwrap();
            assert_eq!(out, data.get(..consumed).unwrap());
        }
    }
}
