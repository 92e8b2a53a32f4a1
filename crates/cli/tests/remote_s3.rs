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
//! `weed` cannot be built or found (or, for parts, without root).

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use ferrofs_testkit::compare::{compare_trees, CompareOptions};
use ferrofs_testkit::faults::{self, Fault, FaultProxy};
use ferrofs_testkit::fuse::FuseMount;
use ferrofs_testkit::s3::{weed_bin_dir, Weed, READ_ONLY, READ_WRITE};
use ferrofs_testkit::verify::run_ok;
use ferrofs_testkit::{corpus, LoopMount};

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

/// A tree under `w/tree` (a `big` file of `big` random bytes), its image
/// `w/img` built with `args`, and what `fsck --json` prints of it.
fn tree_image(w: &Path, big: usize, args: &[&str]) -> (PathBuf, PathBuf, Vec<u8>) {
    let src = w.join("tree");
    small_tree(&src, big);
    let img = w.join("img");
    mkfs(args, &img, &src);
    let want = run_ok(Command::new(FERROFS).args(["fsck", "--json"]).arg(&img)).unwrap();
    (src, img, want)
}

/// `ferrofs ARGS` with `--s3-endpoint` the fault proxy `p`.
fn via(p: &FaultProxy, args: &[&str]) -> Command {
    let mut c = Command::new(FERROFS);
    c.arg(args[0])
        .args(["--s3-endpoint", &p.endpoint()])
        .args(&args[1..]);
    c
}

/// A proxy in front of `s` dealing `fault` to the requests `hit` picks
/// whose number among those it picks (from 1) is in `at` (every one when
/// `at` is empty).
fn proxy(
    s: &Weed,
    hit: fn(&faults::Request) -> bool,
    at: &'static [usize],
    fault: Fault,
) -> FaultProxy {
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let upstream = format!("127.0.0.1:{}", s.port).parse().unwrap();
    FaultProxy::start(upstream, move |r| {
        if !hit(r) {
            return Fault::Pass;
        }
        let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if at.is_empty() || at.contains(&n) {
            fault.clone()
        } else {
            Fault::Pass
        }
    })
    .unwrap()
}

fn is_part(r: &faults::Request) -> bool {
    r.method == "PUT" && r.has_query("partNumber")
}

fn is_complete(r: &faults::Request) -> bool {
    r.method == "POST" && r.has_query("uploadId")
}

fn is_create(r: &faults::Request) -> bool {
    r.method == "POST" && r.has_query("uploads")
}

fn is_get(r: &faults::Request) -> bool {
    r.method == "GET"
}

/// `push` through a proxy that drops connections, answers 500/503/429
/// (with Retry-After), cuts answers or gives them a wrong length: each
/// push either publishes the image whole (read back equal) or fails
/// naming the cause; either way no multipart upload is left, and a
/// failed push leaves no object.
#[test]
fn s3_push_through_faults_publishes_whole_or_nothing() {
    let w = work("remote_s3_push_faults");
    let Some(s) = weed(&w) else { return };
    let (_, img, want) = tree_image(&w, 16 << 20, &[]);
    type Case = (
        &'static str,
        fn(&faults::Request) -> bool,
        &'static [usize],
        Fault,
        bool,
    );
    let cases: [Case; 9] = [
        (
            "a 503 with Retry-After: 1 on a part",
            is_part,
            &[2],
            Fault::Status(503, Some(1)),
            true,
        ),
        (
            "429s on CreateMultipartUpload",
            is_create,
            &[1, 2],
            Fault::Status(429, Some(0)),
            true,
        ),
        (
            "a part's connection dropped mid-body",
            is_part,
            &[3],
            Fault::DropRequest,
            true,
        ),
        (
            "a part's answer with a wrong length",
            is_part,
            &[1],
            Fault::WrongLength(10),
            true,
        ),
        (
            "CompleteMultipartUpload's connection dropped",
            is_complete,
            &[1],
            Fault::DropRequest,
            true,
        ),
        (
            "CompleteMultipartUpload's answer cut",
            is_complete,
            &[1],
            Fault::CutBody(20),
            true,
        ),
        (
            "every part answered 500",
            is_part,
            &[],
            Fault::Status(500, None),
            false,
        ),
        (
            "CompleteMultipartUpload answered 500 every time",
            is_complete,
            &[],
            Fault::Status(500, None),
            false,
        ),
        (
            "a Retry-After past the deadline",
            is_part,
            &[],
            Fault::Status(503, Some(100_000)),
            false,
        ),
    ];
    let mut failures = Vec::new();
    for (i, (what, hit, at, fault, publishes)) in cases.into_iter().enumerate() {
        let url = format!("s3://images/faults-{i}.img");
        let p = proxy(&s, hit, at, fault);
        let t = Instant::now();
        let out = via(
            &p,
            &["push", "--part-size", "5M", img.to_str().unwrap(), &url],
        )
        .output()
        .unwrap();
        let secs = t.elapsed().as_secs_f64();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let dealt = p.dealt();
        drop(p);
        if dealt.is_empty() {
            failures.push(format!("{what}: no fault was dealt"));
        }
        if !s.uploads(BUCKET).is_empty() {
            failures.push(format!(
                "{what}: multipart uploads left: {:?}",
                s.uploads(BUCKET)
            ));
        }
        match (publishes, out.status.success()) {
            (true, true) => {
                let got = ok(&s, &["fsck", "--json", &url]);
                if got.as_deref() != Ok(&want[..]) {
                    failures.push(format!("{what}: the object does not read as the image"));
                }
                if what.contains("Retry-After: 1") && secs < 1.0 {
                    failures.push(format!(
                        "{what}: pushed in {secs:.2} s: Retry-After not waited for"
                    ));
                }
            }
            (false, false) => {
                if out.status.code() != Some(2)
                    || !err.contains("nothing was published")
                    || !err.contains(&url)
                {
                    failures.push(format!("{what}: {:?}: {err}", out.status.code()));
                }
                if s.exists(&url) {
                    failures.push(format!("{what}: failed, but an object is there"));
                }
            }
            (true, false) => failures.push(format!("{what}: failed: {err} (faults: {dealt:?})")),
            (false, true) => failures.push(format!(
                "{what}: succeeded against a server that never took it"
            )),
        }
        println!(
            "{what}: exit {:?} in {secs:.2} s, {} faults",
            out.status.code(),
            dealt.len()
        );
    }
    ferrofs_testkit::tmp::finish(&w, &failures);
}

