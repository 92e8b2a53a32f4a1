//! The zstd stream reader and the checked blob reader on their own.

// Tests index what they built themselves; a panic is a failed test.
#![allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

use std::cell::Cell;
use std::io::Read;
use std::rc::Rc;

use sha2::{Digest, Sha256};

use super::blob::{BlobRef, Verified};
use super::zstd::ZstdReader;

fn frame(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; zstd_safe::compress_bound(data.len())];
    let n = zstd_safe::compress(&mut out[..], data, 3).expect("compress");
    out.truncate(n);
    out
}

fn unzstd(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    // A small buffer: frames arrive in many pieces.
    let r = std::io::BufReader::with_capacity(7, data);
    ZstdReader::new(r).read_to_end(&mut out)?;
    Ok(out)
}

#[test]
fn zstd_frames_concatenate_and_truncation_fails() {
    let a: Vec<u8> = (0..200_000u32)
        .flat_map(|i| (i % 251).to_le_bytes())
        .collect();
    let b = b"second frame".to_vec();
    let mut both = frame(&a);
    both.extend(frame(&b));
    let mut want = a.clone();
    want.extend(&b);
    assert_eq!(unzstd(&both).unwrap(), want);
    let cut = &both[..both.len() - 5];
    assert!(
        unzstd(cut).is_err(),
        "a stream cut inside a frame is an error"
    );
    assert!(unzstd(&[]).is_err(), "an empty stream is not a zstd stream");
    assert!(unzstd(b"not zstd at all").is_err());
}

fn blob(data: &[u8], size: u64) -> BlobRef {
    BlobRef {
        digest: "sha256:x".into(),
        hash: Sha256::digest(data).into(),
        size,
        path: "blob".into(),
    }
}

fn read(data: &[u8], b: BlobRef) -> (std::io::Result<Vec<u8>>, bool) {
    let done = Rc::new(Cell::new(false));
    let mut out = Vec::new();
    let r = Verified::new(data, b, done.clone()).read_to_end(&mut out);
    (r.map(|_| out), done.get())
}

#[test]
fn verified_blobs_check_size_and_digest() {
    let data = b"layer bytes".as_slice();
    let (r, done) = read(data, blob(data, data.len() as u64));
    assert_eq!(r.unwrap(), data);
    assert!(done);
    let (r, done) = read(data, blob(data, 4));
    assert!(r.unwrap_err().to_string().contains("longer than"));
    assert!(!done);
    let (r, _) = read(data, blob(data, 20));
    assert!(r.unwrap_err().to_string().contains("is 11 bytes"));
    let (r, done) = read(b"layer bytez", blob(data, data.len() as u64));
    assert!(r
        .unwrap_err()
        .to_string()
        .contains("does not match its digest"));
    assert!(!done);
}
