//! Where a converted image goes: an OCI image layout (blobs first, then
//! `index.json` replaced atomically), a registry (blobs, then manifests
//! by digest, the tag last, so a failed push moves no tag), or
//! containerd's layer content cache (`DIR/sha256/XX/HEX.erofs`, with an
//! optional `.dmverity` sidecar renamed into place before the blob).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context, Result};
use ferrofs_remote::registry::manifest::{self, Descriptor};
use ferrofs_remote::registry::pull::write_atomic;
use ferrofs_remote::registry::push::Sent;
use ferrofs_remote::registry::{Reference, Registry};

use crate::registry::RegistryArgs;

/// A blob of the converted image: its descriptor and where its bytes
/// are (a file, or bytes of a document).
pub enum Blob {
    File(PathBuf),
    Bytes(Vec<u8>),
}

/// The converted image, ready to write.
pub struct Output {
    /// Layer and config blobs.
    pub blobs: Vec<(String, u64, Blob)>,
    /// Manifests of an index, by digest (empty for a lone manifest).
    pub manifests: Vec<(String, String, Vec<u8>)>,
    /// The top document: its media type and bytes.
    pub top_type: String,
    pub top: Vec<u8>,
}

/// The destination.
pub enum Dest {
    Layout { dir: PathBuf, reference: String },
    Registry { reg: Box<Registry>, r: Reference },
}

/// What was written.
#[derive(Default)]
pub struct Written {
    pub uploaded: u64,
    pub present: u64,
    pub mounted: u64,
}

impl Dest {
    /// Opens `spec`; `tag` names the image when `spec` does not.
    pub fn open(spec: &str, tag: Option<&str>, args: &RegistryArgs) -> Result<Dest> {
        if crate::registry::is_docker(spec) {
            let mut r = Reference::parse(spec)?;
            if r.digest.is_some() {
                bail!("{spec}: a destination names a tag, not a digest");
            }
            if r.tag.is_none() {
                r.tag = Some(tag.unwrap_or("latest").to_owned());
            }
            let reg = Registry::connect(&r, &args.options())?;
            return Ok(Dest::Registry {
                reg: Box::new(reg),
                r,
            });
        }
        match ferrofs_builder::source::oci::parse_spec(spec) {
            Some((dir, reference)) => Ok(Dest::Layout {
                dir,
                reference: reference
                    .or(tag.map(str::to_owned))
                    .unwrap_or_else(|| "latest".to_owned()),
            }),
            None => bail!("{spec}: the destination is docker://[HOST/]REPO[:TAG] or oci:DIR[:REF]"),
        }
    }

    /// Writes `out`; `mount_from` is the source's (registry, repository).
    /// A signal (`stop`) ends it between blobs, before any manifest:
    /// nothing is tagged.
    pub fn write(
        &self,
        out: &Output,
        mount_from: Option<(&str, &str)>,
        stop: &AtomicBool,
    ) -> Result<Written> {
        let stopped = || -> Result<()> {
            if stop.load(Ordering::Relaxed) {
                bail!("interrupted: {} was not tagged", self.name());
            }
            Ok(())
        };
        match self {
            Dest::Layout { dir, reference } => {
                stopped()?;
                write_layout(dir, reference, out).map(|()| Written::default())
            }
            Dest::Registry { reg, r } => {
                let from = mount_from
                    .filter(|(host, _)| *host == r.registry)
                    .map(|(_, repo)| repo);
                let mut w = Written::default();
                for (digest, size, blob) in &out.blobs {
                    stopped()?;
                    let sent = match blob {
                        Blob::File(p) => reg.push_blob(r, digest, p, *size, from)?,
                        Blob::Bytes(b) => {
                            let tmp = std::env::temp_dir().join(format!(
                                "ferrofs-blob-{}-{}",
                                std::process::id(),
                                &digest[7..19]
                            ));
                            std::fs::write(&tmp, b)?;
                            let res = reg.push_blob(r, digest, &tmp, *size, from);
                            let _ = std::fs::remove_file(&tmp);
                            res?
                        }
                    };
                    match sent {
                        Sent::Present => w.present += 1,
                        Sent::Mounted => w.mounted += 1,
                        Sent::Uploaded => w.uploaded += 1,
                    }
                }
                stopped()?;
                for (digest, media_type, bytes) in &out.manifests {
                    reg.put_manifest(r, digest, media_type, bytes)?;
                }
                let tag = r.tag.as_deref().unwrap_or("latest");
                reg.put_manifest(r, tag, &out.top_type, &out.top)
                    .with_context(|| format!("tagging {r}"))?;
                Ok(w)
            }
        }
    }

