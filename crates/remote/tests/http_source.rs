//! `HttpSource` against small HTTP servers written here (std TcpListener,
//! one thread per connection): reads equal the object's bytes, the cache
//! serves repeats without requests, adjacent misses share one request and
//! large reads run several at once; a server that ignores Range, a 404, an
//! object that changes mid-read, a truncated body, transient 503s and a
//! non-HTTP scheme each give their error (or, for the 503s, success).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{cache, object, quick, ranged, remote, status, Reply, Req, Server};

use ferrofs::ReadAt;
use ferrofs_remote::{Cache, HttpSource, RemoteError, RemoteOptions};

#[test]
fn reads_equal_the_object_and_repeats_come_from_the_cache() {
    let data = object(1_000_000);
    let d = data.clone();
    let srv = Server::start("/img", Duration::ZERO, move |r, _| ranged(&d, "\"v1\"", r));
    let c = cache();
    let src = HttpSource::open(&srv.url, c.clone(), &quick()).unwrap();
    assert_eq!(src.len().unwrap(), data.len() as u64);
    let reads: [(u64, usize); 6] = [
        (0, 1024),
        (65530, 20),        // across a chunk boundary
        (999_000, 1000),    // the short last chunk
        (300_000, 400_000), // many chunks, some already held
        (0, 1_000_000),     // everything
        (123_456, 0),
    ];
    for round in 0..2 {
        let before = srv.requests();
        for (off, len) in reads {
            let mut b = vec![0u8; len];
            src.read_exact_at(&mut b, off).unwrap();
            assert!(
                b == data[off as usize..off as usize + len],
                "bytes {off}+{len}"
            );
        }
        if round == 1 {
            assert_eq!(
                srv.requests(),
                before,
                "the second round is served by the cache"
            );
        }
    }
    // Past the end: an UnexpectedEof, and no request.
    let before = srv.requests();
    let mut b = [0u8; 2];
    let e = src.read_exact_at(&mut b, 999_999).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    assert_eq!(srv.requests(), before);
    // A new source on the same cache: only its opening probe goes out.
    let again = HttpSource::open(&srv.url, c.clone(), &quick()).unwrap();
    let mut all = vec![0u8; data.len()];
    again.read_exact_at(&mut all, 0).unwrap();
    assert!(all == *data);
    assert_eq!(srv.requests(), before + 1);
    assert_eq!(srv.ranges().last().unwrap(), "bytes=0-0");
    assert_eq!(again.stats().requests, 1);
}

#[test]
fn adjacent_misses_share_a_request_and_large_reads_go_in_parallel() {
    let data = object(2 << 20);
    let d = data.clone();
    let srv = Server::start("/img", Duration::from_millis(150), move |r, _| {
        ranged(&d, "\"v\"", r)
    });
    let opts = RemoteOptions {
        max_request: 256 << 10,
        ..quick()
    };
    let src = HttpSource::open(&srv.url, cache(), &opts).unwrap();
    // Chunk 5 first; then chunks 0..8 need 0..5 and 6..8: two requests.
    let k = 64 << 10;
    let mut b = vec![0u8; k];
    src.read_exact_at(&mut b, 5 * k as u64).unwrap();
    let mut b = vec![0u8; 8 * k];
    src.read_exact_at(&mut b, 0).unwrap();
    assert!(b == data[..8 * k]);
    let mut r = srv.ranges();
    assert_eq!(r[1], "bytes=327680-393215");
    // In any order (they run in parallel): chunks 0..4 (the 256 KiB cap),
    // chunk 4, chunks 6..8.
    r[2..].sort();
    assert_eq!(
        r[2..],
        [
            "bytes=0-262143",
            "bytes=262144-327679",
            "bytes=393216-524287"
        ]
    );
    assert!(
        srv.peak.load(Ordering::SeqCst) >= 2,
        "requests ran in parallel"
    );
    // 1.5 MiB uncached: six 256 KiB requests, at most four at a time.
    let before = srv.requests();
    let mut b = vec![0u8; 24 * k];
    src.read_exact_at(&mut b, 8 * k as u64).unwrap();
    assert!(b == data[8 * k..32 * k]);
    assert_eq!(srv.requests() - before, 6);
    assert!(srv.peak.load(Ordering::SeqCst) <= 4);
}

