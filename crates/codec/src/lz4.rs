//! LZ4: raw blocks, decoded with `LZ4_decompress_safe(_partial)` and
//! encoded with `LZ4_compress_destSize` / `LZ4_compress_HC_destSize`.

use crate::{Algorithm, CodecError, DecodeMode};
use lzzzz::{lz4, lz4_hc};

const ALG: Algorithm = Algorithm::Lz4;

/// liblz4 takes sizes as C `int` and refuses inputs above `LZ4_MAX_INPUT_SIZE`.
const MAX_LEN: usize = 0x7E00_0000;

fn check_len(len: usize) -> Result<(), CodecError> {
    if len > MAX_LEN {
        Err(CodecError::TooLarge { alg: ALG, len })
    } else {
        Ok(())
    }
}

/// Decode `src` into `dst`.
///
/// `LZ4_decompress_safe` only succeeds when the block's last literal run
/// ends exactly at the end of `src`, so Exact mode gets the "all input
/// consumed" check from liblz4; we add the output-length check.
pub(crate) fn decompress(src: &[u8], dst: &mut [u8], mode: DecodeMode) -> Result<(), CodecError> {
    check_len(src.len())?;
    check_len(dst.len())?;
    let want = dst.len();
    let got = match mode {
        DecodeMode::Exact => lz4::decompress(src, dst).map_err(|_| {
            CodecError::corrupt(
                ALG,
                format!("malformed block, or it does not decode to exactly {want} bytes"),
            )
        })?,
        DecodeMode::Prefix => lz4::decompress_partial(src, dst, want)
            .map_err(|_| CodecError::corrupt(ALG, "malformed block"))?,
    };
    if got != want {
        return Err(CodecError::ShortOutput {
            alg: ALG,
            got,
            want,
        });
    }
    Ok(())
}

/// The part of `src` one LZ4 block may take (liblz4's `int` limit).
pub(crate) fn input_part(src: &[u8]) -> &[u8] {
    src.get(..MAX_LEN).unwrap_or(src)
}

/// Compress as much of `src` as fits in `dst`; `hc_level` selects LZ4HC.
pub(crate) fn compress_fixed_output(
    src: &[u8],
    dst: &mut [u8],
    hc_level: Option<i32>,
) -> Result<(usize, usize), CodecError> {
    check_len(dst.len())?;
    // liblz4 takes srcSize as a C int; never offer it more than it accepts.
    let src = input_part(src);
    if src.is_empty() || dst.is_empty() {
        return Ok((0, 0));
    }
    let res = match hc_level {
        Some(level) => lz4_hc::compress_fill(src, dst, level),
        None => lz4::compress_fill(src, dst),
    };
    match res {
        // liblz4 may emit a lone empty sequence when nothing fits.
        Ok((0, _)) => Ok((0, 0)),
        Ok((read, wrote)) if read <= src.len() && wrote <= dst.len() => Ok((read, wrote)),
        Ok((read, wrote)) => Err(CodecError::internal(
            ALG,
            format!("destSize compression reported {read} in / {wrote} out"),
        )),
        // destSize fails only when not even one literal fits.
        Err(_) => Ok((0, 0)),
    }
}
