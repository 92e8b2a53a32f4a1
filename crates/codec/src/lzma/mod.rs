//! MicroLZMA (EROFS algorithm 1) through liblzma.

mod ffi;

use crate::{Algorithm, CodecError, DecodeMode};
use ffi::{EncoderBuild, Outcome, Stream};
use liblzma_sys as sys;

const ALG: Algorithm = Algorithm::Lzma;

/// Dictionary size meant by a zero `lzma_dict_size` (8 MiB).
pub const LZMA_DICT_SIZE_DEFAULT: u32 = 8 << 20;
/// Largest dictionary the kernel accepts (8 MiB).
pub const LZMA_DICT_SIZE_MAX: u32 = 8 << 20;
/// Smallest dictionary the kernel accepts (4 KiB).
const DICT_SIZE_MIN: u32 = 4096;
/// liblzma's MicroLZMA encoder needs room for at least this much output.
const MIN_OUTPUT: usize = 6;
/// `LZMA_PRESET_DEFAULT`.
const DEFAULT_PRESET: u32 = 6;
/// Levels 100..=109 ask for preset 0..=9 with `LZMA_PRESET_EXTREME`.
const EXTREME_BASE: i32 = 100;

/// The dictionary the decoder sets up for a configured `lzma_dict_size`.
pub(crate) fn decoder_dict_size(cfg: u32) -> u32 {
    if cfg == 0 {
        LZMA_DICT_SIZE_DEFAULT
    } else {
        cfg.clamp(DICT_SIZE_MIN, LZMA_DICT_SIZE_MAX)
    }
}

/// The dictionary `mkfs.erofs` picks for a pcluster size:
/// `max(32 KiB, min(8 MiB, 4 * pcluster_size))`. The builder stores the
/// same value in the image's LZMA configuration record.
pub fn lzma_dict_size_for_pcluster(pcluster_size: u32) -> u32 {
    pcluster_size
        .saturating_mul(4)
        .clamp(32 << 10, LZMA_DICT_SIZE_MAX)
}

fn init_error(ret: sys::lzma_ret, what: &str) -> CodecError {
    match ret {
        sys::LZMA_MEM_ERROR => CodecError::OutOfMemory { alg: ALG },
        _ => CodecError::internal(ALG, format!("{what} failed (lzma_ret {ret})")),
    }
}

/// A reusable MicroLZMA decoder.
pub(crate) struct MicroLzmaDecoder {
    stream: Stream,
}

impl MicroLzmaDecoder {
    pub fn new() -> Self {
        Self {
            stream: Stream::new(),
        }
    }

    /// Decode `src` into `dst` with a `dict`-byte dictionary.
    ///
    /// Exact: the decoder is told the exact output size and the exact input
    /// size, and liblzma checks that the range coder finishes on the last
    /// input byte. Prefix: the output size is an "at least" bound, which is
    /// what `dst.len()` is.
    pub fn decompress(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        mode: DecodeMode,
        dict: u32,
    ) -> Result<(), CodecError> {
        let exact = mode == DecodeMode::Exact;
        let ret = self
            .stream
            .init_microlzma_decoder(src.len(), dst.len(), exact, dict);
        if ret != sys::LZMA_OK {
            return Err(init_error(ret, "lzma_microlzma_decoder"));
        }
        let want = dst.len();
        let Outcome {
            ret,
            consumed,
            produced,
        } = self.stream.finish(src, dst);
        match ret {
            sys::LZMA_STREAM_END if produced != want => Err(CodecError::ShortOutput {
                alg: ALG,
                got: produced,
                want,
            }),
            sys::LZMA_STREAM_END if exact && consumed != src.len() => {
                Err(CodecError::TrailingInput {
                    alg: ALG,
                    used: consumed,
                    len: src.len(),
                })
            }
            sys::LZMA_STREAM_END => Ok(()),
            sys::LZMA_OPTIONS_ERROR => Err(CodecError::corrupt(
                ALG,
                "first byte is not a valid inverted lc/lp/pb properties byte",
            )),
            sys::LZMA_DATA_ERROR => Err(CodecError::corrupt(
                ALG,
                "invalid data (bad match distance, end marker, or the range \
                 coder does not finish at the end of the input)",
            )),
            sys::LZMA_MEM_ERROR => Err(CodecError::OutOfMemory { alg: ALG }),
            // Input exhausted (LZMA_BUF_ERROR) or no progress (LZMA_OK).
            sys::LZMA_BUF_ERROR | sys::LZMA_OK if produced < want => Err(CodecError::ShortOutput {
                alg: ALG,
                got: produced,
                want,
            }),
            sys::LZMA_BUF_ERROR | sys::LZMA_OK => Err(CodecError::corrupt(
                ALG,
                "stream does not end after the expected output",
            )),
            other => Err(CodecError::internal(
                ALG,
                format!("lzma_code returned {other}"),
            )),
        }
    }
}

/// Map an encoder level to a liblzma preset: `None` = 6, `0..=9`, or
/// `100..=109` for the "extreme" variants of 0..=9.
pub(crate) fn preset_for_level(level: Option<i32>) -> Result<u32, CodecError> {
    match level {
        None => Ok(DEFAULT_PRESET),
        Some(l @ 0..=9) => Ok(l.unsigned_abs()),
        Some(l @ EXTREME_BASE..=109) => Ok(l.abs_diff(EXTREME_BASE) | sys::LZMA_PRESET_EXTREME),
        Some(l) => Err(CodecError::invalid_config(
            ALG,
            format!("level {l} is not 0..=9 (or 100..=109 for extreme)"),
        )),
    }
}

