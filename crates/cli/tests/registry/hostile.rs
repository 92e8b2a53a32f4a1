//! A fake registry serving one layout's documents and blobs, each answer
//! changeable: manifests that are not JSON, too large or of an unknown
//! type, blobs whose bytes do not match their digest or run long, a
//! redirect loop, a 401 without a challenge, an index without the
//! platform asked for, transient 503s and 429s (retried), and blobs
//! redirected to another host (which must not see the registry's
//! credentials). Every failure names the reference and leaves no image
//! and no scratch directory behind. An index of two platforms converts
//! to one of two EROFS-native manifests (`--all-platforms`) or of the
//! host's.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::{err, leftovers, make_layout, ok, s, skip_reason};

/// An answer: status, headers, body.
type Answer = (u16, Vec<(String, String)>, Vec<u8>);
/// The requests a server saw: path and headers.
type Seen = Mutex<Vec<(String, HashMap<String, String>)>>;
/// Decides the answer to (method, path, headers).
type Handler = dyn Fn(&str, &str, &HashMap<String, String>) -> Answer + Send + Sync;

/// A tiny HTTP/1.1 server on 127.0.0.1 (one request per connection).
struct Fake {
    addr: String,
    seen: Arc<Seen>,
}

impl Fake {
    fn start(h: Arc<Handler>) -> Fake {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let seen: Arc<Seen> = Arc::default();
        let seen2 = seen.clone();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let (h, seen) = (h.clone(), seen2.clone());
                std::thread::spawn(move || serve(c, &*h, &seen));
            }
        });
        Fake { addr, seen }
    }
}

