//! Tests of the fixed-output cutting of segments into extents.

use super::*;
use crate::options::compress::Compressor;

/// The shape of a build with 4 KiB blocks and `pcl`-byte pclusters.
fn shape(pcl: u64, leave_tail: Option<u64>, ztail: bool) -> Shape {
    Shape {
        pcluster: pcl,
        bs: 4096,
        big: pcl > 4096,
        leave_tail,
        max_extent: None,
        ztail,
        cut_end: false,
        by_content: false,
        page_end: false,
    }
}

#[test]
fn elf_files_and_static_archives_are_machine_code() {
    assert!(is_machine_code(b"\x7fELF\x02\x01\x01\0"));
    assert!(is_machine_code(b"!<arch>\n"));
    assert!(!is_machine_code(b"!<thin>\n"));
    assert!(!is_machine_code(b"#!/bin/sh"));
    assert!(!is_machine_code(b"\x7fEL"));
}

#[test]
fn segments_tile_the_input_and_respect_the_lcluster_rules() {
    let bs = 4096;
    let mut data = Vec::new();
    for i in 0..20000 {
        data.extend_from_slice(format!("{i} some text that compresses well\n").as_bytes());
    }
    // Random-ish part that does not compress.
    let mut x = 12345u64;
    for _ in 0..50000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.push(x as u8);
    }
    for (alg, pcl, ztail) in [
        ("lz4", 4096u64, false),
        ("lz4hc", 65536, false),
        ("zstd", 16384, false),
        ("lz4hc", 65536, true),
        ("zstd", 16384, true),
    ] {
        let mut enc = Compressor::parse(alg).unwrap().encoder(pcl).unwrap();
        let shape = shape(pcl, None, ztail);
        let (ex, saves) = compress_segment(&mut enc, &data, 0, &shape, false).unwrap();
        assert!(saves, "{alg}: text start compresses");
        let mut pos = 0;
        for (k, e) in ex.iter().enumerate() {
            assert_eq!(e.la, pos);
            assert!(e.blocks(bs) * bs <= pcl);
            if k + 1 < ex.len() {
                assert!(e.llen >= bs, "{alg}: short extent {k}");
            }
            if e.blocks(bs) > 1 {
                assert!(
                    e.la % bs + e.llen >= 2 * bs,
                    "{alg}: extent {k} does not reach lcluster h+2"
                );
            }
            if e.compressed.is_none() {
                assert!(e.llen <= e.blocks(bs) * bs);
            }
            pos += e.llen;
        }
        assert_eq!(pos, data.len() as u64);
        assert!(ex.iter().any(|e| e.compressed.is_some()));
        assert!(
            ex.iter().any(|e| e.compressed.is_none()),
            "{alg}: random tail stored raw"
        );
    }
}

#[test]
fn a_segment_cut_off_a_block_boundary_leaves_the_next_its_lcluster() {
    // Segments that end at a content-defined cut (any byte), just past
    // where the first extent ends on its own: the last extent starts
    // at least two lclusters before the cut's, so the next segment's
    // head has the cut's lcluster and a multi-block last extent its
    // NONHEAD; where the first extent would end too near the cut, it
    // is made shorter.
    let bs = 4096u64;
    let data = ferrofs_testkit::corpus::mixed_bytes(1 << 20, 9);
    for (alg, pcl) in [("lz4hc", 131_072u64), ("zstd", 65536), ("lz4", 16384)] {
        let mut enc = Compressor::parse(alg).unwrap().encoder(pcl).unwrap();
        let mut limited = 0;
        for base in [5_000_123u64, 77] {
            let plain = shape(pcl, None, false);
            let e0 = first_extent(&mut enc, &data, base, &plain)
                .unwrap()
                .unwrap();
            let from = e0.llen as usize;
            for end in (from..from + 3 * bs as usize).step_by(97) {
                let shape = Shape {
                    cut_end: true,
                    by_content: true,
                    ..plain
                };
                let (ex, _) =
                    compress_segment(&mut enc, &data[..end], base, &shape, false).unwrap();
                let cut = base + end as u64;
                let mut pos = base;
                for e in &ex {
                    assert_eq!(e.la, pos, "{alg}: extents tile the segment");
                    assert!(e.blocks(bs) * bs <= pcl);
                    if e.blocks(bs) > 1 {
                        assert!(e.la % bs + e.llen >= 2 * bs, "{alg}: no NONHEAD");
                    }
                    pos += e.llen;
                }
                assert_eq!(pos, cut, "{alg}: extents end at the cut");
                let last = ex.last().unwrap();
                assert!(
                    last.la / bs + 2 <= cut / bs,
                    "{alg}: last extent at {} too near the cut at {cut}",
                    last.la
                );
                if ex[0].llen < e0.llen {
                    limited += 1;
                }
            }
        }
        assert!(limited > 0, "{alg}: no first extent was made shorter");
    }
}

