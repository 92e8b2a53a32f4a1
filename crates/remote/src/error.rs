//! What can go wrong reading an image over HTTP or S3 (or pushing one to
//! S3), each case naming the URL.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::http::secs;

/// ` (after N attempts)` when there were several.
fn after(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}

/// An error of the remote source. Converted into an [`io::Error`] (whose
/// message is this one's) where the reader asks for one.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// Not an `http://` or `https://` URL.
    #[error("{url}: unsupported URL scheme {scheme:?} (only http and https are read)")]
    UnsupportedScheme { url: String, scheme: String },
    /// The server answered a range request with the whole object.
    #[error(
        "{url}: the server does not support range requests (it answered HTTP {status} with the \
         whole object{}): serve the image with one that does (nginx, any S3-compatible store), \
         or allow a whole download",
        len.map(|l| format!(", {l} bytes")).unwrap_or_default()
    )]
    NoRangeSupport {
        url: String,
        status: u16,
        len: Option<u64>,
    },
    /// A server without range requests, and an image larger than the
    /// cache that would have to hold it whole.
    #[error(
        "{url}: the server does not support range requests, and the image ({len} bytes) is \
         larger than the cache ({limit} bytes, --cache-dir-size) it would be downloaded into"
    )]
    TooLargeForWholeDownload { url: String, len: u64, limit: u64 },
    /// HTTP 404 (or 410).
    #[error("{url}: not found (HTTP {status})")]
    NotFound { url: String, status: u16 },
    /// Any other status that is neither success nor worth a retry, or a
    /// transient one that persisted through every retry.
    #[error("{url}: HTTP {status}{}", if *attempts > 1 { format!(" (after {attempts} attempts)") } else { String::new() })]
    Status {
        url: String,
        status: u16,
        attempts: u32,
    },
    /// The object is not the one opened: another ETag, Last-Modified or
    /// length. Nothing of the new object is returned.
    #[error("{url}: the object changed since it was opened ({what} was {was}, now {now})")]
    Changed {
        url: String,
        what: &'static str,
        was: String,
        now: String,
    },
    /// The body ended before the bytes the response announced.
    #[error(
        "{url}: truncated response for bytes {start}..{end}: got {got} of {} bytes (after {attempts} attempts)",
        end - start
    )]
    Truncated {
        url: String,
        start: u64,
        end: u64,
        got: u64,
        attempts: u32,
    },
    /// A response that contradicts the request (wrong Content-Range,
    /// missing headers).
    #[error("{url}: bad response: {what}")]
    BadResponse { url: String, what: String },
    /// The connection failed (after every retry, when transient).
    #[error("{url}: {source}{}", if *attempts > 1 { format!(" (after {attempts} attempts)") } else { String::new() })]
    Transport {
        url: String,
        attempts: u32,
        #[source]
        source: ureq::Error,
    },
    /// The server kept us waiting past a limit: `phase` says for what
    /// (connecting, the response headers, body bytes), `limit` and
    /// `option` which limit (the per-request timeout or the deadline).
    #[error("{url}: timed out {phase} (limit {}, {option}){}", secs(*limit), after(*attempts))]
    TimedOut {
        url: String,
        phase: &'static str,
        limit: Duration,
        option: &'static str,
        attempts: u32,
    },
    /// The body arrived slower than the low-speed limit: `bytes` in
    /// `elapsed`, a window of at least `window`.
    #[error(
        "{url}: transfer too slow receiving bytes {start}..{end}: {bytes} bytes in {}, below \
         the limit of {limit} bytes/s over {} (--http-speed-limit, --http-speed-time){}",
        secs(*elapsed), secs(*window), after(*attempts)
    )]
    TooSlow {
        url: String,
        start: u64,
        end: u64,
        bytes: u64,
        elapsed: Duration,
        limit: u64,
        window: Duration,
        attempts: u32,
    },
    /// The deadline left no time for another attempt after `last`.
    #[error("{last}; gave up at the {} deadline (--http-deadline)", secs(*deadline))]
    GaveUp {
        deadline: Duration,
        last: Box<RemoteError>,
    },
    /// A request of this source timed out or was too slow a moment ago:
    /// the server is not asked again until a deadline has passed since
    /// (so a dead server fails a run's reads at once, not one deadline
    /// each).
    #[error("{url}: not asked again for {}, the server failed to answer a moment ago: {why}", secs(*left))]
    Unresponsive {
        url: String,
        /// The failure, without the URL.
        why: String,
        /// Until the server is asked again.
        left: Duration,
    },
    /// A malformed `s3://BUCKET/KEY`, endpoint or region.
    #[error("{url}: {why}")]
    S3Url { url: String, why: String },
    /// No region given (`--s3-region`, `AWS_REGION`, `AWS_DEFAULT_REGION`)
    /// and no endpoint to default one for.
    #[error(
        "{url}: no S3 region: give --s3-region or set AWS_REGION (or an endpoint with \
         --s3-endpoint / AWS_ENDPOINT_URL)"
    )]
    S3NoRegion { url: String },
    /// No credentials found; `looked` says where.
    #[error("{url}: no S3 credentials: {looked}")]
    S3NoCredentials { url: String, looked: String },
    /// The shared credentials file could not be read or parsed (`why`
    /// never quotes a value).
    #[error("S3 credentials file {}: {why}", path.display())]
    S3CredentialsFile { path: PathBuf, why: String },
    /// HTTP 401/403 (or 400 for a session token): the credentials were
    /// refused.
    #[error("{0}")]
    S3Denied(Box<Denied>),
    /// HTTP 404: `what` says which of bucket and key is missing.
    #[error("{url}: not found: {what}{}", code.as_ref().map(|c| format!(" ({c})")).unwrap_or_default())]
    S3NotFound {
        url: String,
        what: String,
        code: Option<String>,
    },
    /// Another error answer of S3 to the operation `what`.
    #[error(
        "{url}: {what}: HTTP {status}{}{}",
        code.as_ref().map(|c| format!(" {c}")).unwrap_or_default(),
        message.as_ref().map(|m| format!(": {m}")).unwrap_or_default()
    )]
    S3Status {
        url: String,
        what: String,
        status: u16,
        code: Option<String>,
        message: Option<String>,
    },
    /// The image to upload could not be read.
    #[error("{url}: reading bytes {start}..{end} of the image to upload: {source}")]
    ImageRead {
        url: String,
        start: u64,
        end: u64,
        #[source]
        source: io::Error,
    },
    /// An upload stopped by a signal (after it was aborted).
    #[error("{url}: upload interrupted")]
    Interrupted { url: String },
    /// A registry reference, manifest or blob that cannot be used:
    /// `why` says what is wrong with it.
    #[error("{reference}: {why}")]
    Registry { reference: String, why: String },
    /// A registry refused access (HTTP 401/403, a token service's
    /// refusal); `why` never quotes a secret.
    #[error("{what}: access refused (HTTP {status}): {why}")]
    RegistryDenied {
        what: String,
        status: u16,
        why: String,
    },
    /// A credentials file (`auth.json`, docker's `config.json`) could
    /// not be read or used; `why` never quotes a value.
    #[error("registry credentials file {}: {why}", path.display())]
    AuthFile { path: PathBuf, why: String },
    /// The connection broke while a body was being read.
    #[error("{url}: the answer broke off after {got} of {size} bytes: {source}")]
    BodyBroken {
        url: String,
        got: u64,
        size: u64,
        #[source]
        source: io::Error,
    },
    /// The on-disk cache could not be set up.
    #[error("cache directory {}: {source}", path.display())]
    Cache {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl From<RemoteError> for io::Error {
    fn from(e: RemoteError) -> Self {
        let kind = match &e {
            RemoteError::NotFound { .. } | RemoteError::S3NotFound { .. } => {
                io::ErrorKind::NotFound
            }
            RemoteError::S3Denied { .. } | RemoteError::RegistryDenied { .. } => {
                io::ErrorKind::PermissionDenied
            }
            RemoteError::UnsupportedScheme { .. } => io::ErrorKind::Unsupported,
            RemoteError::TimedOut { .. }
            | RemoteError::TooSlow { .. }
            | RemoteError::Unresponsive { .. } => io::ErrorKind::TimedOut,
            RemoteError::GaveUp { last, .. } => match **last {
                RemoteError::TimedOut { .. } | RemoteError::TooSlow { .. } => {
                    io::ErrorKind::TimedOut
                }
                _ => io::ErrorKind::Other,
            },
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

impl RemoteError {
    /// Whether the server failed to answer in time (a timeout or the
    /// low-speed limit, after every attempt allowed).
    pub fn is_unresponsive(&self) -> bool {
        match self {
            RemoteError::TimedOut { .. }
            | RemoteError::TooSlow { .. }
            | RemoteError::Unresponsive { .. } => true,
            RemoteError::GaveUp { last, .. } => last.is_unresponsive(),
            _ => false,
        }
    }
}

/// S3 refused a request's credentials: `why` says how, from S3's error
/// code.
#[derive(Debug, thiserror::Error)]
#[error("{url}: access to bucket {bucket:?}, key {key:?} refused (HTTP {status}): {why}")]
pub struct Denied {
    pub url: String,
    pub bucket: String,
    pub key: String,
    pub status: u16,
    pub code: Option<String>,
    pub why: String,
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, RemoteError>;
