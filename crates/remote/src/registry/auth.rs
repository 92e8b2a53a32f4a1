//! Who we are to a registry: credentials found where docker, podman and
//! skopeo keep them (`auth.json`, `~/.docker/config.json`, a credential
//! helper), and the `WWW-Authenticate` challenges that say how to use
//! them (HTTP Basic, or a Bearer token from the registry's token
//! service). Secrets are never put in messages.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine;
use serde::Deserialize;

use crate::error::{RemoteError, Result};

/// Largest credentials file read.
const MAX_AUTH_FILE: u64 = 1 << 20;

/// A user's secret for one registry.
#[derive(Clone)]
pub enum Credentials {
    /// A user name and password (or access token used as one).
    Basic { user: String, pass: String },
    /// An OAuth2 refresh token (`identitytoken` of `docker login`),
    /// exchanged at the token service.
    Identity(String),
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Basic { user, .. } => write!(f, "Basic({user:?}, <secret>)"),
            Credentials::Identity(_) => write!(f, "Identity(<secret>)"),
        }
    }
}

impl Credentials {
    /// The `Authorization` value of HTTP Basic, when this is a password.
    pub(crate) fn basic_header(&self) -> Option<String> {
        match self {
            Credentials::Basic { user, pass } => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
            )),
            Credentials::Identity(_) => None,
        }
    }
}

/// The files looked in for credentials, first match wins: `explicit`
/// alone if given; else `$REGISTRY_AUTH_FILE`, containers' `auth.json`
/// (`$XDG_RUNTIME_DIR/containers/`, then `$XDG_CONFIG_HOME/containers/` or
/// `~/.config/containers/`), then docker's `config.json`
/// (`$DOCKER_CONFIG/` or `~/.docker/`).
pub fn auth_files(explicit: Option<&Path>) -> Vec<PathBuf> {
    if let Some(p) = explicit {
        return vec![p.to_owned()];
    }
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = env("HOME");
    let mut v = Vec::new();
    if let Some(p) = env("REGISTRY_AUTH_FILE") {
        v.push(p);
    }
    if let Some(d) = env("XDG_RUNTIME_DIR") {
        v.push(d.join("containers/auth.json"));
    }
    match (env("XDG_CONFIG_HOME"), &home) {
        (Some(d), _) => v.push(d.join("containers/auth.json")),
        (None, Some(h)) => v.push(h.join(".config/containers/auth.json")),
        (None, None) => {}
    }
    match (env("DOCKER_CONFIG"), &home) {
        (Some(d), _) => v.push(d.join("config.json")),
        (None, Some(h)) => v.push(h.join(".docker/config.json")),
        (None, None) => {}
    }
    v
}

#[derive(Deserialize, Default)]
struct AuthFile {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
}

#[derive(Deserialize, Default)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

/// A key of `auths` reduced to `HOST[/PATH]`: without a scheme and
/// without the `/v1/`, `/v2/` API suffixes docker writes; Docker Hub's
/// old index address is `docker.io`.
fn normalize_key(k: &str) -> String {
    let k = k.split_once("://").map_or(k, |(_, r)| r);
    let k = k.trim_end_matches('/');
    let k = k
        .strip_suffix("/v1")
        .or_else(|| k.strip_suffix("/v2"))
        .unwrap_or(k);
    match k {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_owned(),
        _ => k.to_owned(),
    }
}

/// The credentials for `registry` (as a reference names it) and
/// `repository`, from the first of `files` that has an entry: the most
/// specific `HOST/REPO…` key first, then `HOST`. A credential helper
/// (`credHelpers`, `credsStore`) is run as docker runs it. `Ok(None)`:
/// none found (anonymous access).
pub fn find(files: &[PathBuf], registry: &str, repository: &str) -> Result<Option<Credentials>> {
    for path in files {
        let file = match read_file(path)? {
            Some(f) => f,
            None => continue,
        };
        if let Some(c) = lookup(&file, path, registry, repository)? {
            return Ok(Some(c));
        }
        let helper = file
            .cred_helpers
            .iter()
            .find(|(k, _)| normalize_key(k) == registry)
            .map(|(_, h)| h.clone())
            .or(file.creds_store.clone());
        if let Some(h) = helper {
            if let Some(c) = run_helper(&h, registry, path)? {
                return Ok(Some(c));
            }
        }
    }
    Ok(None)
}