#[test]
fn short_tails_after_a_big_pcluster_stay_readable() {
    // A multi-block pcluster needs a NONHEAD lcluster after its head
    // (it holds the block count): a last extent of one to two blocks
    // that ends in the lcluster after its head must be one block. A
    // 72,911-byte PNG hit this: 66,389 bytes compressed, then 6,522
    // that did not save a block, stored raw in two blocks.
    let bs = 4096;
    let mut text = Vec::new();
    for i in 0..4000 {
        text.extend_from_slice(format!("{i} some text that compresses well\n").as_bytes());
    }
    // Noise that LZ4 shrinks by a few percent (8 repeated bytes in
    // every 72): a short tail of it compresses, but not by a block.
    let random = ferrofs_testkit::corpus::random_bytes(3 * 65536, 7);
    let mut noise = Vec::new();
    for chunk in random.chunks(64) {
        noise.extend_from_slice(chunk);
        let back = noise.len().saturating_sub(1000);
        noise.extend_from_within(back..back + 8);
    }
    let mut enc = Compressor::parse("lz4hc,12")
        .unwrap()
        .encoder(65536)
        .unwrap();
    let shape = shape(65536, None, false);
    let mut checked = 0;
    for head in (0..60000).step_by(1999) {
        // Some text, then noise: the first pcluster ends somewhere in
        // the noise; the file then ends 1 to 2 blocks later, before
        // the lcluster after next.
        let mut long = text[..head].to_vec();
        long.extend_from_slice(&noise);
        let first = first_extent(&mut enc, &long, 0, &shape).unwrap().unwrap();
        let c = first.llen % bs;
        for tail in (bs + 1..2 * bs - c).step_by(211) {
            let data = &long[..(first.llen + tail) as usize];
            for ztail in [false, true] {
                let s = Shape { ztail, ..shape };
                let (ex, _) = compress_segment(&mut enc, data, 0, &s, false).unwrap();
                assert_eq!(ex.iter().map(|e| e.llen).sum::<u64>(), data.len() as u64);
                for (k, e) in ex.iter().enumerate() {
                    if e.stored_blocks(bs) > 1 {
                        assert!(
                            e.la % bs + e.llen >= 2 * bs,
                            "head {head} tail {tail}: extent {k} at {} of {} bytes takes {} \
                         blocks but has no NONHEAD lcluster",
                            e.la,
                            e.llen,
                            e.stored_blocks(bs)
                        );
                    }
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 0);
}

/// LZ4 extents (but a segment's last) keep the kernel's in-place
/// margin, which depends on where in its page an extent ends; a file
/// cut by content keeps none, so the same bytes make the same extents
/// wherever they lie in the file, for liblz4 and for the machine-code
/// encoder alike.
#[test]
fn a_file_cut_by_content_compresses_its_bytes_alike_at_any_offset() {
    let data = ferrofs_testkit::corpus::mixed_bytes(3 << 20, 5);
    let pcl = 131_072u64;
    let relative = |ex: &[Extent], base: u64| -> Vec<(u64, u64, Option<Vec<u8>>)> {
        ex.iter()
            .map(|e| (e.la - base, e.llen, e.compressed.clone()))
            .collect()
    };
    for machine_code in [false, true] {
        let mut enc = Compressor::parse("lz4hc,12").unwrap().encoder(pcl).unwrap();
        enc.set_machine_code(machine_code);
        let mut runs = Vec::new();
        for by_content in [false, true] {
            let shape = Shape {
                by_content,
                ..shape(pcl, None, false)
            };
            let mut alike = true;
            let (first, _) = compress_segment(&mut enc, &data, 0, &shape, false).unwrap();
            for base in [77u64, 4096 * 1000 + 3001, 2050] {
                let (ex, _) = compress_segment(&mut enc, &data, base, &shape, false).unwrap();
                alike &= relative(&ex, base) == relative(&first, 0);
                let (_, rest) = ex.split_last().unwrap();
                let kept = rest.iter().all(|e| {
                    let oend = e.la % 4096 + e.llen;
                    let need = e.compressed.as_ref().map_or(0, |c| c.len() as u64) / 256 + 32;
                    oend.div_ceil(4096) * 4096 - oend >= need
                });
                // Without content cuts the margin holds; with them it
                // is not looked at.
                assert!(kept || by_content, "machine code {machine_code}: margin");
            }
            runs.push(alike);
        }
        assert_eq!(runs, [false, true], "machine code {machine_code}");
    }
}

/// With a fragment to take the file's tail, an LZ4 segment's last
/// stream ends in whole blocks by cutting the stream shorter, not by
/// compressing again: every extent decodes to exactly its bytes, the
/// last fills whole blocks, and it leaves the fragment no more than a
/// second compression into those blocks would (within a sequence; on
/// these lines of text the two differ by at most 223 bytes).
#[test]
fn an_lz4_tail_for_the_fragment_is_cut_from_the_stream() {
    let bs = 4096u64;
    let pcl = 65536u64;
    let mut data = Vec::new();
    for i in 0u64..40_000 {
        let w = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52;
        data.extend_from_slice(format!("{i} {w:x} a line of text, {}\n", i % 97).as_bytes());
    }
    let mut dec = ferrofs_codec::Decoder::new(ferrofs_codec::DecoderConfig::default());
    for alg in ["lz4hc,12", "lz4"] {
        let mut enc = Compressor::parse(alg).unwrap().encoder(pcl).unwrap();
        let mut checked = 0;
        for len in (150_000..400_000).step_by(12_347) {
            let input = &data[..len];
            let shape = shape(pcl, Some(pcl), false);
            let (ex, _) = compress_segment(&mut enc, input, 0, &shape, false).unwrap();
            let mut at = 0u64;
            for e in &ex {
                assert_eq!(e.la, at);
                let c = e.compressed.as_ref().unwrap();
                let mut out = vec![0u8; e.llen as usize];
                dec.decompress(
                    Algorithm::Lz4,
                    c,
                    &mut out,
                    ferrofs_codec::DecodeMode::Exact,
                )
                .unwrap();
                assert!(out == input[e.la as usize..(e.la + e.llen) as usize]);
                at += e.llen;
            }
            let last = ex.last().unwrap();
            let written = last.compressed.as_ref().unwrap().len() as u64;
            let rest = len as u64 - at;
            if rest == 0 {
                continue;
            }
            // What compressing the last extent's input again into its
            // whole blocks would have left.
            let blocks = written.div_ceil(bs) * bs;
            let mut again = vec![0u8; blocks as usize];
            let (took, _) = enc
                .compress_fixed_output(&input[last.la as usize..], &mut again)
                .unwrap();
            let rest_again = len as u64 - last.la - took as u64;
            assert!(
                rest <= rest_again + 300,
                "{alg} {len}: {rest} left vs {rest_again}"
            );
            checked += 1;
        }
        assert!(checked > 5, "{alg}: {checked} tails");
    }
}

#[test]
fn ztail_ends_a_file_with_a_pcluster_shorter_than_a_block() {
    let bs = 4096;
    let mut text = Vec::new();
    for i in 0..2000 {
        text.extend_from_slice(format!("{i} a line of text, said twice\n").as_bytes());
    }
    let random = ferrofs_testkit::corpus::random_bytes(65536, 11);
    let cut = |data: &[u8], ztail: bool| {
        let mut enc = Compressor::parse("lz4hc").unwrap().encoder(65536).unwrap();
        compress_segment(&mut enc, data, 0, &shape(65536, None, ztail), true).unwrap()
    };
    // A file of less than a block saves no block, but it shrinks: with
    // ztailpacking it is kept, one stream that can go inline.
    let small = &text[..3000];
    assert_eq!(cut(small, false), (Vec::new(), false));
    let (ex, keep) = cut(small, true);
    assert!(keep);
    assert_eq!(ex.len(), 1);
    assert!(ex[0].compressed.as_ref().unwrap().len() < 3000);
    // Text then noise: the whole compresses to more than a block that
    // ends partly empty; made again into one whole block, the rest is
    // a last pcluster of less than a block.
    let mut mixed = text[..5000].to_vec();
    mixed.extend_from_slice(&random[..5000]);
    let (whole, _) = cut(&mixed, false);
    let (ex, keep) = cut(&mixed, true);
    assert!(keep);
    assert_eq!(ex.iter().map(|e| e.llen).sum::<u64>(), mixed.len() as u64);
    let (last, rest) = ex.split_last().unwrap();
    assert!(last.llen < bs, "{ex:?}");
    let blocks = |ex: &[Extent]| ex.iter().map(|e| e.stored_blocks(bs)).sum::<u64>();
    assert!(blocks(rest) < blocks(&whole), "{whole:?} vs {ex:?}");
    // Noise then text: no block saved, so whole blocks are stored raw
    // and the rest, less than a block, is compressed on its own.
    let mut mixed = random[..9000].to_vec();
    mixed.extend_from_slice(&text[..1000]);
    let (ex, keep) = cut(&mixed, true);
    assert!(keep);
    assert_eq!(ex.len(), 2, "{ex:?}");
    assert_eq!((ex[0].llen, ex[0].compressed.is_none()), (2 * bs, true));
    assert!(ex[1].compressed.as_ref().unwrap().len() < ex[1].llen as usize);
    // Without ztailpacking such a file is stored flat.
    assert!(!cut(&mixed, false).1);
}

/// With `page_end`, every extent but the last ends on a page of the
/// file, whatever page offset the segment starts at, with every codec,
/// and the extents still tile the input and decode to it (LZMA,
/// DEFLATE and zstd as partial references to their streams). Without
/// it, fixed-size output ends mid-page.
#[test]
fn page_ends_put_every_extent_end_but_the_last_on_a_page() {
    let mut data = Vec::new();
    for i in 0..40000 {
        data.extend_from_slice(format!("{i} line {} of text\n", i * 7 % 23).as_bytes());
    }
    let mut dec = ferrofs_codec::Decoder::new(ferrofs_codec::DecoderConfig::default());
    for (alg, algo) in [
        ("lzma,6", Algorithm::Lzma),
        ("zstd", Algorithm::Zstd),
        ("deflate", Algorithm::Deflate),
        ("lz4hc,12", Algorithm::Lz4),
    ] {
        let pcl = 16384u64;
        let mut enc = Compressor::parse(alg).unwrap().encoder(pcl).unwrap();
        for base in [0u64, 1000, 4096 * 3 + 17] {
            let on = Shape {
                page_end: true,
                ..shape(pcl, None, false)
            };
            let (ex, _) = compress_segment(&mut enc, &data, base, &on, false).unwrap();
            assert!(ex.len() > 2, "{alg}");
            let mut at = base;
            let mut partial = 0;
            for e in &ex {
                assert_eq!(e.la, at, "{alg}");
                let src = &data[(at - base) as usize..][..e.llen as usize];
                if let Some(c) = &e.compressed {
                    // A stream cut short of its end on the page is a
                    // partial reference: its first llen bytes are the
                    // extent's. LZ4's is cut where it stands instead.
                    let mode = match e.partial {
                        true => ferrofs_codec::DecodeMode::Prefix,
                        false => ferrofs_codec::DecodeMode::Exact,
                    };
                    assert!(!(e.partial && algo == Algorithm::Lz4), "{alg}");
                    let mut out = vec![0u8; src.len()];
                    dec.decompress(algo, c, &mut out, mode).unwrap();
                    assert!(out == src, "{alg} at {at}");
                }
                partial += usize::from(e.partial);
                at += e.llen;
            }
            assert_eq!(partial > 0, algo != Algorithm::Lz4, "{alg} at {base}");
            assert_eq!(at, base + data.len() as u64, "{alg}");
            let ends_on_page = ex[..ex.len() - 1]
                .iter()
                .filter(|e| (e.la + e.llen) % 4096 == 0)
                .count();
            assert_eq!(ends_on_page, ex.len() - 1, "{alg} at {base}");
            let (off, _) =
                compress_segment(&mut enc, &data, base, &shape(pcl, None, false), false).unwrap();
            assert!(
                off[..off.len() - 1]
                    .iter()
                    .any(|e| (e.la + e.llen) % 4096 != 0),
                "{alg}"
            );
        }
    }
}

#[test]
fn first_extent_is_the_first_of_the_segment() {
    let mut data = Vec::new();
    for i in 0..30000 {
        data.extend_from_slice(format!("{i} line of text {}\n", i % 17).as_bytes());
    }
    for (alg, pcl, leave) in [
        ("lz4hc,12", 65536u64, None),
        ("lz4", 4096, Some(4096)),
        ("zstd", 16384, None),
    ] {
        let mut enc = Compressor::parse(alg).unwrap().encoder(pcl).unwrap();
        for base in [0u64, 8192, 123 * 4096] {
            let shape = shape(pcl, leave, false);
            let (all, _) = compress_segment(&mut enc, &data, base, &shape, false).unwrap();
            let first = first_extent(&mut enc, &data, base, &shape).unwrap();
            assert!(all.len() > 1, "{alg}");
            assert_eq!(first.as_ref(), all.first(), "{alg} at {base}");
        }
    }
}

#[test]
fn a_rest_fast_lz4_fits_in_two_pclusters_goes_to_the_fragment_whole() {
    let pcl = 16384u64;
    let mut text = Vec::new();
    let mut i = 0u64;
    while text.len() < 400_000 {
        text.extend_from_slice(format!("{i} {} lines of text\n", i * 7 % 1000).as_bytes());
        i += 1;
    }
    let random = ferrofs_testkit::corpus::random_bytes(200_000, 3);
    for alg in ["lzma,6", "zstd,15", "deflate,9"] {
        let mut enc = Compressor::parse(alg).unwrap().encoder(pcl).unwrap();
        let frag = shape(pcl, Some(pcl), false);
        // Text fast LZ4 fits into two pclusters (but longer than the
        // pcluster the rest used to have to fit in): no extent, all of
        // it for the fragment, and worth compressing.
        let short = &text[..60_000];
        let mut room = vec![0u8; 2 * pcl as usize];
        let lz4 = probe_encoder()
            .unwrap()
            .compress_fixed_output(short, &mut room);
        assert_eq!(lz4.unwrap().0, short.len());
        let (ex, keep) = compress_segment(&mut enc, short, 0, &frag, true).unwrap();
        assert!(ex.is_empty() && keep, "{alg}: {ex:?}");
        // Random data fast LZ4 cannot fit: compressed (or stored) as
        // before, up to a rest of at most a pcluster.
        let (ex, _) = compress_segment(&mut enc, &random, 0, &frag, false).unwrap();
        let covered: u64 = ex.iter().map(|e| e.llen).sum();
        assert!(
            covered > 0 && random.len() as u64 - covered <= 2 * pcl,
            "{alg}"
        );
        // Long text: extents while the rest is more than fast LZ4
        // fits into two pclusters, then a rest for the fragment.
        let (ex, _) = compress_segment(&mut enc, &text, 0, &frag, false).unwrap();
        let covered: u64 = ex.iter().map(|e| e.llen).sum();
        assert!(!ex.is_empty() && covered < text.len() as u64, "{alg}");
        // Without a fragment, nothing changes: the segment is covered.
        let plain = shape(pcl, None, false);
        let (ex, _) = compress_segment(&mut enc, short, 0, &plain, false).unwrap();
        assert_eq!(ex.iter().map(|e| e.llen).sum::<u64>(), short.len() as u64);
    }
}
