//! Trace-guided prefetch of images read by URL: a `mkfs --profile` image
//! carries a hot-range record in its boot area, which the kernel and
//! fsck.erofs (1.8.6, 1.9.x) ignore (the image reads as its source through
//! them); served by nginx behind the counting proxy, a FUSE mount of its
//! URL fetches the traced start's data in a few requests (the default
//! image needs many more for the same reads) and the mount shows the
//! source tree. A damaged, stale or wrong record is only a hint: reads of
//! the URL give what the local file gives, with a warning where the
//! record is refused. Needs root (corner tree, FUSE, loop mounts) and
//! nginx; skipped with the reason otherwise.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ferrofs_format::hotrange::{HotRanges, AREA};
use ferrofs_testkit::compare::{compare_trees, CompareOptions};
use ferrofs_testkit::fuse::FuseMount;
use ferrofs_testkit::nginx::{nginx_bin, Nginx};
use ferrofs_testkit::proxy::DelayProxy;
use ferrofs_testkit::verify::{image_reads_as_source, run_ok};
use ferrofs_testkit::{corpus, tools};

const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

fn work(test: &str) -> PathBuf {
    ferrofs_testkit::tmp::fresh_run_dir(&Path::new(env!("CARGO_TARGET_TMPDIR")).join(test))
}

/// Skips (with the reason) unless root, FUSE and nginx are there.
fn facilities() -> Option<PathBuf> {
    if !ferrofs_testkit::is_root() {
        println!("skipped: not root (the corner tree, FUSE and loop mounts need it)");
        return None;
    }
    if !Path::new("/dev/fuse").exists() {
        println!("skipped: /dev/fuse is absent");
        return None;
    }
    let bin = nginx_bin();
    if bin.is_none() {
        println!("skipped: nginx is not installed (apt-get install nginx-light)");
    }
    bin
}

/// The corner tree plus `data/dNN/fNN`: 160 files of 16-80 KiB of
/// poorly compressible bytes. Returns the trace of a start that reads
/// every seventh data file (newest first, one of them in two pieces).
fn tree_and_trace(src: &Path, trace: &Path) -> Vec<PathBuf> {
    corpus::make_corner_tree(src).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut hot = Vec::new();
    for d in 0..16 {
        let dir = src.join(format!("data/d{d:02}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..10 {
            let len = 16384 + ((d * 10 + f) * 4099) % 65536;
            let bytes: Vec<u8> = (0..len)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if i % 3 == 0 {
                        b'a'
                    } else {
                        x as u8
                    }
                })
                .collect();
            let rel = PathBuf::from(format!("data/d{d:02}/f{f:02}"));
            fs::write(src.join(&rel), bytes).unwrap();
            if (d * 10 + f) % 7 == 3 {
                hot.push(rel);
            }
        }
    }
    hot.reverse();
    let mut text = String::new();
    for (i, p) in hot.iter().enumerate() {
        if i == 2 {
            text.push_str(&format!(
                "{}\t0\t4096\n{}\t8192\t4096\n",
                p.display(),
                p.display()
            ));
        } else {
            text.push_str(&format!("{}\n", p.display()));
        }
    }
    fs::write(trace, text).unwrap();
    hot
}

/// A test's directories: the source tree, its trace, the served files.
struct Fixture {
    bin: PathBuf,
    w: PathBuf,
    src: PathBuf,
    trace: PathBuf,
    www: PathBuf,
    /// The traced files.
    hot: Vec<PathBuf>,
}

impl Fixture {
    /// `None` (having said why) without the facilities.
    fn new(test: &str) -> Option<Fixture> {
        let bin = facilities()?;
        let w = work(test);
        let (src, trace, www) = (w.join("tree"), w.join("trace.txt"), w.join("www"));
        fs::create_dir_all(&www).unwrap();
        let hot = tree_and_trace(&src, &trace);
        Some(Fixture {
            bin,
            w,
            src,
            trace,
            www,
            hot,
        })
    }
}

impl Fixture {
    /// nginx serving `www`, and the counting proxy (no delay) in front.
    fn serve(&self) -> (Nginx, DelayProxy) {
        let ng = Nginx::start(&self.bin, &self.www, &self.w.join("nginx"));
        let upstream: SocketAddr = ([127, 0, 0, 1], ng.port).into();
        let proxy = DelayProxy::start(0, upstream, Duration::ZERO).unwrap();
        (ng, proxy)
    }
}

