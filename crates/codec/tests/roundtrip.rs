//! Fixed-output compression followed by Exact and Prefix decoding.

mod common;

use common::*;
use ferrofs_codec::{Algorithm, CodecError, DecodeMode, EncoderConfig};

const CAPS: [usize; 2] = [4096, 65536];

fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let n = 1 << 20;
    vec![
        ("text", text(n, 1)),
        ("random", random(n, 2)),
        ("zeros", zeros(n)),
        ("mixed", mixed(n, 3)),
    ]
}

fn label(cfg: &EncoderConfig) -> String {
    format!("{}{}", cfg.alg.name(), if cfg.lz4hc { "hc" } else { "" })
}

#[test]
fn exact_decode_returns_exactly_the_consumed_input() {
    let mut dec = decoder();
    for cfg in configs() {
        for (name, data) in samples() {
            for cap in CAPS {
                let what = format!("{} {name} cap {cap}", label(&cfg));
                let (consumed, stream) = pcluster(cfg, &data, cap);
                assert!(consumed > 0, "{what}: nothing consumed");
                assert!(stream.len() <= cap, "{what}: {} > cap", stream.len());
                assert_ne!(stream[0], 0, "{what}: first byte must be non-zero");
                if name == "random" {
                    // Incompressible data cannot grow much past the cap.
                    assert!(consumed <= cap, "{what}: consumed {consumed}");
                    assert!(
                        consumed * 100 >= cap * 95,
                        "{what}: consumed only {consumed}"
                    );
                }
                if name == "text" {
                    assert!(consumed > cap * 3 / 2, "{what}: ratio too low ({consumed})");
                }
                let out = decode(&mut dec, cfg.alg, &stream, consumed, DecodeMode::Exact)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(out == data[..consumed], "{what}: decoded bytes differ");
            }
        }
    }
}

#[test]
fn prefix_decode_returns_input_prefix() {
    let mut dec = decoder();
    for cfg in configs() {
        for (name, data) in samples() {
            let (consumed, stream) = pcluster(cfg, &data, 65536);
            let what = format!("{} {name}", label(&cfg));
            for k in [1, 7, 100, 4095, 4096, consumed / 2, consumed - 1, consumed] {
                let out = decode(&mut dec, cfg.alg, &stream, k, DecodeMode::Prefix)
                    .unwrap_or_else(|e| panic!("{what} k={k}: {e}"));
                assert!(out == data[..k], "{what} k={k}: prefix differs");
            }
            match decode(&mut dec, cfg.alg, &stream, consumed + 1, DecodeMode::Prefix) {
                Ok(_) => panic!("{what}: prefix longer than the stream accepted"),
                Err(err) => assert!(err.is_corruption(), "{what}: {err}"),
            }
            assert!(decode(&mut dec, cfg.alg, &stream, 0, DecodeMode::Prefix)
                .unwrap()
                .is_empty());
        }
    }
}

#[test]
fn exact_decode_rejects_wrong_lengths() {
    let mut dec = decoder();
    for cfg in configs() {
        for (name, data) in samples() {
            for cap in CAPS {
                let (consumed, stream) = pcluster(cfg, &data, cap);
                let what = format!("{} {name} cap {cap}", label(&cfg));
                for len in [consumed - 1, consumed + 1, consumed / 2, consumed * 2] {
                    match decode(&mut dec, cfg.alg, &stream, len, DecodeMode::Exact) {
                        Ok(_) => panic!("{what}: length {len} of {consumed} accepted"),
                        Err(err) => assert!(err.is_corruption(), "{what} len {len}: {err}"),
                    }
                }
                // The decoder is still usable after the errors.
                assert!(decode(&mut dec, cfg.alg, &stream, consumed, DecodeMode::Exact).is_ok());
            }
        }
    }
}

#[test]
fn exact_decode_rejects_trailing_input() {
    let mut dec = decoder();
    for cfg in configs() {
        let data = text(300_000, 9);
        let (consumed, mut stream) = pcluster(cfg, &data, 4096);
        for extra in [&[0u8][..], &[0x5a, 0xa5, 0x5a], &stream.clone()] {
            let mut s = stream.clone();
            s.extend_from_slice(extra);
            let r = decode(&mut dec, cfg.alg, &s, consumed, DecodeMode::Exact);
            assert!(
                r.is_err(),
                "{} accepted {} trailing bytes",
                label(&cfg),
                extra.len()
            );
            // Prefix decoding ignores what follows.
            let out = decode(&mut dec, cfg.alg, &s, consumed, DecodeMode::Prefix).unwrap();
            assert!(out == data[..consumed]);
        }
        stream.truncate(stream.len() - 1);
        assert!(decode(&mut dec, cfg.alg, &stream, consumed, DecodeMode::Exact).is_err());
    }
}

