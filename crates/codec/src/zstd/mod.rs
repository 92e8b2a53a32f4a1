//! Zstandard (EROFS algorithm 3): one zstd frame per pcluster.

mod fill;
mod header;

use crate::fit::{Fit, Search, WholeCompressor};
use crate::{Algorithm, CodecError, DecodeMode};
use zstd_safe::{CCtx, DCtx, DParameter, InBuffer, OutBuffer, ResetDirective};

const ALG: Algorithm = Algorithm::Zstd;

/// Window log assumed when the configuration says 0 (1 MiB, the most the
/// kernel accepts).
pub const ZSTD_WINDOW_LOG_DEFAULT: u8 = 20;
/// Largest window log the decoder will ever accept (128 MiB), whatever the
/// configuration says.
pub const ZSTD_WINDOW_LOG_MAX: u8 = 27;
/// Smallest window log zstd knows.
const WINDOW_LOG_MIN: u8 = 10;
/// Outputs of at least this many bytes are filled in one pass; smaller
/// ones by the prefix search.
pub(crate) const FILL_FROM: usize = 16 << 10;
/// Window log limit of frames the encoder writes (1 MiB); the builder
/// stores `ZSTD_ENCODER_WINDOW_LOG - 10` in the zstd configuration record.
pub const ZSTD_ENCODER_WINDOW_LOG: u32 = 20;

fn zstd_error(code: usize) -> String {
    zstd_safe::get_error_name(code).to_owned()
}

/// A reusable zstd decoder.
pub(crate) struct ZstdDecoder {
    dctx: DCtx<'static>,
    max_window: u64,
}

impl ZstdDecoder {
    /// `window_log`: log2 of the largest window a frame may use, 0 = default.
    pub fn new(window_log: u8) -> Result<Self, CodecError> {
        let log = match window_log {
            0 => ZSTD_WINDOW_LOG_DEFAULT,
            l => l.clamp(WINDOW_LOG_MIN, ZSTD_WINDOW_LOG_MAX),
        };
        let mut dctx = DCtx::try_create().ok_or(CodecError::OutOfMemory { alg: ALG })?;
        dctx.set_parameter(DParameter::WindowLogMax(u32::from(log)))
            .map_err(|c| CodecError::internal(ALG, zstd_error(c)))?;
        Ok(Self {
            dctx,
            max_window: 1u64 << log,
        })
    }

    pub fn decompress(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        mode: DecodeMode,
    ) -> Result<(), CodecError> {
        let frame = header::check(src, self.max_window)
            .map_err(|e| CodecError::corrupt(ALG, e.to_string()))?;
        self.dctx
            .reset(ResetDirective::SessionOnly)
            .map_err(|c| CodecError::internal(ALG, zstd_error(c)))?;
        match mode {
            DecodeMode::Exact => self.exact(src, dst, frame.content_size),
            DecodeMode::Prefix => self.prefix(src, dst),
        }
    }

    /// One-shot decode of exactly one frame filling `dst`. One-shot
    /// decoding keeps no window buffer, so it allocates nothing.
    fn exact(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        content_size: Option<u64>,
    ) -> Result<(), CodecError> {
        let want = dst.len();
        if let Some(size) = content_size {
            let got = usize::try_from(size).unwrap_or(usize::MAX);
            if got > want {
                return Err(CodecError::LongOutput { alg: ALG, want });
            }
            if got < want {
                return Err(CodecError::ShortOutput {
                    alg: ALG,
                    got,
                    want,
                });
            }
        }
        let frame_len = zstd_safe::find_frame_compressed_size(src)
            .map_err(|c| CodecError::corrupt(ALG, zstd_error(c)))?;
        if frame_len != src.len() {
            return Err(CodecError::TrailingInput {
                alg: ALG,
                used: frame_len,
                len: src.len(),
            });
        }
        let got = self
            .dctx
            .decompress(dst, src)
            .map_err(|c| CodecError::corrupt(ALG, zstd_error(c)))?;
        if got != want {
            return Err(CodecError::ShortOutput {
                alg: ALG,
                got,
                want,
            });
        }
        Ok(())
    }

    /// Streaming decode that stops as soon as `dst` is full.
    fn prefix(&mut self, src: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
        let want = dst.len();
        let mut input = InBuffer::around(src);
        let mut output = OutBuffer::around(dst);
        loop {
            let before = (input.pos(), output.pos());
            let hint = self
                .dctx
                .decompress_stream(&mut output, &mut input)
                .map_err(|c| CodecError::corrupt(ALG, zstd_error(c)))?;
            let got = output.pos();
            if got == want {
                return Ok(());
            }
            // Frame finished early, or no progress: the input ran out.
            if hint == 0 || (input.pos(), got) == before {
                return Err(CodecError::ShortOutput {
                    alg: ALG,
                    got,
                    want,
                });
            }
        }
    }
}

/// A reusable zstd compression context for fixed-size output.
pub(crate) struct ZstdEncoder {
    cctx: CCtx<'static>,
    filler: fill::Filler,
}

impl ZstdEncoder {
    /// `level`: zstd's level range; default 3. Frames have no checksum,
    /// carry their content size and use at most a 1 MiB window.
    pub fn new(level: Option<i32>) -> Result<Self, CodecError> {
        let level = level.unwrap_or(zstd_safe::CLEVEL_DEFAULT);
        let range = zstd_safe::min_c_level()..=zstd_safe::max_c_level();
        if !range.contains(&level) {
            return Err(CodecError::invalid_config(
                ALG,
                format!(
                    "level {level} is outside {}..={}",
                    range.start(),
                    range.end()
                ),
            ));
        }
        let mut cctx = CCtx::try_create().ok_or(CodecError::OutOfMemory { alg: ALG })?;
        fill::set_match_finder(&mut cctx, level, fill::Finder::Level)?;
        Ok(Self {
            cctx,
            filler: fill::Filler::new(level),
        })
    }

    /// One frame holding a long prefix of `src` that fits in `dst`: from
    /// [`FILL_FROM`] bytes of output by the one-pass fill (see [`fill`]),
    /// below it by the prefix search (flushed pieces cost too much of a
    /// small frame; a small frame is cheap to compress again).
    pub fn compress_fixed_output(
        &mut self,
        search: &mut Search,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Fit, CodecError> {
        if dst.len() >= FILL_FROM {
            self.filler.fill(&mut self.cctx, src, dst)
        } else {
            fill::set_match_finder(&mut self.cctx, self.filler.level(), fill::Finder::Level)?;
            search.run(self, src, dst)
        }
    }

    /// Says whether the next inputs are machine code: large frames at
    /// levels 13-15 then get [`fill::Finder::MachineCode`].
    pub fn set_machine_code(&mut self, yes: bool) {
        self.filler.machine_code = yes;
    }

    /// Forgets the ratio learned from earlier calls.
    pub fn forget(&mut self) {
        self.filler.forget();
    }
}

/// One-shot frames: the prefix search's trials.
impl WholeCompressor for ZstdEncoder {
    fn compress_into(&mut self, src: &[u8], out: &mut [u8]) -> Result<Option<usize>, CodecError> {
        match self.cctx.compress2(out, src) {
            Ok(n) => Ok(Some(n)),
            Err(_) if out.len() < zstd_safe::compress_bound(src.len()) => Ok(None),
            Err(c) => Err(CodecError::internal(ALG, zstd_error(c))),
        }
    }
}
