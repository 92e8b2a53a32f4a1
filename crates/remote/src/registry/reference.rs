//! Image references as skopeo and podman write them after `docker://`:
//! `[HOST[:PORT]/]REPO[:TAG][@DIGEST]`, with Docker Hub's short forms
//! (`python:3.13` is `docker.io/library/python:3.13`).

use std::fmt;

use crate::error::{RemoteError, Result};

/// The host Docker Hub's short names refer to.
pub const DOCKER_HUB: &str = "docker.io";
/// Where Docker Hub's registry API answers.
const DOCKER_HUB_API: &str = "registry-1.docker.io";
/// Longest reference accepted (the distribution spec caps names at 255
/// bytes; a tag and a digest add under 200).
const MAX_REFERENCE: usize = 512;

/// A parsed `docker://` reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The registry host (and port) as written, `docker.io` for Docker
    /// Hub.
    pub registry: String,
    /// The repository path, `library/python` for an official Hub image.
    pub repository: String,
    /// The tag, if one was given.
    pub tag: Option<String>,
    /// The manifest digest (`sha256:…`), if one was given.
    pub digest: Option<String>,
}

impl Reference {
    /// Parses `s`, with or without its `docker://` prefix.
    pub fn parse(s: &str) -> Result<Reference> {
        let bad = |why: &str| RemoteError::Registry {
            reference: s.to_owned(),
            why: why.to_owned(),
        };
        let body = s.strip_prefix("docker://").unwrap_or(s);
        if body.is_empty() {
            return Err(bad("empty reference"));
        }
        if body.len() > MAX_REFERENCE {
            return Err(bad("reference too long"));
        }
        let (rest, digest) = match body.split_once('@') {
            Some((r, d)) => (r, Some(d)),
            None => (body, None),
        };
        if let Some(d) = digest {
            check_digest(d).map_err(|w| bad(&w))?;
        }
        // A tag follows the last ':' after the last '/' (a ':' before it
        // is the registry's port).
        let slash = rest.rfind('/').map_or(0, |i| i.saturating_add(1));
        let (name, tag) = match rest.get(slash..).and_then(|t| t.rfind(':')) {
            Some(i) => {
                let at = slash.saturating_add(i);
                (
                    rest.get(..at).unwrap_or(""),
                    rest.get(at.saturating_add(1)..),
                )
            }
            None => (rest, None),
        };
        if let Some(t) = tag {
            check_tag(t).map_err(|w| bad(&w))?;
        }
        let (registry, repository) = match name.split_once('/') {
            Some((first, path)) if is_host(first) => (first.to_owned(), path.to_owned()),
            _ => (DOCKER_HUB.to_owned(), name.to_owned()),
        };
        let registry = if registry == "index.docker.io" || registry == DOCKER_HUB_API {
            DOCKER_HUB.to_owned()
        } else {
            registry
        };
        let repository = if registry == DOCKER_HUB && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        check_repository(&repository).map_err(|w| bad(&w))?;
        check_host(&registry).map_err(|w| bad(&w))?;
        Ok(Reference {
            registry,
            repository,
            tag: tag.map(str::to_owned),
            digest: digest.map(str::to_owned),
        })
    }

    /// The host (and port) requests go to: Docker Hub's API host for
    /// `docker.io`.
    pub fn api_host(&self) -> &str {
        if self.registry == DOCKER_HUB {
            DOCKER_HUB_API
        } else {
            &self.registry
        }
    }

