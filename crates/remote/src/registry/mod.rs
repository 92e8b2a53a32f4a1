//! OCI registries (the distribution spec 1.1) as skopeo and podman reach
//! them, `docker://HOST/REPO[:TAG|@DIGEST]`: anonymous, HTTP Basic and
//! Bearer-token access with credentials from the usual files
//! ([`auth`]), manifests and indexes with a platform chosen
//! ([`manifest`]), blobs streamed to files with their digest and size
//! checked ([`pull`]), and uploads that never move a tag before every
//! blob is in place ([`push`]).
//!
//! Every request is retried on 429, 5xx and broken connections with a
//! doubling backoff that honours `Retry-After`, within the HTTP source's
//! timeouts and deadline; redirects (registries hand out presigned
//! storage URLs) are followed without the registry's credentials; plain
//! HTTP is used only for this machine and the hosts named insecure.

pub mod auth;
pub mod blob;
pub mod manifest;
pub mod pull;
pub mod push;
pub mod reference;
mod token;

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use ureq::http::{Response, StatusCode};
use ureq::tls::TlsConfig;
use ureq::{Agent, Body};

use crate::error::{RemoteError, Result};
use crate::http::{retry_after, HttpOptions};
use crate::tls;

pub use auth::Credentials;
pub use manifest::Platform;
pub use reference::Reference;

/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 5;

/// How to reach registries.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// Timeouts, retries and the deadline of each request.
    pub http: HttpOptions,
    /// Hosts (`HOST[:PORT]`, as references name them) reached over plain
    /// HTTP; `localhost` and loopback addresses always are.
    pub insecure: Vec<String>,
    /// The one credentials file to read (default: the files
    /// [`auth::auth_files`] lists).
    pub auth_file: Option<PathBuf>,
}

/// The body of a request.
#[derive(Clone, Copy)]
pub(crate) enum Payload<'a> {
    Empty,
    Bytes(&'a [u8]),
    /// `len` bytes of the file at `path` from `start`.
    File {
        path: &'a Path,
        start: u64,
        len: u64,
    },
}

/// A connection to one registry, for one repository's scopes at a time.
pub struct Registry {
    agent: Agent,
    /// `http://HOST` or `https://HOST`.
    base: String,
    /// The API host, to which alone credentials are sent.
    host: String,
    /// The registry as references name it (for messages).
    name: String,
    creds: Option<Credentials>,
    /// `Authorization` values by scope set, once a challenge was met.
    tokens: Mutex<HashMap<String, String>>,
    insecure: Vec<String>,
    opts: HttpOptions,
}

/// A response and the URL that gave it (after redirects).
pub(crate) struct Answer {
    pub(crate) resp: Response<Body>,
    pub(crate) url: String,
}

impl Registry {
    /// A client for the registry of `r`, with the credentials found for
    /// its repository.
    pub fn connect(r: &Reference, opts: &RegistryOptions) -> Result<Registry> {
        let files = auth::auth_files(opts.auth_file.as_deref());
        let creds = auth::find(&files, &r.registry, &r.repository)?;
        let plain = r.is_local() || opts.insecure.iter().any(|h| h == &r.registry);
        let host = r.api_host().to_owned();
        let base = format!("{}://{host}", if plain { "http" } else { "https" });
        let http = &opts.http;
        let agent: Agent = Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_connect(Some(http.timeout))
            .timeout_recv_response(Some(http.timeout))
            .timeout_per_read(Some(http.timeout))
            .user_agent(concat!("ferrofs/", env!("CARGO_PKG_VERSION")))
            .tls_config(TlsConfig::builder().root_certs(tls::roots()).build())
            .build()
            .into();
        Ok(Registry {
            agent,
            base,
            host,
            name: r.registry.clone(),
            creds,
            tokens: Mutex::new(HashMap::new()),
            insecure: opts.insecure.clone(),
            opts: opts.http.clone(),
        })
    }

    /// Whether credentials were found for it.
    pub fn has_credentials(&self) -> bool {
        self.creds.is_some()
    }

    /// The registry's name, as references write it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `BASE/v2/REPO/KIND/REF`.
    pub(crate) fn url(&self, repo: &str, kind: &str, reference: &str) -> String {
        format!("{}/v2/{repo}/{kind}/{reference}", self.base)
    }

