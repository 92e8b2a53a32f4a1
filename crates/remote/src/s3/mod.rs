//! Images in S3 object storage: an `s3://BUCKET/KEY` name resolved
//! ([`S3Options::resolve`]) into a [`Target`], the endpoint URL to request,
//! its addressing (path-style or virtual-hosted) and the SigV4 [`Signer`]
//! of its credentials. Reads go through the HTTP source, which signs each
//! request with the target; [`push`] uploads images.

pub mod creds;
pub mod push;
pub mod sigv4;
pub mod xml;

use std::io::Read;
use std::time::SystemTime;

pub use sigv4::{Credentials, Signer};

use crate::error::{Denied, RemoteError, Result};

/// How the bucket is named in requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addressing {
    /// `ENDPOINT/BUCKET/KEY` (the default with an endpoint given).
    Path,
    /// `BUCKET.ENDPOINT-HOST/KEY` (the default on AWS).
    Virtual,
}

/// What locates and signs S3 requests, as the command line gives it;
/// what is unset comes from the environment (`AWS_ENDPOINT_URL`,
/// `AWS_REGION`/`AWS_DEFAULT_REGION`, `AWS_PROFILE`, the credentials).
#[derive(Clone, Debug, Default)]
pub struct S3Options {
    /// `http(s)://HOST[:PORT]` of an S3-compatible store (default: AWS).
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// A profile of the shared credentials file, used over the
    /// environment's keys.
    pub profile: Option<String>,
    pub addressing: Option<Addressing>,
}

/// `s3://BUCKET/KEY` split: the bucket and the key (which may hold
/// slashes and any other character).
pub fn parse_url(url: &str) -> Result<(String, String)> {
    let bad = |why: &str| RemoteError::S3Url {
        url: url.to_owned(),
        why: why.to_owned(),
    };
    let rest = url
        .strip_prefix("s3://")
        .or_else(|| url.strip_prefix("S3://"))
        .ok_or_else(|| bad("not an s3:// URL"))?;
    let (bucket, key) = rest
        .split_once('/')
        .ok_or_else(|| bad("no key: expected s3://BUCKET/KEY"))?;
    if bucket.is_empty() {
        return Err(bad("no bucket: expected s3://BUCKET/KEY"));
    }
    if key.is_empty() {
        return Err(bad("no key: expected s3://BUCKET/KEY"));
    }
    let bucket_ok = bucket.len() <= 255
        && bucket
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !bucket_ok {
        return Err(bad("a bucket name is letters, digits, '-', '.' and '_'"));
    }
    if key.len() > 1024 {
        return Err(bad("a key is at most 1024 bytes"));
    }
    Ok((bucket.to_owned(), key.to_owned()))
}

/// An object in S3 and how to reach it.
#[derive(Clone, Debug)]
pub struct Target {
    pub bucket: String,
    pub key: String,
    /// `s3://BUCKET/KEY`, as messages name it.
    display: String,
    /// `http` or `https`.
    scheme: String,
    /// Host (and port) of the object's requests: the Host header signed.
    authority: String,
    /// The encoded path before the key: `/BUCKET` (path-style) or empty,
    /// after the endpoint's own path if it has one.
    bucket_path: String,
    signer: Signer,
}

/// Default ports are left out of the Host header (as HTTP clients send it).
fn authority_of(scheme: &str, hostport: &str) -> String {
    let default = if scheme == "https" { ":443" } else { ":80" };
    hostport
        .strip_suffix(default)
        .unwrap_or(hostport)
        .to_owned()
}

impl S3Options {
    /// The target `url` (`s3://BUCKET/KEY`) names, with its credentials
    /// and region: errors for a bad URL or endpoint, a missing region
    /// (none given, in the environment, and no endpoint) and missing
    /// credentials.
    pub fn resolve(&self, url: &str) -> Result<Target> {
        self.resolve_with(url, &creds::process_env)
    }