    /// How the destination is named in messages.
    pub fn name(&self) -> String {
        match self {
            Dest::Layout { dir, reference } => format!("oci:{}:{reference}", dir.display()),
            Dest::Registry { r, .. } => r.to_string(),
        }
    }
}

fn write_layout(dir: &Path, reference: &str, out: &Output) -> Result<()> {
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).with_context(|| format!("creating {}", blobs.display()))?;
    let put = |digest: &str, data: Blob| -> Result<()> {
        let dest = super::source::blob_path(dir, digest)?;
        if dest.exists() {
            return Ok(());
        }
        match data {
            Blob::Bytes(b) => write_atomic(&dest, &b)?,
            Blob::File(p) => {
                let tmp = dest.with_extension("tmp");
                std::fs::copy(&p, &tmp)
                    .with_context(|| format!("copying {} into {}", p.display(), dir.display()))?;
                std::fs::File::open(&tmp)?.sync_all()?;
                std::fs::rename(&tmp, &dest)?;
            }
        }
        Ok(())
    };
    for (digest, _, blob) in &out.blobs {
        let b = match blob {
            Blob::File(p) => Blob::File(p.clone()),
            Blob::Bytes(b) => Blob::Bytes(b.clone()),
        };
        put(digest, b)?;
    }
    for (digest, _, bytes) in &out.manifests {
        put(digest, Blob::Bytes(bytes.clone()))?;
    }
    let top_digest = ferrofs_remote::registry::pull::sha256_digest(&out.top);
    put(&top_digest, Blob::Bytes(out.top.clone()))?;
    // index.json: this reference replaced, others kept.
    let index_path = dir.join("index.json");
    let mut index: serde_json::Value = match std::fs::read(&index_path) {
        Ok(d) => serde_json::from_slice(&d)
            .with_context(|| format!("{}: not JSON", index_path.display()))?,
        Err(_) => {
            serde_json::json!({"schemaVersion": 2, "mediaType": manifest::OCI_INDEX, "manifests": []})
        }
    };
    let entry = Descriptor {
        media_type: out.top_type.clone(),
        digest: top_digest,
        size: out.top.len() as u64,
        annotations: [(
            "org.opencontainers.image.ref.name".to_owned(),
            reference.to_owned(),
        )]
        .into_iter()
        .collect(),
        platform: None,
        urls: Vec::new(),
    };
    let list = index
        .get_mut("manifests")
        .and_then(|m| m.as_array_mut())
        .with_context(|| format!("{}: no manifests list", index_path.display()))?;
    list.retain(|e| {
        e.pointer("/annotations/org.opencontainers.image.ref.name")
            .and_then(|v| v.as_str())
            != Some(reference)
    });
    list.push(serde_json::to_value(&entry)?);
    write_atomic(
        &dir.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )?;
    write_atomic(&index_path, &serde_json::to_vec(&index)?)?;
    Ok(())
}

/// Puts a converted layer's EROFS image into containerd's layer content
/// cache at `dir`, keyed by the source diff_id, with the `.dmverity`
/// sidecar of its appended tree (`tree`: root hash and hash offset) if
/// it has one, renamed into place before the blob, as `ctr images
/// build-erofs-cache --dmverity` writes them.
pub fn write_cache(
    dir: &Path,
    source_diff_id: &str,
    image: &Path,
    tree: Option<&(String, u64)>,
) -> Result<PathBuf> {
    let hex = source_diff_id
        .strip_prefix("sha256:")
        .with_context(|| format!("diff_id {source_diff_id}: not sha256"))?;
    let sub = dir.join("sha256").join(&hex[..2]);
    std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
    let dest = sub.join(format!("{hex}.erofs"));
    let tmp = dir.join(format!(".build-{}-{hex}.erofs", std::process::id()));
    std::fs::copy(image, &tmp).with_context(|| format!("copying into {}", dir.display()))?;
    let sidecar_tmp = PathBuf::from(format!("{}.dmverity", tmp.display()));
    let result = (|| -> Result<()> {
        if let Some((root, offset)) = tree {
            let json = format!("{{\n  \"roothash\": \"{root}\",\n  \"hashoffset\": {offset}\n}}");
            write_atomic(&sidecar_tmp, json.as_bytes())?;
            std::fs::rename(&sidecar_tmp, format!("{}.dmverity", dest.display()))?;
        }
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, &dest)?;
        std::fs::File::open(&sub)?.sync_all()?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        let _ = std::fs::remove_file(&sidecar_tmp);
    }
    result.map(|()| dest)
}
