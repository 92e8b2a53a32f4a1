//! What an HTTP answer means: the failure a transport error or an
//! unexpected status is (and whether another attempt may succeed), the
//! check that an answer names the object opened (its ETag, Last-Modified
//! and length), and the parsing of the headers those checks read.

use ureq::http::{HeaderMap, Response, StatusCode};
use ureq::Body;

use super::{Client, Failure, Validators, Wait};
use crate::error::{RemoteError, Result};
use crate::s3;

pub(super) fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
}

/// A Content-Range header: `bytes FIRST-LAST/TOTAL`, either part `*`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ContentRange {
    /// First and last byte.
    pub(super) range: Option<(u64, u64)>,
    pub(super) total: Option<u64>,
}

pub(super) fn content_range(v: &str) -> Option<ContentRange> {
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

/// A `Retry-After` header's wait: delta-seconds, or an HTTP-date
/// (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`) less the present time (a
/// date past is no wait). Capped at an hour; the deadline of the request
/// bounds it anyway.
pub fn retry_after(v: &str) -> Option<std::time::Duration> {
    retry_after_at(v, std::time::SystemTime::now())
}

/// [`retry_after`] with the present time `now`.
fn retry_after_at(v: &str, now: std::time::SystemTime) -> Option<std::time::Duration> {
    const CAP: u64 = 3600;
    let v = v.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        let secs = v.parse::<u64>().unwrap_or(u64::MAX).min(CAP);
        return Some(std::time::Duration::from_secs(secs));
    }
    let at = http_date(v)?;
    let now = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let wait = at.saturating_sub(now).clamp(0, CAP as i64);
    Some(std::time::Duration::from_secs(wait.unsigned_abs()))
}

/// Seconds since 1970 of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn http_date(v: &str) -> Option<i64> {
    let (_, rest) = v.split_once(", ")?;
    let mut f = rest.split(' ');
    let day: i64 = f.next()?.parse().ok()?;
    let month = f.next()?;
    let year: i64 = f.next()?.parse().ok()?;
    let time = f.next()?;
    if f.next()? != "GMT" || f.next().is_some() {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let m = i64::try_from(MONTHS.iter().position(|&x| x == month)?).ok()? + 1;
    let mut t = time.split(':').map(|x| x.parse::<i64>().ok());
    let (h, mi, s) = (t.next()??, t.next()??, t.next()??);
    if t.next().is_some() || !(1..=31).contains(&day) || !(1970..=9999).contains(&year) {
        return None;
    }
    if h > 23 || mi > 59 || s > 60 {
        return None;
    }
    // Days from 1970-01-01 to the date (the proleptic Gregorian calendar,
    // counted from March so that the leap day comes last in a year).
    let (y, mm) = if m <= 2 {
        (year - 1, m + 9)
    } else {
        (year, m - 3)
    };
    let era_days = y * 365 + y / 4 - y / 100 + y / 400;
    let days = era_days + (153 * mm + 2) / 5 + day - 1 - 719_468;
    Some(days * 86_400 + h * 3_600 + mi * 60 + s)
}

impl Client {
    /// The failure a transport error means; `phase` says what was being
    /// waited for when a timeout struck.
    pub(super) fn transport(&self, e: ureq::Error, wait: Wait, phase: &'static str) -> Failure {
        use ureq::Timeout as T;
        if let ureq::Error::Timeout(t) = e {
            let (phase, limit, option) = match t {
                T::Global => (phase, self.opts.deadline, "--http-deadline"),
                T::Connect => ("connecting", wait.limit, wait.option),
                T::Resolve => ("resolving the host name", wait.limit, wait.option),
                _ => (phase, wait.limit, wait.option),
            };
            return Failure::Retry(RemoteError::TimedOut {
                url: self.url.clone(),
                phase,
                limit,
                option,
                attempts: 1,
            });
        }
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
            ureq::Error::ConnectionFailed => true,
            _ => false,
        };
        let e = RemoteError::Transport {
            url: self.url_and_host(),
            attempts: 1,
            source: e,
        };
        if retry {
            Failure::Retry(e)
        } else {
            Failure::Fatal(e)
        }
    }

    pub(super) fn bad(&self, what: String) -> Failure {
        Failure::Fatal(RemoteError::BadResponse {
            url: self.url.clone(),
            what,
        })
    }

    /// [`RemoteError::Changed`] if the headers name another object than `v`.
    pub(super) fn check_same(&self, v: &Validators, h: &HeaderMap) -> Result<()> {
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

    /// The failure a response other than 206 means: for S3, a refusal or a
    /// missing object or bucket is read from the error answer's body.
    pub(super) fn failure(&self, resp: Response<Body>, v: Option<&Validators>) -> Failure {
        let code = resp.status().as_u16();
        if code == 401 {
            if let Some(a) = &self.auth {
                // A token expired: ask for a new one and try again.
                let e = RemoteError::Status {
                    url: self.url.clone(),
                    status: code,
                    attempts: 1,
                };
                return match a.refresh() {
                    true => Failure::Retry(e),
                    false => Failure::Fatal(e),
                };
            }
        }
        match &self.s3 {
            Some(t) if matches!(code, 400 | 401 | 403 | 404) => {
                let body = s3::read_small(resp.into_body().into_reader());
                Failure::Fatal(t.failure("GET", code, &body))
            }
            _ => self.status_failure(resp.status(), &resp, v),
        }
    }

    /// The failure a response other than 206 means. `v` is set when the
    /// object was opened: a 200 then answers an `If-Range` that no longer
    /// matches, or a Range the server ignored.
    pub(super) fn status_failure(
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
            408 | 429 | 500 | 502 | 503 | 504 => {
                let e = RemoteError::Status {
                    url,
                    status: code,
                    attempts: 1,
                };
                match header(resp.headers(), "retry-after")
                    .as_deref()
                    .and_then(retry_after)
                {
                    Some(d) => Failure::RetryAfter(e, d),
                    None => Failure::Retry(e),
                }
            }
            _ => Failure::Fatal(RemoteError::Status {
                url,
                status: code,
                attempts: 1,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn retry_after_takes_seconds_and_http_dates() {
        use std::time::Duration;
        assert_eq!(retry_after("1"), Some(Duration::from_secs(1)));
        assert_eq!(retry_after(" 120 "), Some(Duration::from_secs(120)));
        assert_eq!(
            retry_after("99999999999999999999999"),
            Some(Duration::from_secs(3600))
        );
        for bad in [
            "",
            "-1",
            "1.5",
            "0x10",
            "Wed, 21 Oct 2015 07:28 GMT",
            "21 Oct 2015",
        ] {
            assert_eq!(retry_after(bad), None, "{bad:?}");
        }
        // An HTTP-date: the time from now to then (none once past).
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        let at = |v| retry_after_at(v, now);
        assert_eq!(
            at("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::from_secs(10))
        );
        assert_eq!(at("Wed, 21 Oct 2015 07:27:00 GMT"), Some(Duration::ZERO));
        assert_eq!(
            at("Thu, 22 Oct 2015 07:28:00 GMT"),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(
            http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            http_date("Tue, 29 Feb 2028 12:00:00 GMT"),
            Some(1_835_438_400)
        );
    }

    use super::*;

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
