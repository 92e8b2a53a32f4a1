//! Whether a file is worth compressing, decided as cheaply as possible:
//! files in an already-compressed format that fast LZ4 cannot shrink are
//! stored flat untried, larger files by samples of their start and middle,
//! and a compressed file whose pclusters and index would take its whole
//! size is stored flat after all (mkfs.erofs's rule).

use ferrofs_codec::{Algorithm, Encoder, EncoderConfig};

use crate::data::extent::{saves_a_block, Extent};
use crate::error::{BuildError, Result};

/// Whether `head`, a file's first bytes, starts like a format whose data
/// is already compressed: gzip, xz, zstd, bzip2, zip (jar, wheel), PNG,
/// JPEG, GIF, WOFF, WOFF2, Ogg, 7z, LZ4 frames, lzip, squashfs, and the
/// package formats that wrap compressed archives: Debian's (an `ar`
/// archive whose first member is `debian-binary`; other `ar` archives,
/// static libraries, compress well) and RPM.
pub(crate) fn looks_compressed(head: &[u8]) -> bool {
    const MAGIC: &[&[u8]] = &[
        b"\x1f\x8b",
        b"\xfd7zXZ\0",
        b"\x28\xb5\x2f\xfd",
        b"BZh",
        b"PK\x03\x04",
        b"\x89PNG",
        b"\xff\xd8\xff",
        b"GIF8",
        b"wOFF",
        b"wOF2",
        b"OggS",
        b"7z\xbc\xaf",
        b"\x04\x22\x4d\x18",
        b"LZIP",
        b"hsqs",
        b"!<arch>\ndebian-binary",
        b"\xed\xab\xee\xdb",
    ];
    MAGIC.iter().any(|m| head.starts_with(m))
}

/// Input of the fast probe for a file that [`looks_compressed`].
const PROBE_BYTES: usize = 256 << 10;

/// Whether a file that [`looks_compressed`] is still worth compressing:
/// fast LZ4 shrinks its first 256 KiB (`data`'s start) by at least 1 %.
/// Such files (a gzip'd man page, a PNG) are stored flat without running
/// the build's codec on them; on /usr/share that skips 16 % of LZMA's
/// work for 0.07 % more image.
pub(crate) fn compressed_file_still_shrinks(data: &[u8]) -> Result<bool> {
    let s = &data[..data.len().min(PROBE_BYTES)];
    let mut enc = Encoder::new(EncoderConfig::new(Algorithm::Lz4))
        .map_err(|e| BuildError::Option(format!("compression probe: {e}")))?;
    let mut dst = vec![0u8; s.len() - s.len() / 100];
    let (consumed, _) = enc
        .compress_fixed_output(s, &mut dst)
        .map_err(|e| BuildError::Option(format!("compression probe: {e}")))?;
    Ok(consumed == s.len())
}

/// Whether a file compressed into `extents` is better stored flat: as
/// mkfs.erofs decides, when its pclusters (an inline tail counted by its
/// bytes) and a full lcluster index (8 bytes per block) take at least the
/// file's size. Not for a file whose tail went to the packed inode.
pub fn flat_is_no_bigger(extents: &[Extent], size: u64, bs: u64, inline_tail: bool) -> bool {
    let mut bytes = 16 + 8 * size.div_ceil(bs);
    for (k, e) in extents.iter().enumerate() {
        bytes += match &e.compressed {
            // ztailpacking may put a short last stream after the inode.
            Some(c) if inline_tail && k + 1 == extents.len() && (c.len() as u64) < bs => {
                c.len() as u64
            }
            _ => e.stored_blocks(bs) * bs,
        };
    }
    bytes >= size
}

/// Whether compressing a pcluster from any of the `samples` of a file (its
/// start, its middle) saves at least one block; files where none does,
/// like media and archives, are stored flat.
pub fn worth_compressing(enc: &mut Encoder, samples: &[&[u8]], pcluster: u64, bs: u64) -> bool {
    enc.reset();
    let mut dst = vec![0u8; pcluster as usize];
    samples.iter().any(|s| {
        matches!(enc.compress_fixed_output(s, &mut dst),
            Ok((consumed, written)) if saves_a_block(consumed, written, bs))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_and_archives_look_compressed_but_static_libraries_do_not() {
        let deb = b"!<arch>\ndebian-binary   1700000000  0     0     100644  4         `\n2.0\n";
        assert!(looks_compressed(deb));
        assert!(looks_compressed(b"\xed\xab\xee\xdb\x03\x00\x00\x00"));
        assert!(looks_compressed(b"\x04\x22\x4d\x18\x64\x40\xa7"));
        assert!(looks_compressed(b"LZIP\x01\x0c"));
        assert!(looks_compressed(b"hsqs\x10\x00\x00\x00"));
        let static_lib = b"!<arch>\n/               0           0     0     0       4         `\n";
        assert!(!looks_compressed(static_lib));
        assert!(!looks_compressed(b"\x7fELF\x02\x01\x01"));
        assert!(!looks_compressed(b"#!/bin/sh\n"));
    }

    #[test]
    fn a_package_of_compressed_members_is_not_worth_compressing() -> Result<()> {
        // A .deb's members are xz or zstd archives: bytes without repeats.
        let mut deb =
            b"!<arch>\ndebian-binary   1700000000  0     0     100644  4         `\n2.0\n".to_vec();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        deb.extend((0..300_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        }));
        assert!(looks_compressed(&deb));
        assert!(!compressed_file_still_shrinks(&deb)?);
        Ok(())
    }
}
