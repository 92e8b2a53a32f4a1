//! Where S3 credentials come from: the `AWS_ACCESS_KEY_ID` /
//! `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` environment, or a profile
//! of the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else
//! `~/.aws/credentials`), as the AWS CLI looks for them.

use std::path::PathBuf;

use super::sigv4::Credentials;
use crate::error::{RemoteError, Result};

/// The credentials file is read only up to this size.
const MAX_FILE: u64 = 1 << 20;

/// The environment the lookup reads (a function, so tests can fake it).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process's environment, empty values counted as unset.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The shared credentials file.
fn file_path(env: Env) -> Option<PathBuf> {
    if let Some(p) = env("AWS_SHARED_CREDENTIALS_FILE") {
        return Some(PathBuf::from(p));
    }
    env("HOME").map(|h| PathBuf::from(h).join(".aws").join("credentials"))
}

/// The credentials: with `profile` given (`--s3-profile`), that profile of
/// the file; else the environment's keys; else the profile `AWS_PROFILE`
/// names (or `default`) of the file. `url` names the object, for errors.
pub fn lookup(profile: Option<&str>, env: Env, url: &str) -> Result<Credentials> {
    if profile.is_none() {
        if let (Some(id), Some(secret)) = (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            let token = env("AWS_SESSION_TOKEN");
            return Ok(Credentials::new(&id, &secret, token.as_deref()));
        }
    }
    let name = profile
        .map(str::to_owned)
        .or_else(|| env("AWS_PROFILE"))
        .unwrap_or_else(|| "default".to_owned());
    let missing = |looked: String| RemoteError::S3NoCredentials {
        url: url.to_owned(),
        looked,
    };
    let Some(path) = file_path(env) else {
        return Err(missing(
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are not set and there is no HOME for \
             ~/.aws/credentials"
                .into(),
        ));
    };
    let text = match read_bounded(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && profile.is_none() => {
            return Err(missing(format!(
                "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are not set and {} does not exist",
                path.display()
            )))
        }
        Err(e) => {
            return Err(RemoteError::S3CredentialsFile {
                path,
                why: e.to_string(),
            })
        }
    };
    match parse_profile(&text, &name) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(missing(format!(
            "{}no profile [{name}] with aws_access_key_id and aws_secret_access_key in {}",
            if profile.is_none() {
                "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are not set and "
            } else {
                ""
            },
            path.display()
        ))),
        Err(why) => Err(RemoteError::S3CredentialsFile { path, why }),
    }
}

fn read_bounded(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut s = String::new();
    std::fs::File::open(path)?
        .take(MAX_FILE)
        .read_to_string(&mut s)?;
    Ok(s)
}

/// The keys of profile `name` in an INI credentials file: `None` when the
/// profile or its key id or secret is missing; an error (line number and
/// what, never a value) for a line that is neither a section, a
/// `key = value` pair, a comment nor blank.
pub fn parse_profile(text: &str, name: &str) -> std::result::Result<Option<Credentials>, String> {
    let (mut id, mut secret, mut token) = (None, None, None);
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some(section) = rest.strip_suffix(']') else {
                return Err(format!("line {}: unterminated section header", i + 1));
            };
            let section = section.trim();
            // The config file's spelling, accepted here too.
            let section = section.strip_prefix("profile ").unwrap_or(section).trim();
            inside = section == name;
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!(
                "line {}: neither a [section] nor key = value",
                i + 1
            ));
        };
        if !inside {
            continue;
        }
        let v = v.trim().to_owned();
        match k.trim().to_ascii_lowercase().as_str() {
            "aws_access_key_id" => id = Some(v),
            "aws_secret_access_key" => secret = Some(v),
            "aws_session_token" => token = Some(v),
            _ => {}
        }
    }
    Ok(match (id, secret) {
        (Some(id), Some(s)) if !id.is_empty() && !s.is_empty() => Some(Credentials::new(
            &id,
            &s,
            token.filter(|t| !t.is_empty()).as_deref(),
        )),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# comment\n[default]\naws_access_key_id = AKID1\n\
                        aws_secret_access_key=SECRET1\n\n[profile ci]\n; another\n\
                        AWS_ACCESS_KEY_ID = AKID2 \naws_secret_access_key = SE=CRET2\n\
                        aws_session_token = TOK\nregion = eu-west-1\n[half]\naws_access_key_id = X\n";

    #[test]
    fn profiles() {
        let d = parse_profile(FILE, "default").unwrap().unwrap();
        assert_eq!(d, Credentials::new("AKID1", "SECRET1", None));
        let ci = parse_profile(FILE, "ci").unwrap().unwrap();
        assert_eq!(ci, Credentials::new("AKID2", "SE=CRET2", Some("TOK")));
        assert_eq!(parse_profile(FILE, "half").unwrap(), None);
        assert_eq!(parse_profile(FILE, "nope").unwrap(), None);
        let e = parse_profile("[a]\naws_secret_access_key\n", "a").unwrap_err();
        assert_eq!(e, "line 2: neither a [section] nor key = value");
        assert!(parse_profile("[a\n", "a").is_err());
    }

    #[test]
    fn lookup_order() {
        let dir = std::env::temp_dir().join(format!("ferrofs-creds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("credentials");
        std::fs::write(&file, FILE).unwrap();
        let f = file.display().to_string();
        let env_keys = |n: &str| match n {
            "AWS_ACCESS_KEY_ID" => Some("ENVID".into()),
            "AWS_SECRET_ACCESS_KEY" => Some("ENVSECRET".into()),
            "AWS_SHARED_CREDENTIALS_FILE" => Some(f.clone()),
            _ => None,
        };
        assert_eq!(lookup(None, &env_keys, "u").unwrap().access_key, "ENVID");
        // An explicit profile wins over the environment's keys.
        assert_eq!(
            lookup(Some("ci"), &env_keys, "u").unwrap().access_key,
            "AKID2"
        );
        let env_file = |n: &str| match n {
            "AWS_SHARED_CREDENTIALS_FILE" => Some(f.clone()),
            "AWS_PROFILE" => Some("ci".into()),
            _ => None,
        };
        assert_eq!(lookup(None, &env_file, "u").unwrap().access_key, "AKID2");
        let e = lookup(Some("nope"), &env_file, "s3://b/k").unwrap_err();
        assert!(matches!(e, RemoteError::S3NoCredentials { .. }), "{e}");
        assert!(e.to_string().contains("[nope]"), "{e}");
        let nothing = |n: &str| (n == "HOME").then(|| dir.join("nohome").display().to_string());
        let e = lookup(None, &nothing, "s3://b/k").unwrap_err();
        assert!(matches!(e, RemoteError::S3NoCredentials { .. }), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
