//! Range requests for one object: the probe that learns its length and
//! validators, and fetches of byte ranges that are checked against them
//! (status, Content-Range, ETag, Last-Modified, body length), with
//! retries and exponential backoff on transient failures, all within
//! bounded time: a per-request timeout, a low-speed limit on bodies and a
//! total deadline that the retries count against.

mod answers;

pub use answers::retry_after;
use answers::{content_range, header, ContentRange};

use std::io::{self, Read};
use std::time::{Duration, Instant};

use ureq::http::{Response, StatusCode};
use ureq::tls::TlsConfig;
use ureq::{Agent, Body};

use std::sync::Arc;

use crate::error::{RemoteError, Result};
use crate::s3::{self, sigv4};
use crate::tls;

/// What identifies the object opened: later responses must match it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validators {
    pub len: u64,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

impl Validators {
    /// The `If-Range` value: a strong ETag, else the Last-Modified date.
    fn if_range(&self) -> Option<&str> {
        match &self.etag {
            Some(e) if !e.starts_with("W/") => Some(e.as_str()),
            _ => self.last_modified.as_deref(),
        }
    }
}

/// Connection settings of a [`Client`]: retries and the limits that
/// bound how long a request may take.
///
/// One request (the opening probe, or a fetch of up to
/// [`RemoteOptions::max_request`](crate::RemoteOptions::max_request)
/// bytes), retries and backoff included, fails within `deadline`
/// whatever the server does (a fetch is cut at it; a probe's waits are
/// shortened to a third of what is left of it). Within that, each attempt waits at
/// most `timeout` to connect, `timeout` for the response headers and
/// `timeout` for any read of the body, and a body arriving slower than
/// `speed_limit` bytes/s over `speed_time` is abandoned.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Attempts per request (at least 1) before a transient failure is
    /// reported.
    pub attempts: u32,
    /// Wait before the first retry; doubled for each further one.
    pub backoff: Duration,
    /// Per-request timeout: the longest wait to connect, for the whole
    /// response header (from the request sent to its last byte), and for
    /// any one read of the body (default 30 s).
    pub timeout: Duration,
    /// Low-speed limit in bytes per second (0: none): a body that brings
    /// fewer than `speed_limit * speed_time` bytes in a `speed_time`
    /// window is abandoned, as curl's `--speed-limit` (default 1024).
    pub speed_limit: u64,
    /// The window of the low-speed limit (default 30 s).
    pub speed_time: Duration,
    /// Total deadline of one request, its retries and backoff included:
    /// no attempt starts after it and a range fetch in progress is cut at
    /// it (default 120 s).
    pub deadline: Duration,
}

impl Default for HttpOptions {
    /// 5 attempts, 0.1 s doubling backoff, a 30 s timeout, at least
    /// 1 KiB/s over 30 s, a 120 s deadline.
    fn default() -> Self {
        HttpOptions {
            attempts: 5,
            backoff: Duration::from_millis(100),
            timeout: Duration::from_secs(30),
            speed_limit: 1024,
            speed_time: Duration::from_secs(30),
            deadline: Duration::from_secs(120),
        }
    }
}

/// The low-speed check of one body: bytes counted in windows of
/// `speed_time`; a window that ends below the limit is a failure.
pub(crate) struct Pace {
    limit: u64,
    window: Duration,
    since: Instant,
    got: u64,
}

impl Pace {
    pub(crate) fn new(opts: &HttpOptions) -> Pace {
        Pace {
            limit: opts.speed_limit,
            window: opts.speed_time.max(Duration::from_millis(1)),
            since: Instant::now(),
            got: 0,
        }
    }

    /// Counts `n` more bytes; once a window has passed, `Err((bytes,
    /// elapsed))` if it brought less than the limit, else a new window.
    fn step(&mut self, n: usize) -> std::result::Result<(), (u64, Duration)> {
        self.got = self.got.saturating_add(n as u64);
        let elapsed = self.since.elapsed();
        if self.limit == 0 || elapsed < self.window {
            return Ok(());
        }
        // Bytes per second over the window, compared without rounding.
        if u128::from(self.got) * 1000 < u128::from(self.limit) * elapsed.as_millis() {
            return Err((self.got, elapsed));
        }
        self.since = Instant::now();
        self.got = 0;
        Ok(())
    }
}

