//! Range requests for one object: the probe that learns its length and
//! validators, and fetches of byte ranges that are checked against them
//! (status, Content-Range, ETag, Last-Modified, body length), with
//! retries and exponential backoff on transient failures.

use std::io::Read;
use std::time::Duration;

use ureq::http::{HeaderMap, Response, StatusCode};
use ureq::tls::TlsConfig;
use ureq::{Agent, Body};

use crate::error::{RemoteError, Result};
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

/// Connection settings of a [`Client`].
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Attempts per request (at least 1) before a transient failure is
    /// reported.
    pub attempts: u32,
    /// Wait before the first retry; doubled for each further one.
    pub backoff: Duration,
    /// Limit for connecting, and for each read of the connection.
    pub timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            attempts: 5,
            backoff: Duration::from_millis(100),
            timeout: Duration::from_secs(30),
        }
    }
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
    Whole(Validators, Box<dyn Read + Send>),
}

/// A failure and whether another attempt may succeed.
enum Failure {
    Retry(RemoteError),
    Fatal(RemoteError),
}

/// Range requests to one URL.
pub struct Client {
    agent: Agent,
    url: String,
    opts: HttpOptions,
}

fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
}

/// A Content-Range header: `bytes FIRST-LAST/TOTAL`, either part `*`.
#[derive(Debug, PartialEq, Eq)]
struct ContentRange {
    /// First and last byte.
    range: Option<(u64, u64)>,
    total: Option<u64>,
}

