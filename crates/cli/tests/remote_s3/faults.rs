//! Faults on the way to S3 (issue 62): through `ferrofs_testkit::faults`,
//! a proxy in front of SeaweedFS that drops connections, answers 5xx and
//! 429 with Retry-After, cuts or mis-sizes answers and stalls them, `push`
//! publishes whole or leaves nothing, lazy reads (`fsck`, `cat`, a FUSE
//! mount) read right or fail naming the cause, an object replaced mid-read
//! is an error, and a push killed outright leaves no object and has its
//! upload aborted by the next push of the key.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferrofs_testkit::compare::{compare_trees, CompareOptions};
use ferrofs_testkit::faults::{self, Fault, FaultProxy};
use ferrofs_testkit::fuse::FuseMount;
use ferrofs_testkit::s3::{Weed, READ_WRITE};
use ferrofs_testkit::verify::run_ok;
use ferrofs_testkit::LoopMount;

use crate::{
    cmd, fails, mkfs, noise, ok, push_json, slow_push, small_tree, weed, work, BUCKET, FERROFS,
};

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
