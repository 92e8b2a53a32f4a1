//! The JSON documents of an OCI image layout (`oci-layout`, `index.json`,
//! image indexes, manifests) and the choice of one image manifest in them:
//! by its `org.opencontainers.image.ref.name`, or the only one, and in an
//! image index the linux/amd64 one.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::blob::{blob_ref, read_small, MAX_DOC};
use crate::error::{BuildError, Result};

pub(super) const INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub(super) const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub(super) const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub(super) const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const REF_NAME: &str = "org.opencontainers.image.ref.name";
/// Deepest nesting of image indexes followed.
const MAX_DEPTH: usize = 8;

/// A content descriptor.
#[derive(Clone, Debug, Deserialize)]
pub(super) struct Descriptor {
    #[serde(rename = "mediaType", default)]
    pub(super) media_type: String,
    pub(super) digest: String,
    pub(super) size: u64,
    #[serde(default)]
    pub(super) annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) platform: Option<Platform>,
}

#[derive(Clone, Debug, Deserialize)]
pub(super) struct Platform {
    pub(super) architecture: String,
    pub(super) os: String,
}

/// An image index or an image manifest (which fields are there tells
/// them apart when the descriptor has no media type).
#[derive(Debug, Deserialize)]
pub(super) struct Doc {
    #[serde(rename = "mediaType", default)]
    pub(super) media_type: Option<String>,
    #[serde(default)]
    pub(super) manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    pub(super) config: Option<Descriptor>,
    #[serde(default)]
    pub(super) layers: Option<Vec<Descriptor>>,
}

/// An image manifest: its config and layers, bottom layer first.
pub(super) struct Manifest {
    pub(super) digest: String,
    pub(super) config: Descriptor,
    pub(super) layers: Vec<Descriptor>,
}

fn parse<T: for<'de> Deserialize<'de>>(data: &[u8], path: &Path, what: &str) -> Result<T> {
    serde_json::from_slice(data).map_err(|e| BuildError::input(path, format!("{what}: {e}")))
}

/// Reads `dir/index.json` after checking `dir/oci-layout`.
pub(super) fn read_index(dir: &Path) -> Result<Doc> {
    let marker = dir.join("oci-layout");
    let data = std::fs::read(&marker).map_err(|e| {
        BuildError::input(dir, format!("not an OCI image layout (oci-layout: {e})"))
    })?;
    #[derive(Deserialize)]
    struct Marker {
        #[serde(rename = "imageLayoutVersion")]
        version: String,
    }
    let m: Marker = parse(&data, &marker, "oci-layout")?;
    if !m.version.starts_with("1.") {
        return Err(BuildError::input(
            &marker,
            format!("unsupported image layout version {}", m.version),
        ));
    }
    let path = dir.join("index.json");
    let f = std::fs::File::open(&path).map_err(BuildError::io(&path))?;
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_DOC + 1), &mut data)
        .map_err(BuildError::io(&path))?;
    if data.len() as u64 > MAX_DOC {
        return Err(BuildError::input(&path, "larger than 16 MiB"));
    }
    parse(&data, &path, "index.json")
}

fn refs(ds: &[Descriptor]) -> String {
    let names: Vec<&str> = ds
        .iter()
        .map(|d| {
            d.annotations
                .get(REF_NAME)
                .map_or("(unnamed)", String::as_str)
        })
        .collect();
    names.join(", ")
}

/// The manifest `reference` names in the layout's index, or its only one.
pub(super) fn choose<'a>(
    dir: &Path,
    index: &'a Doc,
    reference: Option<&str>,
) -> Result<&'a Descriptor> {
    let all = index.manifests.as_deref().unwrap_or_default();
    let path = dir.join("index.json");
    match reference {
        Some(r) => {
            let named: Vec<&Descriptor> = all
                .iter()
                .filter(|d| d.annotations.get(REF_NAME).map(String::as_str) == Some(r))
                .collect();
            match named.as_slice() {
                [one] => Ok(one),
                [] => Err(BuildError::input(
                    path,
                    format!("no manifest named {r:?} (the layout has: {})", refs(all)),
                )),
                _ => Err(BuildError::input(
                    path,
                    format!("{} manifests are named {r:?}", named.len()),
                )),
            }
        }
        None => match all {
            [one] => Ok(one),
            [] => Err(BuildError::input(path, "the layout has no manifests")),
            _ => Err(BuildError::input(
                path,
                format!(
                    "the layout has {} manifests; name one as oci:DIR:REF (refs: {})",
                    all.len(),
                    refs(all)
                ),
            )),
        },
    }
}

/// Follows `d` through image indexes (picking linux/amd64) to an image
/// manifest, reading and checking each blob.
pub(super) fn resolve(dir: &Path, d: &Descriptor) -> Result<Manifest> {
    let mut d = d.clone();
    for _ in 0..MAX_DEPTH {
        let blob = blob_ref(dir, &d.digest, d.size)?;
        let known = [INDEX, DOCKER_LIST, MANIFEST, DOCKER_MANIFEST, ""];
        if !known.contains(&d.media_type.as_str()) {
            return Err(BuildError::input(
                &blob.path,
                format!(
                    "{}: unsupported manifest media type {}",
                    d.digest, d.media_type
                ),
            ));
        }
        let data = read_small(&blob, "manifest")?;
        let doc: Doc = parse(&data, &blob.path, "manifest")?;
        let media = match d.media_type.as_str() {
            "" => doc.media_type.clone().unwrap_or_default(),
            m => m.to_string(),
        };
        let is_index = media == INDEX || media == DOCKER_LIST || doc.manifests.is_some();
        if !is_index {
            let (Some(config), Some(layers)) = (doc.config, doc.layers) else {
                return Err(BuildError::input(
                    &blob.path,
                    format!("manifest {} has no config or no layers", d.digest),
                ));
            };
            return Ok(Manifest {
                digest: d.digest,
                config,
                layers,
            });
        }
        let all = doc.manifests.unwrap_or_default();
        let amd64 = |p: &Option<Platform>| {
            p.as_ref()
                .is_some_and(|p| p.os == "linux" && p.architecture == "amd64")
        };
        let picked: Vec<&Descriptor> = all.iter().filter(|m| amd64(&m.platform)).collect();
        d = match picked.as_slice() {
            [one] => (*one).clone(),
            _ => {
                let platforms: Vec<String> = all
                    .iter()
                    .map(|m| {
                        m.platform
                            .as_ref()
                            .map_or("(none)".into(), |p| format!("{}/{}", p.os, p.architecture))
                    })
                    .collect();
                return Err(BuildError::input(
                    &blob.path,
                    format!(
                        "image index {} has {} linux/amd64 manifests (platforms: {})",
                        d.digest,
                        picked.len(),
                        platforms.join(", ")
                    ),
                ));
            }
        };
    }
    Err(BuildError::input(
        dir,
        format!("image indexes nested more than {MAX_DEPTH} deep"),
    ))
}
