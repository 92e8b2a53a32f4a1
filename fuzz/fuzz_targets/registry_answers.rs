//! What registries answer and users write, on hostile input: image
//! references, manifests and indexes (parsed, checked, a platform chosen),
//! `WWW-Authenticate` challenges and platform names. A bad input is an
//! error or nothing, never a panic; a reference that parses prints as one
//! that parses to the same.
#![no_main]

use ferrofs_remote::registry::auth::parse_challenge;
use ferrofs_remote::registry::manifest::{choose, Doc, Kind, Platform};
use ferrofs_remote::registry::Reference;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match sel % 4 {
        0 => {
            if let Ok(r) = Reference::parse(&text) {
                let again = Reference::parse(&r.to_string()).expect("a printed reference parses");
                assert_eq!(again, r, "{text:?} prints as {r}");
            }
        }
        1 => {
            for header in [None, Some("application/vnd.oci.image.index.v1+json")] {
                if let Ok((doc, kind)) = Doc::parse(rest, "r", header) {
                    if kind == Kind::Index {
                        let entries = doc.manifests.as_deref().unwrap_or_default();
                        let _ = choose(entries, &Platform::host(), "r");
                    }
                }
            }
        }
        2 => {
            let _ = parse_challenge(&text);
        }
        _ => {
            if let Ok(p) = Platform::parse(&text) {
                assert!(p.matches(&p) || p.os.is_empty(), "{p} does not match itself");
            }
        }
    }
});