#[test]
fn trailing_input_is_reported_as_such_for_zstd_and_deflate() {
    let mut dec = decoder();
    for alg in [Algorithm::Zstd, Algorithm::Deflate] {
        let data = text(100_000, 4);
        let (consumed, mut stream) = pcluster(EncoderConfig::new(alg), &data, 4096);
        let len = stream.len();
        stream.extend_from_slice(&[1, 2, 3]);
        let err = decode(&mut dec, alg, &stream, consumed, DecodeMode::Exact).unwrap_err();
        assert_eq!(
            err,
            CodecError::TrailingInput {
                alg,
                used: len,
                len: len + 3
            }
        );
    }
}

#[test]
fn small_inputs_and_outputs() {
    let mut dec = decoder();
    for cfg in configs() {
        // All of a short input fits.
        let data = text(1000, 5);
        let (consumed, stream) = pcluster(cfg, &data, 4096);
        assert_eq!(consumed, data.len(), "{}", label(&cfg));
        let out = decode(&mut dec, cfg.alg, &stream, consumed, DecodeMode::Exact).unwrap();
        assert_eq!(out, data);
        // Empty input, empty output.
        assert_eq!(pcluster(cfg, &[], 4096), (0, vec![]));
        assert_eq!(pcluster(cfg, &data, 0), (0, vec![]));
        // Tiny outputs: whatever is produced must decode.
        for cap in 1..40 {
            let (consumed, stream) = pcluster(cfg, &random(100, 6), cap);
            assert!(stream.len() <= cap);
            if consumed > 0 {
                let out = decode(&mut dec, cfg.alg, &stream, consumed, DecodeMode::Exact)
                    .unwrap_or_else(|e| panic!("{} cap {cap}: {e}", label(&cfg)));
                assert_eq!(out, random(100, 6)[..consumed]);
            } else {
                assert!(stream.is_empty());
            }
        }
    }
}

#[test]
fn deflate_sets_bit_3_when_the_stream_starts_with_a_stored_block() {
    let data = random(300_000, 7);
    let (consumed, stream) = pcluster(EncoderConfig::new(Algorithm::Deflate), &data, 200_000);
    assert_eq!(
        stream[0], 0x08,
        "expected a patched non-final stored block header"
    );
    let out = decode(
        &mut decoder(),
        Algorithm::Deflate,
        &stream,
        consumed,
        DecodeMode::Exact,
    )
    .unwrap();
    assert!(out == data[..consumed]);
}

/// LZ4HC level 12 compresses machine code with ferrofs's own parser when
/// told so: both encoders' blocks decode to exactly the consumed input, and
/// they differ (the hint is not ignored).
#[test]
fn machine_code_hint_picks_the_tree_encoder() {
    let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let code = &exe[..exe.len().min(4 << 20)];
    let cfg = EncoderConfig {
        lz4hc: true,
        level: Some(12),
        ..EncoderConfig::new(Algorithm::Lz4)
    };
    let mut dec = decoder();
    let mut streams = Vec::new();
    for hint in [false, true] {
        let mut enc = ferrofs_codec::Encoder::new(cfg).unwrap();
        enc.set_machine_code(hint);
        let mut pos = 0;
        let mut all = Vec::new();
        while pos < code.len() {
            let mut buf = vec![0u8; 65536];
            let (consumed, written) = enc.compress_fixed_output(&code[pos..], &mut buf).unwrap();
            assert!(consumed > 0 && written <= buf.len(), "hint {hint} at {pos}");
            let out = decode(
                &mut dec,
                Algorithm::Lz4,
                &buf[..written],
                consumed,
                DecodeMode::Exact,
            )
            .unwrap_or_else(|e| panic!("hint {hint} at {pos}: {e}"));
            assert!(
                out == code[pos..pos + consumed],
                "hint {hint} at {pos}: bytes differ"
            );
            all.extend_from_slice(&buf[..written]);
            pos += consumed;
        }
        streams.push(all);
    }
    assert_ne!(
        streams[0], streams[1],
        "the machine-code hint changed nothing"
    );
}