    /// [`S3Options::resolve`] with the environment `env`.
    pub fn resolve_with(&self, url: &str, env: creds::Env) -> Result<Target> {
        let (bucket, key) = parse_url(url)?;
        let endpoint = self
            .endpoint
            .clone()
            .or_else(|| env("AWS_ENDPOINT_URL_S3"))
            .or_else(|| env("AWS_ENDPOINT_URL"));
        let region = self
            .region
            .clone()
            .or_else(|| env("AWS_REGION"))
            .or_else(|| env("AWS_DEFAULT_REGION"));
        let region = match (region, &endpoint) {
            (Some(r), _) => r,
            // S3-compatible stores take any region; us-east-1 is theirs.
            (None, Some(_)) => "us-east-1".to_owned(),
            (None, None) => {
                return Err(RemoteError::S3NoRegion {
                    url: url.to_owned(),
                })
            }
        };
        if region.is_empty()
            || !region
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(RemoteError::S3Url {
                url: url.to_owned(),
                why: format!("invalid region {region:?}"),
            });
        }
        let addressing = self.addressing.unwrap_or(if endpoint.is_some() {
            Addressing::Path
        } else {
            Addressing::Virtual
        });
        let endpoint = endpoint.unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
        let bad_endpoint = |why: &str| RemoteError::S3Url {
            url: url.to_owned(),
            why: format!("endpoint {endpoint:?}: {why}"),
        };
        let (scheme, rest) = endpoint
            .split_once("://")
            .ok_or_else(|| bad_endpoint("expected http://HOST[:PORT] or https://…"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(bad_endpoint("only http and https endpoints"));
        }
        let (hostport, base) = match rest.split_once('/') {
            Some((h, p)) => (h, p.trim_end_matches('/')),
            None => (rest, ""),
        };
        if hostport.is_empty()
            || hostport.contains(['@', '?', '#', ' '])
            || base.contains(['?', '#'])
        {
            return Err(bad_endpoint("expected http://HOST[:PORT] or https://…"));
        }
        let base = if base.is_empty() {
            String::new()
        } else {
            format!("/{}", sigv4::uri_encode(base, true))
        };
        let (authority, bucket_path) = match addressing {
            Addressing::Path => (
                authority_of(&scheme, hostport),
                format!("{base}/{}", sigv4::uri_encode(&bucket, false)),
            ),
            Addressing::Virtual => {
                if bucket.contains(['.', '_']) || bucket.bytes().any(|b| b.is_ascii_uppercase()) {
                    return Err(RemoteError::S3Url {
                        url: url.to_owned(),
                        why: "virtual-hosted addressing needs a bucket name that is a DNS label \
                              (lower case, no '.' or '_'): use --s3-addressing path"
                            .into(),
                    });
                }
                (authority_of(&scheme, &format!("{bucket}.{hostport}")), base)
            }
        };
        let creds = creds::lookup(self.profile.as_deref(), env, url)?;
        Ok(Target {
            display: format!("s3://{bucket}/{key}"),
            bucket,
            key,
            scheme,
            authority,
            bucket_path,
            signer: Signer {
                creds,
                region,
                service: "s3".into(),
            },
        })
    }
}

/// What an S3 request answered: status, headers we read, bounded body.
pub struct Answer {
    pub status: u16,
    pub etag: Option<String>,
    pub body: String,
}

impl Target {
    /// `s3://BUCKET/KEY`.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// The encoded path of the object.
    pub fn object_path(&self) -> String {
        format!(
            "{}/{}",
            self.bucket_path,
            sigv4::uri_encode(&self.key, true)
        )
    }

    /// The encoded path of the bucket (`/` when virtual-hosted).
    pub fn bucket_path(&self) -> String {
        if self.bucket_path.is_empty() {
            "/".to_owned()
        } else {
            self.bucket_path.clone()
        }
    }

    /// The URL of `path` with `query` (encoded as signed).
    pub fn url(&self, path: &str, query: &[(&str, &str)]) -> String {
        let q = sigv4::canonical_query(query);
        let sep = if q.is_empty() { "" } else { "?" };
        format!("{}://{}{path}{sep}{q}", self.scheme, self.authority)
    }