    /// A URL the registry gave (a `Location`), made absolute against
    /// `from`.
    pub(crate) fn absolute(&self, from: &str, location: &str) -> String {
        if crate::http::scheme(location).is_some() {
            return location.to_owned();
        }
        let origin_end = from
            .split_once("://")
            .map(|(s, rest)| s.len() + 3 + rest.find('/').unwrap_or(rest.len()))
            .unwrap_or(0);
        let origin = from.get(..origin_end).unwrap_or(&self.base);
        if location.starts_with('/') {
            format!("{origin}{location}")
        } else {
            let dir = from
                .rfind('/')
                .map_or(from, |i| from.get(..=i).unwrap_or(from));
            format!("{dir}{location}")
        }
    }

    fn host_of(url: &str) -> &str {
        url.split_once("://")
            .map(|(_, r)| r.split(['/', '?']).next().unwrap_or(r))
            .unwrap_or("")
    }

    /// Whether a plain-HTTP URL may carry credentials: only to this
    /// machine or a host named insecure.
    fn plain_ok(&self, url: &str) -> bool {
        let host = Self::host_of(url);
        let name = host.split(':').next().unwrap_or(host);
        matches!(name, "localhost" | "127.0.0.1")
            || host.starts_with("[::1]")
            || self.insecure.iter().any(|h| h == host)
    }

    /// Sends a request, with authentication, redirects and retries.
    /// `scopes` are the token scopes it needs; `what` names it in errors.
    /// Statuses other than 401, 429, 5xx and redirects are returned for
    /// the caller to judge.
    pub(crate) fn send(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Payload<'_>,
        scopes: &[String],
        what: &str,
    ) -> Result<Answer> {
        let started = Instant::now();
        let attempts = self.opts.attempts.max(1);
        let mut backoff = self.opts.backoff;
        let mut n: u32 = 0;
        let mut authed = false;
        loop {
            n = n.saturating_add(1);
            let failure = match self.attempt(method, url, headers, body, scopes, what)? {
                Step::Done(a) => return Ok(a),
                Step::Challenge(c) if !authed => {
                    authed = true;
                    self.authenticate(&c, scopes, what)?;
                    n = n.saturating_sub(1);
                    continue;
                }
                Step::Challenge(_) => {
                    return Err(RemoteError::RegistryDenied {
                        what: what.to_owned(),
                        status: 401,
                        why: if self.creds.is_some() {
                            "the credentials found were refused".to_owned()
                        } else {
                            "authentication required and no credentials found (docker login, or \
                             --authfile)"
                                .to_owned()
                        },
                    });
                }
                Step::Retry(e, after) => (e, after),
            };
            let (err, after) = failure;
            let wait = after.map_or(backoff, |a| a.max(backoff));
            if n >= attempts || started.elapsed().saturating_add(wait) > self.opts.deadline {
                return Err(err);
            }
            std::thread::sleep(wait);
            backoff = backoff.saturating_mul(2);
        }
    }

