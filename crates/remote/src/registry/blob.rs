//! A registry blob read lazily: an [`HttpSource`] over the URL its bytes
//! come from (the storage a registry redirects to, or the registry itself,
//! every request then carrying the repository's token, asked for again
//! when it expires), its chunks cached under the blob's digest.

use std::sync::Arc;

use super::manifest::Descriptor;
use super::{pull_scope, Payload, Reference, Registry};
use crate::error::{RemoteError, Result};
use crate::http::{Authorizer, Client};
use crate::{Cache, HttpSource, RemoteOptions};

/// The token of a repository's blob requests.
struct BlobAuth {
    reg: Arc<Registry>,
    scopes: Vec<String>,
    url: String,
}

impl Authorizer for BlobAuth {
    fn header(&self) -> Option<String> {
        self.reg.auth_header(&self.scopes)
    }

    fn refresh(&self) -> bool {
        self.reg.forget_tokens();
        self.reg
            .send(
                "HEAD",
                &self.url,
                &[],
                Payload::Empty,
                &self.scopes,
                "a token",
            )
            .is_ok_and(|a| a.resp.status().is_success())
    }
}

/// Opens blob `d` of `r`'s repository for range reads: one ranged GET
/// finds where its bytes are served (following redirects) and that
/// Range is honoured; its length must be the descriptor's size.
pub fn open_blob(
    reg: Arc<Registry>,
    r: &Reference,
    d: &Descriptor,
    cache: Arc<Cache>,
    opts: &RemoteOptions,
) -> Result<HttpSource> {
    let shown = format!("{}@{}", r.with_ref(None, None), d.digest);
    let url = reg.url(&r.repository, "blobs", &d.digest);
    let scopes = vec![pull_scope(&r.repository)];
    let a = reg.send(
        "GET",
        &url,
        &[("range", "bytes=0-0")],
        Payload::Empty,
        &scopes,
        &shown,
    )?;
    match a.resp.status().as_u16() {
        206 => {}
        200 => {
            return Err(RemoteError::Registry {
                reference: shown,
                why: "the registry answered a range request with the whole blob (HTTP 200): \
                      its layers cannot be read lazily from it"
                    .to_owned(),
            })
        }
        404 => {
            return Err(RemoteError::Registry {
                reference: shown,
                why: "blob not found (HTTP 404)".to_owned(),
            })
        }
        s => {
            return Err(RemoteError::Status {
                url: a.url,
                status: s,
                attempts: 1,
            })
        }
    }
    let at_registry = Registry::host_of(&a.url) == reg.host;
    let auth: Option<Arc<dyn Authorizer>> = at_registry.then(|| {
        Arc::new(BlobAuth {
            reg: reg.clone(),
            scopes,
            url: url.clone(),
        }) as Arc<dyn Authorizer>
    });
    let client = Client::new(&a.url, opts.http.clone())?.with_auth(auth, &shown);
    // Blobs are named by their content: the digest keys the cache.
    let key = format!("registry:{}/{}@{}", reg.name, r.repository, d.digest);
    let src = HttpSource::open_client(client, &key, cache, opts, &mut |_| {})?;
    let len = ferrofs::ReadAt::len(&src).unwrap_or(0);
    if len != d.size {
        return Err(RemoteError::Registry {
            reference: shown,
            why: format!("the blob is {len} bytes, its descriptor says {}", d.size),
        });
    }
    Ok(src)
}
