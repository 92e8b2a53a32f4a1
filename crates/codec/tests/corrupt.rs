//! Hostile input: mutated, truncated and random streams must give `Err`
//! (or, for mutations that keep the stream valid, the right length) and
//! never panic or hang.

mod common;

use common::*;
use ferrofs_codec::{Algorithm, DecodeMode, Decoder};

/// Valid pclusters of every configuration, with their decoded lengths.
fn streams() -> Vec<(Algorithm, usize, Vec<u8>)> {
    samples()
        .into_iter()
        .map(|(alg, len, s, _)| (alg, len, s))
        .collect()
}

/// Like `streams`, plus whether the stream holds text (mixed samples
/// start with random bytes, stored as literals that no flip can break).
fn samples() -> Vec<(Algorithm, usize, Vec<u8>, bool)> {
    let mut v = Vec::new();
    for cfg in configs() {
        for (i, data) in [text(200_000, 11), mixed(200_000, 12)].iter().enumerate() {
            for cap in [512, 4096] {
                let (consumed, stream) = pcluster(cfg, data, cap);
                assert!(consumed > 0, "{} sample {i}", cfg.alg);
                v.push((cfg.alg, consumed, stream, i == 0));
            }
        }
    }
    v
}

/// Decode in both modes; a success must have produced the asked length,
/// which `decompress` guarantees by construction, so only count errors.
fn try_all_modes(dec: &mut Decoder, alg: Algorithm, s: &[u8], len: usize) -> [bool; 2] {
    let mut out = vec![0u8; len];
    let exact = dec.decompress(alg, s, &mut out, DecodeMode::Exact).is_err();
    let half = len / 2 + 1;
    let prefix = dec
        .decompress(alg, s, &mut out[..half], DecodeMode::Prefix)
        .is_err();
    [exact, prefix]
}

#[test]
fn bit_flips_never_panic_and_mostly_fail() {
    let mut dec = decoder();
    let mut rng = Rng::new(0x00c0_ffee);
    for (alg, len, stream, is_text) in samples() {
        let mut errors = 0;
        let rounds = 300;
        for _ in 0..rounds {
            let mut s = stream.clone();
            for _ in 0..1 + rng.below(3) {
                let i = rng.below(s.len());
                s[i] ^= 1 << rng.below(8);
            }
            errors += usize::from(try_all_modes(&mut dec, alg, &s, len)[0]);
        }
        // Flips in literals can keep a stream valid, but most flips break
        // structure; a decoder that accepts almost everything is broken.
        assert!(
            !is_text || errors * 4 >= rounds,
            "{alg}: only {errors}/{rounds} flips detected"
        );
    }
}

#[test]
fn truncation_always_fails_exact_decoding() {
    let mut dec = decoder();
    for (alg, len, stream) in streams() {
        let cuts = (1..stream.len()).step_by(1 + stream.len() / 64);
        for cut in cuts.chain([stream.len() - 1]) {
            let [exact, _] = try_all_modes(&mut dec, alg, &stream[..cut], len);
            assert!(exact, "{alg}: truncated to {cut}/{} accepted", stream.len());
        }
    }
}

#[test]
fn random_bytes_fail_and_never_panic() {
    let mut dec = decoder();
    let mut rng = Rng::new(42);
    for alg in Algorithm::ALL {
        for round in 0..600 {
            let n = 1 + rng.below(if round % 2 == 0 { 64 } else { 5000 });
            let mut s = random(n, rng.next_u64());
            // Also try plausible-looking starts.
            match round % 4 {
                1 if alg == Algorithm::Zstd && n > 8 => {
                    s[..4].copy_from_slice(&[0x28, 0xb5, 0x2f, 0xfd])
                }
                2 if alg == Algorithm::Lzma => s[0] = !0x5d,
                _ => {}
            }
            let len = 1 + rng.below(70_000);
            let [exact, _] = try_all_modes(&mut dec, alg, &s, len);
            assert!(
                exact,
                "{alg}: random {n}-byte stream decoded to {len} bytes"
            );
        }
    }
}

#[test]
fn spliced_streams_never_panic() {
    // Pieces of different valid streams glued together, fed to every
    // algorithm's decoder.
    let all = streams();
    let mut dec = decoder();
    let mut rng = Rng::new(7);
    for _ in 0..1500 {
        let (_, _, a) = &all[rng.below(all.len())];
        let (_, len, b) = &all[rng.below(all.len())];
        let mut s = a[..1 + rng.below(a.len())].to_vec();
        s.extend_from_slice(&b[rng.below(b.len())..]);
        let alg = Algorithm::ALL[rng.below(4)];
        try_all_modes(&mut dec, alg, &s, *len);
    }
}

#[test]
fn huge_requested_lengths_do_not_allocate_or_hang() {
    // The decoder writes only into the caller's buffer; a short stream
    // asked for a long output fails quickly.
    let mut dec = decoder();
    let data = text(10_000, 3);
    for cfg in configs() {
        let (_, stream) = pcluster(cfg, &data, 4096);
        let mut out = vec![0u8; 8 << 20];
        for mode in [DecodeMode::Exact, DecodeMode::Prefix] {
            assert!(dec.decompress(cfg.alg, &stream, &mut out, mode).is_err());
        }
    }
}

#[test]
fn empty_stream_is_corrupt() {
    let mut dec = decoder();
    for alg in Algorithm::ALL {
        for mode in [DecodeMode::Exact, DecodeMode::Prefix] {
            let err = dec.decompress(alg, &[], &mut [0u8; 10], mode).unwrap_err();
            assert!(err.is_corruption(), "{alg}: {err}");
        }
    }
}

#[test]
fn empty_output_never_panics() {
    let mut dec = decoder();
    for (alg, _, stream) in streams() {
        // A non-empty stream cannot decode to nothing.
        assert!(
            dec.decompress(alg, &stream, &mut [], DecodeMode::Exact)
                .is_err(),
            "{alg}"
        );
        // Nothing asked, nothing to do.
        assert!(
            dec.decompress(alg, &stream, &mut [], DecodeMode::Prefix)
                .is_ok(),
            "{alg}"
        );
    }
}