    /// What the manifest is asked for by: the digest if given, else the
    /// tag, else `latest`.
    pub fn manifest_ref(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// The same repository at another tag or digest.
    pub fn with_ref(&self, tag: Option<&str>, digest: Option<&str>) -> Reference {
        Reference {
            tag: tag.map(str::to_owned),
            digest: digest.map(str::to_owned),
            ..self.clone()
        }
    }

    /// Whether the host is this machine (plain HTTP is allowed there).
    pub fn is_local(&self) -> bool {
        let host = host_part(&self.registry);
        host == "localhost" || host == "127.0.0.1" || host == "[::1]" || host == "::1"
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "docker://{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// The host of `HOST[:PORT]` (an IPv6 literal keeps its brackets).
fn host_part(registry: &str) -> &str {
    if registry.starts_with('[') {
        return registry
            .find(']')
            .and_then(|i| registry.get(..=i))
            .unwrap_or(registry);
    }
    registry.split(':').next().unwrap_or(registry)
}

/// Whether a reference's first component names a registry rather than
/// a repository: it has a dot or a port, or is `localhost`.
fn is_host(first: &str) -> bool {
    first.contains('.') || first.contains(':') || first == "localhost" || first.starts_with('[')
}

fn check_host(h: &str) -> std::result::Result<(), String> {
    let host = host_part(h);
    let port = h.get(host.len()..).unwrap_or("");
    let name_ok = if host.starts_with('[') {
        host.len() > 2
            && host.ends_with(']')
            && host
                .bytes()
                .all(|c| c.is_ascii_hexdigit() || matches!(c, b':' | b'.' | b'[' | b']'))
    } else {
        !host.is_empty()
            && host
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-'))
    };
    let port_ok = port.is_empty()
        || port.strip_prefix(':').is_some_and(|p| {
            !p.is_empty() && p.len() <= 5 && p.bytes().all(|c| c.is_ascii_digit())
        });
    if name_ok && port_ok {
        Ok(())
    } else {
        Err(format!("bad registry host {h:?}"))
    }
}

/// The distribution spec's repository name: components of lowercase
/// letters and digits joined by `.`, `_`, `__` or runs of `-`.
fn check_repository(r: &str) -> std::result::Result<(), String> {
    if r.is_empty() || r.len() > 255 {
        return Err(format!("bad repository name {r:?} (1 to 255 bytes)"));
    }
    for comp in r.split('/') {
        let b = comp.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        let ends_ok = b.first().is_some_and(alnum) && b.last().is_some_and(alnum);
        let chars_ok = b
            .iter()
            .all(|c| alnum(c) || matches!(c, b'.' | b'_' | b'-'));
        let seps_ok = !comp.contains("..") && !comp.contains("___") && !comp.contains("._");
        if !(ends_ok && chars_ok && seps_ok) {
            return Err(format!(
                "bad repository name {r:?} (lowercase letters, digits and separators . _ - between them)"
            ));
        }
    }
    Ok(())
}

/// A tag: a word character then up to 127 word characters, `.` or `-`.
fn check_tag(t: &str) -> std::result::Result<(), String> {
    let b = t.as_bytes();
    let word = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
    let ok = b.len() <= 128
        && b.first().is_some_and(word)
        && b.iter().all(|c| word(c) || matches!(c, b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!("bad tag {t:?}"))
    }
}

/// A `sha256:` digest of 64 lowercase hex digits (the only algorithm
/// registries use for manifests and blobs).
pub fn check_digest(d: &str) -> std::result::Result<(), String> {
    match d.split_once(':') {
        Some(("sha256", hex))
            if hex.len() == 64
                && hex
                    .bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) =>
        {
            Ok(())
        }
        Some((alg, _)) if alg != "sha256" => {
            Err(format!("digest {d:?}: only sha256 digests are supported"))
        }
        _ => Err(format!(
            "bad digest {d:?} (sha256: and 64 lowercase hex digits)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Reference {
        Reference::parse(s).unwrap()
    }

    #[test]
    fn docker_hub_short_names_are_completed() {
        let r = p("docker://python:3.13");
        assert_eq!(r.registry, "docker.io");
        assert_eq!(r.repository, "library/python");
        assert_eq!(r.tag.as_deref(), Some("3.13"));
        assert_eq!(r.api_host(), "registry-1.docker.io");
        assert_eq!(p("bitnami/redis").repository, "bitnami/redis");
        assert_eq!(p("index.docker.io/library/alpine").registry, "docker.io");
        assert_eq!(r.to_string(), "docker://docker.io/library/python:3.13");
    }

    #[test]
    fn hosts_ports_tags_and_digests() {
        let d = format!("sha256:{}", "ab".repeat(32));
        let r = p(&format!("localhost:5000/a/b:v1@{d}"));
        assert_eq!(r.registry, "localhost:5000");
        assert_eq!(r.repository, "a/b");
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert_eq!(r.digest.as_deref(), Some(d.as_str()));
        assert_eq!(r.manifest_ref(), d);
        assert!(r.is_local());
        let r = p("127.0.0.1:5000/x");
        assert_eq!(r.tag, None);
        assert_eq!(r.manifest_ref(), "latest");
        assert!(!p("ghcr.io/o/r:t").is_local());
    }

    #[test]
    fn bad_references_are_refused_with_the_reason() {
        for (s, why) in [
            ("docker://", "empty"),
            ("UPPER/case", "repository"),
            ("a:b:c/d", "registry host"),
            ("repo:", "tag"),
            ("repo:-x", "tag"),
            ("repo@sha256:12", "digest"),
            ("repo@md5:0000", "only sha256"),
            ("a//b", "repository"),
        ] {
            let e = Reference::parse(s).unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
        }
        assert!(Reference::parse(&"a".repeat(600)).is_err());
    }
}
