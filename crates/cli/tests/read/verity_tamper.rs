//! The tamper matrix of verified reads (#34): one flipped byte in file
//! data, in metadata, in the hash tree or in the verity superblock, or a
//! wrong root hash: `fsck`, `cat` and `extract` with `--verity` exit
//! non-zero naming the block, and never hand out a wrong byte (what `cat`
//! wrote and what `extract` left are true to the source). Also over HTTP,
//! a server handing out a tampered copy.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferrofs_testkit::work_dir;

use super::verity::{mkfs_verity, tree};
use crate::FERROFS;

use super::remote_errors::common;

fn run(args: &[&str]) -> std::process::Output {
    std::process::Command::new(FERROFS)
        .args(args)
        .output()
        .unwrap()
}

fn json(args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert!(o.status.success(), "{args:?}");
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A built image: path, root hash, hash offset, the source tree.
struct Built {
    img: std::path::PathBuf,
    root: String,
    hash_offset: u64,
    src: std::path::PathBuf,
}

fn build(w: &Path) -> Built {
    let src = tree(w, 2, 1_500_000);
    let img = w.join("good.img");
    let root = mkfs_verity(&img, &src, &[]);
    let v = json(&["verity", "--json", img.to_str().unwrap()]);
    assert_eq!(v["root_hash"], root.as_str());
    let hash_offset = v["hash_offset"].as_u64().unwrap();
    Built {
        img,
        root,
        hash_offset,
        src,
    }
}

/// A copy of the image with byte `at` flipped.
fn flipped(b: &Built, name: &str, at: u64) -> std::path::PathBuf {
    let mut bytes = fs::read(&b.img).unwrap();
    bytes[at as usize] ^= 0x5a;
    let out = b.img.with_file_name(name);
    fs::write(&out, bytes).unwrap();
    out
}

/// Every file extract left in `dir` holds its source's exact bytes.
fn extracted_true(dir: &Path, src: &Path) {
    for rel in ["f0", "f1", "sub/small"] {
        if let Ok(got) = fs::read(dir.join(rel)) {
            assert!(
                got == fs::read(src.join(rel)).unwrap(),
                "{rel}: wrong bytes left"
            );
        }
    }
}

/// fsck, cat and extract of `img` under `root` fail, saying `expect`.
fn refused(b: &Built, img: &Path, root: &str, expect: &str, w: &Path) -> String {
    let i = img.to_str().unwrap();
    let o = run(&["fsck", "--verity", root, i]);
    let fsck = String::from_utf8_lossy(&o.stderr).to_string() + &String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "fsck passed {i}");
    assert!(fsck.contains(expect), "fsck of {i}: {fsck}");
    let o = run(&["cat", "--verity", root, i, "/f1"]);
    assert!(!o.status.success(), "cat passed {i}");
    let f1 = fs::read(b.src.join("f1")).unwrap();
    assert!(f1.starts_with(&o.stdout), "cat of {i} wrote wrong bytes");
    let dir = w.join(format!("x-{}", img.file_name().unwrap().to_str().unwrap()));
    let o = run(&["extract", "--verity", root, i, dir.to_str().unwrap()]);
    assert!(!o.status.success(), "extract passed {i}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(expect) || err.contains("integrity") || err.contains("verity"),
        "{err}"
    );
    extracted_true(&dir, &b.src);
    fsck.lines()
        .find(|l| l.contains(expect))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn every_flipped_byte_is_an_integrity_error_naming_the_block() {
    let w = work_dir!("verity_tamper");
    let b = build(&w);
    let img = b.img.to_str().unwrap();
    // The control: everything checks.
    assert!(run(&["fsck", "--verity", &b.root, img]).status.success());
    let f1 = json(&["dump", img, "--path", "/f1", "--json"]);
    let data_at = f1["extents"][0]["map"]["pos"].as_u64().unwrap() + 5000;
    let small = json(&["dump", img, "--path", "/sub/small", "--json"]);
    let inode_at = small["position"].as_u64().unwrap() + 8;
    let tree_at = b.hash_offset + 4096;
    let cases = [
        (
            "data.img",
            data_at,
            format!("data block {}", data_at / 4096),
        ),
        (
            "meta.img",
            inode_at,
            format!("data block {}", inode_at / 4096),
        ),
        // The tree's second block: the first of its bottom level.
        (
            "tree.img",
            tree_at + 4096 + 40,
            "hash block 0 of tree level 0".into(),
        ),
        (
            "treetop.img",
            tree_at + 7,
            "root hash does not match".into(),
        ),
        // The verity superblock's salt.
        (
            "vsb.img",
            b.hash_offset + 88,
            "root hash does not match".into(),
        ),
        // Its magic: no tree found.
        ("magic.img", b.hash_offset, "no verity superblock".into()),
    ];
    let mut matrix = Vec::new();
    for (name, at, expect) in &cases {
        let bad = flipped(&b, name, *at);
        let said = refused(&b, &bad, &b.root, expect, &w);
        matrix.push(format!("{name} (byte {at}): {said}"));
        // Without --verity the data and tree flips go unnoticed by fsck:
        // that is what the tree is for.
        if *name == "data.img" || *name == "tree.img" {
            assert!(run(&["fsck", bad.to_str().unwrap()]).status.success());
        }
    }
    let mut wrong = b.root.clone();
    wrong.replace_range(0..1, if wrong.starts_with('0') { "1" } else { "0" });
    let said = refused(&b, &b.img, &wrong, "root hash does not match", &w);
    matrix.push(format!("wrong root: {said}"));
    println!("{}", matrix.join("\n"));
}

#[test]
fn a_tampered_copy_served_over_http_is_refused() {
    let w = work_dir!("verity_http");
    let b = build(&w);
    let good = Arc::new(fs::read(&b.img).unwrap());
    let f1 = json(&["dump", b.img.to_str().unwrap(), "--path", "/f1", "--json"]);
    let at = f1["extents"][0]["map"]["pos"].as_u64().unwrap() + 123_456;
    let mut bad = (*good).clone();
    bad[at as usize] ^= 1;
    let bad = Arc::new(bad);
    let g = good.clone();
    let srv = common::Server::start("/good.img", Duration::ZERO, move |r, _| {
        common::ranged(&g, "\"g\"", r)
    });
    let o = run(&["fsck", "--verity", &b.root, &srv.url]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&["cat", "--verity", &b.root, &srv.url, "/sub/small"]);
    assert_eq!(o.stdout, b"small and good\n");
    let srv = common::Server::start("/bad.img", Duration::ZERO, move |r, _| {
        common::ranged(&bad, "\"b\"", r)
    });
    let o = run(&["fsck", "--verity", &b.root, &srv.url]);
    let err = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("data block {}", at / 4096)), "{err}");
    // A good file of the tampered copy still reads.
    let o = run(&["cat", "--verity", &b.root, &srv.url, "/sub/small"]);
    assert_eq!(o.stdout, b"small and good\n");
    let o = run(&["cat", "--verity", &b.root, &srv.url, "/f1"]);
    assert!(!o.status.success());
    assert!(fs::read(b.src.join("f1")).unwrap().starts_with(&o.stdout));
    // The tree from a separate URL (a hash file), the image from another.
    let hash = w.join("tree.bin");
    let plain = w.join("plain.img");
    fs::write(&plain, &good[..b.hash_offset as usize]).unwrap();
    let v = json(&[
        "verity",
        "--json",
        "--hash-file",
        hash.to_str().unwrap(),
        plain.to_str().unwrap(),
    ]);
    let root = v["root_hash"].as_str().unwrap().to_string();
    let tree = Arc::new(fs::read(&hash).unwrap());
    let hsrv = common::Server::start("/tree.bin", Duration::ZERO, move |r, _| {
        common::ranged(&tree, "\"t\"", r)
    });
    let o = run(&[
        "fsck",
        "--verity",
        &root,
        "--verity-hash-file",
        &hsrv.url,
        &srv.url,
    ]);
    let err = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("data block {}", at / 4096)), "{err}");
}

