//! Decode throughput of MicroLZMA pclusters, one core: ferrofs's decoder
//! (liblzma 5.8, built with xz's x86-64 defines) against 7-Zip 25.01's
//! `LzmaDecode` (its assembly decoding loop), on the same streams; and the
//! encoders: ferrofs's fixed-output MicroLZMA encoder against 7-Zip's
//! `LzmaEnc` made fixed-output (build.rs patches a copy of it to end each
//! stream at the last symbol that fits), their time and total size, the
//! 7-Zip streams checked by decoding them with liblzma.
//!
//! The streams are what `ferrofs mkfs -zlzma,6 -C131072` makes of the
//! tree's files (read in path order, concatenated): 128 KiB fixed-size
//! pclusters from ferrofs's own encoder. 7-Zip reads a MicroLZMA stream
//! once its first byte (the complement of the properties byte, standing
//! where an LZMA range coder's first byte, always 0, would be) is set back
//! to 0 and the properties are passed beside it, with the output buffer as
//! the dictionary. Every decoded pcluster is compared with the input.
//!
//!   cargo run --release -- TREE [MiB] [ROUNDS]
#![allow(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use ferrofs_codec::{Algorithm, DecodeMode, Decoder, DecoderConfig, Encoder, EncoderConfig};

/// Files under `dir`, in path order.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut v: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    v.sort();
    for p in v {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => files(&p, out),
            Ok(m) if m.is_file() => out.push(p),
            _ => {}
        }
    }
}

/// One pcluster: its stream and the bytes it decodes to.
struct Pcluster {
    stream: Vec<u8>,
    plain: std::ops::Range<usize>,
}

/// 7-Zip's decoding of one MicroLZMA stream into `dst` (exactly filled).
fn sdk_decode(stream: &[u8], dst: &mut [u8], dict: u32) -> bool {
    use lzma_sdk_sys as sdk;
    let mut src = stream.to_vec();
    let props_byte = !src[0];
    src[0] = 0;
    let d = dict.to_le_bytes();
    let props = [props_byte, d[0], d[1], d[2], d[3]];
    let a = allocator();
    let mut dlen: sdk::SizeT = dst.len();
    let mut slen: sdk::SizeT = src.len();
    let mut status = sdk::ELzmaStatus::LZMA_STATUS_NOT_SPECIFIED;
    // SAFETY: buffers and lengths match; the allocator lives for the call.
    let r = unsafe {
        sdk::LzmaDecode(
            dst.as_mut_ptr(),
            &mut dlen,
            src.as_ptr(),
            &mut slen,
            props.as_ptr(),
            props.len() as core::ffi::c_uint,
            sdk::ELzmaFinishMode::LZMA_FINISH_ANY,
            &mut status,
            &a,
        )
    };
    r == 0 && dlen == dst.len()
}

extern "C" {
    fn ffx_set_limit(limit: u32);
    fn ffx_stopped_at(pos: *mut u32) -> core::ffi::c_int;
    fn ffx_LzmaEncode(
        dest: *mut u8,
        dest_len: *mut lzma_sdk_sys::SizeT,
        src: *const u8,
        src_len: lzma_sdk_sys::SizeT,
        props: *const lzma_sdk_sys::CLzmaEncProps,
        props_encoded: *mut u8,
        props_size: *mut lzma_sdk_sys::SizeT,
        write_end_mark: core::ffi::c_int,
        progress: *const core::ffi::c_void,
        alloc: *const lzma_sdk_sys::ISzAlloc,
        alloc_big: *const lzma_sdk_sys::ISzAlloc,
    ) -> core::ffi::c_int;
}

