//! Image manifests and indexes (OCI and Docker schema 2): their media
//! types, the fields read from them, and the choice of one platform's
//! manifest in an index.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{RemoteError, Result};

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
/// An EROFS image as a layer (containerd 2.3+).
pub const EROFS_LAYER: &str = "application/vnd.erofs.layer.v1";
/// An EROFS image compressed whole as one zstd stream.
pub const EROFS_LAYER_ZSTD: &str = "application/vnd.erofs.layer.v1+zstd";

/// The `Accept` header of a manifest request: every type read.
pub const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// Largest manifest or index read (the distribution registry's own
/// limit).
pub const MAX_MANIFEST: u64 = 4 << 20;
/// Largest image config read.
pub const MAX_CONFIG: u64 = 16 << 20;
/// Most entries of an index or layers of a manifest accepted.
pub const MAX_ENTRIES: usize = 4096;

/// A content descriptor.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Descriptor {
    #[serde(rename = "mediaType", default)]
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<String>,
}

/// An image's platform.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct Platform {
    pub architecture: String,
    pub os: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    #[serde(
        rename = "os.version",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub os_version: Option<String>,
    #[serde(rename = "os.features", default, skip_serializing_if = "Vec::is_empty")]
    pub os_features: Vec<String>,
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

impl Platform {
    /// Parses `OS/ARCH[/VARIANT]`.
    pub fn parse(s: &str) -> std::result::Result<Platform, String> {
        let mut it = s.split('/');
        let (Some(os), Some(arch)) = (it.next(), it.next()) else {
            return Err(format!(
                "platform {s:?}: write OS/ARCH[/VARIANT], e.g. linux/amd64"
            ));
        };
        let variant = it.next().map(str::to_owned);
        if it.next().is_some() || os.is_empty() || arch.is_empty() {
            return Err(format!(
                "platform {s:?}: write OS/ARCH[/VARIANT], e.g. linux/amd64"
            ));
        }
        Ok(Platform {
            os: os.to_owned(),
            architecture: normalize_arch(arch).to_owned(),
            variant: variant.filter(|v| !v.is_empty()),
            os_version: None,
            os_features: Vec::new(),
        })
    }

    /// This machine's platform (Linux, the Go names of its architecture).
    pub fn host() -> Platform {
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "x86" => "386",
            "aarch64" => "arm64",
            "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
            "loongarch64" => "loong64",
            a => a,
        };
        Platform {
            os: "linux".to_owned(),
            architecture: arch.to_owned(),
            variant: None,
            os_version: None,
            os_features: Vec::new(),
        }
    }

    /// Whether an index entry of platform `p` serves `self`: the same OS
    /// and architecture, and the variant asked for (arm64's `v8` is its
    /// default).
    pub fn matches(&self, p: &Platform) -> bool {
        let var = |v: &Option<String>, arch: &str| match (v.as_deref(), arch) {
            (None, "arm64") => Some("v8".to_owned()),
            (v, _) => v.map(str::to_owned),
        };
        self.os == p.os
            && self.architecture == normalize_arch(&p.architecture)
            && (self.variant.is_none()
                || var(&self.variant, &self.architecture) == var(&p.variant, &p.architecture))
    }
}

fn normalize_arch(a: &str) -> &str {
    match a {
        "x86_64" | "x86-64" => "amd64",
        "aarch64" => "arm64",
        "i386" => "386",
        a => a,
    }
}

/// An index or manifest, told apart by its fields when the media type
/// is missing.
#[derive(Debug, Deserialize)]
pub struct Doc {
    #[serde(rename = "schemaVersion", default)]
    pub schema_version: Option<u32>,
    #[serde(rename = "mediaType", default)]
    pub media_type: Option<String>,
    #[serde(default)]
    pub manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    pub config: Option<Descriptor>,
    #[serde(default)]
    pub layers: Option<Vec<Descriptor>>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// What a manifest document is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Index,
    Manifest,
}

