//! Compare ferrofs's LZ4HC level-12 encoder (its own parser for ELF files,
//! liblz4 for the rest, as the builder uses it) with liblz4's on real files:
//! each file is cut into fixed-size-output pclusters (64 KiB by default)
//! the way the builder does, with both encoders; prints input, output
//! pclusters and the 4 KiB blocks they take, and the seconds each took.
//!
//! `cargo run --release -p ferrofs-codec --example lz4-level12 -- DIR [PCLUSTER]`

use ferrofs_codec::{Algorithm, Encoder, EncoderConfig};
use std::path::Path;
use std::time::Instant;

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            files(&e.path(), out);
        } else if t.is_file() {
            out.push(e.path());
        }
    }
}

/// Cut `data` into pclusters with `f`; returns (pclusters, 4 KiB blocks
/// they take, or with `cap` 0 the bytes of one block per file).
fn cut(
    data: &[u8],
    cap: usize,
    mut f: impl FnMut(&[u8], &mut [u8]) -> (usize, usize),
) -> (u64, u64) {
    // 0: one block per file (compares ratio alone).
    let whole = cap == 0;
    let cap = if whole {
        data.len() + data.len() / 200 + 64
    } else {
        cap
    };
    let mut dst = vec![0u8; cap];
    let (mut pos, mut n, mut blocks) = (0, 0u64, 0u64);
    while pos < data.len() {
        let (c, w) = f(&data[pos..], &mut dst);
        if c == 0 {
            break;
        }
        pos += c;
        n += 1;
        blocks += if whole {
            w as u64
        } else {
            (w as u64).div_ceil(4096)
        };
    }
    (n, blocks)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).expect("usage: lz4-level12 DIR [PCLUSTER]");
    let cap: usize = args
        .get(2)
        .map_or(65536, |s| s.parse().expect("pcluster size"));
    let mut list = Vec::new();
    files(Path::new(dir), &mut list);
    let data: Vec<Vec<u8>> = list
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .filter(|d| d.len() > 4096)
        .collect();
    let input: u64 = data.iter().map(|d| d.len() as u64).sum();
    let mut enc = Encoder::new(EncoderConfig {
        lz4hc: true,
        level: Some(12),
        ..EncoderConfig::new(Algorithm::Lz4)
    })
    .expect("encoder");
    let t = Instant::now();
    let (mut n1, mut b1) = (0, 0);
    for d in &data {
        // As the builder does: ELF files are machine code.
        enc.set_machine_code(d.starts_with(b"\x7fELF"));
        let (n, b) = cut(d, cap, |s, o| {
            enc.compress_fixed_output(s, o).expect("ferrofs")
        });
        n1 += n;
        b1 += b;
    }
    let ours = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (mut n2, mut b2) = (0, 0);
    for d in &data {
        let (n, b) = cut(d, cap, |s, o| {
            lzzzz::lz4_hc::compress_fill(s, o, 12).expect("liblz4")
        });
        n2 += n;
        b2 += b;
    }
    let theirs = t.elapsed().as_secs_f64();
    println!("files {} input {input} pcluster {cap}", data.len());
    println!(
        "ferrofs  pclusters {n1} blocks {b1} s {ours:.2} MB/s {:.1}",
        input as f64 / ours / 1e6
    );
    println!(
        "liblz4   pclusters {n2} blocks {b2} s {theirs:.2} MB/s {:.1}",
        input as f64 / theirs / 1e6
    );
}