/// `d` for messages: `30 s`, `1.5 s`, `0.25 s`.
pub(crate) fn secs(d: Duration) -> String {
    let s = format!("{:.3}", d.as_secs_f64());
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} s")
}

/// The scheme of `url` if it has the form `scheme://…`.
pub fn scheme(url: &str) -> Option<&str> {
    let (s, _) = url.split_once("://")?;
    let mut b = s.bytes();
    let first_ok = b.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'));
    (first_ok && rest_ok).then_some(s)
}

/// What the opening request found.
pub enum Probe {
    /// The server honours Range: the object's length and validators.
    Ranges(Validators),
    /// The server sent the whole object instead: its validators and the
    /// body, still to be read.
    Whole(Validators, WholeBody),
}

/// The body of a whole-object answer, read with [`Client::read_whole`].
pub struct WholeBody {
    reader: Box<dyn Read + Send>,
    wait: Wait,
    pace: Pace,
}

/// A failure and whether another attempt may succeed.
enum Failure {
    Retry(RemoteError),
    /// A retryable answer (429, 503) whose `Retry-After` asks for at
    /// least this long a wait before the next attempt.
    RetryAfter(RemoteError, Duration),
    Fatal(RemoteError),
}

/// The limit on one wait of an attempt, as its error names it: the
/// per-request timeout, or what was left of the deadline when that was
/// shorter.
#[derive(Clone, Copy)]
struct Wait {
    limit: Duration,
    option: &'static str,
}

/// Range requests to one URL (or S3 object, each request signed).
pub struct Client {
    agent: Agent,
    /// The URL as messages name it (`s3://BUCKET/KEY` for S3).
    url: String,
    /// The URL requested.
    target: String,
    /// The S3 object, whose credentials sign every request.
    s3: Option<Arc<s3::Target>>,
    /// Who gives every request its `Authorization` (a registry's token).
    auth: Option<Arc<dyn Authorizer>>,
    opts: HttpOptions,
}

/// Gives requests their `Authorization` header, and a new one when the
/// server refuses the old (HTTP 401): a registry's Bearer token.
pub trait Authorizer: Send + Sync {
    /// The header's value for the next request, if any.
    fn header(&self) -> Option<String>;
    /// The server answered 401: get a fresh credential. `false` when
    /// that failed (the 401 then stands).
    fn refresh(&self) -> bool;
}

/// The agent of a [`Client`] (and of S3 uploads): statuses are answers,
/// not errors; every wait bounded by `opts.timeout`.
pub(crate) fn agent(opts: &HttpOptions) -> Agent {
    Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(opts.timeout))
        .timeout_recv_response(Some(opts.timeout))
        .timeout_per_read(Some(opts.timeout))
        .user_agent(concat!("ferrofs/", env!("CARGO_PKG_VERSION")))
        .tls_config(TlsConfig::builder().root_certs(tls::roots()).build())
        .build()
        .into()
}

impl Client {
    /// A client for `url`, which must be `http://` or `https://`.
    pub fn new(url: &str, opts: HttpOptions) -> Result<Client> {
        match scheme(url) {
            Some(s) if s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https") => {}
            s => {
                return Err(RemoteError::UnsupportedScheme {
                    url: url.to_owned(),
                    scheme: s.unwrap_or("").to_owned(),
                })
            }
        }
        Ok(Client {
            agent: agent(&opts),
            url: url.to_owned(),
            target: url.to_owned(),
            s3: None,
            auth: None,
            opts,
        })
    }

    /// A client for the S3 object `t`: its requests signed, its errors
    /// read from S3's error answers.
    pub fn s3(t: Arc<s3::Target>, opts: HttpOptions) -> Client {
        Client {
            agent: agent(&opts),
            url: t.display().to_owned(),
            target: t.object_url(),
            s3: Some(t),
            auth: None,
            opts,
        }
    }