fn file_error(path: &Path, why: impl Into<String>) -> RemoteError {
    RemoteError::AuthFile {
        path: path.to_owned(),
        why: why.into(),
    }
}

fn read_file(path: &Path) -> Result<Option<AuthFile>> {
    use std::io::Read;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(file_error(path, e.to_string())),
    };
    let mut data = Vec::new();
    f.take(MAX_AUTH_FILE.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(|e| file_error(path, e.to_string()))?;
    if data.len() as u64 > MAX_AUTH_FILE {
        return Err(file_error(path, "larger than 1 MiB"));
    }
    // serde's message names a line and column, never the value.
    serde_json::from_slice(&data)
        .map(Some)
        .map_err(|e| file_error(path, format!("not a credentials file: {e}")))
}

fn lookup(
    file: &AuthFile,
    path: &Path,
    registry: &str,
    repository: &str,
) -> Result<Option<Credentials>> {
    // HOST/a/b/c, HOST/a/b, HOST/a, HOST.
    let mut keys = vec![registry.to_owned()];
    let mut acc = registry.to_owned();
    for comp in repository.split('/') {
        acc = format!("{acc}/{comp}");
        keys.push(acc.clone());
    }
    let entries: BTreeMap<String, &AuthEntry> = file
        .auths
        .iter()
        .map(|(k, v)| (normalize_key(k), v))
        .collect();
    for key in keys.iter().rev() {
        let Some(e) = entries.get(key) else { continue };
        if let Some(t) = e.identitytoken.as_ref().filter(|t| !t.is_empty()) {
            return Ok(Some(Credentials::Identity(t.clone())));
        }
        if let (Some(u), Some(p)) = (&e.username, &e.password) {
            return Ok(Some(Credentials::Basic {
                user: u.clone(),
                pass: p.clone(),
            }));
        }
        if let Some(a) = e.auth.as_ref().filter(|a| !a.is_empty()) {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(a.trim())
                .map_err(|_| file_error(path, format!("the \"auth\" of {key:?} is not base64")))?;
            let text = String::from_utf8(raw)
                .map_err(|_| file_error(path, format!("the \"auth\" of {key:?} is not UTF-8")))?;
            let Some((u, p)) = text.split_once(':') else {
                return Err(file_error(
                    path,
                    format!("the \"auth\" of {key:?} is not USER:PASSWORD"),
                ));
            };
            return Ok(Some(Credentials::Basic {
                user: u.to_owned(),
                pass: p.to_owned(),
            }));
        }
    }
    Ok(None)
}

/// Runs `docker-credential-HELPER get` with the registry on its input;
/// a helper that knows no credentials for it gives `None`.
fn run_helper(helper: &str, registry: &str, path: &Path) -> Result<Option<Credentials>> {
    if helper.is_empty()
        || !helper
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.')
    {
        return Err(file_error(
            path,
            format!("bad credential helper name {helper:?}"),
        ));
    }
    let prog = format!("docker-credential-{helper}");
    let server = if registry == super::reference::DOCKER_HUB {
        "https://index.docker.io/v1/"
    } else {
        registry
    };
    let fail = |why: String| file_error(path, format!("credential helper {prog}: {why}"));
    let mut child = Command::new(&prog)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    if let Some(mut i) = child.stdin.take() {
        // A helper that exits without reading is judged by its status.
        let _ = i.write_all(server.as_bytes());
    }
    let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stdout);
        if msg.contains("credentials not found") {
            return Ok(None);
        }
        return Err(fail(format!("exited with {}", out.status)));
    }
    #[derive(Deserialize)]
    struct Answer {
        #[serde(rename = "Username", default)]
        user: String,
        #[serde(rename = "Secret", default)]
        secret: String,
    }
    let a: Answer = serde_json::from_slice(&out.stdout)
        .map_err(|_| fail("its answer is not the expected JSON".to_owned()))?;
    Ok(Some(if a.user == "<token>" {
        Credentials::Identity(a.secret)
    } else {
        Credentials::Basic {
            user: a.user,
            pass: a.secret,
        }
    }))
}

/// A `WWW-Authenticate` challenge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Challenge {
    /// `Basic realm=…`.
    Basic,
    /// `Bearer realm=…,service=…,scope=…`: a token service.
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