fn mkfs(img: &Path, src: &Path, extra: &[&str]) {
    let mut cmd = Command::new(FERROFS);
    cmd.args(["mkfs", "--quiet", "-zlz4hc", "-C65536"])
        .args(extra)
        .arg(img)
        .arg(src);
    run_ok(&mut cmd).unwrap();
}

/// Requests and bytes through `proxy` while a FUSE mount of `url` is
/// made and `hot` (files under it) are read; the contents are checked
/// against `src`, and the whole mount against `src` afterwards.
fn mount_and_read(
    proxy: &DelayProxy,
    url: &str,
    mnt: &Path,
    src: &Path,
    hot: &[PathBuf],
) -> (u64, u64) {
    let (r0, b0) = (proxy.requests(), proxy.bytes());
    let m = FuseMount::new(Path::new(FERROFS), url.as_ref(), mnt, &[]);
    for rel in hot {
        let got = fs::read(m.dir.join(rel)).unwrap();
        assert!(
            got == fs::read(src.join(rel)).unwrap(),
            "{url}: {}",
            rel.display()
        );
    }
    let counts = (proxy.requests() - r0, proxy.bytes() - b0);
    let diffs = compare_trees(src, &m.dir, &CompareOptions::strict());
    m.unmount();
    assert!(diffs.is_empty(), "{url} through FUSE: {diffs:?}");
    counts
}

#[test]
fn profiled_image_prefetches_its_start_in_few_requests() {
    let Some(f) = Fixture::new("remote_prefetch") else {
        return;
    };
    let (w, src, trace, www, hot) = (&f.w, &f.src, &f.trace, &f.www, &f.hot);
    let (default, profiled) = (www.join("default.img"), www.join("profiled.img"));
    mkfs(&default, src, &[]);
    mkfs(&profiled, src, &["--profile", trace.to_str().unwrap()]);

    // The record is there, and the kernel, fsck.erofs and ferrofs read the
    // image as its source all the same.
    let image = fs::read(&profiled).unwrap();
    let rec = HotRanges::decode(&image[..AREA])
        .unwrap()
        .expect("a hot-range record");
    assert_eq!(rec.image_len, image.len() as u64);
    assert!(!rec.ranges.is_empty());
    if tools::fsck_next().is_none() {
        println!("note: fsck.erofs 1.9.x not found (UPSTREAM_NEXT_BIN); checked without it");
    }
    let failures = image_reads_as_source(Path::new(FERROFS), "profiled", &profiled, src, w);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    if let Some(fsck) = tools::fsck_next() {
        // Every file decoded, too.
        let r = run_ok(Command::new(&fsck.path).arg("--extract").arg(&profiled));
        assert!(r.is_ok(), "fsck.erofs {} --extract: {r:?}", fsck.version);
    }
    assert_eq!(
        fs::read(&default).unwrap()[..AREA],
        [0u8; AREA],
        "default: no record"
    );

    let (ng, proxy) = f.serve();
    // A command that ends while the prefetch is still fetching (200 ms a
    // request) stops it and leaves no temporary cache directory behind.
    let slow = DelayProxy::start(
        0,
        ([127, 0, 0, 1], ng.port).into(),
        Duration::from_millis(200),
    )
    .unwrap();
    let tmp = w.join("tmp");
    fs::create_dir_all(&tmp).unwrap();
    let listed = run_ok(
        Command::new(FERROFS)
            .env("TMPDIR", &tmp)
            .args(["ls", &slow.url("profiled.img")]),
    );
    assert!(listed.is_ok(), "{listed:?}");
    assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0, "left in TMPDIR");
    // fsck of the URL says what fsck of the file says.
    for img in [&profiled, &default] {
        let name = img.file_name().unwrap().to_str().unwrap();
        let local = run_ok(Command::new(FERROFS).args(["fsck", "--json"]).arg(img));
        let remote = run_ok(Command::new(FERROFS).args(["fsck", "--json", &proxy.url(name)]));
        assert!(
            local.is_ok() && local == remote,
            "{name}: {local:?} / {remote:?}"
        );
    }
    let (dreq, dbytes) = mount_and_read(
        &proxy,
        &proxy.url("default.img"),
        &w.join("mnt-d"),
        src,
        hot,
    );
    let (preq, pbytes) = mount_and_read(
        &proxy,
        &proxy.url("profiled.img"),
        &w.join("mnt-p"),
        src,
        hot,
    );
    println!("default: {dreq} requests, {dbytes} bytes; profiled: {preq} requests, {pbytes} bytes");
    // Probe, the first chunk (superblock and record) and the prefetch: the
    // hot data (about 1 MiB) lies together in a few 256 KiB chunks.
    assert!(preq <= 6, "profiled: {preq} requests");
    assert!(
        dreq >= 3 * preq,
        "default: {dreq} requests, profiled {preq}"
    );
    assert!(
        pbytes * 2 < dbytes,
        "profiled {pbytes} bytes, default {dbytes}"
    );
}

