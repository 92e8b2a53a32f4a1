//! DEFLATE (EROFS algorithm 2): raw RFC 1951 streams. Decoded with flate2's
//! pure-Rust inflater, encoded with libdeflate plus the prefix search.

use crate::fit::{Fit, Search, WholeCompressor};
use crate::{Algorithm, CodecError, DecodeMode};
use flate2::{Decompress, FlushDecompress, Status};
use libdeflater::{CompressionLvl, Compressor};

const ALG: Algorithm = Algorithm::Deflate;

/// A reusable raw-DEFLATE decoder.
pub(crate) struct Inflater {
    state: Decompress,
}

/// Where one inflate run stopped.
enum Stop {
    /// The final block ended.
    End,
    /// The output buffer is full.
    Full,
    /// No progress: the input ran out mid-stream.
    Starved,
}

impl Inflater {
    pub fn new() -> Self {
        Self {
            state: Decompress::new(false),
        }
    }

    fn consumed(&self) -> usize {
        usize::try_from(self.state.total_in()).unwrap_or(usize::MAX)
    }

    fn produced(&self) -> usize {
        usize::try_from(self.state.total_out()).unwrap_or(usize::MAX)
    }

    /// Inflate from `src[in_base + consumed..]` into `out` until the stream
    /// ends, `out` is full or nothing moves. `out_base` is the number of
    /// bytes produced before `out`.
    fn run(&mut self, src: &[u8], out: &mut [u8], out_base: usize) -> Result<Stop, CodecError> {
        loop {
            let (in_pos, out_pos) = (self.consumed(), self.produced());
            let input = src.get(in_pos..).unwrap_or_default();
            let output = out
                .get_mut(out_pos.saturating_sub(out_base)..)
                .unwrap_or_default();
            if output.is_empty() {
                return Ok(Stop::Full);
            }
            let status = self
                .state
                .decompress(input, output, FlushDecompress::None)
                .map_err(|e| CodecError::corrupt(ALG, e.to_string()))?;
            if status == Status::StreamEnd {
                return Ok(Stop::End);
            }
            if (self.consumed(), self.produced()) == (in_pos, out_pos) {
                return Ok(Stop::Starved);
            }
        }
    }

    pub fn decompress(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        mode: DecodeMode,
    ) -> Result<(), CodecError> {
        self.state.reset(false);
        let want = dst.len();
        let mut stop = self.run(src, dst, 0)?;
        if mode == DecodeMode::Exact && matches!(stop, Stop::Full) {
            // The output is full; the stream must now end without
            // producing anything more. Probe with a one-byte buffer.
            let mut probe = [0u8; 1];
            stop = self.run(src, &mut probe, want)?;
            if self.produced() > want {
                return Err(CodecError::LongOutput { alg: ALG, want });
            }
        }
        let got = self.produced();
        match stop {
            Stop::Full => Ok(()),
            Stop::End | Stop::Starved if got < want => Err(CodecError::ShortOutput {
                alg: ALG,
                got,
                want,
            }),
            Stop::Starved => Err(CodecError::corrupt(
                ALG,
                "input ends before the final block does",
            )),
            Stop::End if mode == DecodeMode::Exact && self.consumed() != src.len() => {
                Err(CodecError::TrailingInput {
                    alg: ALG,
                    used: self.consumed(),
                    len: src.len(),
                })
            }
            Stop::End => Ok(()),
        }
    }
}

/// libdeflate wrapped for the prefix search.
pub(crate) struct DeflateEncoder {
    comp: Compressor,
}

impl DeflateEncoder {
    /// `level`: libdeflate's 1..=12 (0 = stored only); default 6.
    pub fn new(level: Option<i32>) -> Result<Self, CodecError> {
        let lvl = match level {
            None => CompressionLvl::default(),
            Some(l) => CompressionLvl::new(l).map_err(|_| {
                CodecError::invalid_config(ALG, format!("level {l} is not a libdeflate level"))
            })?,
        };
        Ok(Self {
            comp: Compressor::new(lvl),
        })
    }

    pub fn compress_fixed_output(
        &mut self,
        search: &mut Search,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Fit, CodecError> {
        let fit = search.run(self, src, dst)?;
        // EROFS zero padding needs a non-zero first byte. A 0x00 first byte
        // is a non-final stored block header (BFINAL=0, BTYPE=00) whose
        // bits 3..7 are padding up to the byte boundary; mkfs sets bit 3.
        if fit.written > 0 {
            if let Some(first) = dst.first_mut() {
                if *first == 0 {
                    *first = 0x08;
                }
            }
        }
        Ok(fit)
    }
}

impl WholeCompressor for DeflateEncoder {
    fn compress_into(&mut self, src: &[u8], out: &mut [u8]) -> Result<Option<usize>, CodecError> {
        // libdeflate's only failure is "does not fit".
        Ok(self.comp.deflate_compress(src, out).ok())
    }
}
