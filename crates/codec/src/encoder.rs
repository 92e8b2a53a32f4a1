//! [`Encoder`]: fixed-size-output compression for the image builder.

use crate::deflate::DeflateEncoder;
use crate::fit::{Fit, Search};
use crate::lz4opt::Lz4Opt;
use crate::lz4pick::Picker;
use crate::lzma::MicroLzmaEncoder;
use crate::zstd::ZstdEncoder;
use crate::{Algorithm, CodecError};

/// How to compress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncoderConfig {
    /// The algorithm.
    pub alg: Algorithm,
    /// Compression level, `None` = the library default. LZ4HC: 1..=12
    /// (default 9); plain LZ4 takes none; MicroLZMA: 0..=9, or 100..=109
    /// for the "extreme" presets (default 6); DEFLATE: libdeflate's 0..=12
    /// (default 6); zstd: its level range (default 3).
    pub level: Option<i32>,
    /// LZ4 only: use LZ4HC (`LZ4_compress_HC_destSize`).
    pub lz4hc: bool,
    /// MicroLZMA dictionary size, 4 KiB ..= 8 MiB, 0 = 8 MiB. Must not
    /// exceed the dictionary size written in the image. Encoder setup time
    /// grows with it, so use about the pcluster size
    /// ([`lzma_dict_size_for_pcluster`](crate::lzma_dict_size_for_pcluster)).
    pub lzma_dict_size: u32,
}

impl EncoderConfig {
    /// Defaults for `alg`: library level, plain LZ4, 8 MiB LZMA dictionary.
    pub fn new(alg: Algorithm) -> Self {
        Self {
            alg,
            level: None,
            lz4hc: false,
            lzma_dict_size: 0,
        }
    }
}

enum Engine {
    Lz4 {
        hc_level: Option<i32>,
    },
    /// LZ4HC level 12; the tree encoder's buffers (about 1 MiB) are made
    /// on its first input.
    Lz4Opt(Option<Box<Lz4Opt>>, Picker),
    Lzma(MicroLzmaEncoder),
    Deflate(DeflateEncoder),
    Zstd(ZstdEncoder),
}

/// Reusable compression state for one algorithm; `Send`.
pub struct Encoder {
    cfg: EncoderConfig,
    engine: Engine,
    search: Search,
    last_trials: u32,
    machine_code: bool,
    one_file: bool,
}

impl Encoder {
    /// Set up an encoder; fails on an invalid level or dictionary size.
    pub fn new(cfg: EncoderConfig) -> Result<Self, CodecError> {
        let engine = match cfg.alg {
            Algorithm::Lz4 => match lz4_level(cfg)? {
                Some(LZ4HC_MAX) => Engine::Lz4Opt(None, Picker::default()),
                hc_level => Engine::Lz4 { hc_level },
            },
            Algorithm::Lzma => Engine::Lzma(MicroLzmaEncoder::new(cfg.level, cfg.lzma_dict_size)?),
            Algorithm::Deflate => Engine::Deflate(DeflateEncoder::new(cfg.level)?),
            Algorithm::Zstd => Engine::Zstd(ZstdEncoder::new(cfg.level)?),
        };
        Ok(Self {
            cfg,
            engine,
            search: Search::default(),
            last_trials: 0,
            machine_code: false,
            one_file: false,
        })
    }

    /// Forgets what earlier calls learned (the ratio DEFLATE's search and
    /// zstd's fill start from), so the next calls give the same output whatever this encoder
    /// compressed before. Call it at the start of independent inputs when
    /// output must not depend on how work was spread over encoders.
    pub fn reset(&mut self) {
        self.search.forget();
        if let Engine::Zstd(e) = &mut self.engine {
            e.forget();
        }
    }

    /// Says whether the next inputs are machine code (from an ELF file).
    /// LZ4HC level 12 compresses machine code with ferrofs's own optimal
    /// parser, which finds its matches with a binary tree in about 0.8x
    /// liblz4's time at the same size; everything else (text, data that
    /// hardly compresses, tables) goes to liblz4, which is faster there,
    /// unless it is one file's bytes whose 4-byte strings recur enough to
    /// make liblz4's chains long ([`Encoder::set_one_file`]).
    /// zstd levels 13-15 give machine code the optimal parser with short
    /// matches (see `zstd::fill`). Other algorithms and levels ignore it.
    /// The streams are valid either way, but not the same bytes: say the
    /// same for the same input wherever output must be reproducible.
    pub fn set_machine_code(&mut self, yes: bool) {
        self.machine_code = yes;
        if let Engine::Zstd(e) = &mut self.engine {
            e.set_machine_code(yes);
        }
    }

