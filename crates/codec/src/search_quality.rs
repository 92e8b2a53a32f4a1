//! How well and how fast DEFLATE's prefix search and zstd's one-pass fill
//! work, compared with exhaustive bisection.

use crate::deflate::DeflateEncoder;
use crate::fit::{Search, WholeCompressor};
use crate::zstd::ZstdEncoder;

/// Pseudo-English from a small vocabulary (xorshift-driven).
fn text(len: usize, mut seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the",
        "of",
        "and",
        "to",
        "in",
        "is",
        "file",
        "block",
        "inode",
        "data",
        "compressed",
        "cluster",
        "directory",
        "extent",
        "kernel",
        "image",
        "offset",
        "length",
        "page",
        "mount",
        "stream",
        "index",
        "that",
        "for",
        "with",
        "on",
        "this",
        "are",
        "from",
        "or",
        "an",
    ];
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let r = seed as usize;
        out.extend_from_slice(WORDS[r % WORDS.len()].as_bytes());
        out.extend_from_slice(match (r >> 8) % 12 {
            0 => b".\n",
            1 => b", ",
            _ => b" ",
        });
        if (r >> 16).is_multiple_of(9) {
            out.extend_from_slice(format!("{} ", (r >> 20) % 100_000).as_bytes());
        }
    }
    out.truncate(len);
    out
}

/// The longest prefix that fits, by plain bisection (assumes monotonic sizes).
fn bisect<C: WholeCompressor>(c: &mut C, src: &[u8], cap: usize) -> usize {
    let mut out = vec![0u8; cap];
    let (mut lo, mut hi) = (0, src.len() + 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match c.compress_into(&src[..mid], &mut out) {
            Ok(Some(_)) => lo = mid,
            _ => hi = mid,
        }
    }
    lo
}

fn measure<C: WholeCompressor>(name: &str, c: &mut C, data: &[u8], cap: usize) -> f64 {
    let mut search = Search::default();
    let mut dst = vec![0u8; cap];
    let (mut trials, mut runs, mut worst_gap) = (0u32, 0u32, 0.0f64);
    let mut pos = 0;
    while pos + 32 * cap <= data.len() && runs < 40 {
        let src = &data[pos..pos + 32 * cap];
        let fit = search.run(c, src, &mut dst).unwrap();
        let best = bisect(c, src, cap);
        let gap = best.saturating_sub(fit.consumed) as f64 / best as f64;
        worst_gap = worst_gap.max(gap);
        assert!(fit.written <= cap && fit.consumed > 0);
        assert!(
            gap <= 0.02,
            "{name} cap {cap}: {} vs best {best}",
            fit.consumed
        );
        trials += fit.trials;
        runs += 1;
        pos += fit.consumed;
    }
    let avg = f64::from(trials) / f64::from(runs);
    println!(
        "{name} cap {cap}: {avg:.2} trials on average over {runs} runs, worst gap {:.2} %",
        worst_gap * 100.0
    );
    avg
}

#[test]
fn search_is_close_to_bisection_with_few_trials() {
    let data = text(24 << 20, 0x1234_5678);
    for cap in [4096, 65536] {
        let avg = measure(
            "deflate",
            &mut DeflateEncoder::new(None).unwrap(),
            &data,
            cap,
        );
        assert!(avg <= 4.0, "deflate cap {cap}: {avg}");
    }
    // zstd into less than 16 KiB (the fill takes larger outputs).
    let avg = measure("zstd", &mut ZstdEncoder::new(None).unwrap(), &data, 4096);
    assert!(avg <= 4.0, "zstd cap 4096: {avg}");
}

/// zstd's one-pass fill takes within 2 % of the longest prefix whose
/// one-shot frame fits (as much as the search above gives up), with
/// about one frame per pcluster.
#[test]
fn zstd_fill_is_close_to_bisection_in_one_pass() {
    let data = text(24 << 20, 0x1234_5678);
    for cap in [16384, 65536, 131072] {
        let mut enc = ZstdEncoder::new(Some(15)).unwrap();
        let mut search = Search::default();
        let mut dst = vec![0u8; cap];
        let (mut frames, mut runs, mut pos, mut gaps) = (0u32, 0u32, 0, 0.0f64);
        while pos + 32 * cap <= data.len() && runs < 10 {
            let src = &data[pos..pos + 32 * cap];
            let fit = enc
                .compress_fixed_output(&mut search, src, &mut dst)
                .unwrap();
            let best = bisect(&mut enc, src, cap);
            assert!(fit.written <= cap && fit.consumed > 0);
            let gap = 1.0 - fit.consumed as f64 / best as f64;
            assert!(gap <= 0.05, "cap {cap}: {} vs best {best}", fit.consumed);
            gaps += gap;
            frames += fit.trials;
            runs += 1;
            pos += fit.consumed;
        }
        let (gap, avg) = (gaps / f64::from(runs), f64::from(frames) / f64::from(runs));
        println!(
            "zstd fill cap {cap}: mean gap {:.2} %, {avg:.2} frames",
            gap * 100.0
        );
        assert!(gap <= 0.01, "cap {cap}: mean gap {gap}");
        assert!(avg <= 1.5, "cap {cap}: {avg} frames per pcluster");
    }
}