    /// The same client, every request authorized by `a`; messages name
    /// the object `shown`.
    pub fn with_auth(mut self, a: Option<Arc<dyn Authorizer>>, shown: &str) -> Client {
        self.auth = a;
        self.url = shown.to_owned();
        self
    }

    /// The URL requested.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL as messages name it, with the host an S3 object is
    /// requested from (`s3://BUCKET/KEY (at HOST)`): what a connection
    /// error is about.
    fn url_and_host(&self) -> String {
        let host = self
            .target
            .split_once("://")
            .and_then(|(_, rest)| rest.split('/').next());
        match (&self.s3, host) {
            (Some(_), Some(h)) => format!("{} (at {h})", self.url),
            _ => self.url.clone(),
        }
    }

    /// The settings it runs with.
    pub fn options(&self) -> &HttpOptions {
        &self.opts
    }

    /// Asks for the first byte: learns the object's length and validators
    /// and that the server honours Range.
    pub fn probe(&self) -> Result<Validators> {
        match self.probe_or_whole()? {
            Probe::Ranges(v) => Ok(v),
            Probe::Whole(v, _) => Err(RemoteError::NoRangeSupport {
                url: self.url.clone(),
                status: 200,
                len: Some(v.len),
            }),
        }
    }

    /// As [`Client::probe`], but a server that answers the range request
    /// with the whole object (and its length) gives that answer, to be
    /// read whole with [`Client::read_whole`].
    ///
    /// The probe is not cut at the deadline as a whole (a whole answer's
    /// body may be large): its waits (connecting, the header, each body
    /// read) are shortened to a third of what is left of it.
    pub fn probe_or_whole(&self) -> Result<Probe> {
        self.retrying(|left| {
            let (resp, wait) = self.send(0, 1, None, left, false)?;
            let h = resp.headers();
            let etag = header(h, "etag");
            let last_modified = header(h, "last-modified");
            let cr = header(h, "content-range");
            let total = cr.as_deref().and_then(content_range).and_then(|c| c.total);
            match resp.status() {
                StatusCode::PARTIAL_CONTENT => {
                    let Some(len) = total else {
                        return Err(self.bad(format!("206 without a Content-Range total ({cr:?})")));
                    };
                    let v = Validators {
                        len,
                        etag,
                        last_modified,
                    };
                    self.read_body(resp, wait, 0, 1)?;
                    Ok(Probe::Ranges(v))
                }
                // An empty object has no first byte.
                StatusCode::RANGE_NOT_SATISFIABLE if total == Some(0) => {
                    Ok(Probe::Ranges(Validators {
                        len: 0,
                        etag,
                        last_modified,
                    }))
                }
                // The whole object, of a known length.
                StatusCode::OK => match header(h, "content-length").and_then(|l| l.parse().ok()) {
                    Some(len) => Ok(Probe::Whole(
                        Validators {
                            len,
                            etag,
                            last_modified,
                        },
                        WholeBody {
                            reader: Box::new(resp.into_body().into_reader()),
                            wait,
                            pace: Pace::new(&self.opts),
                        },
                    )),
                    None => Err(self.status_failure(StatusCode::OK, &resp, None)),
                },
                _ => Err(self.failure(resp, None)),
            }
        })
    }

    /// Reads the next `buf.len()` bytes (bytes `start..` of the object)
    /// of a whole-object answer, under the per-read timeout and the
    /// low-speed limit; fewer is a truncation. Not retried: the answer
    /// cannot be asked for again from where it stopped.
    pub fn read_whole(&self, body: &mut WholeBody, buf: &mut [u8], start: u64) -> Result<()> {
        let end = start + buf.len() as u64;
        let got =
            match self.read_paced(&mut body.reader, buf, &mut body.pace, body.wait, start, end) {
                Ok(got) => got,
                Err(Failure::Retry(e) | Failure::RetryAfter(e, _) | Failure::Fatal(e)) => {
                    return Err(e)
                }
            };
        if got < buf.len() {
            return Err(RemoteError::Truncated {
                url: self.url.clone(),
                start,
                end,
                got: got as u64,
                attempts: 1,
            });
        }
        Ok(())
    }

