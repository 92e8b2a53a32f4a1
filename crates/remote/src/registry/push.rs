//! Writing to a registry: blobs (skipped when the repository has them,
//! mounted from another repository of the same registry when it has
//! them, else uploaded in one request or in chunks) and manifests, which
//! the caller puts last so that a failed push moves no tag.

use std::path::Path;

use super::{pull_scope, push_scope, Payload, Reference, Registry};
use crate::error::{RemoteError, Result};

/// Blobs up to this size go in one PUT; larger ones in PATCH chunks of
/// this size.
pub const CHUNK: u64 = 64 << 20;

/// How a blob reached the repository.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// It was there already.
    Present,
    /// Mounted from another repository of the registry.
    Mounted,
    /// Uploaded.
    Uploaded,
}

fn status_error(url: String, status: u16) -> RemoteError {
    RemoteError::Status {
        url,
        status,
        attempts: 1,
    }
}

impl Registry {
    /// Whether `r`'s repository has blob `digest`.
    pub fn blob_exists(&self, r: &Reference, digest: &str) -> Result<bool> {
        let url = self.url(&r.repository, "blobs", digest);
        let a = self.send(
            "HEAD",
            &url,
            &[],
            Payload::Empty,
            &[push_scope(&r.repository)],
            &format!("{r} blob {digest}"),
        )?;
        match a.resp.status().as_u16() {
            200 => Ok(true),
            404 => Ok(false),
            s @ (401 | 403) => Err(RemoteError::RegistryDenied {
                what: r.to_string(),
                status: s,
                why: "push access refused".to_owned(),
            }),
            s => Err(status_error(a.url, s)),
        }
    }

    /// Puts the blob at `path` (`size` bytes, digest `digest`) into `r`'s
    /// repository, unless it is there; `mount_from` names another
    /// repository of the registry that may have it.
    pub fn push_blob(
        &self,
        r: &Reference,
        digest: &str,
        path: &Path,
        size: u64,
        mount_from: Option<&str>,
    ) -> Result<Sent> {
        if self.blob_exists(r, digest)? {
            return Ok(Sent::Present);
        }
        let what = format!("{r} blob {digest}");
        let mut scopes = vec![push_scope(&r.repository)];
        let mut start = format!("{}/v2/{}/blobs/uploads/", self.base, r.repository);
        if let Some(from) = mount_from.filter(|f| *f != r.repository) {
            scopes.push(pull_scope(from));
            start = format!(
                "{start}?{}",
                super::form_encode(&[("mount", digest), ("from", from)])
            );
        }
        let a = self.send("POST", &start, &[], Payload::Empty, &scopes, &what)?;
        let location = match a.resp.status().as_u16() {
            201 if mount_from.is_some() => return Ok(Sent::Mounted),
            202 => a
                .resp
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(|l| self.absolute(&a.url, l))
                .ok_or_else(|| RemoteError::BadResponse {
                    url: a.url.clone(),
                    what: "an upload started without a Location".to_owned(),
                })?,
            s @ (401 | 403) => {
                return Err(RemoteError::RegistryDenied {
                    what,
                    status: s,
                    why: "push access refused".to_owned(),
                })
            }
            s => return Err(status_error(a.url, s)),
        };
        let mut location = location;
        let mut sent: u64 = 0;
        if size > CHUNK {
            while sent < size {
                let len = CHUNK.min(size.saturating_sub(sent));
                let end = sent.saturating_add(len).saturating_sub(1);
                let range = format!("{sent}-{end}");
                let a = self.send(
                    "PATCH",
                    &location,
                    &[
                        ("content-type", "application/octet-stream"),
                        ("content-range", &range),
                    ],
                    Payload::File {
                        path,
                        start: sent,
                        len,
                    },
                    &scopes,
                    &what,
                )?;
                if a.resp.status().as_u16() != 202 {
                    return Err(status_error(a.url, a.resp.status().as_u16()));
                }
                location = a
                    .resp
                    .headers()
                    .get("location")
                    .and_then(|v| v.to_str().ok())
                    .map(|l| self.absolute(&a.url, l))
                    .unwrap_or(location);
                sent = sent.saturating_add(len);
            }
        }
        let sep = if location.contains('?') { '&' } else { '?' };
        let put = format!(
            "{location}{sep}{}",
            super::form_encode(&[("digest", digest)])
        );
        let body = if size > CHUNK {
            Payload::Empty
        } else {
            Payload::File {
                path,
                start: 0,
                len: size,
            }
        };
        let a = self.send(
            "PUT",
            &put,
            &[("content-type", "application/octet-stream")],
            body,
            &scopes,
            &what,
        )?;
        match a.resp.status().as_u16() {
            201 | 204 => Ok(Sent::Uploaded),
            400 => Err(RemoteError::Registry {
                reference: r.to_string(),
                why: format!(
                    "the registry refused blob {digest} (HTTP 400: digest or size invalid)"
                ),
            }),
            s => Err(status_error(a.url, s)),
        }
    }

    /// Puts a manifest (or index) under `reference` (a tag or its digest)
    /// and returns the digest the registry gives it.
    pub fn put_manifest(
        &self,
        r: &Reference,
        reference: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> Result<String> {
        let url = self.url(&r.repository, "manifests", reference);
        let what = format!("{r} manifest {reference}");
        let a = self.send(
            "PUT",
            &url,
            &[("content-type", media_type)],
            Payload::Bytes(bytes),
            &[push_scope(&r.repository)],
            &what,
        )?;
        match a.resp.status().as_u16() {
            201 | 200 | 204 => Ok(a
                .resp
                .headers()
                .get("docker-content-digest")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .unwrap_or_else(|| super::pull::sha256_digest(bytes))),
            s @ (401 | 403) => Err(RemoteError::RegistryDenied {
                what,
                status: s,
                why: "push access refused".to_owned(),
            }),
            s => Err(RemoteError::Registry {
                reference: r.to_string(),
                why: format!("the registry refused manifest {reference} (HTTP {s})"),
            }),
        }
    }
}
