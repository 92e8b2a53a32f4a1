//! The image a conversion reads: a registry reference (documents fetched
//! as needed, blobs downloaded, checked, into a scratch layout) or an OCI
//! image layout (documents and blobs read from it, checked).

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ferrofs_remote::registry::manifest::{self, Descriptor};
use ferrofs_remote::registry::pull::sha256_digest;
use ferrofs_remote::registry::{Reference, Registry};

use crate::registry::RegistryArgs;

/// Where the source image is.
pub enum Source {
    Registry {
        reg: Box<Registry>,
        r: Reference,
        /// The scratch layout blobs are downloaded into.
        scratch: PathBuf,
    },
    Layout {
        dir: PathBuf,
        reference: Option<String>,
    },
}

/// The top document of an image: an index or a manifest.
pub struct Top {
    pub bytes: Vec<u8>,
    pub digest: String,
    /// A tag for the destination when it names none.
    pub tag: Option<String>,
}

impl Source {
    /// Opens `spec` (`docker://…` or `oci:DIR[:REF]`); downloads go under
    /// `scratch`.
    pub fn open(spec: &str, args: &RegistryArgs, scratch: &Path) -> Result<Source> {
        if crate::registry::is_docker(spec) {
            let r = Reference::parse(spec)?;
            let reg = Registry::connect(&r, &args.options())?;
            let scratch = scratch.join("src");
            std::fs::create_dir_all(scratch.join("blobs/sha256"))
                .with_context(|| format!("creating {}", scratch.display()))?;
            return Ok(Source::Registry {
                reg: Box::new(reg),
                r,
                scratch,
            });
        }
        match ferrofs_builder::source::oci::parse_spec(spec) {
            Some((dir, reference)) => Ok(Source::Layout { dir, reference }),
            None => {
                bail!("{spec}: the source is docker://[HOST/]REPO[:TAG|@DIGEST] or oci:DIR[:REF]")
            }
        }
    }

    /// The directory holding the source's blobs as an OCI layout.
    pub fn layout_dir(&self) -> &Path {
        match self {
            Source::Registry { scratch, .. } => scratch,
            Source::Layout { dir, .. } => dir,
        }
    }

    /// The repository a registry source is in (to mount blobs from).
    pub fn repository(&self) -> Option<(&str, &str)> {
        match self {
            Source::Registry { r, .. } => Some((&r.registry, &r.repository)),
            Source::Layout { .. } => None,
        }
    }

    /// The document the reference names.
    pub fn top(&self) -> Result<Top> {
        match self {
            Source::Registry { reg, r, .. } => {
                let f = reg.manifest(r, r.manifest_ref())?;
                Ok(Top {
                    bytes: f.bytes,
                    digest: f.digest,
                    tag: r.tag.clone(),
                })
            }
            Source::Layout { dir, reference } => {
                let index_path = dir.join("index.json");
                let data = read_capped(&index_path, manifest::MAX_MANIFEST)?;
                let doc: manifest::Doc = serde_json::from_slice(&data)
                    .with_context(|| format!("{}: not an image index", index_path.display()))?;
                let entries = doc.manifests.unwrap_or_default();
                let name = |d: &Descriptor| {
                    d.annotations
                        .get("org.opencontainers.image.ref.name")
                        .cloned()
                };
                let chosen = match reference {
                    Some(want) => entries
                        .iter()
                        .find(|d| name(d).as_deref() == Some(want.as_str()) || d.digest == *want)
                        .with_context(|| format!("{}: no image named {want:?}", dir.display()))?,
                    None if entries.len() == 1 => &entries[0],
                    None => bail!(
                        "{}: {} images in the layout: name one as oci:DIR:REF",
                        dir.display(),
                        entries.len()
                    ),
                };
                let bytes = self.small(chosen, manifest::MAX_MANIFEST)?;
                Ok(Top {
                    bytes,
                    digest: chosen.digest.clone(),
                    tag: reference.clone().or_else(|| name(chosen)),
                })
            }
        }
    }

    /// A document or config blob, read whole and checked.
    pub fn small(&self, d: &Descriptor, cap: u64) -> Result<Vec<u8>> {
        match self {
            Source::Registry { reg, r, .. } => {
                if d.media_type.contains("manifest") || d.media_type.contains("index") {
                    let f = reg.manifest(r, &d.digest)?;
                    if f.bytes.len() as u64 != d.size {
                        bail!(
                            "{r}: manifest {} is {} bytes, its descriptor says {}",
                            d.digest,
                            f.bytes.len(),
                            d.size
                        );
                    }
                    Ok(f.bytes)
                } else {
                    Ok(reg.small_blob(r, d, cap)?)
                }
            }
            Source::Layout { dir, .. } => {
                let path = blob_path(dir, &d.digest)?;
                if d.size > cap {
                    bail!(
                        "{}: {} bytes, over the {cap}-byte limit",
                        path.display(),
                        d.size
                    );
                }
                let data = read_capped(&path, cap)?;
                if data.len() as u64 != d.size || sha256_digest(&data) != d.digest {
                    bail!(
                        "{}: does not match its descriptor ({} bytes, {})",
                        path.display(),
                        d.size,
                        d.digest
                    );
                }
                Ok(data)
            }
        }
    }

    /// Makes sure blob `d` is in [`Source::layout_dir`] (downloading it
    /// from a registry, checked); `progress` sees bytes so far.
    pub fn fetch(&self, d: &Descriptor, progress: &mut dyn FnMut(u64)) -> Result<()> {
        match self {
            Source::Registry { reg, r, scratch } => {
                let dest = blob_path(scratch, &d.digest)?;
                reg.blob_to_file(r, d, &dest, progress)?;
                Ok(())
            }
            // Checked as it is unpacked.
            Source::Layout { .. } => Ok(()),
        }
    }
}

/// `DIR/blobs/sha256/HEX` of a digest.
pub fn blob_path(dir: &Path, digest: &str) -> Result<PathBuf> {
    ferrofs_remote::registry::reference::check_digest(digest).map_err(anyhow::Error::msg)?;
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    Ok(dir.join("blobs/sha256").join(hex))
}

fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>> {
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut data = Vec::new();
    f.take(cap.saturating_add(1))
        .read_to_end(&mut data)
        .with_context(|| format!("reading {}", path.display()))?;
    if data.len() as u64 > cap {
        bail!("{}: larger than {cap} bytes", path.display());
    }
    Ok(data)
}