/// zstd levels 13-15 give large frames of machine code the optimal parser
/// with 3-byte matches when told so: the frames decode to exactly the
/// consumed input, take more input into the same 128 KiB, and once the
/// hint is taken back the encoder makes exactly the frames a fresh one
/// makes (no setting of the machine-code frames stays behind).
#[test]
fn zstd_machine_code_hint_packs_code_denser_and_is_taken_back() {
    let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let code = &exe[..exe.len().min(4 << 20)];
    let cfg = EncoderConfig {
        level: Some(15),
        ..EncoderConfig::new(Algorithm::Zstd)
    };
    let mut dec = decoder();
    let frames = |enc: &mut ferrofs_codec::Encoder, data: &[u8], dec: &mut _| {
        let (mut pos, mut all) = (0, Vec::new());
        while pos < data.len() {
            let mut buf = vec![0u8; 128 << 10];
            let (consumed, written) = enc.compress_fixed_output(&data[pos..], &mut buf).unwrap();
            assert!(consumed > 0 && written <= buf.len(), "at {pos}");
            let out = decode(
                dec,
                Algorithm::Zstd,
                &buf[..written],
                consumed,
                DecodeMode::Exact,
            )
            .unwrap_or_else(|e| panic!("at {pos}: {e}"));
            assert!(out == data[pos..pos + consumed], "at {pos}: bytes differ");
            all.push(buf[..written].to_vec());
            pos += consumed;
        }
        all
    };
    let mut plain = ferrofs_codec::Encoder::new(cfg).unwrap();
    let as_data = frames(&mut plain, code, &mut dec);
    let mut enc = ferrofs_codec::Encoder::new(cfg).unwrap();
    enc.set_machine_code(true);
    let as_code = frames(&mut enc, code, &mut dec);
    let bytes = |f: &[Vec<u8>]| f.iter().map(Vec::len).sum::<usize>();
    assert!(
        bytes(&as_code) < bytes(&as_data) * 99 / 100,
        "machine code: {} bytes in {} frames, as data {} in {}",
        bytes(&as_code),
        as_code.len(),
        bytes(&as_data),
        as_data.len()
    );
    // Taken back: text compresses as a fresh encoder compresses it.
    let words = text(1 << 20, 5);
    enc.set_machine_code(false);
    enc.reset();
    let mut fresh = ferrofs_codec::Encoder::new(cfg).unwrap();
    assert!(frames(&mut enc, &words, &mut dec) == frames(&mut fresh, &words, &mut dec));
}

/// zstd's one-pass fill on inputs whose ratio changes inside a pcluster:
/// a long zero run before random bytes (the ratio of the start would
/// make the next piece megabytes long), text before random, random
/// before text. Each frame fits, decodes exactly, here and with zstd's
/// own one-shot decoder (the frames carry no content size), and fills
/// its pcluster to within 1 % unless the input ended or turned far less
/// compressible right after it (a frame of zeros stops where the random
/// bytes begin: it takes one block, not a pcluster).
#[test]
fn zstd_fill_follows_ratio_changes() {
    let cap = 131_072;
    let mut zero_then_random = zeros(3 << 20);
    zero_then_random.extend(random(1 << 20, 5));
    let mut text_then_random = text(200_000, 6);
    text_then_random.extend(random(1 << 20, 7));
    let mut random_then_text = random(100_000, 8);
    random_then_text.extend(text(1 << 20, 9));
    let mut dec = decoder();
    for (name, data) in [
        ("zeros then random", zero_then_random),
        ("text then random", text_then_random),
        ("random then text", random_then_text),
    ] {
        let mut cfg = EncoderConfig::new(Algorithm::Zstd);
        cfg.level = Some(15);
        let mut at = 0;
        let mut frames = 0;
        let mut short: Option<usize> = None;
        while at < data.len() {
            let (consumed, stream) = pcluster(cfg, &data[at..], cap);
            let what = format!("{name}: frame {frames} at {at}");
            assert!(consumed > 0, "{what}: nothing consumed");
            assert!(stream.len() <= cap, "{what}: {} bytes", stream.len());
            if let Some(before) = short.take() {
                assert!(
                    consumed * 4 < before,
                    "{what}: {consumed} after a short frame of {before}"
                );
            }
            if at + consumed < data.len() && stream.len() * 100 < cap * 99 {
                short = Some(consumed);
            }
            let out = decode(&mut dec, cfg.alg, &stream, consumed, DecodeMode::Exact)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                out == data[at..at + consumed],
                "{what}: decoded bytes differ"
            );
            // The reference decoder reads it too.
            let mut check = vec![0u8; consumed];
            let n = zstd_safe::decompress(&mut check[..], &stream)
                .unwrap_or_else(|c| panic!("{what}: {}", zstd_safe::get_error_name(c)));
            assert_eq!(n, consumed, "{what}");
            at += consumed;
            frames += 1;
        }
    }
}
