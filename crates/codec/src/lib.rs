//! `ferrofs-codec` turns EROFS pcluster streams into bytes and back.
//!
//! Its one job: decompress a single, self-contained EROFS pcluster stream
//! (LZ4 block, MicroLZMA, raw DEFLATE or a zstd frame) into a caller-sized
//! buffer, either exactly or as a prefix, and — for the image builder —
//! compress as much input as fits into a fixed-size output buffer.
//!
//! Every stream handed to [`Decoder::decompress`] is treated as hostile:
//! corrupt input yields a [`CodecError`], never a panic, a hang or an
//! allocation that the input controls.
//!
//! ```
//! use ferrofs_codec::{Algorithm, DecodeMode, Decoder, DecoderConfig, Encoder, EncoderConfig};
//!
//! let data = b"an extent of file data, an extent of file data, an extent".repeat(100);
//! let mut enc = Encoder::new(EncoderConfig::new(Algorithm::Zstd)).unwrap();
//! let mut pcluster = vec![0u8; 4096];
//! let (consumed, written) = enc.compress_fixed_output(&data, &mut pcluster).unwrap();
//!
//! let mut dec = Decoder::new(DecoderConfig::default());
//! let mut out = vec![0u8; consumed];
//! dec.decompress(Algorithm::Zstd, &pcluster[..written], &mut out, DecodeMode::Exact).unwrap();
//! assert_eq!(out, &data[..consumed]);
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

mod algorithm;
mod decoder;
mod deflate;
mod encoder;
mod error;
mod fit;
mod lz4;
pub mod lz4cut;
mod lz4opt;
mod lz4pick;
mod lzma;
mod zstd;

// Test code builds its own inputs; the hostile-input lints are for the
// library paths.
#[cfg(test)]
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]
mod search_quality;

pub use algorithm::Algorithm;
pub use decoder::{DecodeMode, Decoder, DecoderConfig};
pub use encoder::{Encoder, EncoderConfig};
pub use error::CodecError;
pub use lzma::{lzma_dict_size_for_pcluster, LZMA_DICT_SIZE_DEFAULT, LZMA_DICT_SIZE_MAX};
pub use zstd::{ZSTD_ENCODER_WINDOW_LOG, ZSTD_WINDOW_LOG_DEFAULT, ZSTD_WINDOW_LOG_MAX};
