//! Reading from a registry: manifests (an index resolved to one
//! platform's manifest), blobs streamed to files with their size and
//! sha256 checked as they arrive (a file is renamed into place only
//! once both match), and a whole image copied into an OCI image layout.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::manifest::{self, Descriptor, Doc, Kind, Platform};
use super::{pull_scope, read_capped, Payload, Reference, Registry};
use crate::error::{RemoteError, Result};

/// A manifest or index as the registry sent it.
#[derive(Clone, Debug)]
pub struct Fetched {
    pub bytes: Vec<u8>,
    pub media_type: String,
    /// `sha256:` of `bytes`.
    pub digest: String,
}

/// What a reference resolved to.
pub struct Resolved {
    /// The index it named, if it named one.
    pub index: Option<Fetched>,
    /// The chosen image manifest.
    pub manifest: Fetched,
    /// Its parsed form.
    pub doc: Doc,
}

/// `sha256:HEX` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(data)))
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn registry_error(r: &Reference, why: String) -> RemoteError {
    RemoteError::Registry {
        reference: r.to_string(),
        why,
    }
}

impl Registry {
    /// Fetches the manifest or index `reference` (a tag or digest) of
    /// `r`'s repository; a digest reference must match what arrives.
    pub fn manifest(&self, r: &Reference, reference: &str) -> Result<Fetched> {
        let what = format!("{}", r.with_ref(None, None)).replace("docker://", "");
        let what = if reference.starts_with("sha256:") {
            format!("docker://{what}@{reference}")
        } else {
            format!("docker://{what}:{reference}")
        };
        let url = self.url(&r.repository, "manifests", reference);
        let mut a = self.send(
            "GET",
            &url,
            &[("accept", manifest::ACCEPT)],
            Payload::Empty,
            &[pull_scope(&r.repository)],
            &what,
        )?;
        let status = a.resp.status().as_u16();
        match status {
            200 => {}
            404 => {
                return Err(RemoteError::Registry {
                    reference: what,
                    why: "no such manifest (HTTP 404)".to_owned(),
                })
            }
            401 | 403 => {
                return Err(RemoteError::RegistryDenied {
                    what,
                    status,
                    why: "access refused".to_owned(),
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
        let media_type = a
            .resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or(v).trim().to_owned())
            .unwrap_or_default();
        let bytes = read_capped(a.resp.body_mut(), manifest::MAX_MANIFEST, &a.url)?;
        let digest = sha256_digest(&bytes);
        if reference.starts_with("sha256:") && digest != reference {
            return Err(RemoteError::Registry {
                reference: what,
                why: format!("the manifest received has digest {digest}"),
            });
        }
        Ok(Fetched {
            bytes,
            media_type,
            digest,
        })
    }

    /// Resolves `r` to one image manifest: an index's entry for
    /// `platform`.
    pub fn resolve(&self, r: &Reference, platform: &Platform) -> Result<Resolved> {
        let first = self.manifest(r, r.manifest_ref())?;
        let (doc, kind) = Doc::parse(&first.bytes, &r.to_string(), Some(&first.media_type))?;
        match kind {
            Kind::Manifest => {
                let media_type = doc.media_type(kind).to_owned();
                Ok(Resolved {
                    index: None,
                    manifest: Fetched {
                        media_type,
                        ..first
                    },
                    doc,
                })
            }
            Kind::Index => {
                let entries = doc.manifests.as_deref().unwrap_or_default();
                let chosen = manifest::choose(entries, platform, &r.to_string())?.clone();
                let m = self.manifest(r, &chosen.digest)?;
                if m.bytes.len() as u64 != chosen.size {
                    return Err(registry_error(
                        r,
                        format!(
                            "manifest {} is {} bytes, the index says {}",
                            chosen.digest,
                            m.bytes.len(),
                            chosen.size
                        ),
                    ));
                }
                let (mdoc, mkind) = Doc::parse(&m.bytes, &r.to_string(), Some(&m.media_type))?;
                if mkind != Kind::Manifest {
                    return Err(registry_error(
                        r,
                        format!(
                            "the index's entry {} is not an image manifest",
                            chosen.digest
                        ),
                    ));
                }
                let media_type = mdoc.media_type(mkind).to_owned();
                let index_type = doc.media_type(kind).to_owned();
                Ok(Resolved {
                    index: Some(Fetched {
                        media_type: index_type,
                        ..first
                    }),
                    manifest: Fetched { media_type, ..m },
                    doc: mdoc,
                })
            }
        }
    }

    /// Reads a small blob (a config) whole, checked.
    pub fn small_blob(&self, r: &Reference, d: &Descriptor, cap: u64) -> Result<Vec<u8>> {
        if d.size > cap {
            return Err(registry_error(
                r,
                format!(
                    "blob {} of {} bytes is over the {cap}-byte limit",
                    d.digest, d.size
                ),
            ));
        }
        let mut out = Vec::new();
        self.blob_into(r, d, &mut out, &mut |_| {})?;
        Ok(out)
    }

    /// Streams blob `d` into `w`, hashing as it goes: more bytes than the
    /// descriptor's size, fewer, or another digest is an error (after
    /// which `w` holds bytes that must be discarded). Transient failures
    /// are retried from the start by [`Registry::blob_to_file`], not here.
    fn blob_into(
        &self,
        r: &Reference,
        d: &Descriptor,
        w: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<()> {
        let what = format!("{r} blob {}", d.digest);
        let url = self.url(&r.repository, "blobs", &d.digest);
        let mut a = self.send(
            "GET",
            &url,
            &[],
            Payload::Empty,
            &[pull_scope(&r.repository)],
            &what,
        )?;
        match a.resp.status().as_u16() {
            200 => {}
            404 => {
                return Err(registry_error(
                    r,
                    format!("blob {} not found (HTTP 404)", d.digest),
                ))
            }
            s @ (401 | 403) => {
                return Err(RemoteError::RegistryDenied {
                    what,
                    status: s,
                    why: "access refused".to_owned(),
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
        let mut hasher = Sha256::new();
        let mut got: u64 = 0;
        let mut reader = a.resp.body_mut().as_reader();
        let mut buf = vec![0u8; 256 << 10];
        loop {
            let n = reader.read(&mut buf).map_err(|e| RemoteError::BodyBroken {
                url: a.url.clone(),
                got,
                size: d.size,
                source: e,
            })?;
            if n == 0 {
                break;
            }
            let chunk = buf.get(..n).unwrap_or_default();
            got = got.saturating_add(n as u64);
            if got > d.size {
                return Err(registry_error(
                    r,
                    format!("blob {} is longer than its {} bytes", d.digest, d.size),
                ));
            }
            hasher.update(chunk);
            w.write_all(chunk).map_err(|e| RemoteError::Cache {
                path: PathBuf::from(&d.digest),
                source: e,
            })?;
            progress(got);
        }
        if got != d.size {
            return Err(RemoteError::Truncated {
                url: a.url,
                start: 0,
                end: d.size,
                got,
                attempts: 1,
            });
        }
        let digest = format!("sha256:{}", hex(&hasher.finalize()));
        if digest != d.digest {
            return Err(registry_error(
                r,
                format!(
                    "blob {} arrived with digest {digest}: not written",
                    d.digest
                ),
            ));
        }
        Ok(())
    }

    /// Downloads blob `d` to `dest`: into a temporary file beside it,
    /// renamed to `dest` only once its size and digest match; a broken
    /// transfer is started again (up to the attempts of the HTTP
    /// options). An existing `dest` of the right size is kept.
    pub fn blob_to_file(
        &self,
        r: &Reference,
        d: &Descriptor,
        dest: &Path,
        progress: &mut dyn FnMut(u64),
    ) -> Result<()> {
        if std::fs::metadata(dest).is_ok_and(|m| m.len() == d.size) {
            progress(d.size);
            return Ok(());
        }
        let io_err = |e: std::io::Error| RemoteError::Cache {
            path: dest.to_owned(),
            source: e,
        };
        let tmp = dest.with_extension(format!("partial-{}", std::process::id()));
        let attempts = self.opts.attempts.max(1);
        let mut n = 0;
        loop {
            n += 1;
            let mut f = std::fs::File::create(&tmp).map_err(io_err)?;
            let res = {
                let mut bw = std::io::BufWriter::with_capacity(1 << 20, &mut f);
                let r1 = self.blob_into(r, d, &mut bw, progress);
                r1.and_then(|()| bw.flush().map_err(io_err))
            };
            match res {
                Ok(()) => {
                    f.sync_all().map_err(io_err)?;
                    drop(f);
                    std::fs::rename(&tmp, dest).map_err(io_err)?;
                    return Ok(());
                }
                Err(RemoteError::Truncated { .. } | RemoteError::BodyBroken { .. })
                    if n < attempts =>
                {
                    drop(f);
                    std::thread::sleep(self.opts.backoff.saturating_mul(n));
                }
                Err(e) => {
                    drop(f);
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e);
                }
            }
        }
    }
}

/// What [`pull_layout`] wrote.
pub struct Pulled {
    /// The layout's manifest.
    pub manifest: Descriptor,
    /// The reference name recorded for it in `index.json`.
    pub ref_name: String,
    /// Bytes downloaded (blobs already present not counted).
    pub fetched: u64,
}

/// A progress report of [`pull_layout`]: a blob's digest, bytes so far
/// and its size.
pub type PullProgress<'a> = dyn Fn(&str, u64, u64) + Sync + 'a;

/// Copies the image `r` names (the `platform` manifest of an index) into
/// an OCI image layout at `dir`, created if missing: its manifest,
/// config and layers as blobs (those already there kept), then
/// `index.json` naming the manifest by `r`'s tag (or digest). Layers are
/// fetched `parallel` at a time.
pub fn pull_layout(
    reg: &Registry,
    r: &Reference,
    platform: &Platform,
    dir: &Path,
    parallel: usize,
    progress: &PullProgress<'_>,
) -> Result<Pulled> {
    let io_err = |p: &Path| {
        let p = p.to_owned();
        move |e: std::io::Error| RemoteError::Cache { path: p, source: e }
    };
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).map_err(io_err(&blobs))?;
    let res = reg.resolve(r, platform)?;
    let config = res
        .doc
        .config
        .clone()
        .ok_or_else(|| registry_error(r, "the manifest has no config".to_owned()))?;
    let layers = res.doc.layers.clone().unwrap_or_default();
    let blob_path = |d: &str| blobs.join(d.strip_prefix("sha256:").unwrap_or(d));
    let cfg = reg.small_blob(r, &config, manifest::MAX_CONFIG)?;
    write_atomic(&blob_path(&config.digest), &cfg)?;
    let fetched = std::sync::atomic::AtomicU64::new(cfg.len() as u64);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed: std::sync::Mutex<Option<RemoteError>> = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..parallel.clamp(1, 8).min(layers.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(l) = layers.get(i) else { break };
                if failed.lock().map(|f| f.is_some()).unwrap_or(true) {
                    break;
                }
                let dest = blob_path(&l.digest);
                let had = std::fs::metadata(&dest).is_ok_and(|m| m.len() == l.size);
                let res =
                    reg.blob_to_file(r, l, &dest, &mut |got| progress(&l.digest, got, l.size));
                match res {
                    Ok(()) if !had => {
                        fetched.fetch_add(l.size, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(()) => {}
                    Err(e) => {
                        if let Ok(mut f) = failed.lock() {
                            f.get_or_insert(e);
                        }
                        break;
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    write_atomic(&blob_path(&res.manifest.digest), &res.manifest.bytes)?;
    let ref_name = r
        .tag
        .clone()
        .or(r.digest.clone())
        .unwrap_or_else(|| "latest".to_owned());
    let desc = Descriptor {
        media_type: res.manifest.media_type.clone(),
        digest: res.manifest.digest.clone(),
        size: res.manifest.bytes.len() as u64,
        annotations: [(
            "org.opencontainers.image.ref.name".to_owned(),
            ref_name.clone(),
        )]
        .into_iter()
        .collect(),
        platform: None,
        urls: Vec::new(),
    };
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": manifest::OCI_INDEX,
        "manifests": [desc],
    });
    write_atomic(
        &dir.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )?;
    let text = serde_json::to_vec_pretty(&index).unwrap_or_default();
    write_atomic(&dir.join("index.json"), &text)?;
    Ok(Pulled {
        manifest: desc,
        ref_name,
        fetched: fetched.into_inner(),
    })
}

/// Writes `data` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let err = |e: std::io::Error| RemoteError::Cache {
        path: path.to_owned(),
        source: e,
    };
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).map_err(err)?;
    f.write_all(data).map_err(err)?;
    f.sync_all().map_err(err)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(err)
}
