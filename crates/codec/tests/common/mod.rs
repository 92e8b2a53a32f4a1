//! Shared test helpers: a deterministic PRNG and sample data.
#![allow(dead_code)]

use ferrofs_codec::{Algorithm, DecodeMode, Decoder, DecoderConfig, Encoder, EncoderConfig};

/// xorshift64*: tiny, deterministic, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-ish in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.next_u64() as u8;
        }
    }
}

const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "a",
    "to",
    "in",
    "is",
    "file",
    "system",
    "block",
    "inode",
    "data",
    "compressed",
    "cluster",
    "superblock",
    "directory",
    "extent",
    "kernel",
    "image",
    "read",
    "write",
    "offset",
    "length",
    "bytes",
    "page",
    "cache",
    "mount",
    "erofs",
    "stream",
    "index",
    "that",
    "for",
    "with",
    "as",
    "on",
    "be",
    "this",
    "are",
    "by",
    "from",
    "or",
    "an",
    "at",
];

/// Pseudo-English: words, punctuation and line breaks (~3:1 for LZ77s).
pub fn text(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        out.extend_from_slice(WORDS[rng.below(WORDS.len())].as_bytes());
        match rng.below(16) {
            0 => out.extend_from_slice(b".\n"),
            1 => out.extend_from_slice(b", "),
            2 => out.extend_from_slice(format!(" {} ", rng.below(100_000)).as_bytes()),
            _ => out.push(b' '),
        }
    }
    out.truncate(len);
    out
}

pub fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    Rng::new(seed).fill(&mut v);
    v
}

pub fn zeros(len: usize) -> Vec<u8> {
    vec![0u8; len]
}

/// Text with random and zero stretches mixed in.
pub fn mixed(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let n = 1 + rng.below(3000);
        match rng.below(3) {
            0 => out.extend(text(n, rng.next_u64())),
            1 => out.extend(random(n, rng.next_u64())),
            _ => out.extend(zeros(n)),
        }
    }
    out.truncate(len);
    out
}

/// Every encoder configuration the tests exercise.
pub fn configs() -> Vec<EncoderConfig> {
    let mut v: Vec<EncoderConfig> = Algorithm::ALL
        .iter()
        .map(|&a| EncoderConfig::new(a))
        .collect();
    v.push(EncoderConfig {
        lz4hc: true,
        ..EncoderConfig::new(Algorithm::Lz4)
    });
    // Level 12 (liblz4's encoder unless told the input is machine code).
    v.push(EncoderConfig {
        lz4hc: true,
        level: Some(12),
        ..EncoderConfig::new(Algorithm::Lz4)
    });
    // Keep the LZMA dictionary small: setup cost follows it.
    for c in &mut v {
        if c.alg == Algorithm::Lzma {
            c.lzma_dict_size = 64 << 10;
        }
    }
    v
}

/// A decoder whose LZMA dictionary matches `configs()`.
pub fn decoder() -> Decoder {
    Decoder::new(DecoderConfig {
        lzma_dict_size: 64 << 10,
        ..DecoderConfig::default()
    })
}

/// Compress `src` into a `cap`-byte pcluster; returns (consumed, stream).
pub fn pcluster(cfg: EncoderConfig, src: &[u8], cap: usize) -> (usize, Vec<u8>) {
    let mut enc = Encoder::new(cfg).expect("encoder");
    let mut buf = vec![0u8; cap];
    let (consumed, written) = enc.compress_fixed_output(src, &mut buf).expect("compress");
    buf.truncate(written);
    (consumed, buf)
}

/// Decode into a fresh `len`-byte buffer.
pub fn decode(
    dec: &mut Decoder,
    alg: Algorithm,
    stream: &[u8],
    len: usize,
    mode: DecodeMode,
) -> Result<Vec<u8>, ferrofs_codec::CodecError> {
    let mut out = vec![0u8; len];
    dec.decompress(alg, stream, &mut out, mode).map(|()| out)
}