    /// The URL of the object.
    pub fn object_url(&self) -> String {
        self.url(&self.object_path(), &[])
    }

    /// The headers that sign `method` on `path` with `query` and a
    /// payload of hash `payload_hash`, now.
    pub fn sign(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        payload_hash: &str,
    ) -> Vec<(&'static str, String)> {
        let date = sigv4::amz_date(SystemTime::now());
        self.signer
            .s3_headers(method, &self.authority, path, query, payload_hash, &date)
    }

    /// The error an S3 answer other than success means (`what` names the
    /// operation, for the generic case), from its status and XML body.
    pub fn failure(&self, what: &str, status: u16, body: &str) -> RemoteError {
        let code = xml::first(body, "Code");
        let message = xml::first(body, "Message").map(|m| clean(&m));
        let url = self.display.clone();
        let token_code = matches!(
            code.as_deref(),
            Some("ExpiredToken" | "InvalidToken" | "TokenRefreshRequired")
        );
        match status {
            401 | 403 => RemoteError::S3Denied(Box::new(Denied {
                url,
                bucket: self.bucket.clone(),
                key: self.key.clone(),
                status,
                why: refusal(code.as_deref(), self.signer.creds.has_session_token()),
                code,
            })),
            400 if token_code => RemoteError::S3Denied(Box::new(Denied {
                url,
                bucket: self.bucket.clone(),
                key: self.key.clone(),
                status,
                why: refusal(code.as_deref(), true),
                code,
            })),
            404 => RemoteError::S3NotFound {
                url,
                what: match code.as_deref() {
                    Some("NoSuchBucket") => format!("no bucket {:?}", self.bucket),
                    Some("NoSuchUpload") => "the multipart upload is gone".to_owned(),
                    _ => format!("no object {:?} in bucket {:?}", self.key, self.bucket),
                },
                code,
            },
            _ => RemoteError::S3Status {
                url,
                what: what.to_owned(),
                status,
                code,
                message,
            },
        }
    }
}

/// Why S3 refused a request, from its error code.
fn refusal(code: Option<&str>, token: bool) -> String {
    match code {
        Some("SignatureDoesNotMatch") => {
            "the secret access key does not match the access key id (SignatureDoesNotMatch)".into()
        }
        Some("InvalidAccessKeyId") => {
            "the access key id is unknown to the server (InvalidAccessKeyId)".into()
        }
        Some("ExpiredToken") => "the session token has expired (ExpiredToken)".into(),
        Some("InvalidToken") => "the session token is not valid (InvalidToken)".into(),
        Some("TokenRefreshRequired") => {
            "the session token must be refreshed (TokenRefreshRequired)".into()
        }
        Some("AccessDenied") => format!(
            "these credentials{} may not do this (AccessDenied)",
            if token {
                " (with their session token)"
            } else {
                ""
            }
        ),
        Some(c) => format!("the credentials were refused ({c})"),
        None => "the credentials were refused".into(),
    }
}

/// A server's message for ours: printable, at most 200 characters.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect()
}