fn serve(mut c: TcpStream, h: &Handler, seen: &Seen) {
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut line = String::new();
    if r.read_line(&mut line).is_err() {
        return;
    }
    let mut headers = HashMap::new();
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).unwrap_or(0) == 0 || l.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    if let Some(n) = headers
        .get("content-length")
        .and_then(|v| v.parse::<u64>().ok())
    {
        let _ = std::io::copy(&mut (&mut r).take(n), &mut std::io::sink());
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    seen.lock().unwrap().push((path.clone(), headers.clone()));
    let (status, hs, body) = h(&method, &path, &headers);
    let mut out = format!(
        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in hs {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let _ = c.write_all(out.as_bytes());
    if method != "HEAD" {
        let _ = c.write_all(&body);
    }
}

/// The layout's blobs by digest, its manifest digest.
fn blobs(layout: &Path) -> (HashMap<String, Vec<u8>>, String) {
    let mut m = HashMap::new();
    for e in std::fs::read_dir(layout.join("blobs/sha256"))
        .unwrap()
        .flatten()
    {
        m.insert(
            format!("sha256:{}", e.file_name().to_string_lossy()),
            std::fs::read(e.path()).unwrap(),
        );
    }
    let idx: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    (
        m,
        idx["manifests"][0]["digest"].as_str().unwrap().to_owned(),
    )
}

fn ok_answer(body: Vec<u8>, ctype: &str) -> Answer {
    (200, vec![("content-type".into(), ctype.into())], body)
}

/// Serves the layout as repository `r` (`/v2/r/manifests/v1`, blobs),
/// with `twist` given the first say.
fn registry(
    layout: &Path,
    twist: impl Fn(&str, &str, &HashMap<String, String>) -> Option<Answer> + Send + Sync + 'static,
) -> Fake {
    let (b, manifest) = blobs(layout);
    Fake::start(Arc::new(
        move |m: &str, p: &str, h: &HashMap<String, String>| {
            if let Some(a) = twist(m, p, h) {
                return a;
            }
            if p == "/v2/r/manifests/v1" || p == format!("/v2/r/manifests/{manifest}") {
                return ok_answer(
                    b[&manifest].clone(),
                    "application/vnd.oci.image.manifest.v1+json",
                );
            }
            if let Some(d) = p.strip_prefix("/v2/r/blobs/") {
                if let Some(data) = b.get(d) {
                    return ok_answer(data.clone(), "application/octet-stream");
                }
            }
            (
                404,
                vec![],
                b"{\"errors\":[{\"code\":\"NOT_FOUND\"}]}".to_vec(),
            )
        },
    ))
}

fn manifest_json(layout: &Path) -> serde_json::Value {
    let (b, m) = blobs(layout);
    serde_json::from_slice(&b[&m]).unwrap()
}

#[test]
fn hostile_registries_are_refused_by_name() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let work = ferrofs_testkit::work_dir!("registry_hostile");
    let layout = work.join("L");
    make_layout(&layout);
    let m = manifest_json(&layout);
    let layer0 = m["layers"][0]["digest"].as_str().unwrap().to_owned();
    let config = m["config"]["digest"].as_str().unwrap().to_owned();
    let img = work.join("out.img");
    let mut failures = Vec::new();
    let mut case = |name: &str, fake: Fake, want: &[&str]| {
        let r = format!("docker://{}/r:v1", fake.addr);
        let e = err(&["mkfs", &s(&img), &r]);
        for w in want {
            if !e.contains(w) {
                failures.push(format!("{name}: the error lacks {w:?}: {e}"));
            }
        }
        if img.exists() {
            failures.push(format!("{name}: an image was written"));
        }
        if !leftovers(&work).is_empty() {
            failures.push(format!("{name}: left {:?}", leftovers(&work)));
        }
    };
    let manifest_path = |p: &str| p.starts_with("/v2/r/manifests/");
    case(
        "not JSON",
        registry(&layout, move |_, p, _| {
            manifest_path(p).then(|| {
                ok_answer(
                    b"<html>".to_vec(),
                    "application/vnd.oci.image.manifest.v1+json",
                )
            })
        }),
        &["r:v1", "not valid JSON"],
    );
    case(
        "too large",
        registry(&layout, move |_, p, _| {
            manifest_path(p).then(|| ok_answer(vec![b' '; 5 << 20], "application/json"))
        }),
        &["larger than"],
    );
    case(
        "unknown media type",
        registry(&layout, move |_, p, _| {
            manifest_path(p).then(|| {
                ok_answer(
                    br#"{"schemaVersion":2,"mediaType":"application/x-evil"}"#.to_vec(),
                    "application/x-evil",
                )
            })
        }),
        &["r:v1", "unknown manifest media type"],
    );
    let l0 = layer0.clone();
    case(
        "layer cut short",
        registry(&layout, move |_, p, _| {
            (p == format!("/v2/r/blobs/{l0}")).then(|| (200, vec![], Vec::new()))
        }),
        &[&layer0, "truncated"],
    );
    let (b, _) = blobs(&layout);
    let mut flipped = b[&layer0].clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    let l0 = layer0.clone();
    case(
        "layer digest mismatch",
        registry(&layout, move |_, p, _| {
            (p == format!("/v2/r/blobs/{l0}"))
                .then(|| ok_answer(flipped.clone(), "application/octet-stream"))
        }),
        &[&layer0, "arrived with digest"],
    );
    let mut longer = b[&config].clone();
    longer.extend_from_slice(b"  ");
    let c0 = config.clone();
    case(
        "config runs long",
        registry(&layout, move |_, p, _| {
            (p == format!("/v2/r/blobs/{c0}"))
                .then(|| ok_answer(longer.clone(), "application/octet-stream"))
        }),
        &[&config, "longer than"],
    );
    case(
        "redirect loop",
        registry(&layout, move |_, p, _| {
            manifest_path(p).then(|| {
                (
                    307,
                    vec![("location".into(), "/v2/r/manifests/v1".into())],
                    Vec::new(),
                )
            })
        }),
        &["more than 5 redirects"],
    );
    case(
        "401 without a challenge",
        registry(&layout, move |_, _, _| Some((401, vec![], Vec::new()))),
        &["no Basic or Bearer challenge"],
    );
    // An index without linux/amd64.
    let man = blobs(&layout).1;
    let size = b[&man].len();
    let index = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[
        {{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{man}","size":{size},"platform":{{"os":"linux","architecture":"arm64","variant":"v8"}}}},
        {{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{man}","size":{size},"platform":{{"os":"linux","architecture":"s390x"}}}}]}}"#
    );
    let idx = index.clone();
    case(
        "no such platform",
        registry(&layout, move |_, p, _| {
            (p == "/v2/r/manifests/v1").then(|| {
                ok_answer(
                    idx.as_bytes().to_vec(),
                    "application/vnd.oci.image.index.v1+json",
                )
            })
        }),
        &[
            "no image for linux/amd64",
            "linux/arm64/v8, linux/s390x",
            "--platform",
        ],
    );
    // ... which --platform chooses.
    let idx = index.clone();
    let f = registry(&layout, move |_, p, _| {
        (p == "/v2/r/manifests/v1").then(|| {
            ok_answer(
                idx.as_bytes().to_vec(),
                "application/vnd.oci.image.index.v1+json",
            )
        })
    });
    ok(&[
        "mkfs",
        &s(&img),
        &format!("docker://{}/r:v1", f.addr),
        "--platform",
        "linux/arm64",
    ]);
    std::fs::remove_file(&img).unwrap();

    // An EROFS layer from a registry that answers a range request with
    // the whole blob cannot be read lazily: said so, nothing mounted.
    let fake_layer = vec![7u8; 8192];
    let layer_digest = format!("sha256:{}", super::sha256_hex(&fake_layer));
    let cfg = br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#
        .to_vec();
    let cfg_digest = format!("sha256:{}", super::sha256_hex(&cfg));
    let man = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
        "config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{cfg_digest}","size":{}}},
        "layers":[{{"mediaType":"application/vnd.erofs.layer.v1","digest":"{layer_digest}","size":8192}}]}}"#,
        cfg.len()
    );
    let f = Fake::start(Arc::new(
        move |_: &str, p: &str, _: &HashMap<String, String>| {
            if p.starts_with("/v2/r/manifests/") {
                ok_answer(
                    man.as_bytes().to_vec(),
                    "application/vnd.oci.image.manifest.v1+json",
                )
            } else if p.ends_with(&cfg_digest) {
                ok_answer(cfg.clone(), "application/octet-stream")
            } else {
                ok_answer(fake_layer.clone(), "application/octet-stream")
            }
        },
    ));
    let mnt = work.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let e = err(&[
        "mount",
        "--insecure-lazy",
        &format!("docker://{}/r:v1", f.addr),
        &s(&mnt),
    ]);
    if !(e.contains("whole blob") && e.contains("range request")) {
        failures.push(format!("200 to a range request: {e}"));
    }

    // Transient answers are retried (503 with Retry-After, 429).
    let n = Arc::new(AtomicU32::new(0));
    let n2 = n.clone();
    let f = registry(&layout, move |_, p, _| {
        if p.starts_with("/v2/r/blobs/") && n2.fetch_add(1, Ordering::SeqCst) < 2 {
            let status = if n2.load(Ordering::SeqCst) == 1 {
                503
            } else {
                429
            };
            return Some((status, vec![("retry-after".into(), "0".into())], Vec::new()));
        }
        None
    });
    ok(&["mkfs", &s(&img), &format!("docker://{}/r:v1", f.addr)]);
    ok(&["fsck", &s(&img)]);
    assert!(n.load(Ordering::SeqCst) >= 3);
    std::fs::remove_file(&img).unwrap();

    // Blobs redirected to storage elsewhere: followed, without the
    // registry's credentials.
    let (b, _) = blobs(&layout);
    let storage = Fake::start(Arc::new(
        move |_: &str, p: &str, _: &HashMap<String, String>| match b
            .get(p.trim_start_matches("/store/"))
        {
            Some(d) => ok_answer(d.clone(), "application/octet-stream"),
            None => (404, vec![], Vec::new()),
        },
    ));
    let store = storage.addr.clone();
    let f = registry(&layout, move |_, p, h| {
        if h.get("authorization").map(String::as_str) != Some("Basic dTpw") {
            return Some((
                401,
                vec![("www-authenticate".into(), "Basic realm=\"x\"".into())],
                Vec::new(),
            ));
        }
        p.strip_prefix("/v2/r/blobs/").map(|d| {
            (
                307,
                vec![("location".into(), format!("http://{store}/store/{d}"))],
                Vec::new(),
            )
        })
    });
    let auth = work.join("auth.json");
    std::fs::write(
        &auth,
        format!(r#"{{"auths":{{"{}":{{"auth":"dTpw"}}}}}}"#, f.addr),
    )
    .unwrap();
    ok(&[
        "mkfs",
        &s(&img),
        &format!("docker://{}/r:v1", f.addr),
        "--authfile",
        &s(&auth),
    ]);
    ok(&["fsck", &s(&img)]);
    let seen = storage.seen.lock().unwrap();
    if seen.len() < 3 {
        failures.push(format!(
            "storage saw {} requests, expected the 3 blobs",
            seen.len()
        ));
    }
    for (p, h) in seen.iter() {
        if h.contains_key("authorization") {
            failures.push(format!("storage got the registry's credentials for {p}"));
        }
    }
    drop(seen);
    ferrofs_testkit::tmp::finish(&work, &failures);
}

#[test]
fn indexes_convert_per_platform() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let work = ferrofs_testkit::work_dir!("registry_platforms");
    let layout = work.join("L");
    make_layout(&layout);
    let (b, man) = blobs(&layout);
    let size = b[&man].len();
    let index = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[
        {{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{man}","size":{size},"platform":{{"os":"linux","architecture":"arm64","variant":"v8"}}}},
        {{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{man}","size":{size},"platform":{{"os":"linux","architecture":"amd64"}}}}]}}"#
    );
    let f = registry(&layout, move |_, p, _| {
        (p == "/v2/r/manifests/v1").then(|| {
            ok_answer(
                index.as_bytes().to_vec(),
                "application/vnd.oci.image.index.v1+json",
            )
        })
    });
    let src = format!("docker://{}/r:v1", f.addr);
    for (extra, want) in [
        (vec!["--all-platforms"], vec!["arm64", "amd64"]),
        (vec![], vec!["amd64"]),
    ] {
        let out = work.join(format!("OUT{}", want.len()));
        let mut args = vec!["convert", &src];
        let dst = format!("oci:{}", out.display());
        args.push(&dst);
        args.extend(extra.iter().copied());
        ok(&args);
        let read = |d: &str| {
            std::fs::read(
                out.join("blobs/sha256")
                    .join(d.trim_start_matches("sha256:")),
            )
            .unwrap()
        };
        let top: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
        let idx: serde_json::Value =
            serde_json::from_slice(&read(top["manifests"][0]["digest"].as_str().unwrap())).unwrap();
        assert_eq!(idx["mediaType"], "application/vnd.oci.image.index.v1+json");
        let entries = idx["manifests"].as_array().unwrap();
        let archs: Vec<&str> = entries
            .iter()
            .map(|e| e["platform"]["architecture"].as_str().unwrap())
            .collect();
        assert_eq!(archs, want);
        for e in entries {
            assert_eq!(e["platform"]["os.features"], serde_json::json!(["erofs"]));
            let m: serde_json::Value =
                serde_json::from_slice(&read(e["digest"].as_str().unwrap())).unwrap();
            for l in m["layers"].as_array().unwrap() {
                assert_eq!(l["mediaType"], "application/vnd.erofs.layer.v1");
            }
        }
    }
    ferrofs_testkit::tmp::finish(&work, &Vec::<String>::new());
}
