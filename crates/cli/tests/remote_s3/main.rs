//! Images in S3 (#36), served by SeaweedFS (`weed server -s3` on
//! 127.0.0.1, identities enforced): `push` (one PUT, multipart, an
//! interrupted multipart push that leaves no object and no parts), lazy
//! reads of `s3://` URLs (`fsck`, `dump`, `ls`, `cat`, `extract` as for the
//! local file), a FUSE `mount` equal to the kernel's loop mount of the
//! same image, `--verity` over S3, the typed errors (wrong keys, a
//! read-only identity pushing, anonymous access, missing key and bucket,
//! no region, no credentials, an expired session token), and 16 readers of
//! one image at once. Credentials come from a shared credentials file
//! (profiles) and from the environment. Skipped, with the reason, where
//! `weed` cannot be built or found (or, for parts, without root). Faults
//! on the way (a proxy that breaks requests) are in `faults.rs`.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use ferrofs_testkit::compare::{compare_trees, CompareOptions};
use ferrofs_testkit::fuse::FuseMount;
use ferrofs_testkit::s3::{weed_bin_dir, Weed, READ_ONLY, READ_WRITE};
use ferrofs_testkit::verify::run_ok;
use ferrofs_testkit::{corpus, LoopMount};

mod faults;

const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");
const BUCKET: &str = "images";

fn work(test: &str) -> PathBuf {
    ferrofs_testkit::work_dir!(test)
}

/// The credentials file every command of this binary reads (profile `rw`
/// by default; `ro` and `wrong` too), set in the environment once.
fn credentials() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("remote_s3-credentials");
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("credentials");
        fs::write(
            &file,
            format!(
                "[rw]\naws_access_key_id = {}\naws_secret_access_key = {}\n\n\
                 [profile ro]\naws_access_key_id = {}\naws_secret_access_key = {}\n\n\
                 [wrong]\naws_access_key_id = {}\naws_secret_access_key = not-the-secret\n",
                READ_WRITE.access_key,
                READ_WRITE.secret,
                READ_ONLY.access_key,
                READ_ONLY.secret,
                READ_WRITE.access_key
            ),
        )
        .unwrap();
        for v in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_S3",
            "AWS_REGION",
            "AWS_DEFAULT_REGION",
        ] {
            std::env::remove_var(v);
        }
        std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &file);
        std::env::set_var("AWS_PROFILE", "rw");
    });
}

/// A running server, or `None` (said why) when `weed` is not to be had.
fn weed(w: &Path) -> Option<Weed> {
    credentials();
    let Some(bin) = weed_bin_dir() else {
        println!(
            "skipped: SeaweedFS's weed not found (UPSTREAM_S3_BIN, ../shared/tools/upstream-tools \
             --s3, ~/.cache/upstream-s3/bin)"
        );
        return None;
    };
    Some(Weed::start(&bin, w, BUCKET))
}

/// `ferrofs ARGS` with `--s3-endpoint` of `s` after the command name.
fn cmd(s: &Weed, args: &[&str]) -> Command {
    let mut c = Command::new(FERROFS);
    c.arg(args[0])
        .args(["--s3-endpoint", &s.endpoint()])
        .args(&args[1..]);
    c
}

fn ok(s: &Weed, args: &[&str]) -> Result<Vec<u8>, String> {
    run_ok(&mut cmd(s, args))
}

/// Exit status and stderr of a command expected to fail.
fn fails(mut c: Command) -> (Option<i32>, String) {
    let out = c.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `n` pseudo-random bytes.
fn noise(n: usize, mut x: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as u8
        })
        .collect()
}

fn mkfs(args: &[&str], img: &Path, src: &Path) {
    run_ok(
        Command::new(FERROFS)
            .args(["mkfs", "--quiet"])
            .args(args)
            .arg(img)
            .arg(src),
    )
    .unwrap();
}

/// A tree of small files and a `big` file of `big` random bytes.
fn small_tree(dir: &Path, big: usize) {
    fs::create_dir_all(dir.join("d/e f")).unwrap();
    fs::write(dir.join("big"), noise(big, 0x2545_f491_4f6c_dd1d)).unwrap();
    for k in 0..100 {
        fs::write(dir.join("d").join(format!("f{k}")), format!("file {k}\n")).unwrap();
    }
    fs::write(dir.join("d/e f/g h"), "spaces\n").unwrap();
}