/// Parses a `WWW-Authenticate` header: the scheme and its quoted or
/// bare `key=value` parameters. `None` for other schemes or no realm.
pub fn parse_challenge(h: &str) -> Option<Challenge> {
    let h = h.trim();
    let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
    let params = parse_params(rest);
    let get = |k: &str| {
        params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.clone())
    };
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    Some(Challenge::Bearer {
        realm: get("realm")?,
        service: get("service"),
        scope: get("scope"),
    })
}

/// `k="v", k2=v2` pairs; a quoted value may hold commas and `\"`.
fn parse_params(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut it = s.chars().peekable();
    loop {
        while it.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            it.next();
        }
        let mut key = String::new();
        while let Some(&c) = it.peek() {
            if c == '=' || c == ',' {
                break;
            }
            key.push(c);
            it.next();
        }
        if key.is_empty() && it.peek().is_none() {
            break;
        }
        if it.next() != Some('=') {
            // A bare token (no value): skip it.
            if it.peek().is_none() {
                break;
            }
            continue;
        }
        let mut value = String::new();
        if it.peek() == Some(&'"') {
            it.next();
            while let Some(c) = it.next() {
                match c {
                    '\\' => {
                        if let Some(n) = it.next() {
                            value.push(n);
                        }
                    }
                    '"' => break,
                    _ => value.push(c),
                }
            }
        } else {
            while let Some(&c) = it.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                it.next();
            }
        }
        out.push((key.trim().to_owned(), value.trim().to_owned()));
    }
    out
}

/// The answer of a token service.
#[derive(Deserialize)]
pub(crate) struct TokenAnswer {
    #[serde(default)]
    pub(crate) token: Option<String>,
    #[serde(default)]
    pub(crate) access_token: Option<String>,
    #[serde(default)]
    pub(crate) expires_in: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_parsed() {
        let c = parse_challenge(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/python:pull,push""#,
        );
        assert_eq!(
            c,
            Some(Challenge::Bearer {
                realm: "https://auth.docker.io/token".into(),
                service: Some("registry.docker.io".into()),
                scope: Some("repository:library/python:pull,push".into()),
            })
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(parse_challenge("Bearer service=x"), None);
        assert_eq!(parse_challenge("Negotiate"), None);
        let c =
            parse_challenge(r#"bearer realm=http://h/t, error="invalid_token", scope="a \"b\"""#);
        assert!(
            matches!(c, Some(Challenge::Bearer { ref realm, ref scope, .. })
            if realm == "http://h/t" && scope.as_deref() == Some("a \"b\""))
        );
    }

    #[test]
    fn credentials_come_from_the_most_specific_key_and_are_never_printed() {
        let d = std::env::temp_dir().join(format!("ferrofs-auth-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("auth.json");
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        std::fs::write(
            &f,
            format!(
                r#"{{"auths":{{"https://index.docker.io/v1/":{{"auth":"{}"}},
                "reg.example:5000":{{"auth":"{}"}},
                "reg.example:5000/team/app":{{"username":"t","password":"secret-2"}},
                "bad.example":{{"auth":"!!"}}}}}}"#,
                b64("hub:secret-1"),
                b64("u:p:with:colons")
            ),
        )
        .unwrap();
        let files = vec![d.join("missing.json"), f.clone()];
        let hub = find(&files, "docker.io", "library/python")
            .unwrap()
            .unwrap();
        assert!(
            matches!(&hub, Credentials::Basic { user, pass } if user == "hub" && pass == "secret-1")
        );
        assert!(!format!("{hub:?}").contains("secret-1"));
        let team = find(&files, "reg.example:5000", "team/app/sub")
            .unwrap()
            .unwrap();
        assert!(matches!(&team, Credentials::Basic { user, .. } if user == "t"));
        let other = find(&files, "reg.example:5000", "other").unwrap().unwrap();
        assert!(
            matches!(&other, Credentials::Basic { user, pass } if user == "u" && pass == "p:with:colons")
        );
        assert!(find(&files, "none.example", "x").unwrap().is_none());
        let e = find(&files, "bad.example", "x").unwrap_err().to_string();
        assert!(e.contains("not base64") && e.contains("auth.json"), "{e}");
        std::fs::write(&f, "{\"auths\": 7, \"x\": \"hunter2\"}").unwrap();
        let e = find(&files, "a", "b").unwrap_err().to_string();
        assert!(!e.contains("hunter2"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