/// 7-Zip's encoder with the fixed-output patch (build.rs): as much of
/// `src` as fits in `limit` bytes, as a MicroLZMA stream (first byte the
/// complement of the properties). Returns (input used, stream).
fn sdk_fixed(src: &[u8], limit: usize, fb: i32, mc: u32, dict: u32) -> (usize, Vec<u8>) {
    use lzma_sdk_sys as sdk;
    let a = allocator();
    // SAFETY: CLzmaEncProps is plain integers; Init sets every field.
    let mut props: sdk::CLzmaEncProps = unsafe { std::mem::zeroed() };
    // SAFETY: props is a valid, writable CLzmaEncProps.
    unsafe { sdk::LzmaEncProps_Init(&mut props) };
    props.level = 6;
    props.dictSize = dict;
    props.fb = fb;
    props.mc = mc;
    props.numThreads = 1;
    props.reduceSize = src.len() as u64;
    let mut out = vec![0u8; limit + 64];
    let mut dlen: sdk::SizeT = out.len();
    let mut pe = [0u8; 5];
    let mut pl: sdk::SizeT = 5;
    // SAFETY: buffers and lengths match; no progress callback; the limit
    // is a plain value the patched encoder reads.
    let r = unsafe {
        ffx_set_limit(limit as u32);
        ffx_LzmaEncode(
            out.as_mut_ptr(),
            &mut dlen,
            src.as_ptr(),
            src.len(),
            &props,
            pe.as_mut_ptr(),
            &mut pl,
            0,
            std::ptr::null(),
            &a,
            &a,
        )
    };
    let mut pos = 0u32;
    // SAFETY: pos is a valid u32 to write.
    let stopped = unsafe { ffx_stopped_at(&mut pos) } != 0;
    let used = if stopped { pos as usize } else { src.len() };
    assert!(
        r == 0 || (stopped && r == 11),
        "fixed LzmaEncode failed: {r}"
    );
    assert!(dlen <= limit, "fixed LzmaEncode wrote {dlen} > {limit}");
    out.truncate(dlen);
    out[0] = !pe[0];
    (used, out)
}

/// 7-Zip's allocator interface over the C heap.
fn allocator() -> lzma_sdk_sys::ISzAlloc {
    use lzma_sdk_sys as sdk;
    unsafe extern "C" fn alloc(_: sdk::ISzAllocPtr, size: usize) -> *mut core::ffi::c_void {
        // SAFETY: malloc of a size the coder asks for.
        unsafe { libc_malloc(size) }
    }
    unsafe extern "C" fn free(_: sdk::ISzAllocPtr, p: *mut core::ffi::c_void) {
        // SAFETY: p came from alloc above (or is null).
        unsafe { libc_free(p) }
    }
    sdk::ISzAlloc {
        Alloc: Some(alloc),
        Free: Some(free),
    }
}

