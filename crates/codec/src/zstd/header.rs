//! Just enough of the zstd frame header (RFC 8878 §3.1.1.1) to refuse
//! non-frames and frames whose window exceeds the image's limit before
//! libzstd sees them.

/// Little-endian 0xFD2FB528.
const MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Why a header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeaderError {
    /// Not a zstd frame (skippable and legacy frames included).
    BadMagic,
    /// The input ends inside the header.
    Truncated,
    /// The frame needs a window larger than allowed.
    WindowTooLarge { window: u64 },
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BadMagic => f.write_str("not a zstd frame (bad magic number)"),
            Self::Truncated => f.write_str("frame header is truncated"),
            Self::WindowTooLarge { window } => {
                write!(
                    f,
                    "frame needs a {window}-byte window, more than the image allows"
                )
            }
        }
    }
}

/// Fields of a frame header that matter here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameHeader {
    /// Bytes the decoder must keep as history.
    pub window: u64,
    /// Declared decompressed size, if present.
    pub content_size: Option<u64>,
}

/// Parse the header at the start of `src`.
pub(crate) fn parse(src: &[u8]) -> Result<FrameHeader, HeaderError> {
    if src.len() < MAGIC.len() {
        return Err(HeaderError::Truncated);
    }
    if !src.starts_with(&MAGIC) {
        return Err(HeaderError::BadMagic);
    }
    let fhd = *src.get(4).ok_or(HeaderError::Truncated)?;
    let single_segment = fhd & 0x20 != 0;
    let did_len = match fhd & 3 {
        0 => 0,
        1 => 1,
        2 => 2,
        _ => 4,
    };
    let fcs_len = match fhd >> 6 {
        0 if single_segment => 1,
        0 => 0,
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let rest = src.get(5..).unwrap_or_default();
    let (window_descriptor, rest) = if single_segment {
        (None, rest)
    } else {
        let (&wd, rest) = rest.split_first().ok_or(HeaderError::Truncated)?;
        (Some(wd), rest)
    };
    let fcs = rest
        .get(did_len..)
        .and_then(|r| r.get(..fcs_len))
        .ok_or(HeaderError::Truncated)?;
    let mut raw = [0u8; 8];
    for (d, s) in raw.iter_mut().zip(fcs) {
        *d = *s;
    }
    let content_size = match fcs_len {
        0 => None,
        // why: the 2-byte form holds at most 65535, so + 256 cannot overflow.
        #[allow(clippy::arithmetic_side_effects)]
        2 => Some(u64::from_le_bytes(raw) + 256),
        _ => Some(u64::from_le_bytes(raw)),
    };
    let window = match window_descriptor {
        // why: the exponent is 10 + (at most 31), so base <= 2^41 and
        // base + base / 8 * 7 < 2^42: no overflow.
        #[allow(clippy::arithmetic_side_effects)]
        Some(wd) => {
            let log = 10 + u32::from(wd >> 3);
            let base = 1u64 << log;
            base + (base / 8) * u64::from(wd & 7)
        }
        // Single segment: the window is the whole content.
        None => content_size.unwrap_or(0),
    };
    Ok(FrameHeader {
        window,
        content_size,
    })
}

/// Parse and check the window against `max_window`.
pub(crate) fn check(src: &[u8], max_window: u64) -> Result<FrameHeader, HeaderError> {
    let h = parse(src)?;
    if h.window > max_window {
        return Err(HeaderError::WindowTooLarge { window: h.window });
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_window_descriptor_and_sizes() {
        // FHD 0x00: no FCS, window descriptor 0x58 → 2^(10+11) = 2 MiB.
        let h = parse(&[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58]).unwrap();
        assert_eq!(
            h,
            FrameHeader {
                window: 2 << 20,
                content_size: None
            }
        );
        // Mantissa 3: 1 KiB + 3/8 KiB.
        assert_eq!(
            parse(&[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x03]).unwrap().window,
            1024 + 384
        );
        // Single segment, 2-byte FCS 0x0100 + 256 = 512.
        let h = parse(&[0x28, 0xb5, 0x2f, 0xfd, 0x60, 0x00, 0x01]).unwrap();
        assert_eq!(
            h,
            FrameHeader {
                window: 512,
                content_size: Some(512)
            }
        );
        // Single segment, 1-byte FCS, 1-byte dictionary id first.
        let h = parse(&[0x28, 0xb5, 0x2f, 0xfd, 0x21, 0x07, 0x09]).unwrap();
        assert_eq!(h.content_size, Some(9));
    }

    #[test]
    fn refuses_bad_magic_truncation_and_large_windows() {
        assert_eq!(
            parse(&[0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0]),
            Err(HeaderError::BadMagic)
        );
        assert_eq!(parse(&[0x28, 0xb5, 0x2f]), Err(HeaderError::Truncated));
        assert_eq!(
            parse(&[0x28, 0xb5, 0x2f, 0xfd, 0xe0, 1, 2]),
            Err(HeaderError::Truncated)
        );
        let frame = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58];
        assert_eq!(
            check(&frame, 1 << 20),
            Err(HeaderError::WindowTooLarge { window: 2 << 20 })
        );
        assert!(check(&frame, 2 << 20).is_ok());
    }
}