impl Doc {
    /// Parses and checks a manifest or index: JSON, schema version 2, a
    /// known media type (or none, with the fields of one), bounded
    /// entries, well-formed digests.
    pub fn parse(data: &[u8], what: &str, header_type: Option<&str>) -> Result<(Doc, Kind)> {
        let bad = |why: String| RemoteError::Registry {
            reference: what.to_owned(),
            why,
        };
        let doc: Doc = serde_json::from_slice(data)
            .map_err(|e| bad(format!("the manifest is not valid JSON: {e}")))?;
        if doc.schema_version != Some(2) {
            return Err(bad(format!(
                "schemaVersion {:?} (only schema 2 manifests are read)",
                doc.schema_version
            )));
        }
        let mt = doc
            .media_type
            .as_deref()
            .or(header_type.filter(|h| !h.is_empty() && *h != "application/json"));
        let kind = match mt {
            Some(OCI_INDEX | DOCKER_LIST) => Kind::Index,
            Some(OCI_MANIFEST | DOCKER_MANIFEST) => Kind::Manifest,
            Some(other) => {
                return Err(bad(format!("unknown manifest media type {other:?}")));
            }
            None if doc.manifests.is_some() => Kind::Index,
            None if doc.config.is_some() => Kind::Manifest,
            None => return Err(bad("neither an image index nor a manifest".to_owned())),
        };
        match kind {
            Kind::Index => {
                let m = doc.manifests.as_deref().unwrap_or_default();
                if m.len() > MAX_ENTRIES {
                    return Err(bad(format!("an index of {} entries", m.len())));
                }
                for d in m {
                    check_descriptor(d).map_err(&bad)?;
                }
            }
            Kind::Manifest => {
                let Some(c) = &doc.config else {
                    return Err(bad("a manifest without a config".to_owned()));
                };
                check_descriptor(c).map_err(&bad)?;
                let l = doc.layers.as_deref().unwrap_or_default();
                if l.len() > MAX_ENTRIES {
                    return Err(bad(format!("a manifest of {} layers", l.len())));
                }
                for d in l {
                    check_descriptor(d).map_err(&bad)?;
                }
            }
        }
        Ok((doc, kind))
    }

    /// The media type, as given or as the fields say.
    pub fn media_type(&self, kind: Kind) -> &str {
        match (&self.media_type, kind) {
            (Some(m), _) => m,
            (None, Kind::Index) => OCI_INDEX,
            (None, Kind::Manifest) => OCI_MANIFEST,
        }
    }
}

fn check_descriptor(d: &Descriptor) -> std::result::Result<(), String> {
    super::reference::check_digest(&d.digest)
}

/// The entry of `index` for `want`: the first whose platform matches,
/// skipping attestations (`unknown/unknown`). The error lists the
/// platforms there are.
pub fn choose<'a>(index: &'a [Descriptor], want: &Platform, what: &str) -> Result<&'a Descriptor> {
    if let Some(d) = index
        .iter()
        .find(|d| d.platform.as_ref().is_some_and(|p| want.matches(p)))
    {
        return Ok(d);
    }
    let have: Vec<String> = index
        .iter()
        .filter_map(|d| d.platform.as_ref())
        .filter(|p| p.os != "unknown")
        .map(Platform::to_string)
        .collect();
    Err(RemoteError::Registry {
        reference: what.to_owned(),
        why: format!(
            "no image for {want} in the index (it has {}); choose one with --platform",
            if have.is_empty() {
                "none with a platform".to_owned()
            } else {
                have.join(", ")
            }
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(p: &str) -> Descriptor {
        let pl = Platform::parse(p).unwrap();
        Descriptor {
            media_type: OCI_MANIFEST.into(),
            digest: format!("sha256:{}", "0".repeat(64)),
            size: 1,
            annotations: BTreeMap::new(),
            platform: Some(pl),
            urls: vec![],
        }
    }

    #[test]
    fn platforms_are_chosen_by_os_arch_and_variant() {
        let idx = vec![
            desc("unknown/unknown"),
            desc("linux/arm/v7"),
            desc("linux/arm64/v8"),
            desc("linux/amd64"),
        ];
        let p = |s: &str| Platform::parse(s).unwrap();
        assert_eq!(
            choose(&idx, &p("linux/amd64"), "x").unwrap().platform,
            Some(p("linux/amd64"))
        );
        assert_eq!(
            choose(&idx, &p("linux/arm64"), "x").unwrap().platform,
            Some(p("linux/arm64/v8"))
        );
        assert_eq!(
            choose(&idx, &p("linux/aarch64"), "x").unwrap().platform,
            Some(p("linux/arm64/v8"))
        );
        let e = choose(&idx, &p("linux/s390x"), "x")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("linux/arm/v7, linux/arm64/v8, linux/amd64"),
            "{e}"
        );
        assert!(Platform::parse("linux").is_err());
    }

    #[test]
    fn manifests_are_checked() {
        let ok = format!(
            r#"{{"schemaVersion":2,"config":{{"digest":"sha256:{}","size":2}},"layers":[]}}"#,
            "a".repeat(64)
        );
        assert_eq!(
            Doc::parse(ok.as_bytes(), "r", None).unwrap().1,
            Kind::Manifest
        );
        for (bad, why) in [
            ("not json", "not valid JSON"),
            (r#"{"schemaVersion":1}"#, "schemaVersion"),
            (
                r#"{"schemaVersion":2,"mediaType":"text/html"}"#,
                "unknown manifest media type",
            ),
            (r#"{"schemaVersion":2}"#, "neither"),
            (
                r#"{"schemaVersion":2,"manifests":[{"digest":"sha256:zz","size":1}]}"#,
                "bad digest",
            ),
        ] {
            let e = Doc::parse(bad.as_bytes(), "r", None)
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