#[test]
fn concurrent_readers_of_one_chunk_fetch_it_once() {
    let data = object(1 << 20);
    let d = data.clone();
    let srv = Server::start("/img", Duration::from_millis(200), move |r, _| {
        ranged(&d, "\"v\"", r)
    });
    let src = HttpSource::open(&srv.url, cache(), &quick()).unwrap();
    // Eight threads read overlapping parts of chunks 2..4 at once.
    std::thread::scope(|s| {
        for k in 0..8u64 {
            let (src, data) = (&src, &data);
            s.spawn(move || {
                let off = 2 * 65536 + k * 1000;
                let mut b = vec![0u8; 65536];
                src.read_exact_at(&mut b, off).unwrap();
                assert!(b == data[off as usize..off as usize + 65536]);
            });
        }
    });
    // Chunks 2 and 3 fetched once each (in one request or two).
    let r = srv.ranges();
    let mut bytes = 0;
    for range in &r[1..] {
        let (a, b) = range["bytes=".len()..].split_once('-').unwrap();
        let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
        assert!(a >= 2 * 65536 && b < 4 * 65536, "{r:?}");
        bytes += b + 1 - a;
    }
    assert_eq!(bytes, 2 * 65536, "{r:?}");
}

/// A server that answers every request with the whole object and its
/// length (as `python3 -m http.server` does), counting what it sends.
fn no_ranges(data: &Arc<Vec<u8>>) -> Server {
    let d = data.clone();
    Server::start("/img", Duration::ZERO, move |_, _| Reply {
        status: 200,
        headers: vec![(
            "Last-Modified".to_owned(),
            "Mon, 23 Nov 2026 20:00:00 GMT".to_owned(),
        )],
        body: d.to_vec(),
        declared: None,
        pace: None,
    })
}

#[test]
fn a_server_without_ranges_is_read_whole_once_into_the_cache() {
    let data = object(300_000);
    let srv = no_ranges(&data);
    let c = cache();
    let mut noted = Vec::new();
    let src =
        HttpSource::open_noting(&srv.url, c.clone(), &quick(), &mut |n| noted.push(n)).unwrap();
    assert_eq!(noted, [300_000], "the download is announced with its size");
    assert_eq!(src.len().unwrap(), 300_000);
    let mut all = vec![0u8; 300_000];
    src.read_exact_at(&mut all, 0).unwrap();
    assert!(all == *data, "the bytes are the object's");
    let mut some = vec![0u8; 1000];
    src.read_exact_at(&mut some, 123_456).unwrap();
    assert!(some == data[123_456..124_456]);
    assert_eq!(srv.requests(), 1, "one request: the answer to the probe");
    assert_eq!(src.stats().bytes, 300_000);
    // Another run on the same cache directory: the answer is not read
    // again (its body is dropped), nothing is announced.
    drop(src);
    let c2 = Arc::new(Cache::open(c.dir(), 64 << 20).unwrap());
    let mut noted = Vec::new();
    let again = HttpSource::open_noting(&srv.url, c2, &quick(), &mut |n| noted.push(n)).unwrap();
    assert!(noted.is_empty());
    src_equals(&again, &data);
    assert_eq!(srv.requests(), 2);
}

fn src_equals(src: &HttpSource, data: &[u8]) {
    let mut all = vec![0u8; data.len()];
    src.read_exact_at(&mut all, 0).unwrap();
    assert!(all == data);
}