/// Reads at most [`xml::MAX_BODY`] bytes of `r` as (lossy) text.
pub(crate) fn read_small(r: impl Read) -> String {
    let mut buf = Vec::new();
    let _ = r.take(xml::MAX_BODY).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(n: &str) -> Option<String> {
        match n {
            "AWS_ACCESS_KEY_ID" => Some("AK".into()),
            "AWS_SECRET_ACCESS_KEY" => Some("SK".into()),
            _ => None,
        }
    }

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("s3://b/dir/my image.erofs").unwrap(),
            ("b".into(), "dir/my image.erofs".into())
        );
        assert_eq!(parse_url("s3://b/a//b/").unwrap().1, "a//b/");
        for bad in [
            "s3://b",
            "s3://b/",
            "s3:///k",
            "http://b/k",
            "s3://b?x/k",
            "s3://b b/k",
        ] {
            assert!(
                matches!(parse_url(bad), Err(RemoteError::S3Url { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn addressing() {
        let o = S3Options {
            endpoint: Some("http://127.0.0.1:8333".into()),
            ..S3Options::default()
        };
        let t = o.resolve_with("s3://bk/dir/a b+c.img", &env).unwrap();
        assert_eq!(t.object_url(), "http://127.0.0.1:8333/bk/dir/a%20b%2Bc.img");
        assert_eq!(t.authority, "127.0.0.1:8333");
        assert_eq!(t.signer.region, "us-east-1");
        assert_eq!(t.bucket_path(), "/bk");
        assert_eq!(
            t.url(&t.bucket_path(), &[("uploads", ""), ("prefix", "a b")]),
            "http://127.0.0.1:8333/bk?prefix=a%20b&uploads="
        );
        let v = S3Options {
            addressing: Some(Addressing::Virtual),
            endpoint: Some("https://store.example:443/".into()),
            ..o.clone()
        };
        let t = v.resolve_with("s3://bk/k", &env).unwrap();
        assert_eq!(t.object_url(), "https://bk.store.example/k");
        assert_eq!(t.bucket_path(), "/");
        // AWS: virtual-hosted in the region's endpoint.
        let aws = S3Options {
            region: Some("eu-west-1".into()),
            ..S3Options::default()
        };
        let t = aws.resolve_with("s3://bk/k", &env).unwrap();
        assert_eq!(t.object_url(), "https://bk.s3.eu-west-1.amazonaws.com/k");
        let t = S3Options {
            addressing: Some(Addressing::Path),
            ..aws
        }
        .resolve_with("s3://bk/k", &env)
        .unwrap();
        assert_eq!(t.object_url(), "https://s3.eu-west-1.amazonaws.com/bk/k");
        assert!(matches!(
            S3Options::default().resolve_with("s3://bk/k", &env),
            Err(RemoteError::S3NoRegion { .. })
        ));
        assert!(matches!(
            S3Options {
                addressing: Some(Addressing::Virtual),
                ..o.clone()
            }
            .resolve_with("s3://b.k/k", &env),
            Err(RemoteError::S3Url { .. })
        ));
        assert!(matches!(
            S3Options {
                endpoint: Some("ftp://x".into()),
                ..S3Options::default()
            }
            .resolve_with("s3://b/k", &env),
            Err(RemoteError::S3Url { .. })
        ));
        // The region from the environment.
        let env_region = |n: &str| match n {
            "AWS_DEFAULT_REGION" => Some("ap-south-1".into()),
            _ => env(n),
        };
        let t = S3Options::default()
            .resolve_with("s3://bk/k", &env_region)
            .unwrap();
        assert_eq!(t.signer.region, "ap-south-1");
        assert!(!format!("{t:?}").contains("SK\""));
    }

    #[test]
    fn failures() {
        let o = S3Options {
            endpoint: Some("http://h".into()),
            ..S3Options::default()
        };
        let t = o.resolve_with("s3://bk/k", &env).unwrap();
        let body = |c: &str| format!("<Error><Code>{c}</Code><Message>m</Message></Error>");
        let e = t.failure("GET", 403, &body("SignatureDoesNotMatch"));
        assert!(e.to_string().contains("SignatureDoesNotMatch"), "{e}");
        assert!(e.to_string().contains("bucket \"bk\""), "{e}");
        let e = t.failure("GET", 400, &body("ExpiredToken"));
        assert!(matches!(e, RemoteError::S3Denied { .. }), "{e}");
        let e = t.failure("GET", 404, &body("NoSuchBucket"));
        assert!(e.to_string().contains("no bucket \"bk\""), "{e}");
        let e = t.failure("GET", 404, "");
        assert!(e.to_string().contains("no object \"k\""), "{e}");
        let e = t.failure("PUT", 409, &body("BucketAlreadyExists"));
        assert!(
            matches!(e, RemoteError::S3Status { status: 409, .. }),
            "{e}"
        );
    }
}