fn content_range(v: &str) -> Option<ContentRange> {
    let rest = v.strip_prefix("bytes")?.trim_start();
    let (range, total) = rest.split_once('/')?;
    let total = match total.trim() {
        "*" => None,
        t => Some(t.parse().ok()?),
    };
    let range = match range.trim() {
        "*" => None,
        r => {
            let (a, b) = r.split_once('-')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        }
    };
    Some(ContentRange { range, total })
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
        let agent: Agent = Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(opts.timeout))
            .timeout_per_read(Some(opts.timeout))
            .user_agent(concat!("ferrofs/", env!("CARGO_PKG_VERSION")))
            .tls_config(TlsConfig::builder().root_certs(tls::roots()).build())
            .build()
            .into();
        Ok(Client {
            agent,
            url: url.to_owned(),
            opts,
        })
    }

    /// The URL requested.
    pub fn url(&self) -> &str {
        &self.url
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
    /// read whole.
    pub fn probe_or_whole(&self) -> Result<Probe> {
        self.retrying(|| {
            let resp = self.send(0, 1, None)?;
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
                    self.read_body(resp, 0, 1)?;
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
                        Box::new(resp.into_body().into_reader()),
                    )),
                    None => Err(self.status_failure(StatusCode::OK, &resp, None)),
                },
                s => Err(self.status_failure(s, &resp, None)),
            }
        })
    }

    /// Bytes `start..end` (`start < end <= v.len`) of the object `v`
    /// describes; any sign of another object is [`RemoteError::Changed`].
    pub fn fetch(&self, v: &Validators, start: u64, end: u64) -> Result<Vec<u8>> {
        self.retrying(|| {
            let resp = self.send(start, end, v.if_range())?;
            if resp.status() != StatusCode::PARTIAL_CONTENT {
                return Err(self.status_failure(resp.status(), &resp, Some(v)));
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
            self.read_body(resp, start, end)
        })
    }

    /// Sends `GET` with `Range: bytes=start-(end-1)`.
    fn send(
        &self,
        start: u64,
        end: u64,
        if_range: Option<&str>,
    ) -> std::result::Result<Response<Body>, Failure> {
        let mut req = self
            .agent
            .get(&self.url)
            .header("Range", format!("bytes={start}-{}", end - 1));
        if let Some(v) = if_range {
            req = req.header("If-Range", v);
        }
        req.call().map_err(|e| self.transport(e))
    }

    fn transport(&self, e: ureq::Error) -> Failure {
        // Dropped, refused or stalled connections; not a certificate or
        // protocol error, which another attempt would only repeat.
        use std::io::ErrorKind as K;
        let retry = match &e {
            ureq::Error::Io(io) => matches!(
                io.kind(),
                K::ConnectionReset
                    | K::ConnectionAborted
                    | K::ConnectionRefused
                    | K::BrokenPipe
                    | K::UnexpectedEof
                    | K::TimedOut
                    | K::Interrupted
                    | K::NotConnected
            ),
            ureq::Error::Timeout(_) | ureq::Error::ConnectionFailed => true,
            _ => false,
        };
        let e = RemoteError::Transport {
            url: self.url.clone(),
            attempts: 1,
            source: e,
        };
        if retry {
            Failure::Retry(e)
        } else {
            Failure::Fatal(e)
        }
    }

    fn bad(&self, what: String) -> Failure {
        Failure::Fatal(RemoteError::BadResponse {
            url: self.url.clone(),
            what,
        })
    }

    /// [`RemoteError::Changed`] if the headers name another object than `v`.
    fn check_same(&self, v: &Validators, h: &HeaderMap) -> Result<()> {
        let changed = |what, was: &str, now: &str| RemoteError::Changed {
            url: self.url.clone(),
            what,
            was: was.to_owned(),
            now: now.to_owned(),
        };
        if let (Some(was), Some(now)) = (&v.etag, header(h, "etag")) {
            if *was != now {
                return Err(changed("ETag", was, &now));
            }
        }
        if let (Some(was), Some(now)) = (&v.last_modified, header(h, "last-modified")) {
            if *was != now {
                return Err(changed("Last-Modified", was, &now));
            }
        }
        let total = header(h, "content-range")
            .as_deref()
            .and_then(content_range)
            .and_then(|c| c.total);
        if let Some(now) = total {
            if now != v.len {
                return Err(changed("length", &v.len.to_string(), &now.to_string()));
            }
        }
        Ok(())
    }

    /// The failure a response other than 206 means. `v` is set when the
    /// object was opened: a 200 then answers an `If-Range` that no longer
    /// matches, or a Range the server ignored.
    fn status_failure(
        &self,
        s: StatusCode,
        resp: &Response<Body>,
        v: Option<&Validators>,
    ) -> Failure {
        let url = self.url.clone();
        let code = s.as_u16();
        match code {
            200 => {
                let len = header(resp.headers(), "content-length").and_then(|l| l.parse().ok());
                if let Some(v) = v {
                    let mut h = resp.headers().clone();
                    if let Some(l) = len {
                        // A whole-object answer: its length is the object's.
                        if let Ok(cr) = format!("bytes */{l}").parse::<ureq::http::HeaderValue>() {
                            h.insert("content-range", cr);
                        }
                    }
                    if let Err(e) = self.check_same(v, &h) {
                        return Failure::Fatal(e);
                    }
                }
                Failure::Fatal(RemoteError::NoRangeSupport {
                    url,
                    status: code,
                    len,
                })
            }
            404 | 410 => Failure::Fatal(RemoteError::NotFound { url, status: code }),
            416 => {
                if let Some(v) = v {
                    if let Err(e) = self.check_same(v, resp.headers()) {
                        return Failure::Fatal(e);
                    }
                }
                Failure::Fatal(RemoteError::Status {
                    url,
                    status: code,
                    attempts: 1,
                })
            }
            408 | 429 | 500 | 502 | 503 | 504 => Failure::Retry(RemoteError::Status {
                url,
                status: code,
                attempts: 1,
            }),
            _ => Failure::Fatal(RemoteError::Status {
                url,
                status: code,
                attempts: 1,
            }),
        }
    }

    /// Reads exactly `end - start` body bytes; fewer is a (retried)
    /// truncation.
    fn read_body(
        &self,
        resp: Response<Body>,
        start: u64,
        end: u64,
    ) -> std::result::Result<Vec<u8>, Failure> {
        let want = end - start;
        let Ok(n) = usize::try_from(want) else {
            return Err(self.bad(format!("a range of {want} bytes")));
        };
        let mut buf = vec![0u8; n];
        let mut got = 0usize;
        let mut r = resp.into_body().into_reader();
        while got < n {
            match r.read(&mut buf[got..]) {
                Ok(0) | Err(_) => break,
                Ok(k) => got += k,
            }
        }
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

    /// Runs `op` until it succeeds, fails for good, or the attempts run
    /// out (waiting `backoff`, then twice as long each time, between).
    fn retrying<T>(&self, mut op: impl FnMut() -> std::result::Result<T, Failure>) -> Result<T> {
        let attempts = self.opts.attempts.max(1);
        let mut wait = self.opts.backoff;
        let mut n = 1;
        loop {
            match op() {
                Ok(v) => return Ok(v),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Retry(e)) if n >= attempts => return Err(with_attempts(e, n)),
                Err(Failure::Retry(_)) => {
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
        | RemoteError::Truncated { attempts, .. } => *attempts = n,
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

    #[test]
    fn content_range_forms() {
        let cr = |range, total| Some(ContentRange { range, total });
        assert_eq!(content_range("bytes 0-0/10"), cr(Some((0, 0)), Some(10)));
        assert_eq!(content_range("bytes 5-9/*"), cr(Some((5, 9)), None));
        assert_eq!(content_range("bytes */0"), cr(None, Some(0)));
        assert_eq!(content_range("items 0-1/2"), None);
        assert_eq!(content_range("bytes 0-x/2"), None);
        assert_eq!(content_range("bytes 0-1"), None);
    }
}
