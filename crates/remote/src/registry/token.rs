//! Meeting a registry's `WWW-Authenticate` challenge: HTTP Basic with
//! the credentials found, or a Bearer token for the request's scopes from
//! the challenge's token service (asked with Basic credentials, or an
//! identity token's refresh grant), cached per scope set.

use std::sync::PoisonError;

use super::{auth, form_encode, read_capped, Credentials, Registry};
use crate::error::{RemoteError, Result};

impl Registry {
    /// Meets a challenge: Basic with the credentials found, or a token
    /// for `scopes` from the Bearer challenge's service.
    pub(super) fn authenticate(
        &self,
        c: &auth::Challenge,
        scopes: &[String],
        what: &str,
    ) -> Result<()> {
        let denied = |status: u16, why: String| RemoteError::RegistryDenied {
            what: what.to_owned(),
            status,
            why,
        };
        let value = match c {
            auth::Challenge::Basic => {
                let Some(h) = self.creds.as_ref().and_then(Credentials::basic_header) else {
                    return Err(denied(
                        401,
                        "the registry asks for a user name and password and none were found \
                         (docker login, or --authfile)"
                            .to_owned(),
                    ));
                };
                if self.base.starts_with("http:") && !self.plain_ok(&self.base) {
                    return Err(denied(
                        401,
                        "refusing to send a password over plain HTTP".into(),
                    ));
                }
                self.tokens
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert("*basic*".to_owned(), h);
                return Ok(());
            }
            auth::Challenge::Bearer {
                realm,
                service,
                scope,
            } => self.token(realm, service.as_deref(), scope.as_deref(), scopes, what)?,
        };
        self.tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(Self::scope_key(scopes), format!("Bearer {value}"));
        Ok(())
    }

    /// Asks the token service at `realm` for a token.
    fn token(
        &self,
        realm: &str,
        service: Option<&str>,
        challenge_scope: Option<&str>,
        scopes: &[String],
        what: &str,
    ) -> Result<String> {
        let denied = |status: u16, why: String| RemoteError::RegistryDenied {
            what: what.to_owned(),
            status,
            why,
        };
        match crate::http::scheme(realm) {
            Some(s) if s.eq_ignore_ascii_case("https") => {}
            Some(s) if s.eq_ignore_ascii_case("http") && self.plain_ok(realm) => {}
            _ => {
                return Err(denied(
                    401,
                    format!("the token service {realm:?} is not an https:// URL"),
                ))
            }
        }
        let mut want: Vec<&str> = scopes.iter().map(String::as_str).collect();
        if want.is_empty() {
            want.extend(challenge_scope);
        }
        let mut query: Vec<(&str, &str)> = Vec::new();
        if let Some(s) = service {
            query.push(("service", s));
        }
        for s in &want {
            query.push(("scope", s));
        }
        let resp = match &self.creds {
            Some(Credentials::Identity(refresh)) => {
                let mut form: Vec<(&str, &str)> = vec![
                    ("grant_type", "refresh_token"),
                    ("client_id", "ferrofs"),
                    ("refresh_token", refresh.as_str()),
                ];
                form.extend(query.iter().copied());
                let body = form_encode(&form);
                let req = ureq::http::Request::builder()
                    .method("POST")
                    .uri(realm)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(body);
                match req {
                    Ok(r) => self.agent.run(r),
                    Err(e) => return Err(denied(401, format!("bad token request: {e}"))),
                }
            }
            creds => {
                let sep = if realm.contains('?') { '&' } else { '?' };
                let url = format!("{realm}{sep}{}", form_encode(&query));
                let mut b = ureq::http::Request::builder().method("GET").uri(&url);
                if let Some(h) = creds.as_ref().and_then(Credentials::basic_header) {
                    b = b.header("authorization", h);
                }
                match b.body(()) {
                    Ok(r) => self.agent.run(r),
                    Err(e) => return Err(denied(401, format!("bad token request: {e}"))),
                }
            }
        };
        let mut resp = resp.map_err(|e| RemoteError::Transport {
            url: realm.to_owned(),
            attempts: 1,
            source: e,
        })?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(denied(
                status,
                format!(
                    "the token service {realm} refused {}the request for {:?}",
                    if self.creds.is_some() {
                        "the credentials or "
                    } else {
                        ""
                    },
                    want.join(" ")
                ),
            ));
        }
        let data = read_capped(resp.body_mut(), 1 << 20, realm)?;
        let a: auth::TokenAnswer =
            serde_json::from_slice(&data).map_err(|e| RemoteError::BadResponse {
                url: realm.to_owned(),
                what: format!("the token service's answer is not JSON: {e}"),
            })?;
        let _ = a.expires_in;
        a.token
            .filter(|t| !t.is_empty())
            .or(a.access_token.filter(|t| !t.is_empty()))
            .ok_or_else(|| RemoteError::BadResponse {
                url: realm.to_owned(),
                what: "the token service's answer has no token".to_owned(),
            })
    }
}