/// Lazy reads (`fsck`, `cat`, a FUSE mount) through a proxy that answers 503/429 with
/// Retry-After, cuts bodies, gives wrong lengths, stalls past the timeout
/// or drops connections read the image right (retried); a server that
/// always fails gives a clear error; an object replaced between two
/// requests is an error saying so, never bytes of both.
#[test]
fn s3_lazy_reads_through_faults_read_right_or_fail_clearly() {
    let w = work("remote_s3_read_faults");
    let Some(s) = weed(&w) else { return };
    let (src, img, want_fsck) = tree_image(&w, 6 << 20, &["-zlz4hc"]);
    let url = "s3://images/read-faults.img";
    push_json(&s, &[], &img, url);
    let other_src = w.join("other");
    small_tree(&other_src, 7 << 20);
    fs::write(other_src.join("big"), noise(6 << 20, 99)).unwrap();
    let other = w.join("other.img");
    mkfs(&["-zlz4hc"], &other, &other_src);
    let want_big = fs::read(src.join("big")).unwrap();
    // Small chunks, so that a read makes many requests.
    let common = ["--http-timeout", "1", "--http-deadline", "30"];
    type Case = (&'static str, &'static [usize], Fault);
    let cases: [Case; 7] = [
        (
            "503s with Retry-After: 1",
            &[2, 3],
            Fault::Status(503, Some(1)),
        ),
        ("a 429", &[2], Fault::Status(429, Some(0))),
        ("a body cut short", &[2], Fault::CutBody(1000)),
        ("a length too short", &[3], Fault::WrongLength(-100)),
        ("a length too long", &[3], Fault::WrongLength(100)),
        (
            "a stall past the timeout",
            &[2],
            Fault::Stall(Duration::from_secs(3)),
        ),
        ("a dropped connection", &[2], Fault::DropRequest),
    ];
    let mut failures = Vec::new();
    for (what, at, fault) in cases {
        for (cmd, want) in [("fsck", &want_fsck), ("cat", &want_big)] {
            let p = proxy(&s, is_get, at, fault.clone());
            let mut args = vec![cmd, "--json"];
            if cmd == "cat" {
                args.pop();
            }
            args.extend(common);
            args.push(url);
            if cmd == "cat" {
                args.push("/big");
            }
            let out = via(&p, &args).output().unwrap();
            if p.dealt().is_empty() {
                failures.push(format!("{what}: {cmd}: no fault was dealt"));
            }
            if !out.status.success() || out.stdout != *want {
                failures.push(format!(
                    "{what}: {cmd}: exit {:?}, {} bytes out: {}",
                    out.status.code(),
                    out.stdout.len(),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    // Always 500: a clear error naming the status and the attempts.
    let p = proxy(&s, is_get, &[], Fault::Status(500, None));
    let c = via(&p, &["cat", "--http-deadline", "30", url, "/big"]);
    let (code, err) = fails(c);
    if code != Some(2) || !err.contains("HTTP 500") || !err.contains(url) {
        failures.push(format!("always 500: {code:?}: {err}"));
    }
    drop(p);
    // The FUSE mount of the URL through cut bodies and 503s shows what the
    // kernel's mount of the image does (root only: loop and FUSE mounts).
    if ferrofs_testkit::is_root() {
        let p = proxy(&s, is_get, &[3, 4, 7], Fault::CutBody(700));
        let lm = LoopMount::new(&img, &[]).unwrap();
        let m = FuseMount::new(
            Path::new(FERROFS),
            url.as_ref(),
            &w.join("mnt-faults"),
            &["--s3-endpoint", &p.endpoint(), "--http-timeout", "1"],
        );
        for d in compare_trees(lm.path(), &m.dir, &CompareOptions::strict()) {
            failures.push(format!("FUSE mount through cut bodies: {d}"));
        }
        m.unmount();
        if p.dealt().is_empty() {
            failures.push("FUSE mount through cut bodies: no fault was dealt".into());
        }
    } else {
        println!("the FUSE mount through faults is skipped: not root");
    }
    // The object replaced by another image after the third request.
    let up = s.uploader(url, READ_WRITE);
    let data = fs::read(&other).unwrap();
    let replace = std::sync::Mutex::new(Some(up));
    let upstream = format!("127.0.0.1:{}", s.port).parse().unwrap();
    let p = FaultProxy::start(upstream, move |r| {
        if r.method == "GET" && r.n == 3 {
            if let Some(up) = replace.lock().unwrap().take() {
                up.push(&data, data.len() as u64, &|_| {}, &Default::default())
                    .unwrap();
            }
        }
        Fault::Pass
    })
    .unwrap();
    let out = via(&p, &["cat", url, "/big"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let whole_old = out.status.success() && out.stdout == want_big;
    if !whole_old && (out.status.success() || !err.contains("the object changed")) {
        failures.push(format!(
            "replaced mid-read: exit {:?}, {} bytes: {err}",
            out.status.code(),
            out.stdout.len()
        ));
    }
    if !out.status.success() && out.stdout.len() >= want_big.len() {
        failures.push("replaced mid-read: a failed cat wrote the whole file".into());
    }
    ferrofs_testkit::tmp::finish(&w, &failures);
}

/// `push` killed (SIGKILL) at random points of a multipart upload: no
/// object appears; the upload it left is listed, and the next push of the
/// same key reports it, aborts it and publishes the image whole.
#[test]
fn s3_killed_push_leaves_no_object_and_the_next_push_aborts_its_upload() {
    let w = work("remote_s3_push_killed");
    let Some(s) = weed(&w) else { return };
    let (_, img, want) = tree_image(&w, 24 << 20, &[]);
    let url = "s3://images/killed.img";
    let mut failures = Vec::new();
    // Milliseconds after the upload appears (None: right after the start,
    // before it may exist).
    for after in [None, Some(0u64), Some(150), Some(500), Some(900)] {
        let what = format!("killed {after:?} ms after the upload appeared");
        let mut child = slow_push(&s, &img, url)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        if let Some(ms) = after {
            while s.uploads(BUCKET).is_empty() && start.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(Duration::from_millis(ms));
        } else {
            std::thread::sleep(Duration::from_millis(30));
        }
        if let Some(st) = child.try_wait().unwrap() {
            // Done before the kill (a slow machine can be this late):
            // then it published the whole image.
            println!("{what}: the push had ended ({st})");
            if !st.success() || !s.uploads(BUCKET).is_empty() {
                failures.push(format!("{what}: the push ended with {st}"));
            }
            s.uploader(url, READ_WRITE).delete().unwrap();
            continue;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        if s.exists(url) {
            failures.push(format!("{what}: an object is there"));
        }
        let left = s.uploads(BUCKET);
        if after.is_some() && left.len() != 1 {
            failures.push(format!("{what}: uploads left: {left:?}"));
        }
        let out = cmd(
            &s,
            &[
                "push",
                "--json",
                "--part-size",
                "5M",
                img.to_str().unwrap(),
                url,
            ],
        )
        .output()
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if !out.status.success() {
            failures.push(format!("{what}: the next push failed: {err}"));
        }
        if v["aborted_uploads"] != serde_json::json!(left.len()) {
            failures.push(format!(
                "{what}: the next push says {v}, {} were left",
                left.len()
            ));
        }
        if !left.is_empty() && !err.contains("aborted an unfinished upload of this key") {
            failures.push(format!(
                "{what}: the next push did not report the upload: {err}"
            ));
        }
        if !s.uploads(BUCKET).is_empty() {
            failures.push(format!(
                "{what}: uploads after the next push: {:?}",
                s.uploads(BUCKET)
            ));
        }
        if ok(&s, &["fsck", "--json", url]).as_deref() != Ok(&want[..]) {
            failures.push(format!(
                "{what}: the pushed object does not read as the image"
            ));
        }
        s.uploader(url, READ_WRITE).delete().unwrap();
    }
    ferrofs_testkit::tmp::finish(&w, &failures);
}
