//! Configuration handling: dictionary and window limits, levels, types.

mod common;

use common::*;
use ferrofs_codec::{
    lzma_dict_size_for_pcluster, Algorithm, CodecError, DecodeMode, Decoder, DecoderConfig,
    Encoder, EncoderConfig,
};

fn lzma_cfg(dict: u32) -> EncoderConfig {
    EncoderConfig {
        lzma_dict_size: dict,
        ..EncoderConfig::new(Algorithm::Lzma)
    }
}

/// 20 KiB of random bytes repeated: every match is 20 KiB back.
fn far_repeats() -> Vec<u8> {
    random(20 << 10, 99).repeat(20)
}

#[test]
fn lzma_decodes_with_the_configured_dictionary() {
    let data = far_repeats();
    for dict in [32 << 10, 64 << 10, 1 << 20] {
        let (consumed, stream) = pcluster(lzma_cfg(dict), &data, 65536);
        // Matches 20 KiB back let far more than 64 KiB fit.
        assert!(consumed > 200 << 10, "dict {dict}: consumed {consumed}");
        for dec_dict in [dict, 8 << 20, 0] {
            let mut dec = Decoder::new(DecoderConfig {
                lzma_dict_size: dec_dict,
                ..DecoderConfig::default()
            });
            let out = decode(
                &mut dec,
                Algorithm::Lzma,
                &stream,
                consumed,
                DecodeMode::Exact,
            )
            .unwrap_or_else(|e| panic!("dict {dict} decoded with {dec_dict}: {e}"));
            assert!(out == data[..consumed]);
        }
        // A dictionary smaller than the match distances cannot decode it.
        let mut small = Decoder::new(DecoderConfig {
            lzma_dict_size: 16 << 10,
            ..DecoderConfig::default()
        });
        let err = decode(
            &mut small,
            Algorithm::Lzma,
            &stream,
            consumed,
            DecodeMode::Exact,
        )
        .unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }
}

#[test]
fn lzma_small_dictionary_limits_match_distance() {
    // With a 16 KiB dictionary the 20 KiB-back repeats are invisible, so
    // the data is incompressible to the encoder.
    let (consumed, stream) = pcluster(lzma_cfg(16 << 10), &far_repeats(), 65536);
    assert!(consumed < 66 << 10, "consumed {consumed}");
    let mut dec = Decoder::new(DecoderConfig {
        lzma_dict_size: 16 << 10,
        ..DecoderConfig::default()
    });
    assert!(decode(
        &mut dec,
        Algorithm::Lzma,
        &stream,
        consumed,
        DecodeMode::Exact
    )
    .is_ok());
}

#[test]
fn lzma_dictionary_helper_follows_mkfs() {
    assert_eq!(lzma_dict_size_for_pcluster(4096), 32 << 10);
    assert_eq!(lzma_dict_size_for_pcluster(65536), 256 << 10);
    assert_eq!(lzma_dict_size_for_pcluster(16 << 20), 8 << 20);
    assert_eq!(lzma_dict_size_for_pcluster(u32::MAX), 8 << 20);
}

#[test]
fn zstd_window_limit_is_enforced() {
    let data = text(1 << 20, 5);
    let (consumed, stream) = pcluster(EncoderConfig::new(Algorithm::Zstd), &data, 65536);
    assert!(consumed > 64 << 10);
    let window_log = (usize::BITS - (consumed - 1).leading_zeros()) as u8;
    for (log, ok) in [
        (window_log, true),
        (20, true),
        (0, true),
        (window_log - 1, false),
        (10, false),
    ] {
        let mut dec = Decoder::new(DecoderConfig {
            zstd_window_log: log,
            ..DecoderConfig::default()
        });
        for mode in [DecodeMode::Exact, DecodeMode::Prefix] {
            let r = decode(&mut dec, Algorithm::Zstd, &stream, consumed, mode);
            assert_eq!(r.is_ok(), ok, "window log {log} {mode:?}: {r:?}");
        }
    }
}

#[test]
fn zstd_frames_stay_within_a_1mib_window() {
    // Beyond 1 MiB of input the frame is no longer single-segment and
    // must declare a window <= 1 MiB for the default decoder to accept it.
    let data = zeros(64 << 20);
    let (consumed, stream) = pcluster(EncoderConfig::new(Algorithm::Zstd), &data, 4096);
    assert!(consumed > 2 << 20, "consumed {consumed}");
    let out = decode(
        &mut decoder(),
        Algorithm::Zstd,
        &stream,
        consumed,
        DecodeMode::Exact,
    )
    .unwrap();
    assert!(out.iter().all(|&b| b == 0));
}

#[test]
fn invalid_levels_are_rejected() {
    let bad = [
        (Algorithm::Lz4, false, Some(1)),
        (Algorithm::Lz4, true, Some(13)),
        (Algorithm::Lz4, true, Some(0)),
        (Algorithm::Lzma, false, Some(10)),
        (Algorithm::Lzma, false, Some(-1)),
        (Algorithm::Deflate, false, Some(13)),
        (Algorithm::Zstd, false, Some(1000)),
    ];
    for (alg, lz4hc, level) in bad {
        let r = Encoder::new(EncoderConfig {
            alg,
            lz4hc,
            level,
            lzma_dict_size: 64 << 10,
        });
        assert!(
            matches!(r, Err(CodecError::InvalidConfig { .. })),
            "{alg} {level:?}"
        );
    }
    for dict in [1, 4095, (8 << 20) + 1] {
        assert!(Encoder::new(lzma_cfg(dict)).is_err(), "dict {dict}");
    }
    let good = [
        (Algorithm::Lz4, true, Some(12)),
        (Algorithm::Lzma, false, Some(0)),
        (Algorithm::Lzma, false, Some(109)),
        (Algorithm::Deflate, false, Some(12)),
        (Algorithm::Zstd, false, Some(19)),
        (Algorithm::Zstd, false, Some(-5)),
    ];
    let data = text(100_000, 8);
    let mut dec = decoder();
    for (alg, lz4hc, level) in good {
        let cfg = EncoderConfig {
            alg,
            lz4hc,
            level,
            lzma_dict_size: 64 << 10,
        };
        let (consumed, stream) = pcluster(cfg, &data, 4096);
        let out = decode(&mut dec, alg, &stream, consumed, DecodeMode::Exact).unwrap();
        assert!(out == data[..consumed], "{alg} {level:?}");
    }
}

#[test]
fn codec_state_is_send() {
    fn is_send<T: Send>() {}
    is_send::<Decoder>();
    is_send::<Encoder>();
}

#[test]
fn errors_describe_what_happened() {
    let mut dec = decoder();
    let data = text(50_000, 1);
    let (consumed, stream) = pcluster(EncoderConfig::new(Algorithm::Lz4), &data, 4096);
    let err = decode(
        &mut dec,
        Algorithm::Lz4,
        &stream,
        consumed + 10,
        DecodeMode::Exact,
    )
    .unwrap_err();
    assert_eq!(err.algorithm(), Algorithm::Lz4);
    assert_eq!(
        err.to_string(),
        format!(
            "lz4 stream produced {consumed} bytes, {} were expected",
            consumed + 10
        )
    );
}
