//! [`Decoder`]: reusable per-thread decompression state and the dispatch to
//! the per-algorithm modules.

use crate::{deflate, lz4, lzma, zstd, Algorithm, CodecError};

/// Parameters from the image's compression configuration records (§4 of
/// the format notes). All-zero means "the EROFS defaults".
#[derive(Clone, Copy, Debug, Default)]
pub struct DecoderConfig {
    /// MicroLZMA dictionary size in bytes. 0 means 8 MiB. Values are
    /// clamped to 4 KiB ..= 8 MiB (the kernel refuses images outside that
    /// range), which also caps the decoder's memory.
    pub lzma_dict_size: u32,
    /// log2 of the largest zstd window a frame may declare (the record
    /// stores this minus 10). 0 means 20 (1 MiB). Clamped to 10 ..= 27.
    pub zstd_window_log: u8,
    /// DEFLATE window bits from the record. Informational: the inflater
    /// always keeps a 32 KiB window, which accepts every valid stream.
    pub deflate_window_bits: u8,
}

/// How much of a stream to decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeMode {
    /// The stream must decode to exactly `dst.len()` bytes and end exactly
    /// at the end of `src` (trailing input or short/long output = error).
    Exact,
    /// Fill `dst` with the first `dst.len()` bytes of the stream's output;
    /// the stream may hold more (decoding stops early). A stream that ends
    /// before filling `dst` is an error. (MicroLZMA needs no "at least"
    /// size hint: `dst.len()` itself is one.)
    Prefix,
}

/// Reusable decoder state (zstd context, lzma stream, inflate state), so a
/// thread reuses its allocations across pclusters. Each algorithm's state is
/// created on first use. `Send`, not meant to be shared.
pub struct Decoder {
    cfg: DecoderConfig,
    lzma: Option<lzma::MicroLzmaDecoder>,
    deflate: Option<deflate::Inflater>,
    zstd: Option<zstd::ZstdDecoder>,
}

impl Decoder {
    /// A decoder for an image with the given configuration records.
    pub fn new(cfg: DecoderConfig) -> Self {
        Self {
            cfg,
            lzma: None,
            deflate: None,
            zstd: None,
        }
    }

    /// The configuration this decoder was made with.
    pub fn config(&self) -> DecoderConfig {
        self.cfg
    }

    /// Decompress one pcluster stream `src` (zero padding already stripped
    /// by the caller) with `alg` into `dst`, as `mode` says.
    ///
    /// On error `dst` holds unspecified bytes.
    pub fn decompress(
        &mut self,
        alg: Algorithm,
        src: &[u8],
        dst: &mut [u8],
        mode: DecodeMode,
    ) -> Result<(), CodecError> {
        if src.is_empty() {
            return Err(CodecError::corrupt(alg, "empty stream"));
        }
        if mode == DecodeMode::Prefix && dst.is_empty() {
            return Ok(());
        }
        match alg {
            Algorithm::Lz4 => lz4::decompress(src, dst, mode),
            Algorithm::Lzma => {
                let dict = lzma::decoder_dict_size(self.cfg.lzma_dict_size);
                let lzma = self.lzma.get_or_insert_with(lzma::MicroLzmaDecoder::new);
                lzma.decompress(src, dst, mode, dict)
            }
            Algorithm::Deflate => self
                .deflate
                .get_or_insert_with(deflate::Inflater::new)
                .decompress(src, dst, mode),
            Algorithm::Zstd => {
                if self.zstd.is_none() {
                    self.zstd = Some(zstd::ZstdDecoder::new(self.cfg.zstd_window_log)?);
                }
                match self.zstd.as_mut() {
                    Some(z) => z.decompress(src, dst, mode),
                    None => Err(CodecError::internal(alg, "zstd context missing")),
                }
            }
        }
    }
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("cfg", &self.cfg)
            .field("lzma_ready", &self.lzma.is_some())
            .field("deflate_ready", &self.deflate.is_some())
            .field("zstd_ready", &self.zstd.is_some())
            .finish()
    }
}
