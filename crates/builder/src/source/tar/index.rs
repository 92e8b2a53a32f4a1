//! Tar index mode (mkfs.erofs's `--tar=i`): file data stays in the
//! archive, which becomes the image's extra device 1 (appended to the image
//! it mounts as one file: the device is mapped right after the image's own
//! blocks). A regular file is chunk-based; its chunk indexes name its
//! 512-byte blocks in the archive, holes of a sparse member none.

use super::BLOCK;
use crate::tree::content::{External, Segment};
use crate::tree::ExtraDevice;

/// The device the archive is.
const DEVICE: u16 = 1;
/// log2 of the block size tar and the index share.
const BLOCK_BITS: u32 = 9;
/// The offset-in-block bits.
const BLOCK_MASK: u64 = (1 << BLOCK_BITS) - 1;
/// Largest chunk a chunk index can name: 2^31 blocks.
const MAX_CHUNK_BITS: u32 = BLOCK_BITS + 31;
/// Most chunks one file's table may have (32 MiB of indexes).
const MAX_CHUNKS: u64 = 1 << 22;

/// The archive as the image's device, `end` bytes long (to the end of its
/// end-of-archive blocks).
pub(super) fn device(end: u64) -> ExtraDevice {
    ExtraDevice {
        tag: [0; 64],
        blocks: end.div_ceil(BLOCK as u64),
    }
}

/// The chunks of a file of `size` bytes stored in the archive's ranges
/// `segments`. A contiguous file is one chunk (the smallest power of two
/// that holds it, as mkfs.erofs sizes it); a sparse one gets chunks as
/// large as its data ranges' edges allow, each all data or all hole.
pub(super) fn chunks(segments: &[Segment], size: u64) -> Result<External, String> {
    if size == 0 {
        return Ok(External {
            bits_extra: 0,
            chunks: Vec::new(),
            tail: false,
        });
    }
    let contiguous = matches!(segments, [s] if s.logical == 0 && s.len == size);
    let bits = if contiguous {
        // ilog2(size - 1) + 1: the bits that cover `size` bytes.
        let last = size.saturating_sub(1);
        u64::BITS
            .saturating_sub(last.leading_zeros())
            .clamp(BLOCK_BITS, MAX_CHUNK_BITS)
    } else {
        let edges = segments
            .iter()
            .flat_map(|s| [s.logical, s.logical.saturating_add(s.len)])
            .filter(|&e| e != size);
        let bits = edges.fold(MAX_CHUNK_BITS, |b, e| b.min(e.trailing_zeros()));
        if bits < BLOCK_BITS {
            return Err(
                "a sparse member's data ranges do not start and end on 512-byte boundaries \
                 (a tar index can only point at whole blocks)"
                    .into(),
            );
        }
        bits
    };
    let cs = 1u64 << bits;
    let count = size.div_ceil(cs);
    if count > MAX_CHUNKS {
        return Err(format!(
            "{count} chunks of {cs} bytes for one file (a tar index takes at most {MAX_CHUNKS})"
        ));
    }
    let mut chunks = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    for k in 0..count {
        let start = k.saturating_mul(cs);
        let i = segments.partition_point(|s| s.logical.saturating_add(s.len) <= start);
        let chunk = match segments.get(i).filter(|s| s.logical <= start) {
            None => None,
            Some(s) => {
                let at = s.physical.saturating_add(start.saturating_sub(s.logical));
                let (blk, off) = (at >> BLOCK_BITS, at & BLOCK_MASK);
                if off != 0 {
                    return Err(format!(
                        "its data is at byte {at} of the archive, not on a 512-byte boundary"
                    ));
                }
                Some((DEVICE, blk))
            }
        };
        chunks.push(chunk);
    }
    Ok(External {
        bits_extra: u8::try_from(bits.saturating_sub(BLOCK_BITS)).unwrap_or(31),
        chunks,
        tail: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(logical: u64, len: u64, physical: u64) -> Segment {
        Segment {
            logical,
            len,
            physical,
        }
    }

    #[test]
    fn a_contiguous_file_is_one_chunk_as_upstream_sizes_it() {
        // mkfs.erofs 1.9.4: 10000 bytes at byte 3584 -> one 16 KiB chunk at block 7.
        let x = chunks(&[seg(0, 10000, 3584)], 10000).unwrap();
        assert_eq!((x.bits_extra, x.chunks), (5, vec![Some((1, 7))]));
        let x = chunks(&[seg(0, 6, 1024)], 6).unwrap();
        assert_eq!((x.bits_extra, x.chunks), (0, vec![Some((1, 2))]));
        let x = chunks(&[seg(0, 512, 512)], 512).unwrap();
        assert_eq!((x.bits_extra, x.chunks), (0, vec![Some((1, 1))]));
        // Past 2^40 bytes: chunks of 2^40.
        let big = (1u64 << 40) + 1;
        let x = chunks(&[seg(0, big, 0)], big).unwrap();
        assert_eq!(x.bits_extra, 31);
        assert_eq!(x.chunks, vec![Some((1, 0)), Some((1, 1 << 31))]);
    }

    #[test]
    fn sparse_files_get_hole_chunks() {
        // Data at 0..4096 and 12288..16384 of a 16384-byte file.
        let s = [seg(0, 4096, 512), seg(12288, 4096, 4608)];
        let x = chunks(&s, 16384).unwrap();
        assert_eq!(x.bits_extra, 3); // 4 KiB chunks
        assert_eq!(x.chunks, vec![Some((1, 1)), None, None, Some((1, 9))]);
        // All holes.
        let x = chunks(&[], 1 << 20).unwrap();
        assert!(x.chunks.iter().all(Option::is_none));
    }

    #[test]
    fn unaligned_data_is_refused() {
        assert!(chunks(&[seg(0, 100, 0), seg(300, 100, 100)], 1000)
            .unwrap_err()
            .contains("512-byte"));
        // Data ending short of a block before the file's end: the rest
        // of that block in the archive is not the file's (zeros there).
        assert!(chunks(&[seg(0, 4096, 512), seg(8192, 712, 4608)], 16384).is_err());
        assert!(chunks(&[seg(0, 1000, 700)], 1000)
            .unwrap_err()
            .contains("byte 700"));
    }
}