/// Bytes a server sent for the ranges it was asked (a request without a
/// range: the whole object).
fn fetched(srv: &common::Server, whole: u64) -> u64 {
    srv.ranges()
        .iter()
        .map(|r| {
            r.strip_prefix("bytes=")
                .and_then(|s| s.split_once('-'))
                .and_then(|(a, b)| Some(b.parse::<u64>().ok()? + 1 - a.parse::<u64>().ok()?))
                .unwrap_or(whole)
        })
        .sum()
}

/// Verified reads stay lazy over HTTP: a cold `cat` of one small file
/// fetches the chunks it fetches unverified plus those holding the hash
/// blocks on its path, far from the whole image.
#[test]
fn verified_cold_reads_over_http_stay_lazy() {
    let w = work_dir!("verity_http_lazy");
    let b = build(&w);
    let good = Arc::new(fs::read(&b.img).unwrap());
    let whole = good.len() as u64;
    let mut seen = Vec::new();
    for verity in [false, true] {
        let g = good.clone();
        let srv = common::Server::start("/v.img", Duration::ZERO, move |r, _| {
            common::ranged(&g, "\"v\"", r)
        });
        let mut args = vec!["cat", &srv.url, "/sub/small"];
        if verity {
            args.extend(["--verity", &b.root]);
        }
        let o = run(&args);
        assert_eq!(
            o.stdout,
            b"small and good\n",
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        seen.push(fetched(&srv, whole));
    }
    println!(
        "cold cat over HTTP: {} bytes unverified, {} verified, image {whole}",
        seen[0], seen[1]
    );
    assert!(seen[1] < whole / 2, "{seen:?} of {whole}");
    assert!(seen[1] <= seen[0] + (1 << 20), "{seen:?}");
}
