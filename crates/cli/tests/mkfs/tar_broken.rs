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

/// Each case's archive, from a file and from a pipe, must make `mkfs
/// --tar` exit 2 with its reason in the message and leave no image; what
/// did not.
fn refusals(work: &std::path::Path, cases: Vec<(&str, Vec<u8>, &str)>) -> Vec<String> {
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
    failures
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
    let failures = refusals(&work, cases);
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One PAX record (`LEN key=value\n`, LEN counting itself).
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let body = key.len() + value.len() + 3;
    let mut len = body + 1;
    while len != body + len.to_string().len() {
        len = body + len.to_string().len();
    }
    let mut r = format!("{len} {key}=").into_bytes();
    r.extend_from_slice(value);
    r.push(b'\n');
    assert_eq!(r.len(), len);
    r
}

/// An entry preceded by a PAX extended header with `records`.
fn with_pax(records: &[(&str, &[u8])], entry: Vec<u8>) -> Vec<u8> {
    let body: Vec<u8> = records.iter().flat_map(|(k, v)| pax_record(k, v)).collect();
    let mut v = header("./PaxHeaders/e", body.len() as u64, b'x', "");
    v.extend_from_slice(&body);
    v.resize(v.len().div_ceil(512) * 512, 0);
    v.extend(entry);
    v
}

/// Entries past a limit Linux enforces on what it reads back (a symlink
/// target of more than 4095 bytes, which the kernel cuts, or none; a NUL
/// inside a path or a link target; a name of more than 255 bytes; an
/// xattr name of more than 255 bytes; xattr names listing to more than
/// 64 KiB) are refused naming the member and the limit, from a file and
/// a pipe, leaving no image; entries at each limit are taken, and (as
/// root) the kernel gives them back whole.
#[test]
fn entries_past_linux_limits_are_refused() {
    let work = work_dir!("mkfs_tar_limits");
    let long = |n: usize| "t".repeat(n);
    let symlink =
        |name: &str, target: &[u8]| with_pax(&[("linkpath", target)], header(name, 0, b'2', "x"));
    let many_names: Vec<(String, Vec<u8>)> = (0..300)
        .map(|k| {
            (
                format!("SCHILY.xattr.user.{k:03}{}", "n".repeat(240)),
                b"v".to_vec(),
            )
        })
        .collect();
    let many: Vec<(&str, &[u8])> = many_names
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_slice()))
        .collect();
    let xattr_256 = format!("SCHILY.xattr.user.{}", "x".repeat(251));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "symlink-4096",
            symlink("l", long(4096).as_bytes()),
            "at most 4095",
        ),
        ("symlink-nul", symlink("l", b"ab\0cd"), "NUL"),
        (
            "path-nul",
            with_pax(&[("path", b"ab\0cd")], file_entry("x", b"1")),
            "NUL",
        ),
        (
            "name-256",
            with_pax(&[("path", long(256).as_bytes())], file_entry("x", b"1")),
            "255",
        ),
        (
            "xattr-name-256",
            with_pax(&[(&xattr_256, b"v")], file_entry("x", b"1")),
            "at most 255",
        ),
        (
            "xattr-list",
            with_pax(&many, file_entry("x", b"1")),
            "65536",
        ),
    ];
    let mut failures = refusals(&work, cases);
    // At the limits: taken, and read back whole.
    let target = long(4095);
    let xattr_255 = format!("SCHILY.xattr.user.{}", "x".repeat(250));
    let mut ok = symlink("l", target.as_bytes());
    ok.extend(with_pax(
        &[("path", long(255).as_bytes()), (&xattr_255, b"v")],
        file_entry("x", b"1"),
    ));
    let tar = work.join("limits.tar");
    fs::write(&tar, &ok).unwrap();
    let img = work.join("limits.img");
    let out = Command::new(FERROFS)
        .args(["mkfs", "--quiet", "--tar"])
        .arg(&img)
        .arg(&tar)
        .output()
        .unwrap();
    if !out.status.success() {
        failures.push(format!(
            "entries at the limits: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    } else {
        let image = ferrofs::Image::open_path(&img).unwrap();
        match image.read_link("/l") {
            Ok(t) if t.as_os_str().len() == 4095 => {}
            other => failures.push(format!("ferrofs reads the 4095-byte symlink as {other:?}")),
        }
        match ferrofs_testkit::mount::LoopMount::new(&img, &[]) {
            Ok(m) => {
                match fs::read_link(m.path().join("l")) {
                    Ok(t) if t.as_os_str().len() == 4095 => {}
                    other => failures.push(format!("the kernel reads the symlink as {other:?}")),
                }
                let file = m.path().join(long(255));
                match ferrofs_testkit::xattr::get(&file, format!("user.{}", "x".repeat(250))) {
                    Ok(Some(v)) if v == b"v" => {}
                    other => failures.push(format!("the kernel's 255-byte xattr: {other:?}")),
                }
            }
            Err(e) => println!("kernel check skipped: {e}"),
        }
    }
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
