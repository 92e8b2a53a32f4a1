//! Feed arbitrary bytes to every decoder, whole and as a prefix.
#![no_main]

use ferrofs_codec::{Algorithm, DecodeMode, Decoder, DecoderConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let alg = match data[0] % 4 {
        0 => Algorithm::Lz4,
        1 => Algorithm::Lzma,
        2 => Algorithm::Deflate,
        _ => Algorithm::Zstd,
    };
    let out_len = usize::from(u16::from_le_bytes([data[1], data[2]])) * 4;
    let mut d = Decoder::new(DecoderConfig::default());
    let mut out = vec![0u8; out_len];
    let _ = d.decompress(alg, &data[3..], &mut out, DecodeMode::Exact);
    let _ = d.decompress(alg, &data[3..], &mut out, DecodeMode::Prefix);
});