    /// Says whether the next inputs are one file's own bytes (not a run of
    /// many small files, such as the packed inode). LZ4HC level 12 then
    /// gives a pcluster of them that is not machine code to ferrofs's own
    /// encoder where liblz4's hash chains would be long (see `lz4pick`);
    /// other algorithms and levels ignore it. As for
    /// [`Encoder::set_machine_code`], say the same for the same input
    /// wherever output must be reproducible.
    pub fn set_one_file(&mut self, yes: bool) {
        self.one_file = yes;
    }

    /// The configuration this encoder was made with.
    pub fn config(&self) -> EncoderConfig {
        self.cfg
    }

    /// Compress as much of `src` as fits into at most `dst.len()` bytes.
    /// Returns `(consumed_input, written_output)`; `consumed` may be less
    /// than `src.len()`, and is 0 (with 0 written) when nothing fits or
    /// `src` is empty. The output is the raw stream as EROFS stores it
    /// (LZ4 block / MicroLZMA / raw DEFLATE / zstd frame), its first byte
    /// is non-zero, and [`Decoder`](crate::Decoder) in
    /// [`Exact`](crate::DecodeMode::Exact) mode decodes it to exactly
    /// `src[..consumed]`.
    ///
    /// DEFLATE and zstd have no fixed-output mode. DEFLATE (and zstd into
    /// less than 16 KiB) searches for a long prefix that fits (within 1 %
    /// of the longest); zstd feeds one frame piece by piece, flushing
    /// each, and cuts it at the last piece that fits (about one
    /// compression of the input instead of the search's two to five), so
    /// `consumed` may be slightly below the true maximum. The caller bounds `src` (DEFLATE's first trial takes at
    /// most 4 × `dst.len()` bytes, but zero runs can extend it to all of
    /// `src`).
    pub fn compress_fixed_output(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(usize, usize), CodecError> {
        self.last_trials = 1;
        let fit = match &mut self.engine {
            Engine::Lz4 { hc_level } => {
                return crate::lz4::compress_fixed_output(src, dst, *hc_level)
            }
            Engine::Lz4Opt(e, pick) => {
                if self.machine_code || (self.one_file && pick.tree_is_faster(src)) {
                    let e = e.get_or_insert_with(|| Box::new(Lz4Opt::new()));
                    return Ok(e.compress_fill(crate::lz4::input_part(src), dst));
                }
                return crate::lz4::compress_fixed_output(src, dst, Some(LZ4HC_MAX));
            }
            Engine::Lzma(e) => return e.compress_fixed_output(src, dst),
            Engine::Deflate(e) => e.compress_fixed_output(&mut self.search, src, dst)?,
            Engine::Zstd(e) => e.compress_fixed_output(&mut self.search, src, dst)?,
        };
        let Fit {
            consumed,
            written,
            trials,
        } = fit;
        self.last_trials = trials;
        Ok((consumed, written))
    }

    /// How many trial compressions the last
    /// [`compress_fixed_output`](Self::compress_fixed_output) ran (always 1
    /// for LZ4 and MicroLZMA, which have a native fixed-output mode; for
    /// zstd, the frames started).
    pub fn last_trials(&self) -> u32 {
        self.last_trials
    }
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

/// LZ4HC's top level, which [`Lz4Opt`] implements for machine code (an
/// optimal parse over a binary-tree match finder).
const LZ4HC_MAX: i32 = 12;

fn lz4_level(cfg: EncoderConfig) -> Result<Option<i32>, CodecError> {
    match (cfg.lz4hc, cfg.level) {
        (false, None) => Ok(None),
        (false, Some(l)) => Err(CodecError::invalid_config(
            Algorithm::Lz4,
            format!("plain LZ4 fixed-output compression has no level (got {l}); set lz4hc"),
        )),
        (true, None) => Ok(Some(lzzzz::lz4_hc::CLEVEL_DEFAULT)),
        (true, Some(l @ 1..=12)) => Ok(Some(l)),
        (true, Some(l)) => Err(CodecError::invalid_config(
            Algorithm::Lz4,
            format!("LZ4HC level {l} is not 1..=12"),
        )),
    }
}