    /// One attempt, following redirects.
    fn attempt(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Payload<'_>,
        scopes: &[String],
        what: &str,
    ) -> Result<Step> {
        let mut target = url.to_owned();
        let mut method = method.to_owned();
        let mut body = body;
        for _ in 0..=MAX_REDIRECTS {
            let to_registry = Self::host_of(&target) == self.host;
            let mut b = ureq::http::Request::builder()
                .method(method.as_str())
                .uri(&target);
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            if to_registry {
                if let Some(a) = self.auth_header(scopes) {
                    b = b.header("authorization", a);
                }
            }
            let sent = match body {
                Payload::Empty if method == "GET" || method == "HEAD" => {
                    b.body(()).map(|r| self.agent.run(r))
                }
                Payload::Empty => b
                    .header("content-length", "0")
                    .body(ureq::SendBody::none())
                    .map(|r| self.agent.run(r)),
                Payload::Bytes(data) => b
                    .header("content-length", data.len())
                    .body(data)
                    .map(|r| self.agent.run(r)),
                Payload::File { path, start, len } => {
                    let mut f = std::fs::File::open(path).map_err(|e| RemoteError::ImageRead {
                        url: target.clone(),
                        start,
                        end: start.saturating_add(len),
                        source: e,
                    })?;
                    f.seek(SeekFrom::Start(start))
                        .map_err(|e| RemoteError::ImageRead {
                            url: target.clone(),
                            start,
                            end: start.saturating_add(len),
                            source: e,
                        })?;
                    let mut r = std::io::BufReader::with_capacity(1 << 20, f.take(len));
                    b.header("content-length", len)
                        .body(ureq::SendBody::from_reader(&mut r))
                        .map(|r| self.agent.run(r))
                }
            };
            let resp = match sent {
                Err(e) => {
                    return Err(RemoteError::BadResponse {
                        url: target,
                        what: format!("cannot build the {method} request: {e}"),
                    })
                }
                Ok(Err(e)) => {
                    return Ok(Step::Retry(
                        RemoteError::Transport {
                            url: target,
                            attempts: 1,
                            source: e,
                        },
                        None,
                    ))
                }
                Ok(Ok(r)) => r,
            };
            let status = resp.status();
            if status.is_redirection() && status != StatusCode::NOT_MODIFIED {
                let Some(loc) = resp.headers().get("location").and_then(|v| v.to_str().ok()) else {
                    return Err(RemoteError::BadResponse {
                        url: target,
                        what: format!("HTTP {} without a Location", status.as_u16()),
                    });
                };
                target = self.absolute(&target, loc);
                if status == StatusCode::SEE_OTHER {
                    method = "GET".to_owned();
                    body = Payload::Empty;
                }
                continue;
            }
            if status == StatusCode::UNAUTHORIZED && to_registry {
                let c = resp
                    .headers()
                    .get_all("www-authenticate")
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .find_map(auth::parse_challenge);
                return match c {
                    Some(c) => Ok(Step::Challenge(c)),
                    None => Err(RemoteError::RegistryDenied {
                        what: what.to_owned(),
                        status: 401,
                        why: "no Basic or Bearer challenge in the answer".to_owned(),
                    }),
                };
            }
            let s = status.as_u16();
            if s == 429 || matches!(s, 500 | 502 | 503 | 504) {
                let after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(retry_after);
                return Ok(Step::Retry(
                    RemoteError::Status {
                        url: target,
                        status: s,
                        attempts: 1,
                    },
                    after,
                ));
            }
            return Ok(Step::Done(Answer { resp, url: target }));
        }
        Err(RemoteError::BadResponse {
            url: url.to_owned(),
            what: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    fn scope_key(scopes: &[String]) -> String {
        scopes.join(" ")
    }

    fn auth_header(&self, scopes: &[String]) -> Option<String> {
        let tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        tokens
            .get(&Self::scope_key(scopes))
            .or_else(|| tokens.get("*basic*"))
            .cloned()
    }

    /// Forgets the tokens (the next request meets its challenge again).
    pub fn forget_tokens(&self) {
        self.tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The options requests run with.
    pub fn http_options(&self) -> &HttpOptions {
        &self.opts
    }
}

/// What one attempt came to.
enum Step {
    Done(Answer),
    Challenge(auth::Challenge),
    Retry(RemoteError, Option<Duration>),
}

/// `application/x-www-form-urlencoded` of `pairs` (also a URL's query).
pub(crate) fn form_encode(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        let mut o = String::new();
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                o.push(char::from(b));
            } else {
                o.push_str(&format!("%{b:02X}"));
            }
        }
        o
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Reads a body of at most `cap` bytes (a larger one is an error).
pub(crate) fn read_capped(body: &mut Body, cap: u64, url: &str) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    body.as_reader()
        .take(cap.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(|e| RemoteError::BadResponse {
            url: url.to_owned(),
            what: format!("reading the answer: {e}"),
        })?;
    if data.len() as u64 > cap {
        return Err(RemoteError::BadResponse {
            url: url.to_owned(),
            what: format!("answer larger than {cap} bytes"),
        });
    }
    Ok(data)
}

/// The pull scope of `repo`.
pub fn pull_scope(repo: &str) -> String {
    format!("repository:{repo}:pull")
}

/// The push scope of `repo`.
pub fn push_scope(repo: &str) -> String {
    format!("repository:{repo}:pull,push")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_made_absolute() {
        let r = Registry::connect(
            &Reference::parse("localhost:5000/a").unwrap(),
            &RegistryOptions {
                auth_file: Some(PathBuf::from("/nonexistent/auth.json")),
                ..Default::default()
            },
        )
        .unwrap();
        let from = "http://localhost:5000/v2/a/blobs/uploads/";
        assert_eq!(
            r.absolute(from, "/v2/a/blobs/uploads/u1?x=1"),
            "http://localhost:5000/v2/a/blobs/uploads/u1?x=1"
        );
        assert_eq!(
            r.absolute(from, "u2"),
            "http://localhost:5000/v2/a/blobs/uploads/u2"
        );
        assert_eq!(r.absolute(from, "https://s3/x"), "https://s3/x");
        assert_eq!(Registry::host_of("https://h:1/p?q"), "h:1");
        assert!(r.plain_ok("http://localhost:5000/x"));
        assert!(!r.plain_ok("http://example.com/x"));
        assert_eq!(
            form_encode(&[("scope", "repository:a/b:pull,push")]),
            "scope=repository%3Aa%2Fb%3Apull%2Cpush"
        );
    }
}