fn push_json(s: &Weed, extra: &[&str], img: &Path, url: &str) -> serde_json::Value {
    let mut args = vec!["push", "--json"];
    args.extend_from_slice(extra);
    args.push(img.to_str().unwrap());
    args.push(url);
    let out = ok(s, &args).unwrap_or_else(|e| panic!("push {url}: {e}"));
    serde_json::from_slice(&out).unwrap()
}

/// `ferrofs push` of `img` to `url` in 5 MiB parts, two at a time, each
/// after 400 ms: slow enough to be interrupted mid-way.
fn slow_push(s: &Weed, img: &Path, url: &str) -> Command {
    cmd(
        s,
        &[
            "push",
            "--part-size",
            "5M",
            "--parallel",
            "2",
            "--part-delay-ms",
            "400",
            img.to_str().unwrap(),
            url,
        ],
    )
}

#[test]
fn s3_push_then_lazy_reads_mount_and_verity() {
    if !ferrofs_testkit::is_root() || !Path::new("/dev/fuse").exists() {
        println!("skipped: not root or no /dev/fuse (the corner tree, FUSE and loop mounts)");
        return;
    }
    let w = work("remote_s3");
    let Some(s) = weed(&w) else { return };
    let src = w.join("tree");
    corpus::make_corner_tree(&src).unwrap();
    // A small image (one PUT) and a larger one in 5 MiB parts.
    let small = w.join("corner.img");
    mkfs(&["-zlz4hc", "-C65536", "-Eztailpacking"], &small, &src);
    let big_src = w.join("big-tree");
    small_tree(&big_src, 13 << 20);
    let big = w.join("big.img");
    mkfs(&[], &big, &big_src);
    let mut failures = Vec::new();
    let mut fail = |what: String| failures.push(what);
    let one = push_json(&s, &[], &small, "s3://images/dir/the corner.img");
    assert_eq!(one["parts"], 0, "{one}");
    assert_eq!(one["bytes"], fs::metadata(&small).unwrap().len(), "{one}");
    let multi = push_json(&s, &["--part-size", "5M"], &big, "s3://images/big.img");
    assert_eq!(multi["parts"], 3, "{multi}");
    assert!(s.uploads(BUCKET).is_empty());
    for (img, url, tree) in [
        (&small, "s3://images/dir/the corner.img", &src),
        (&big, "s3://images/big.img", &big_src),
    ] {
        let local = img.to_str().unwrap();
        for args in [vec!["fsck", "--json"], vec!["dump"], vec!["ls", "-lR"]] {
            let want = run_ok(Command::new(FERROFS).args(&args).arg(local));
            let extra: &[&str] = if args[0] == "fsck" {
                &["--remote-stats"]
            } else {
                &[]
            };
            let got = ok(&s, &[&args[..], extra, &[url]].concat());
            // fsck --json --remote-stats of a URL adds what the reads
            // cost: compared without it.
            let got = match (args[0], &got, &want) {
                ("fsck", Ok(g), Ok(l)) => {
                    let mut v: serde_json::Value = serde_json::from_slice(g).unwrap();
                    assert!(v["remote"]["requests"].as_u64().unwrap() > 0, "{v}");
                    v.as_object_mut().unwrap().remove("remote");
                    let l: serde_json::Value = serde_json::from_slice(l).unwrap();
                    if v == l {
                        want.clone()
                    } else {
                        got
                    }
                }
                _ => got,
            };
            if want.is_err() || want != got {
                fail(format!("{url}: {args:?}: local {want:?}, S3 {got:?}"));
            }
        }
        let out = w.join(format!(
            "out-{}",
            img.file_name().unwrap().to_str().unwrap()
        ));
        match ok(&s, &["extract", url, out.to_str().unwrap()]) {
            Ok(_) => {
                for d in compare_trees(tree, &out, &CompareOptions::strict()) {
                    fail(format!("{url}: extract: {d}"));
                }
            }
            Err(e) => fail(format!("{url}: extract: {e}")),
        }
        // The FUSE mount of the URL shows what the kernel's mount of the
        // image does.
        let lm = LoopMount::new(img, &[]).unwrap();
        let m = FuseMount::new(
            Path::new(FERROFS),
            url.as_ref(),
            &w.join(format!(
                "mnt-{}",
                img.file_name().unwrap().to_str().unwrap()
            )),
            &["--s3-endpoint", &s.endpoint()],
        );
        for d in compare_trees(lm.path(), &m.dir, &CompareOptions::strict()) {
            fail(format!("{url}: FUSE mount vs the kernel's: {d}"));
        }
        m.unmount();
        lm.unmount().unwrap();
    }
    match ok(&s, &["cat", "s3://images/big.img", "big"]) {
        Ok(b) if b == fs::read(big_src.join("big")).unwrap() => {}
        Ok(b) => fail(format!("cat big: {} bytes, not the file's", b.len())),
        Err(e) => fail(format!("cat big: {e}")),
    }
    match ok(&s, &["cat", "s3://images/big.img", "d/e f/g h"]) {
        Ok(b) if b == b"spaces\n" => {}
        other => fail(format!("cat 'd/e f/g h': {other:?}")),
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // --verity over S3: the good image reads, a tampered copy is refused.
    let vsrc = w.join("vtree");
    small_tree(&vsrc, 3_000_000);
    let good = w.join("good.img");
    let out = run_ok(
        Command::new(FERROFS)
            .args(["mkfs", "--quiet", "--json", "--verity"])
            .arg(&good)
            .arg(&vsrc),
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let root = v["verity"]["root_hash"].as_str().unwrap().to_string();
    let mut bytes = fs::read(&good).unwrap();
    let big = fs::read(vsrc.join("big")).unwrap();
    let at = bytes
        .windows(64)
        .position(|x| x == &big[2_000_000..2_000_064])
        .unwrap();
    bytes[at + 1] ^= 0x10;
    let bad = w.join("bad.img");
    fs::write(&bad, &bytes).unwrap();
    push_json(&s, &[], &good, "s3://images/v/good.img");
    push_json(&s, &[], &bad, "s3://images/v/bad.img");
    let local = run_ok(Command::new(FERROFS).args(["ls", "-lR"]).arg(&good)).unwrap();
    let verified = ok(
        &s,
        &["ls", "-lR", "--verity", &root, "s3://images/v/good.img"],
    )
    .unwrap();
    assert_eq!(local, verified);
    ok(&s, &["fsck", "--verity", &root, "s3://images/v/good.img"]).unwrap();
    let (code, err) = fails(cmd(
        &s,
        &["cat", "--verity", &root, "s3://images/v/bad.img", "big"],
    ));
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("verity") || err.contains("hash"), "{err}");
    let m = FuseMount::new(
        Path::new(FERROFS),
        "s3://images/v/bad.img".as_ref(),
        &w.join("mnt-bad"),
        &["--s3-endpoint", &s.endpoint(), "--verity", &root],
    );
    assert_eq!(fs::read(m.dir.join("d/f7")).unwrap(), b"file 7\n");
    let e = fs::read(m.dir.join("big")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(5), "{e}");
    m.unmount();
}

#[test]
fn s3_interrupted_and_refused_pushes_leave_nothing() {
    let w = work("remote_s3_push");
    let Some(s) = weed(&w) else { return };
    let src = w.join("tree");
    small_tree(&src, 40 << 20);
    let img = w.join("img");
    mkfs(&[], &img, &src);
    // SIGINT or SIGTERM in the middle of a multipart upload: aborted, exit
    // 130 or 143; an upload aborted under it (its next part fails with
    // NoSuchUpload): exit 2. Nothing is left either way.
    let url = "s3://images/interrupted.img";
    for (how, status, says) in [
        ("-INT", 130, "interrupted and aborted"),
        ("-TERM", 143, "interrupted and aborted"),
        ("abort", 2, "nothing was published"),
    ] {
        let mut c = slow_push(&s, &img, url);
        let mut child = c.stderr(Stdio::piped()).spawn().unwrap();
        // Until the upload exists (its parts are going up).
        let start = Instant::now();
        let upload = loop {
            if let Some(u) = s.uploads(BUCKET).pop() {
                break u;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no upload started"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        std::thread::sleep(Duration::from_millis(600));
        if how == "abort" {
            s.uploader(url, READ_WRITE).abort(&upload.upload_id);
        } else {
            let pid = child.id().to_string();
            assert!(Command::new("kill")
                .args([how, &pid])
                .status()
                .unwrap()
                .success());
        }
        let st = child.wait().unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(st.code(), Some(status), "{how}: {err}");
        assert!(err.contains(says), "{how}: {err}");
        assert_eq!(s.uploads(BUCKET), vec![], "{how}: parts left behind");
        assert!(!s.exists(url), "{how}");
    }
    // The same push, not interrupted, is whole (and again with the parts
    // unsigned).
    let done = push_json(&s, &["--part-size", "5M"], &img, url);
    assert_eq!(done["parts"], 9, "{done}");
    assert!(s.exists(url));
    let again = push_json(&s, &["--part-size", "5M", "--unsigned-payload"], &img, url);
    assert_eq!(again["parts"], 9, "{again}");
    let want = run_ok(Command::new(FERROFS).args(["fsck", "--json"]).arg(&img)).unwrap();
    assert_eq!(ok(&s, &["fsck", "--json", url]).unwrap(), want);
    assert!(s.uploads(BUCKET).is_empty());
    // A read-only identity may not push: 403 named, nothing left.
    for part in ["5M", "64M"] {
        let mut c = cmd(
            &s,
            &[
                "push",
                "--part-size",
                part,
                img.to_str().unwrap(),
                "s3://images/ro.img",
            ],
        );
        c.env("AWS_PROFILE", "ro");
        let (code, err) = fails(c);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains("access to bucket \"images\", key \"ro.img\" refused (HTTP 403)")
                && err.contains("AccessDenied"),
            "{err}"
        );
        assert!(!s.exists("s3://images/ro.img"));
        assert!(s.uploads(BUCKET).is_empty());
    }
}

#[test]
fn s3_errors_are_typed() {
    let w = work("remote_s3_errors");
    let Some(s) = weed(&w) else { return };
    let src = w.join("tree");
    small_tree(&src, 100_000);
    let img = w.join("img");
    mkfs(&["-zlz4"], &img, &src);
    let url = "s3://images/e.img";
    push_json(&s, &[], &img, url);
    // Pushed with the bytes unsigned (as curl does): the same image.
    let u = "s3://images/unsigned.img";
    push_json(&s, &["--unsigned-payload"], &img, u);
    let want = run_ok(Command::new(FERROFS).args(["ls", "-lR"]).arg(&img)).unwrap();
    assert_eq!(ok(&s, &["ls", "-lR", u]).unwrap(), want);
    let expect = |mut c: Command, want: &[&str]| {
        let (code, err) = fails({
            c.stdin(Stdio::null());
            c
        });
        assert_eq!(code, Some(2), "{err}");
        for w in want {
            assert!(err.contains(w), "want {w:?} in: {err}");
        }
        // Never a secret.
        for secret in [READ_WRITE.secret, READ_ONLY.secret, "not-the-secret"] {
            assert!(!err.contains(secret), "{err}");
        }
        err
    };
    let refused =
        "s3://images/e.img: access to bucket \"images\", key \"e.img\" refused (HTTP 403)";
    // A wrong secret.
    let mut c = cmd(&s, &["ls", url]);
    c.env("AWS_PROFILE", "wrong");
    expect(c, &[refused, "SignatureDoesNotMatch"]);
    let mut c = cmd(&s, &["ls", "--s3-profile", "wrong", url]);
    c.env("AWS_PROFILE", "rw");
    expect(c, &[refused, "SignatureDoesNotMatch"]);
    // An unknown key, from the environment (over the file's profile).
    let mut c = cmd(&s, &["fsck", url]);
    c.env("AWS_ACCESS_KEY_ID", "NOSUCHKEY")
        .env("AWS_SECRET_ACCESS_KEY", "x");
    expect(c, &[refused, "InvalidAccessKeyId"]);
    // The environment's right keys work; a read-only identity reads.
    let mut c = cmd(&s, &["ls", url]);
    s.env(&mut c, READ_ONLY);
    run_ok(&mut c).unwrap();
    // Anonymous: the object's plain URL is refused.
    let anon = format!("{}/images/e.img", s.endpoint());
    expect(cmd(&s, &["ls", &anon]), &["HTTP 403"]);
    // Missing key and bucket.
    expect(
        cmd(&s, &["ls", "s3://images/nope.img"]),
        &["s3://images/nope.img: not found: no object \"nope.img\" in bucket \"images\" (NoSuchKey)"],
    );
    expect(
        cmd(&s, &["cat", "s3://nobucket/k", "x"]),
        &["s3://nobucket/k: not found: no bucket \"nobucket\" (NoSuchBucket)"],
    );
    // No region (and no endpoint), no credentials, a malformed URL.
    let mut c = Command::new(FERROFS);
    c.args(["ls", url]);
    expect(c, &["s3://images/e.img: no S3 region: give --s3-region"]);
    let mut c = cmd(&s, &["ls", url]);
    c.env("AWS_PROFILE", "nobody");
    expect(c, &["s3://images/e.img: no S3 credentials", "[nobody]"]);
    expect(
        cmd(&s, &["ls", "s3://images/"]),
        &["no key: expected s3://BUCKET/KEY"],
    );
    // An expired session token: a stand-in S3 that checks the token is
    // sent and signed, and answers as AWS does.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (conn, _) = l.accept().unwrap();
        let mut r = BufReader::new(conn.try_clone().unwrap());
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                break;
            }
            head.push(line.to_ascii_lowercase());
        }
        let body = "<?xml version=\"1.0\"?><Error><Code>ExpiredToken</Code>\
                    <Message>The provided token has expired.</Message></Error>";
        let mut conn = conn;
        write!(
            conn,
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        head
    });
    let mut c = Command::new(FERROFS);
    c.args([
        "ls",
        "--s3-endpoint",
        &format!("http://127.0.0.1:{port}"),
        url,
    ])
    .env("AWS_ACCESS_KEY_ID", "ASIATEMP")
    .env("AWS_SECRET_ACCESS_KEY", "temp-secret")
    .env("AWS_SESSION_TOKEN", "the-token");
    let err = expect(
        c,
        &[
            "refused (HTTP 400)",
            "the session token has expired (ExpiredToken)",
        ],
    );
    assert!(
        !err.contains("the-token") && !err.contains("temp-secret"),
        "{err}"
    );
    let head = server.join().unwrap();
    assert!(
        head.contains(&"x-amz-security-token: the-token\r\n".to_owned()),
        "{head:?}"
    );
    let auth = head
        .iter()
        .find(|h| h.starts_with("authorization:"))
        .unwrap();
    assert!(auth.contains("x-amz-security-token"), "{auth}");
}

