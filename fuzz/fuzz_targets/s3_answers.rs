//! What S3 servers answer, on hostile input: error bodies (their Code and
//! Message become the error's text), multipart upload results and
//! listings (UploadId, ETag, Key), Retry-After headers, and the shared
//! credentials file. A
//! bad answer is an error or nothing; never a panic, and the texts made
//! of it stay bounded (an error message is not the whole body).
#![no_main]

use ferrofs_remote::http::retry_after;
use ferrofs_remote::s3::{creds, push, xml, S3Options};
use libfuzzer_sys::fuzz_target;

fn env(name: &str) -> Option<String> {
    match name {
        "AWS_ACCESS_KEY_ID" => Some("AKID".into()),
        "AWS_SECRET_ACCESS_KEY" => Some("SECRET".into()),
        "AWS_ENDPOINT_URL" => Some("http://127.0.0.1:9".into()),
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match sel % 4 {
        0 => {
            let t = S3Options::default()
                .resolve_with("s3://bucket/key.img", &env)
                .expect("a target");
            for status in [400u16, 403, 404, 500] {
                let e = t.failure("PUT object", status, &text).to_string();
                assert!(e.len() < 4096, "an error message of {} bytes", e.len());
            }
        }
        1 => {
            let _ = xml::first(&text, "UploadId");
            let _ = xml::first(&text, "ETag");
            for u in push::parse_uploads(&text) {
                assert!(!u.upload_id.is_empty(), "an upload without an id");
            }
        }
        2 => {
            let _ = retry_after(&text);
        }
        _ => {
            for profile in ["default", "ro", ""] {
                let _ = creds::parse_profile(&text, profile);
            }
        }
    }
});