extern "C" {
    #[link_name = "malloc"]
    fn libc_malloc(size: usize) -> *mut core::ffi::c_void;
    #[link_name = "free"]
    fn libc_free(p: *mut core::ffi::c_void);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tree = PathBuf::from(args.get(1).expect("TREE"));
    let mib: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(96);
    let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let mut list = Vec::new();
    files(&tree, &mut list);
    let mut data = Vec::new();
    for p in list {
        if data.len() >= mib << 20 {
            break;
        }
        if let Ok(b) = std::fs::read(&p) {
            data.extend_from_slice(&b);
        }
    }
    data.truncate(mib << 20);
    let dict = 1u32 << 17;
    let mut cfg = EncoderConfig::new(Algorithm::Lzma);
    cfg.level = Some(6);
    cfg.lzma_dict_size = dict;
    let mut enc = Encoder::new(cfg).expect("encoder");
    let mut check = Decoder::new(DecoderConfig {
        lzma_dict_size: dict,
        ..Default::default()
    });
    // The encoders, alternating round by round: ferrofs's, then 7-Zip's
    // with the fixed-output patch at three settings. Sizes are the sum of
    // the streams (every one but the last fills its 128 KiB); each 7-Zip
    // stream is checked by decoding it with liblzma's MicroLZMA decoder.
    let settings: [(i32, u32); 3] = [(64, 48), (48, 0), (32, 32)];
    let mut enc_times: Vec<Vec<f64>> = vec![Vec::new(); 1 + settings.len()];
    let mut sizes = vec![(0usize, 0usize); 1 + settings.len()];
    let mut pcs = Vec::new();
    for round in 0..rounds {
        let t = Instant::now();
        let mut ours = Vec::new();
        let mut pos = 0;
        while pos < data.len() {
            let mut out = vec![0u8; 128 << 10];
            let end = (pos + (8 << 20)).min(data.len());
            let (used, written) = enc
                .compress_fixed_output(&data[pos..end], &mut out)
                .expect("encode");
            out.truncate(written);
            ours.push(Pcluster {
                stream: out,
                plain: pos..pos + used,
            });
            pos += used;
        }
        enc_times[0].push(t.elapsed().as_secs_f64());
        sizes[0] = (ours.len(), ours.iter().map(|p| p.stream.len()).sum());
        pcs = ours;
        for (k, &(fb, mc)) in settings.iter().enumerate() {
            let t = Instant::now();
            let mut pos = 0;
            let mut streams = Vec::new();
            while pos < data.len() {
                let end = (pos + (8 << 20)).min(data.len());
                let (used, s) = sdk_fixed(&data[pos..end], 128 << 10, fb, mc, dict);
                streams.push((pos..pos + used, s));
                pos += used;
            }
            enc_times[k + 1].push(t.elapsed().as_secs_f64());
            sizes[k + 1] = (streams.len(), streams.iter().map(|(_, s)| s.len()).sum());
            if round == 0 {
                for (plain, s) in &streams {
                    let mut dst = vec![0u8; plain.len()];
                    check
                        .decompress(Algorithm::Lzma, s, &mut dst, DecodeMode::Exact)
                        .expect("7-Zip fixed-output stream decodes");
                    assert!(
                        dst == data[plain.clone()],
                        "7-Zip fixed-output stream decodes wrong"
                    );
                }
            }
        }
    }
    let median = |v: &Vec<f64>| {
        let mut v = v.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "{}: {:.1} MiB of input, encoders alternating, medians of {rounds}",
        tree.display(),
        data.len() as f64 / 1048576.0
    );
    let base = median(&enc_times[0]);
    for (k, name) in
        std::iter::once("ferrofs fixed-output MicroLZMA (liblzma, level 6)".to_string())
            .chain(
                settings
                    .iter()
                    .map(|(fb, mc)| format!("7-Zip fixed-output, level 6, fb {fb} mc {mc}")),
            )
            .enumerate()
    {
        let m = median(&enc_times[k]);
        println!(
            "{name}: {m:.2} s, {:.2} MB/s of input ({:+.1} %), {} pclusters, {} bytes ({:+.2} %)",
            data.len() as f64 / m / 1e6,
            (base / m - 1.0) * 100.0,
            sizes[k].0,
            sizes[k].1,
            (sizes[k].1 as f64 / sizes[0].1 as f64 - 1.0) * 100.0
        );
    }
    let mut dec = Decoder::new(DecoderConfig {
        lzma_dict_size: dict,
        ..Default::default()
    });
    let mut buf = vec![0u8; 8 << 20];
    let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (k, name) in ["liblzma", "7-Zip"].iter().enumerate() {
            let t = Instant::now();
            for p in &pcs {
                let want = &data[p.plain.clone()];
                let dst = &mut buf[..want.len()];
                let ok = if k == 0 {
                    dec.decompress(Algorithm::Lzma, &p.stream, dst, DecodeMode::Exact)
                        .is_ok()
                } else {
                    sdk_decode(&p.stream, dst, dict)
                };
                assert!(ok && dst == want, "{name}: a pcluster decoded wrong");
            }
            times[k].push(t.elapsed().as_secs_f64());
        }
    }
    for (k, name) in [
        "liblzma 5.8 (ferrofs's build)",
        "7-Zip 25.01 LzmaDecode (asm)",
    ]
    .iter()
    .enumerate()
    {
        let mut v = times[k].clone();
        v.sort_by(f64::total_cmp);
        let med = v[v.len() / 2];
        println!(
            "{name}: median {:.3} s, {:.1} MB/s of output per core",
            med,
            data.len() as f64 / med / 1e6
        );
    }
}