#[test]
fn s3_sixteen_concurrent_readers() {
    let w = work("remote_s3_readers");
    let Some(s) = weed(&w) else { return };
    let src = w.join("tree");
    small_tree(&src, 6 << 20);
    let img = w.join("img");
    mkfs(&["-zlz4hc", "-C65536"], &img, &src);
    let url = "s3://images/shared.img";
    push_json(&s, &[], &img, url);
    let want = run_ok(Command::new(FERROFS).args(["fsck", "--json"]).arg(&img)).unwrap();
    let want: serde_json::Value = serde_json::from_slice(&want).unwrap();
    let children: Vec<_> = (0..16)
        .map(|i| {
            let cache = w.join(format!("cache-{i}"));
            cmd(
                &s,
                &[
                    "fsck",
                    "--json",
                    "--remote-stats",
                    "--cache-dir",
                    cache.to_str().unwrap(),
                    url,
                ],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let (mut requests, mut bytes) = (0, 0);
    let len = fs::metadata(&img).unwrap().len();
    println!("image {len} bytes; reader, requests, bytes");
    for (i, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "reader {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = v.as_object_mut().unwrap().remove("remote").unwrap();
        assert_eq!(v, want, "reader {i}");
        let (q, b) = (
            r["requests"].as_u64().unwrap(),
            r["bytes"].as_u64().unwrap(),
        );
        println!("{i:>2} {q:>4} {b:>10}");
        assert!(
            b >= len && b <= len + len / 10 + (1 << 20),
            "reader {i}: {b} bytes of {len}"
        );
        requests += q;
        bytes += b;
    }
    println!("total {requests} requests, {bytes} bytes");
}

/// An object replaced under its key (a new image pushed over the old one)
/// is read as the new one through a cache directory that holds the old
/// one's chunks: the ETag differs, so the old chunks are not served.
#[test]
fn s3_replaced_object_is_not_read_from_a_stale_cache() {
    let w = work("remote_s3_replaced");
    let Some(s) = weed(&w) else { return };
    let (a_src, b_src) = (w.join("a"), w.join("b"));
    for (dir, seed) in [(&a_src, 1u64), (&b_src, 2)] {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("big"), noise(3 << 20, seed)).unwrap();
    }
    let (a, b) = (w.join("a.img"), w.join("b.img"));
    mkfs(&[], &a, &a_src);
    mkfs(&[], &b, &b_src);
    let url = "s3://images/replaced.img";
    let cache = w.join("cache");
    let cache_arg = cache.to_str().unwrap();
    push_json(&s, &[], &a, url);
    let first = ok(&s, &["cat", "--cache-dir", cache_arg, url, "/big"]).unwrap();
    assert!(
        first == fs::read(a_src.join("big")).unwrap(),
        "the first image's file"
    );
    push_json(&s, &[], &b, url);
    let second = ok(&s, &["cat", "--cache-dir", cache_arg, url, "/big"]).unwrap();
    assert!(
        second == fs::read(b_src.join("big")).unwrap(),
        "the replaced image read through the old cache is not the new one"
    );
    let _ = ferrofs_testkit::tmp::remove_tree(&w);
}

/// Virtual-hosted addressing (`--s3-addressing virtual`: the bucket in
/// the host name, `images.localhost`) reads an image as path-style
/// addressing does. Root only: the name is made to resolve through
/// /etc/hosts for the test.
#[test]
fn s3_virtual_hosted_addressing_reads_the_same() {
    if !ferrofs_testkit::is_root() {
        println!("skipped: not root (images.localhost is made to resolve through /etc/hosts)");
        return;
    }
    let w = work("remote_s3_virtual");
    let Some(s) = weed(&w) else { return };
    let Some(_name) = ferrofs_testkit::s3::HostsEntry::add("images.localhost") else {
        println!("skipped: images.localhost cannot be made to resolve");
        return;
    };
    let src = w.join("tree");
    small_tree(&src, 1 << 20);
    let img = w.join("v.img");
    mkfs(&["-zlz4"], &img, &src);
    let url = "s3://images/virtual/v.img";
    push_json(&s, &[], &img, url);
    let want = run_ok(Command::new(FERROFS).args(["ls", "-lR"]).arg(&img)).unwrap();
    let path_style = ok(&s, &["ls", "-lR", url]).unwrap();
    let virtual_hosted = run_ok(
        Command::new(FERROFS)
            .args(["ls", "--s3-endpoint", &s.named_endpoint()])
            .args(["--s3-addressing", "virtual", "-lR", url]),
    )
    .unwrap();
    assert!(path_style == want && virtual_hosted == want);
    let big = run_ok(
        Command::new(FERROFS)
            .args(["cat", "--s3-endpoint", &s.named_endpoint()])
            .args(["--s3-addressing", "virtual", url, "big"]),
    )
    .unwrap();
    assert!(big == fs::read(src.join("big")).unwrap());
    // The bucket really is in the host name: one that does not resolve
    // fails naming it.
    let (code, err) = fails({
        let mut c = Command::new(FERROFS);
        c.args(["ls", "--s3-endpoint", &s.named_endpoint()]).args([
            "--s3-addressing",
            "virtual",
            "s3://unresolved-bucket/v.img",
        ]);
        c
    });
    assert!(
        code != Some(0) && err.contains("unresolved-bucket.localhost"),
        "{code:?} {err}"
    );
    let _ = ferrofs_testkit::tmp::remove_tree(&w);
}
