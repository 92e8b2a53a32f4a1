//! Broken tar archives (bad checksum, truncated member, oversized or
//! malformed PAX header, hard link to nothing, a path leaving the root),
//! from a file and from a pipe: `ferrofs mkfs --tar` exits 2 naming the
//! reason and leaves no image.

use std::fs;
use std::process::{Command, Stdio};

use crate::FERROFS;
use ferrofs_testkit::work_dir;

/// A 512-byte ustar header with a valid checksum.
fn header(name: &str, size: u64, typeflag: u8, link: &str) -> Vec<u8> {
    let mut h = vec![0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    let sz = format!("{size:011o}");
    h[124..135].copy_from_slice(sz.as_bytes());
    h[136..147].copy_from_slice(b"14000000000");
    h[156] = typeflag;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    h
}

fn file_entry(name: &str, data: &[u8]) -> Vec<u8> {
    let mut v = header(name, data.len() as u64, b'0', "");
    v.extend_from_slice(data);
    v.resize(v.len().div_ceil(512) * 512, 0);
    v
}

#[test]
fn broken_archives_are_refused_with_the_reason() {
    let work = work_dir!("mkfs_tar_bad");
    let good = file_entry("a.txt", b"hello\n");
    let mut bad_sum = good.clone();
    bad_sum[0] = b'b';
    let mut truncated = file_entry("big.txt", &[7u8; 5000]);
    truncated.truncate(512 + 1000);
    let mut pax_huge = header("./PaxHeaders/x", 1 << 32, b'x', "");
    pax_huge.extend_from_slice(&[0u8; 512]);
    let mut missing_link = good.clone();
    missing_link.extend(header("l", 0, b'1', "nowhere"));
    let dotdot = file_entry("../escape", b"x");
    let mut bad_pax = header("./PaxHeaders/y", 12, b'x', "");
    bad_pax.extend_from_slice(b"99 path=zz\n\0");
    bad_pax.resize(1024, 0);
    bad_pax.extend(good.clone());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("checksum", bad_sum, "checksum"),
        ("truncated", truncated, "truncated"),
        ("pax-huge", pax_huge, "too large"),
        ("missing-link", missing_link, "nowhere"),
        ("dotdot", dotdot, ".."),
        ("bad-pax", bad_pax, "PAX"),
    ];
    let mut failures = Vec::new();
    for (name, bytes, reason) in cases {
        let tar = work.join(format!("{name}.tar"));
        fs::write(&tar, &bytes).unwrap();
        let img = work.join(format!("{name}.img"));
        for pipe in [false, true] {
            let mut cmd = Command::new(FERROFS);
            cmd.args(["mkfs", "--quiet", "--tar"]).arg(&img);
            if pipe {
                cmd.arg("-").stdin(fs::File::open(&tar).unwrap());
            } else {
                cmd.arg(&tar).stdin(Stdio::null());
            }
            let out = cmd.output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            if out.status.code() != Some(2) || !err.contains(reason) || img.exists() {
                failures.push(format!(
                    "{name} (pipe {pipe}): status {:?}, stderr {err:?}",
                    out.status.code()
                ));
            }
        }
    }
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