#[test]
fn a_server_without_ranges_is_refused_when_asked_or_too_large() {
    let data = object(300_000);
    let srv = no_ranges(&data);
    let refuse = RemoteOptions {
        whole_download: false,
        ..quick()
    };
    let e = HttpSource::open(&srv.url, cache(), &refuse).err().unwrap();
    assert!(
        matches!(
            e,
            RemoteError::NoRangeSupport {
                status: 200,
                len: Some(300_000),
                ..
            }
        ),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("does not support range requests") && msg.contains("nginx"),
        "{e}"
    );
    assert_eq!(srv.requests(), 1, "no retry");
    // A cache smaller than the image cannot hold it whole.
    let small = Arc::new(Cache::temporary(100_000).unwrap());
    let e = HttpSource::open(&srv.url, small, &quick()).err().unwrap();
    assert!(
        matches!(
            e,
            RemoteError::TooLargeForWholeDownload {
                len: 300_000,
                limit: 100_000,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn not_found_and_other_statuses() {
    let srv = Server::start("/missing.img", Duration::ZERO, |_, _| status(404));
    let e = HttpSource::open(&srv.url, cache(), &quick()).err().unwrap();
    assert!(
        matches!(e, RemoteError::NotFound { status: 404, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("/missing.img: not found"), "{e}");
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(srv.requests(), 1);

    // A 403 fails at once; a 500 that persists after every attempt, and
    // the error says how many were made.
    for (code, tries) in [(403u16, 1u32), (500, 3)] {
        let srv = Server::start("/img", Duration::ZERO, move |_, _| status(code));
        let e = HttpSource::open(&srv.url, cache(), &quick()).err().unwrap();
        assert!(
            matches!(e, RemoteError::Status { status, attempts, .. } if status == code && attempts == tries),
            "{e}"
        );
        assert_eq!(srv.requests(), tries as usize);
    }
}

/// A server of `data` (ETag "v") that answers the requests numbered in
/// `bad` (from 1) with `status(code)`.
fn flaky(data: &Arc<Vec<u8>>, bad: &'static [usize], code: u16) -> Server {
    let d = data.clone();
    Server::start("/img", Duration::ZERO, move |r, n| {
        if bad.contains(&n) {
            status(code)
        } else {
            ranged(&d, "\"v\"", r)
        }
    })
}

#[test]
fn transient_errors_are_retried() {
    let data = object(200_000);
    // The first fetch and its first retry fail.
    let srv = flaky(&data, &[2, 3], 503);
    let src = HttpSource::open(&srv.url, cache(), &quick()).unwrap();
    let mut b = vec![0u8; 100_000];
    src.read_exact_at(&mut b, 50_000).unwrap();
    assert!(b == data[50_000..150_000]);
    assert_eq!(srv.requests(), 4);
    // A connection closed without an answer is retried too.
    let srv = flaky(&data, &[2], 0);
    let src = HttpSource::open(&srv.url, cache(), &quick()).unwrap();
    src.read_exact_at(&mut b, 0).unwrap();
    assert!(b == data[..100_000]);
    assert_eq!(srv.requests(), 3);
    // A server that stalls past the timeout: the request is made again.
    let d = data.clone();
    let srv = Server::start("/img", Duration::ZERO, move |r, n| {
        if n == 2 {
            std::thread::sleep(Duration::from_millis(1500));
        }
        ranged(&d, "\"v\"", r)
    });
    let mut opts = quick();
    opts.http.timeout = Duration::from_millis(300);
    let src = HttpSource::open(&srv.url, cache(), &opts).unwrap();
    src.read_exact_at(&mut b, 0).unwrap();
    assert!(b == data[..100_000]);
    assert_eq!(srv.requests(), 3);
}

#[test]
fn a_truncated_body_is_an_error_after_retries() {
    let data = object(200_000);
    let d = data.clone();
    let srv = Server::start("/img", Duration::ZERO, move |r, n| {
        let mut reply = ranged(&d, "\"v\"", r);
        if n > 1 {
            let full = reply.body.len();
            reply.body.truncate(full / 2);
            reply.declared = Some(full);
        }
        reply
    });
    let src = HttpSource::open(&srv.url, cache(), &quick()).unwrap();
    let mut b = vec![0u8; 1000];
    let e = src.read_exact_at(&mut b, 0).unwrap_err();
    match remote(&e) {
        RemoteError::Truncated {
            start: 0,
            end: 65536,
            got: 32768,
            attempts: 3,
            ..
        } => {}
        other => panic!("{other}"),
    }
    assert_eq!(srv.requests(), 4);
}

#[test]
fn an_object_that_changes_mid_read_is_an_error_never_mixed_data() {
    let old = object(300_000);
    let new: Arc<Vec<u8>> = Arc::new(old.iter().map(|b| !b).collect());
    // After the third request the server has the new object (new ETag,
    // same length), and honours If-Range.
    let (o, n2) = (old.clone(), new.clone());
    let srv = Server::start("/img", Duration::ZERO, move |r, n| {
        if n <= 2 {
            ranged(&o, "\"old\"", r)
        } else {
            ranged(&n2, "\"new\"", r)
        }
    });
    let src = HttpSource::open(&srv.url, cache(), &quick()).unwrap();
    let mut b = vec![0u8; 1000];
    src.read_exact_at(&mut b, 0).unwrap();
    assert!(b == old[..1000]);
    let mut b = vec![0u8; 1000];
    let e = src.read_exact_at(&mut b, 200_000).unwrap_err();
    // The If-Range no longer matches: the server answers 200 with the
    // whole new object, which is seen as a change.
    assert!(
        matches!(remote(&e), RemoteError::Changed { what: "ETag", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("changed since it was opened"), "{e}");
    assert!(srv.ranges()[2].starts_with("bytes="));
    // The source remembers it: later reads fail with it without asking.
    assert!(
        matches!(src.changed(), Some(RemoteError::Changed { what: "ETag", ref now, .. }) if now == "\"new\""),
        "{:?}",
        src.changed()
    );
    let before = srv.requests();
    let e = src.read_exact_at(&mut b, 100_000).unwrap_err();
    assert!(matches!(remote(&e), RemoteError::Changed { .. }), "{e}");
    assert_eq!(srv.requests(), before);

    // A server that ignores If-Range: the 206's ETag gives it away.
    let (o, n2) = (old.clone(), new.clone());
    let srv = Server::start("/img", Duration::ZERO, move |r, n| {
        let req = Req {
            range: r.range,
            if_range: None,
        };
        if n <= 2 {
            ranged(&o, "\"old\"", &req)
        } else {
            ranged(&n2, "\"new\"", &req)
        }
    });
    let src = HttpSource::open(&srv.url, cache(), &quick()).unwrap();
    src.read_exact_at(&mut b, 0).unwrap();
    let e = src.read_exact_at(&mut b, 200_000).unwrap_err();
    assert!(
        matches!(remote(&e), RemoteError::Changed { what: "ETag", .. }),
        "{e}"
    );

    // Same ETag, another length (a server without validators that
    // changed): the Content-Range total gives it away.
    let (o, short) = (old.clone(), Arc::new(old[..250_000].to_vec()));
    let srv = Server::start("/img", Duration::ZERO, move |r, n| {
        if n <= 2 {
            ranged(&o, "\"same\"", r)
        } else {
            ranged(&short, "\"same\"", r)
        }
    });
    let src = HttpSource::open(&srv.url, cache(), &quick()).unwrap();
    src.read_exact_at(&mut b, 0).unwrap();
    let e = src.read_exact_at(&mut b, 200_000).unwrap_err();
    match remote(&e) {
        RemoteError::Changed { what, was, now, .. } => {
            assert_eq!(
                (*what, was.as_str(), now.as_str()),
                ("length", "300000", "250000")
            )
        }
        other => panic!("{other}"),
    }
}

#[test]
fn only_http_and_https_urls() {
    for url in [
        "ftp://example.org/img",
        "file:///tmp/img",
        "s3://bucket/img",
    ] {
        let e = HttpSource::open(url, cache(), &quick()).err().unwrap();
        assert!(
            matches!(e, RemoteError::UnsupportedScheme { .. }),
            "{url}: {e}"
        );
        assert!(e.to_string().contains("unsupported URL scheme"), "{e}");
    }
    assert!(ferrofs_remote::is_url("https://h/x") && !ferrofs_remote::is_url("./x://y"));
}

#[test]
fn the_cache_stays_within_its_bound() {
    let data = object(1_000_000);
    let d = data.clone();
    let srv = Server::start("/img", Duration::ZERO, move |r, _| ranged(&d, "\"v\"", r));
    let c = Arc::new(Cache::temporary(4 * 65536).unwrap());
    let src = HttpSource::open(&srv.url, c.clone(), &quick()).unwrap();
    let mut all = vec![0u8; data.len()];
    src.read_exact_at(&mut all, 0).unwrap();
    assert!(all == *data, "a read larger than the cache is still whole");
    assert!(c.used() <= 4 * 65536, "{} bytes held", c.used());
    // The most recent chunks stayed: the end is read without a request.
    let before = srv.requests();
    let mut b = vec![0u8; 1000];
    src.read_exact_at(&mut b, 999_000).unwrap();
    assert_eq!(srv.requests(), before);
}

/// Small limits for the deadline tests: a 0.5 s timeout, 10 ms backoff,
/// `attempts` attempts within a `deadline`, at least 100 bytes/s over 1 s.
fn tight(attempts: u32, deadline: Duration) -> RemoteOptions {
    let mut o = quick();
    o.http.attempts = attempts;
    o.http.timeout = Duration::from_millis(500);
    o.http.speed_limit = 100;
    o.http.speed_time = Duration::from_secs(1);
    o.http.deadline = deadline;
    o
}

/// Accepts, reads the request, never answers (until long after the test).
fn silent(_: &Req, _: usize) -> Reply {
    std::thread::sleep(Duration::from_secs(120));
    status(0)
}

#[test]
fn a_server_that_never_answers_fails_within_the_bound() {
    // The attempts run out first: 3 x 0.5 s (plus 30 ms of backoff).
    let srv = Server::start("/img", Duration::ZERO, silent);
    let t = Instant::now();
    let e = HttpSource::open(&srv.url, cache(), &tight(3, Duration::from_secs(10)))
        .err()
        .unwrap();
    let took = t.elapsed();
    match &e {
        RemoteError::TimedOut {
            phase: "waiting for the response headers",
            limit,
            option: "--http-timeout",
            attempts: 3,
            ..
        } if *limit == Duration::from_millis(500) => {}
        other => panic!("{other}"),
    }
    let msg = e.to_string();
    assert!(
        msg.starts_with(&srv.url)
            && msg.contains("timed out waiting for the response headers (limit 0.5 s, --http-timeout) (after 3 attempts)"),
        "{msg}"
    );
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    assert!(took < Duration::from_millis(2500), "{took:?}");
    assert_eq!(srv.requests(), 3);
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);

    // The deadline comes first: 20 attempts allowed, 2 s in all; the
    // later attempts' waits are cut to fit in what is left of it.
    let srv = Server::start("/img", Duration::ZERO, silent);
    let t = Instant::now();
    let e = HttpSource::open(&srv.url, cache(), &tight(20, Duration::from_secs(2)))
        .err()
        .unwrap();
    let took = t.elapsed();
    match &e {
        RemoteError::TimedOut {
            option: "--http-deadline",
            attempts,
            ..
        } if (3..20).contains(attempts) => assert_eq!(srv.requests(), *attempts as usize),
        e => panic!("{e}"),
    }
    assert!(
        e.to_string().contains("(limit 2 s, --http-deadline)"),
        "{e}"
    );
    assert!(took < Duration::from_millis(2300), "{took:?}");

    // Opened, then silent: a read's fetch (its retries included) is cut
    // at the deadline.
    let data = object(300_000);
    let d = data.clone();
    let quiet = Arc::new(AtomicBool::new(false));
    let q = quiet.clone();
    let srv = Server::start("/img", Duration::ZERO, move |r, n| {
        if q.load(Ordering::SeqCst) {
            silent(r, n)
        } else {
            ranged(&d, "\"v\"", r)
        }
    });
    let src = HttpSource::open(&srv.url, cache(), &tight(20, Duration::from_secs(2))).unwrap();
    quiet.store(true, Ordering::SeqCst);
    let t = Instant::now();
    let mut b = vec![0u8; 1000];
    let e = src.read_exact_at(&mut b, 100_000).unwrap_err();
    let took = t.elapsed();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
    assert!(
        matches!(
            remote(&e),
            RemoteError::TimedOut {
                option: "--http-deadline",
                ..
            }
        ),
        "{e}"
    );
    assert!(took < Duration::from_millis(2400), "{took:?}");
    assert!(src.failed().is_some_and(|m| m.contains("timed out")));
    // Reads right after fail at once, without asking the server: a run
    // over a dead server does not wait a deadline per read.
    let before = srv.requests();
    let t = Instant::now();
    let e = src.read_exact_at(&mut b, 200_000).unwrap_err();
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "{:?}",
        t.elapsed()
    );
    assert!(
        matches!(remote(&e), RemoteError::Unresponsive { why, .. } if why.starts_with("timed out")),
        "{e}"
    );
    assert!(e.to_string().contains("not asked again for"), "{e}");
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(srv.requests(), before);
    // A deadline later the server (answering again) is asked again.
    quiet.store(false, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(2100));
    src.read_exact_at(&mut b, 200_000).unwrap();
    assert!(b == data[200_000..201_000]);
}

#[test]
fn a_trickling_body_is_abandoned_below_the_speed_limit() {
    // Headers at once, then one byte every 300 ms (about 3 bytes/s, the
    // limit is 100 bytes/s over 1 s).
    let data = object(300_000);
    let d = data.clone();
    let srv = Server::start("/img", Duration::ZERO, move |r, n| {
        let mut reply = ranged(&d, "\"v\"", r);
        if n > 1 {
            reply.pace = Some(Duration::from_millis(300));
        }
        reply
    });
    let src = HttpSource::open(&srv.url, cache(), &tight(2, Duration::from_secs(10))).unwrap();
    let t = Instant::now();
    let mut b = vec![0u8; 1000];
    let e = src.read_exact_at(&mut b, 0).unwrap_err();
    let took = t.elapsed();
    match remote(&e) {
        RemoteError::TooSlow {
            start: 0,
            end: 65536,
            bytes,
            elapsed,
            limit: 100,
            attempts: 2,
            ..
        } if *bytes < 100 && *elapsed >= Duration::from_secs(1) => {}
        other => panic!("{other}"),
    }
    let msg = e.to_string();
    assert!(
        msg.starts_with(&srv.url)
            && msg.contains("transfer too slow receiving bytes 0..65536")
            && msg.contains("below the limit of 100 bytes/s over 1 s"),
        "{msg}"
    );
    // Two attempts of one window each (a read lands every 300 ms).
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(took < Duration::from_millis(3500), "{took:?}");
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);

    // A whole download (no Range) trickling is abandoned the same way.
    let d = data.clone();
    let srv = Server::start("/img", Duration::ZERO, move |_, _| Reply {
        status: 200,
        headers: Vec::new(),
        body: d.to_vec(),
        declared: None,
        pace: Some(Duration::from_millis(300)),
    });
    let t = Instant::now();
    let e = HttpSource::open(&srv.url, cache(), &tight(2, Duration::from_secs(10)))
        .err()
        .unwrap();
    assert!(matches!(e, RemoteError::TooSlow { start: 0, .. }), "{e}");
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn a_healthy_server_reads_fine_under_tight_limits() {
    let data = object(2 << 20);
    let d = data.clone();
    let srv = Server::start("/img", Duration::from_millis(50), move |r, _| {
        ranged(&d, "\"v\"", r)
    });
    let src = HttpSource::open(&srv.url, cache(), &tight(2, Duration::from_secs(2))).unwrap();
    let mut all = vec![0u8; data.len()];
    src.read_exact_at(&mut all, 0).unwrap();
    assert!(all == *data);
    // A body that pauses less than the timeout and stays above the speed
    // limit: 200 bytes, one every 4 ms (250 bytes/s).
    let d = data.clone();
    let srv = Server::start("/img", Duration::ZERO, move |r, n| {
        let mut reply = ranged(&d[..200], "\"v\"", r);
        if n > 1 {
            reply.pace = Some(Duration::from_millis(4));
        }
        reply
    });
    let mut opts = tight(1, Duration::from_secs(5));
    opts.http.speed_time = Duration::from_millis(200);
    let src = HttpSource::open(&srv.url, cache(), &opts).unwrap();
    let mut b = vec![0u8; 200];
    src.read_exact_at(&mut b, 0).unwrap();
    assert!(b == data[..200]);
}
