//! AWS Signature Version 4: the canonical request, the string to sign,
//! the derived signing key and the `Authorization` header, with the
//! HMAC-SHA256 and URI encoding they are built from. Pure functions of
//! their inputs (the time is a parameter), checked against AWS's
//! published examples.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

/// SHA-256 of the empty payload, in hex.
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// An access key and its secret (and a session token for temporary
/// credentials). Neither the secret nor the token is ever shown: `Debug`
/// prints the key id only.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key: String,
    pub(crate) secret: String,
    pub(crate) session_token: Option<String>,
}

impl Credentials {
    pub fn new(access_key: &str, secret: &str, session_token: Option<&str>) -> Credentials {
        Credentials {
            access_key: access_key.to_owned(),
            secret: secret.to_owned(),
            session_token: session_token.map(str::to_owned),
        }
    }

    /// Whether a session token comes with the key.
    pub fn has_session_token(&self) -> bool {
        self.session_token.is_some()
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Hex of `bytes`, lower case.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// SHA-256 of `data`, in hex.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// HMAC-SHA256 (RFC 2104) of `msg` under `key`.
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(msg);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// URI-encodes `s` as SigV4 wants it: every byte but the unreserved
/// `A-Z a-z 0-9 - _ . ~` as `%XX` (upper-case hex); `/` kept when
/// `keep_slash` (object key paths), encoded otherwise (query parts).
pub fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'_' | b'.' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The time as SigV4 stamps it: `YYYYMMDDTHHMMSSZ` (UTC).
pub fn amz_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// One request to sign.
pub struct Request<'a> {
    /// `GET`, `PUT`, …
    pub method: &'a str,
    /// The path, already URI-encoded as it is sent (`/bucket/my%20key`).
    pub path: &'a str,
    /// Query parameters, not encoded (`("partNumber", "1")`, `("uploads", "")`).
    pub query: &'a [(&'a str, &'a str)],
    /// Headers to sign: `host` and `x-amz-date` at least (any case, any
    /// order; the values are trimmed and their inner runs of spaces
    /// squeezed as SigV4 says).
    pub headers: &'a [(&'a str, &'a str)],
    /// SHA-256 of the payload in hex, or `UNSIGNED-PAYLOAD`.
    pub payload_hash: &'a str,
}

/// The canonical query string: each name and value URI-encoded, sorted.
pub fn canonical_query(query: &[(&str, &str)]) -> String {
    let mut q: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (uri_encode(k, false), uri_encode(v, false)))
        .collect();
    q.sort();
    q.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// A header value as signed: trimmed, inner whitespace runs one space.
fn squeeze(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The canonical request and its signed-header list.
pub fn canonical_request(r: &Request) -> (String, String) {
    let mut headers: Vec<(String, String)> = Vec::new();
    for (name, value) in r.headers {
        let name = name.to_ascii_lowercase();
        let value = squeeze(value);
        match headers.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => {
                v.push(',');
                v.push_str(&value);
            }
            None => headers.push((name, value)),
        }
    }
    headers.sort();
    let signed = headers
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let mut canon = format!("{}\n{}\n{}\n", r.method, r.path, canonical_query(r.query));
    for (n, v) in &headers {
        canon.push_str(n);
        canon.push(':');
        canon.push_str(v);
        canon.push('\n');
    }
    canon.push('\n');
    canon.push_str(&signed);
    canon.push('\n');
    canon.push_str(r.payload_hash);
    (canon, signed)
}

/// Signs requests with one key for one region and service.
#[derive(Clone, Debug)]
pub struct Signer {
    pub creds: Credentials,
    pub region: String,
    pub service: String,
}

impl Signer {
    /// The string to sign for `canonical` at `date` (`YYYYMMDDTHHMMSSZ`).
    pub fn string_to_sign(&self, canonical: &str, date: &str) -> String {
        format!(
            "AWS4-HMAC-SHA256\n{date}\n{}\n{}",
            self.scope(date),
            sha256_hex(canonical.as_bytes())
        )
    }

    fn scope(&self, date: &str) -> String {
        let day = date.get(..8).unwrap_or(date);
        format!("{day}/{}/{}/aws4_request", self.region, self.service)
    }

