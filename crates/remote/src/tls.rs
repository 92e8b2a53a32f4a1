//! The certificate authorities HTTPS connections trust: the system's CA
//! bundle (`SSL_CERT_FILE`, else the distribution's bundle), as curl and
//! OpenSSL use it, so local and corporate CAs work; Mozilla's roots, built
//! in, where no bundle is found.

use std::path::PathBuf;

use ureq::tls::{parse_pem, PemItem, RootCerts};

/// Where distributions keep the bundle (Debian and derivatives, Fedora
/// and RHEL, openSUSE, Alpine).
const BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The roots to verify servers against.
pub fn roots() -> RootCerts {
    let env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    for path in env.into_iter().chain(BUNDLES.iter().map(PathBuf::from)) {
        let Ok(pem) = std::fs::read(&path) else {
            continue;
        };
        let certs: Vec<_> = parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if !certs.is_empty() {
            return RootCerts::from(certs);
        }
    }
    RootCerts::WebPki
}