/// A copy of `img` under `www` as `name` with its boot area replaced.
fn with_area(img: &[u8], www: &Path, name: &str, area: &[u8; AREA]) {
    let mut v = img.to_vec();
    v[..AREA].copy_from_slice(area);
    fs::write(www.join(name), v).unwrap();
}

#[test]
fn hot_range_record_is_only_a_hint() {
    let Some(f) = Fixture::new("remote_prefetch_hint") else {
        return;
    };
    let (w, src, trace, www, hot) = (&f.w, &f.src, &f.trace, &f.www, &f.hot);
    let good = www.join("good.img");
    mkfs(&good, src, &["--profile", trace.to_str().unwrap()]);
    let img = fs::read(&good).unwrap();
    let rec = HotRanges::decode(&img[..AREA]).unwrap().unwrap();
    let len = img.len() as u64;

    let mut flipped = rec.encode();
    flipped[41] ^= 1;
    with_area(&img, www, "bad-checksum.img", &flipped);
    let stale = HotRanges {
        image_len: len + 4096,
        ..rec.clone()
    };
    with_area(&img, www, "other-length.img", &stale.encode());
    let other = HotRanges {
        uuid: [0xa5; 16],
        ..rec.clone()
    };
    with_area(&img, www, "other-uuid.img", &other.encode());
    let past = HotRanges {
        ranges: vec![(len + 8192, len + 16384)],
        ..rec.clone()
    };
    with_area(&img, www, "past-the-end.img", &past.encode());
    let most = HotRanges {
        ranges: vec![(0, len)],
        image_len: len,
        ..rec.clone()
    };
    let big = len > 64 << 20;
    // Valid but wrong: the last chunks of the image instead of the start.
    let wrong = HotRanges::new(&[(len.saturating_sub(300_000), len)], 0, len, rec.uuid);
    with_area(&img, www, "wrong-ranges.img", &wrong.encode());
    with_area(&img, www, "whole-image.img", &most.encode());

    let (_ng, proxy) = f.serve();
    let want = run_ok(Command::new(FERROFS).args(["ls", "-l"]).arg(&good)).unwrap();
    for (name, refused) in [
        ("bad-checksum.img", Some("checksum")),
        ("other-length.img", Some("made for an image of")),
        ("other-uuid.img", Some("superblock UUID differs")),
        ("past-the-end.img", Some("hot-range record range")),
        ("wrong-ranges.img", None),
        ("whole-image.img", big.then_some("more than half")),
    ] {
        let url = proxy.url(name);
        let out = Command::new(FERROFS)
            .args(["ls", "-l", &url])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {err}");
        assert_eq!(out.stdout, want, "{name}: ls -l of the URL");
        match refused {
            Some(why) => assert!(
                err.contains(&format!("{url}: hot-range record ignored")) && err.contains(why),
                "{name}: {err}"
            ),
            None => assert!(!err.contains("hot-range"), "{name}: {err}"),
        }
    }
    // An image 4096 bytes into its file (mkfs --offset): the record is at
    // the image's start and is used there.
    let shifted = www.join("offset.img");
    mkfs(
        &shifted,
        src,
        &["--offset", "4096", "--profile", trace.to_str().unwrap()],
    );
    assert_eq!(&fs::read(&shifted).unwrap()[4096..4104], b"ferroHOT");
    let out = Command::new(FERROFS)
        .args(["ls", "-l", "--offset", "4096", &proxy.url("offset.img")])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("hot-range"), "{err}");
    assert_eq!(out.stdout, want, "offset.img: ls -l of the URL");
    // Through FUSE: the tree is the source's whatever the record says.
    for name in ["bad-checksum.img", "past-the-end.img", "wrong-ranges.img"] {
        let mnt = w.join(format!("mnt-{name}"));
        mount_and_read(&proxy, &proxy.url(name), &mnt, src, hot);
    }
}