    /// The signature of `r` at `date`, in hex.
    pub fn signature(&self, r: &Request, date: &str) -> String {
        let (canonical, _) = canonical_request(r);
        let day = date.get(..8).unwrap_or(date);
        let mut key = hmac_sha256(
            format!("AWS4{}", self.creds.secret).as_bytes(),
            day.as_bytes(),
        );
        for part in [self.region.as_str(), self.service.as_str(), "aws4_request"] {
            key = hmac_sha256(&key, part.as_bytes());
        }
        hex(&hmac_sha256(
            &key,
            self.string_to_sign(&canonical, date).as_bytes(),
        ))
    }

    /// The `Authorization` header of `r` at `date`.
    pub fn authorization(&self, r: &Request, date: &str) -> String {
        let (_, signed) = canonical_request(r);
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={signed}, Signature={}",
            self.creds.access_key,
            self.scope(date),
            self.signature(r, date)
        )
    }

    /// The headers that sign an S3 request (`method` on `host` and `path`
    /// with `query`, a payload hashing to `payload_hash`) at `date`:
    /// `x-amz-date`, `x-amz-content-sha256`, the session token if any, and
    /// `Authorization`. Host, the date, the hash and the token are signed.
    pub fn s3_headers(
        &self,
        method: &str,
        host: &str,
        path: &str,
        query: &[(&str, &str)],
        payload_hash: &str,
        date: &str,
    ) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            ("host", host),
            ("x-amz-content-sha256", payload_hash),
            ("x-amz-date", date),
        ];
        if let Some(t) = &self.creds.session_token {
            headers.push(("x-amz-security-token", t));
        }
        let auth = self.authorization(
            &Request {
                method,
                path,
                query,
                headers: &headers,
                payload_hash,
            },
            date,
        );
        let mut out = vec![
            ("x-amz-date", date.to_owned()),
            ("x-amz-content-sha256", payload_hash.to_owned()),
        ];
        if let Some(t) = &self.creds.session_token {
            out.push(("x-amz-security-token", t.clone()));
        }
        out.push(("authorization", auth));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of AWS's SigV4 test suite (service `service`, us-east-1,
    /// 2015-08-30 12:36:00 UTC).
    fn suite() -> Signer {
        Signer {
            creds: Credentials::new(
                "AKIDEXAMPLE",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                None,
            ),
            region: "us-east-1".into(),
            service: "service".into(),
        }
    }

    const SUITE_DATE: &str = "20150830T123600Z";
    const SUITE_HOST: (&str, &str) = ("Host", "example.amazonaws.com");
    const SUITE_STAMP: (&str, &str) = ("X-Amz-Date", SUITE_DATE);

    fn suite_auth(method: &str, query: &[(&str, &str)], extra: &[(&str, &str)]) -> String {
        let mut headers = vec![SUITE_HOST, SUITE_STAMP];
        headers.extend_from_slice(extra);
        suite().authorization(
            &Request {
                method,
                path: "/",
                query,
                headers: &headers,
                payload_hash: EMPTY_SHA256,
            },
            SUITE_DATE,
        )
    }

    fn suite_want(signed: &str, sig: &str) -> String {
        format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders={signed}, Signature={sig}"
        )
    }

    #[test]
    fn hmac_rfc4231_case2() {
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn suite_get_vanilla() {
        let r = Request {
            method: "GET",
            path: "/",
            query: &[],
            headers: &[SUITE_HOST, SUITE_STAMP],
            payload_hash: EMPTY_SHA256,
        };
        let (canon, _) = canonical_request(&r);
        assert_eq!(
            suite().string_to_sign(&canon, SUITE_DATE),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n\
             bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"
        );
        assert_eq!(
            suite_auth("GET", &[], &[]),
            suite_want(
                "host;x-amz-date",
                "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
            )
        );
    }

    #[test]
    fn suite_get_vanilla_query_order_key_case() {
        let q = [("Param2", "value2"), ("Param1", "value1")];
        assert_eq!(canonical_query(&q), "Param1=value1&Param2=value2");
        assert_eq!(
            suite_auth("GET", &q, &[]),
            suite_want(
                "host;x-amz-date",
                "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
            )
        );
    }

    #[test]
    fn suite_post_vanilla() {
        assert_eq!(
            suite_auth("POST", &[], &[]),
            suite_want(
                "host;x-amz-date",
                "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"
            )
        );
    }

    #[test]
    fn suite_get_header_value_trim() {
        let extra = [("My-Header1", " value1"), ("My-Header2", "\"a   b   c\"")];
        assert_eq!(
            suite_auth("GET", &[], &extra),
            suite_want(
                "host;my-header1;my-header2;x-amz-date",
                "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"
            )
        );
    }

    #[test]
    fn suite_post_header_value_case() {
        assert_eq!(
            suite_auth("POST", &[], &[("My-Header1", "VALUE1")]),
            suite_want(
                "host;my-header1;x-amz-date",
                "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"
            )
        );
    }

    /// The S3 documentation's examples (examplebucket, 2013-05-24).
    fn s3() -> Signer {
        Signer {
            creds: Credentials::new(
                "AKIAIOSFODNN7EXAMPLE",
                "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                None,
            ),
            region: "us-east-1".into(),
            service: "s3".into(),
        }
    }

    const S3_DATE: &str = "20130524T000000Z";
    const S3_HOST: (&str, &str) = ("host", "examplebucket.s3.amazonaws.com");

    #[test]
    fn s3_get_object_range() {
        let r = Request {
            method: "GET",
            path: "/test.txt",
            query: &[],
            headers: &[
                S3_HOST,
                ("range", "bytes=0-9"),
                ("x-amz-content-sha256", EMPTY_SHA256),
                ("x-amz-date", S3_DATE),
            ],
            payload_hash: EMPTY_SHA256,
        };
        let (canon, _) = canonical_request(&r);
        assert!(s3()
            .string_to_sign(&canon, S3_DATE)
            .ends_with("\n7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"));
        assert_eq!(
            s3().authorization(&r, S3_DATE),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn s3_put_object() {
        let body = sha256_hex(b"Welcome to Amazon S3.");
        assert_eq!(
            body,
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
        );
        let path = format!("/{}", uri_encode("test$file.text", true));
        assert_eq!(path, "/test%24file.text");
        let r = Request {
            method: "PUT",
            path: &path,
            query: &[],
            headers: &[
                ("Date", "Fri, 24 May 2013 00:00:00 GMT"),
                S3_HOST,
                ("x-amz-date", S3_DATE),
                ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
                ("x-amz-content-sha256", &body),
            ],
            payload_hash: &body,
        };
        assert_eq!(
            s3().signature(&r, S3_DATE),
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
        );
    }

    #[test]
    fn s3_get_bucket_lifecycle_and_list() {
        let headers = [
            S3_HOST,
            ("x-amz-date", S3_DATE),
            ("x-amz-content-sha256", EMPTY_SHA256),
        ];
        let sig = |query: &[(&str, &str)]| {
            s3().signature(
                &Request {
                    method: "GET",
                    path: "/",
                    query,
                    headers: &headers,
                    payload_hash: EMPTY_SHA256,
                },
                S3_DATE,
            )
        };
        assert_eq!(
            sig(&[("lifecycle", "")]),
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"
        );
        assert_eq!(
            sig(&[("prefix", "J"), ("max-keys", "2")]),
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
        );
    }

    #[test]
    fn s3_headers_sign_the_token() {
        let mut signer = s3();
        signer.creds.session_token = Some("TOKEN".into());
        let h = signer.s3_headers("GET", "h", "/k", &[], EMPTY_SHA256, S3_DATE);
        let names: Vec<_> = h.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "x-amz-date",
                "x-amz-content-sha256",
                "x-amz-security-token",
                "authorization"
            ]
        );
        assert!(h[3]
            .1
            .contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,"));
        assert!(!format!("{signer:?}").contains("TOKEN"));
        assert!(!format!("{signer:?}").contains("bPxRfiCY"));
    }

    #[test]
    fn dates_and_encoding() {
        assert_eq!(amz_date(UNIX_EPOCH), "19700101T000000Z");
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_440_938_160);
        assert_eq!(amz_date(t), "20150830T123600Z");
        let t = UNIX_EPOCH + std::time::Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(amz_date(t), "20000229T000000Z");
        assert_eq!(uri_encode("a b/c~d+é", true), "a%20b/c~d%2B%C3%A9");
        assert_eq!(uri_encode("a/b", false), "a%2Fb");
    }
}