    /// Bytes `start..end` (`start < end <= v.len`) of the object `v`
    /// describes; any sign of another object is [`RemoteError::Changed`].
    pub fn fetch(&self, v: &Validators, start: u64, end: u64) -> Result<Vec<u8>> {
        self.retrying(|left| {
            let (resp, wait) = self.send(start, end, v.if_range(), left, true)?;
            if resp.status() != StatusCode::PARTIAL_CONTENT {
                return Err(self.failure(resp, Some(v)));
            }
            self.check_same(v, resp.headers()).map_err(Failure::Fatal)?;
            let cr = header(resp.headers(), "content-range");
            match cr.as_deref().and_then(content_range) {
                Some(ContentRange {
                    range: Some((a, b)),
                    ..
                }) if a == start && b.checked_add(1) == Some(end) => {}
                _ => {
                    return Err(self.bad(format!(
                        "asked for bytes {start}-{}, got Content-Range {cr:?}",
                        end - 1
                    )))
                }
            }
            self.read_body(resp, wait, start, end)
        })
    }

    /// Sends `GET` with `Range: bytes=start-(end-1)`, with `left` of the
    /// deadline. With `cut` the whole exchange (body included) ends at
    /// `left` and each wait is the timeout or `left` if shorter; without,
    /// each wait is the timeout or a third of `left` if shorter, so that
    /// connecting, the header and the first body read end within it.
    fn send(
        &self,
        start: u64,
        end: u64,
        if_range: Option<&str>,
        left: Duration,
        cut: bool,
    ) -> std::result::Result<(Response<Body>, Wait), Failure> {
        let left = left.max(Duration::from_millis(1));
        let t = self.opts.timeout.min(if cut { left } else { left / 3 });
        let wait = if t < self.opts.timeout {
            Wait {
                limit: self.opts.deadline,
                option: "--http-deadline",
            }
        } else {
            Wait {
                limit: self.opts.timeout,
                option: "--http-timeout",
            }
        };
        let mut req = self
            .agent
            .get(&self.target)
            .header("Range", format!("bytes={start}-{}", end - 1));
        if let Some(t) = &self.s3 {
            for (name, value) in t.sign("GET", &t.object_path(), &[], sigv4::EMPTY_SHA256) {
                req = req.header(name, value);
            }
        }
        if let Some(v) = self.auth.as_ref().and_then(|a| a.header()) {
            req = req.header("Authorization", v);
        }
        if let Some(v) = if_range {
            req = req.header("If-Range", v);
        }
        let mut cfg = req
            .config()
            .timeout_connect(Some(t))
            .timeout_recv_response(Some(t))
            .timeout_per_read(Some(t));
        if cut {
            cfg = cfg.timeout_global(Some(left));
        }
        match cfg.build().call() {
            Ok(resp) => Ok((resp, wait)),
            Err(e) => Err(self.transport(e, wait, "waiting for the response headers")),
        }
    }

    /// Reads exactly `end - start` body bytes; fewer is a (retried)
    /// truncation, and so are a stall and a body slower than the
    /// low-speed limit.
    fn read_body(
        &self,
        resp: Response<Body>,
        wait: Wait,
        start: u64,
        end: u64,
    ) -> std::result::Result<Vec<u8>, Failure> {
        let want = end - start;
        let Ok(n) = usize::try_from(want) else {
            return Err(self.bad(format!("a range of {want} bytes")));
        };
        let mut buf = vec![0u8; n];
        let mut r = resp.into_body().into_reader();
        let mut pace = Pace::new(&self.opts);
        let got = self.read_paced(&mut r, &mut buf, &mut pace, wait, start, end)?;
        if got < n {
            return Err(Failure::Retry(RemoteError::Truncated {
                url: self.url.clone(),
                start,
                end,
                got: got as u64,
                attempts: 1,
            }));
        }
        Ok(buf)
    }