/// The dictionary the encoder uses for a configured `lzma_dict_size`.
pub(crate) fn encoder_dict_size(cfg: u32) -> Result<u32, CodecError> {
    match cfg {
        0 => Ok(LZMA_DICT_SIZE_DEFAULT),
        DICT_SIZE_MIN..=LZMA_DICT_SIZE_MAX => Ok(cfg),
        _ => Err(CodecError::invalid_config(
            ALG,
            format!("dictionary size {cfg} is outside 4 KiB ..= 8 MiB"),
        )),
    }
}

/// A reusable MicroLZMA fixed-output encoder.
pub(crate) struct MicroLzmaEncoder {
    stream: Stream,
    build: EncoderBuild,
    preset: u32,
    dict: u32,
}

impl MicroLzmaEncoder {
    pub fn new(level: Option<i32>, dict_size: u32) -> Result<Self, CodecError> {
        Ok(Self {
            stream: Stream::new(),
            build: EncoderBuild::Guarded,
            preset: preset_for_level(level)?,
            dict: encoder_dict_size(dict_size)?,
        })
    }

    /// Encode as much of `src` as fits in `dst`.
    ///
    /// liblzma re-initialises the encoder per stream (that is how MicroLZMA
    /// works); with an unchanged dictionary size it keeps its buffers and
    /// only clears the match-finder hash, whose size follows the dictionary.
    pub fn compress_fixed_output(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(usize, usize), CodecError> {
        if src.is_empty() || dst.len() < MIN_OUTPUT {
            return Ok((0, 0));
        }
        let ret = self
            .stream
            .init_microlzma_encoder(self.build, self.preset, self.dict);
        if ret != sys::LZMA_OK {
            return Err(init_error(ret, "lzma_microlzma_encoder"));
        }
        let out = self.stream.finish(src, dst);
        match out.ret {
            sys::LZMA_STREAM_END if out.consumed == 0 => Ok((0, 0)),
            sys::LZMA_STREAM_END => Ok((out.consumed, out.produced)),
            sys::LZMA_MEM_ERROR => Err(CodecError::OutOfMemory { alg: ALG }),
            other => Err(CodecError::internal(
                ALG,
                format!("MicroLZMA encoding returned lzma_ret {other}"),
            )),
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use ferrofs_testkit::corpus::{mixed_bytes, random_bytes, text_bytes};

    /// liblzma is compiled with the fast paths xz's own build selects on
    /// x86-64 (.cargo/config.toml): the probe, compiled with the same
    /// headers, config.h and C flags as liblzma-sys compiles liblzma,
    /// reports each as on. Without the flags every bit is 0.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn liblzma_is_built_with_xzs_fast_paths() {
        let bits = ffi::fast_paths();
        for (bit, what) in [
            (1, "TUKLIB_FAST_UNALIGNED_ACCESS"),
            (2, "the decoder's SSE2 copy (LZMA_LZ_DECODER_CONFIG 2)"),
            (4, "the 8-byte lzma_memcmplen"),
            (8, "CRC by carry-less multiplication"),
            (16, "builtin byte swaps"),
        ] {
            assert!(bits & bit != 0, "{what} is off (probe bits {bits:#x})");
        }
    }

    /// ferrofs's guarded encoder (build.rs) must write exactly what
    /// liblzma's own writes, with the same input consumed, for every output
    /// limit: the guard only skips dry runs that cannot fail. Limits from
    /// liblzma's smallest to 1 MiB, around block sizes included, over
    /// machine code (this test's own executable), text, incompressible,
    /// zero and mixed data, at several presets.
    #[test]
    fn guarded_encoder_writes_what_liblzma_writes() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let inputs: Vec<Vec<u8>> = vec![
            exe[..exe.len().min(3 << 20)].to_vec(),
            text_bytes(2 << 20, 1),
            random_bytes(600 << 10, 2),
            vec![0u8; 4 << 20],
            mixed_bytes(300_000, 3),
            b"a".repeat(70_000),
        ];
        let limits = [
            6,
            7,
            64,
            127,
            128,
            129,
            200,
            4095,
            4096,
            4097,
            8192,
            16384,
            65536,
            131072,
            1 << 20,
        ];
        let mut checked = 0;
        for level in [Some(0), Some(6), Some(9), Some(106)] {
            let mut ours = MicroLzmaEncoder::new(level, 1 << 20).unwrap();
            let mut theirs = MicroLzmaEncoder::new(level, 1 << 20).unwrap();
            theirs.build = EncoderBuild::Reference;
            for (i, input) in inputs.iter().enumerate() {
                for &limit in &limits {
                    let mut a = vec![0u8; limit];
                    let mut b = vec![0u8; limit];
                    let got = ours.compress_fixed_output(input, &mut a).unwrap();
                    let want = theirs.compress_fixed_output(input, &mut b).unwrap();
                    let what = format!("level {level:?}, input {i}, limit {limit}");
                    assert_eq!(got, want, "{what}: (consumed, written)");
                    assert!(
                        got.1 > 0 && a[..got.1] == b[..want.1],
                        "{what}: bytes differ"
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 4 * 6 * 15);
    }
}
