//! Compress arbitrary bytes into a pcluster of arbitrary size with every
//! encoder (LZ4HC level 12 with ferrofs's own optimal parser), then decode:
//! the stream must fit and decode to exactly the consumed input.
#![no_main]

use ferrofs_codec::{Algorithm, DecodeMode, Decoder, DecoderConfig, Encoder, EncoderConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let cfg = match data[0] % 3 {
        0 => EncoderConfig {
            lz4hc: true,
            level: Some(12),
            ..EncoderConfig::new(Algorithm::Lz4)
        },
        1 => EncoderConfig::new(Algorithm::Lz4),
        _ => EncoderConfig::new(Algorithm::Zstd),
    };
    let cap = usize::from(u16::from_le_bytes([data[1], data[2]]));
    // Repeat the input to get long matches and zero-like runs cheaply.
    let reps = usize::from(data[0] >> 4) + 1;
    let src: Vec<u8> = data[3..]
        .iter()
        .copied()
        .cycle()
        .take((data.len() - 3) * reps)
        .collect();
    let mut enc = Encoder::new(cfg).expect("encoder");
    // Level 12 uses ferrofs's own parser for machine code.
    enc.set_machine_code(true);
    let mut dst = vec![0u8; cap];
    let (consumed, written) = enc.compress_fixed_output(&src, &mut dst).expect("compress");
    assert!(written <= cap && consumed <= src.len());
    if consumed == 0 {
        return;
    }
    let mut out = vec![0u8; consumed];
    let mut dec = Decoder::new(DecoderConfig::default());
    dec.decompress(cfg.alg, &dst[..written], &mut out, DecodeMode::Exact)
        .expect("own stream decodes");
    assert!(out == src[..consumed], "decoded bytes differ");
});