    /// Fills `buf` from `r` until it is full or the body ends (the count
    /// read); a timed-out read or a window below the low-speed limit is a
    /// (retried) failure. `start..end` is the span of the request, for
    /// errors.
    fn read_paced(
        &self,
        r: &mut dyn Read,
        buf: &mut [u8],
        pace: &mut Pace,
        wait: Wait,
        start: u64,
        end: u64,
    ) -> std::result::Result<usize, Failure> {
        let mut got = 0usize;
        while got < buf.len() {
            match r.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(k) => {
                    got += k;
                    if let Err((bytes, elapsed)) = pace.step(k) {
                        return Err(Failure::Retry(RemoteError::TooSlow {
                            url: self.url.clone(),
                            start,
                            end,
                            bytes,
                            elapsed,
                            limit: self.opts.speed_limit,
                            window: self.opts.speed_time,
                            attempts: 1,
                        }));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let timeout = e
                        .get_ref()
                        .and_then(|i| i.downcast_ref::<ureq::Error>())
                        .and_then(|u| match u {
                            ureq::Error::Timeout(t) => Some(*t),
                            _ => None,
                        });
                    let timeout = match timeout {
                        Some(t) => Some(t),
                        None if e.kind() == io::ErrorKind::TimedOut => Some(ureq::Timeout::PerRead),
                        None => None,
                    };
                    // Anything else ends the body: a truncation.
                    if let Some(t) = timeout {
                        return Err(self.transport(
                            ureq::Error::Timeout(t),
                            wait,
                            "waiting for body bytes",
                        ));
                    }
                    break;
                }
            }
        }
        Ok(got)
    }

    /// Runs `op` (given what is left of the deadline) until it succeeds,
    /// fails for good, the attempts run out, or the deadline leaves no
    /// time for another attempt (waiting `backoff`, then twice as long
    /// each time, between attempts).
    fn retrying<T>(
        &self,
        mut op: impl FnMut(Duration) -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        let begun = Instant::now();
        let deadline = self.opts.deadline;
        let attempts = self.opts.attempts.max(1);
        let mut wait = self.opts.backoff;
        let mut n = 1;
        loop {
            let (e, asked) = match op(deadline.saturating_sub(begun.elapsed())) {
                Ok(v) => return Ok(v),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Retry(e)) => (e, Duration::ZERO),
                Err(Failure::RetryAfter(e, d)) => (e, d),
            };
            match e {
                e if n >= attempts => return Err(with_attempts(e, n)),
                e => {
                    let e = with_attempts(e, n);
                    // The server's Retry-After, when longer than ours.
                    wait = wait.max(asked);
                    // Another attempt needs the backoff and some time to
                    // run (a tenth of the timeout, at least 1 ms).
                    let room = wait + (self.opts.timeout / 10).max(Duration::from_millis(1));
                    if deadline.saturating_sub(begun.elapsed()) < room {
                        return Err(match e {
                            // Cut at the deadline: that error says so.
                            RemoteError::TimedOut {
                                option: "--http-deadline",
                                ..
                            } => e,
                            e => RemoteError::GaveUp {
                                deadline,
                                last: Box::new(e),
                            },
                        });
                    }
                    std::thread::sleep(wait);
                    wait = wait.saturating_mul(2);
                    n += 1;
                }
            }
        }
    }
}

/// `e` with its attempt count set to `n`.
fn with_attempts(mut e: RemoteError, n: u32) -> RemoteError {
    match &mut e {
        RemoteError::Status { attempts, .. }
        | RemoteError::Transport { attempts, .. }
        | RemoteError::Truncated { attempts, .. }
        | RemoteError::TimedOut { attempts, .. }
        | RemoteError::TooSlow { attempts, .. } => *attempts = n,
        _ => {}
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_schemes() {
        assert_eq!(scheme("http://h/x"), Some("http"));
        assert_eq!(scheme("s3+x.y-z://b/k"), Some("s3+x.y-z"));
        assert_eq!(scheme("/tmp/a://b"), None);
        assert_eq!(scheme("img.erofs"), None);
        assert_eq!(scheme("://x"), None);
        assert!(matches!(
            Client::new("ftp://h/x", HttpOptions::default()),
            Err(RemoteError::UnsupportedScheme { scheme, .. }) if scheme == "ftp"
        ));
        assert!(Client::new("HTTPS://h/x", HttpOptions::default()).is_ok());
    }
}
