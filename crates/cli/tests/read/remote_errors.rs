//! Images by URL that go wrong mid-run, against the remote crate's small
//! test servers (std TcpListener on 127.0.0.1, no root): `fsck` of an
//! object replaced on the server partway through (another ETag) reports
//! the change with exit status 3, not damage (1); one that goes silent
//! partway makes the check incomplete (exit 2) within one deadline; a
//! server that never answers fails within `--http-deadline`; every reader
//! command and `mount` take the HTTP limits.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrofs_testkit::work_dir;

use crate::FERROFS;

#[path = "../../../remote/tests/common/mod.rs"]
pub(crate) mod common;
use common::{ranged, status, Server};

/// An uncompressed image of three 1 MiB files (data in 12 of its 256 KiB
/// chunks, metadata after them).
fn image(work: &Path) -> Arc<Vec<u8>> {
    let src = work.join("tree");
    fs::create_dir_all(&src).unwrap();
    for k in 0..3u32 {
        let bytes: Vec<u8> = (0..1u32 << 20)
            .map(|i| (i.wrapping_mul(2654435761).wrapping_add(k) >> 13) as u8)
            .collect();
        fs::write(src.join(format!("f{k}")), bytes).unwrap();
    }
    let img = work.join("a.img");
    let st = Command::new(FERROFS)
        .args(["mkfs", "--quiet"])
        .arg(&img)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    Arc::new(fs::read(&img).unwrap())
}

fn ferrofs(args: &[&str]) -> Output {
    Command::new(FERROFS).args(args).output().unwrap()
}

#[test]
fn fsck_of_an_object_replaced_mid_run_reports_the_change() {
    let data = image(&work_dir!("remote_changed"));
    // The same bytes throughout: fsck passes (the control).
    let d = data.clone();
    let srv = Server::start("/a.img", Duration::ZERO, move |r, _| {
        ranged(&d, "\"v1\"", r)
    });
    let out = ferrofs(&["fsck", &srv.url]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // From the fourth request on, the server has another object (ETag
    // "v2"; the bytes do not matter, the reader must not mix them).
    for json in [false, true] {
        let d = data.clone();
        let srv = Server::start("/a.img", Duration::ZERO, move |r, n| {
            ranged(&d, if n <= 3 { "\"v1\"" } else { "\"v2\"" }, r)
        });
        let mut args = vec!["fsck", srv.url.as_str()];
        if json {
            args.push("--json");
        }
        let out = ferrofs(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "json {json}: {err}");
        assert!(
            err.contains(&format!(
                "{}: the object changed since it was opened (ETag was \"v1\", now \"v2\")",
                srv.url
            )) && err.contains("the image changed while it was being read"),
            "{err}"
        );
        // No report of damage that is not there.
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            srv.requests() > 3,
            "the change came partway: {:?}",
            srv.ranges()
        );
    }
}

#[test]
fn fsck_of_a_server_that_goes_silent_mid_run_is_incomplete_not_damage() {
    let data = image(&work_dir!("remote_silent"));
    // After its third request the server accepts and never answers.
    let d = data.clone();
    let srv = Server::start("/a.img", Duration::ZERO, move |r, n| {
        if n <= 3 {
            ranged(&d, "\"v1\"", r)
        } else {
            std::thread::sleep(Duration::from_secs(120));
            status(0)
        }
    });
    let t = Instant::now();
    let out = ferrofs(&[
        "fsck",
        &srv.url,
        "--http-timeout",
        "0.3",
        "--http-deadline",
        "1",
    ]);
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&srv.url)
            && err.contains("timed out")
            && err.contains("the image could not be read whole, so the check is incomplete"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // One deadline, not one per cluster: the reads after the first
    // failure fail at once.
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[test]
fn a_silent_server_fails_within_the_deadline() {
    let srv = Server::start("/a.img", Duration::ZERO, |_, _| {
        std::thread::sleep(Duration::from_secs(120));
        status(0)
    });
    let t = Instant::now();
    let out = ferrofs(&[
        "fsck",
        &srv.url,
        "--http-timeout",
        "0.5",
        "--http-deadline",
        "1.5s",
    ]);
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&srv.url)
            && err.contains(
                "timed out waiting for the response headers (limit 1.5 s, --http-deadline)"
            ),
        "{err}"
    );
    assert!(took < Duration::from_millis(2500), "{took:?}");
    // A bad value is refused by name.
    let out = ferrofs(&["ls", &srv.url, "--http-deadline", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--http-deadline"));
}

#[test]
fn every_command_that_reads_a_url_takes_the_http_limits() {
    for cmd in ["fsck", "extract", "ls", "cat", "dump", "diff", "mount"] {
        let out = ferrofs(&[cmd, "--help"]);
        let help = String::from_utf8_lossy(&out.stdout);
        for opt in [
            "--http-timeout",
            "--http-speed-limit",
            "--http-speed-time",
            "--http-deadline",
        ] {
            assert!(help.contains(opt), "{cmd} --help lacks {opt}");
        }
    }
}
