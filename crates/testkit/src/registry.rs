//! The CNCF registry (distribution v3) on 127.0.0.1 for tests of pulling
//! and pushing images: filesystem storage in a temporary directory, and
//! one of three kinds of access: open, HTTP Basic (an htpasswd file with
//! a read-write and a read-only user), or Bearer tokens from a small
//! token service here that signs ES256 JWTs with a key made for the run
//! (its certificate is the registry's `rootcertbundle`). Stopped on drop.
//!
//! `registry` is found from `UPSTREAM_REGISTRY_BIN`, from what
//! `<workspace>/../shared/tools/upstream-tools --registry` prints, or at
//! `~/.cache/upstream-registry/bin`. Token access also needs `openssl`.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;

/// The user who may pull and push.
pub const WRITER: (&str, &str) = ("writer", "ferrofs-pass");
/// The user who may only pull.
pub const READER: (&str, &str) = ("reader", "reader-pass");
/// bcrypt hashes of the two passwords (cost 4).
const HTPASSWD: &str = "writer:$2b$04$d9wI1oykpbHQvjenmVV02uKY8.MoerwbwTKhWqufczkjnsYP/hIzW\n\
                        reader:$2b$04$VjWdmtJ6JmD2XQ91TXbqGu7LH12bE7ZWEd927vOaP9DbcC3YRxB3C\n";
const SERVICE: &str = "ferrofs-registry";
const ISSUER: &str = "ferrofs-test-issuer";

/// How clients are let in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone may pull and push.
    Open,
    /// HTTP Basic: [`WRITER`] pulls and pushes, [`READER`] pulls.
    Basic,
    /// Bearer tokens from the token service: anonymous clients may pull,
    /// [`WRITER`] pull and push, [`READER`] pull.
    Token,
}

/// The directory holding `registry`, if it can be found.
pub fn registry_bin_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        crate::tools::find_tool_dir(
            "UPSTREAM_REGISTRY_BIN",
            &["--registry"],
            ".cache/upstream-registry/bin",
            &["registry"],
        )
    })
    .clone()
}

/// A running registry.
pub struct CncfRegistry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    log: PathBuf,
    token: Option<TokenService>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl CncfRegistry {
    /// Starts the registry from `bin_dir` with its storage, configuration
    /// and log under `dir`, and waits until it answers.
    pub fn start(bin_dir: &Path, dir: &Path, access: Access) -> CncfRegistry {
        let data = dir.join("registry-data");
        std::fs::create_dir_all(&data).unwrap();
        let mut token = None;
        let auth = match access {
            Access::Open => String::new(),
            Access::Basic => {
                let p = dir.join("htpasswd");
                std::fs::write(&p, HTPASSWD).unwrap();
                format!(
                    "auth:\n  htpasswd:\n    realm: ferrofs-test\n    path: {}\n",
                    p.display()
                )
            }
            Access::Token => {
                let t = TokenService::start(dir);
                let cfg = format!(
                    "auth:\n  token:\n    realm: http://{}/token\n    service: {SERVICE}\n    \
                     issuer: {ISSUER}\n    rootcertbundle: {}\n",
                    t.addr,
                    t.cert.display()
                );
                token = Some(t);
                cfg
            }
        };
        let config = dir.join("registry.yml");
        let log = dir.join("registry.log");
        for attempt in 0.. {
            let port = free_port();
            let addr = format!("127.0.0.1:{port}");
            std::fs::write(
                &config,
                format!(
                    "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  \
                     delete:\n    enabled: true\nhttp:\n  addr: {addr}\n{auth}",
                    data.display()
                ),
            )
            .unwrap();
            let mut cmd = Command::new(bin_dir.join("registry"));
            cmd.arg("serve")
                .arg(&config)
                .env("OTEL_TRACES_EXPORTER", "none");
            let child = crate::process::spawn_logged(&mut cmd, &log);
            let mut r = CncfRegistry {
                child,
                addr,
                log: log.clone(),
                token: token.take(),
            };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(30) {
                if r.child.try_wait().unwrap().is_some() {
                    break;
                }
                // Ours, not whoever else may hold the port now.
                if crate::process::listens_on(r.child.id(), port) {
                    return r;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let text = r.log_text();
            // Someone took the port between our probe and the
            // registry's bind: try another.
            if attempt < 4 && text.contains("address already in use") {
                token = r.token.take();
                continue;
            }
            panic!("registry did not start: {text}");
        }
        unreachable!()
    }

    /// The registry's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Tokens the token service refused so far.
    pub fn token_refusals(&self) -> u32 {
        self.token
            .as_ref()
            .map_or(0, |t| t.refused.load(Ordering::Relaxed))
    }

    /// Writes an `auth.json` at `path` with `user`'s credentials for this
    /// registry.
    pub fn write_auth(&self, path: &Path, user: (&str, &str)) {
        let auth =
            base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", user.0, user.1));
        std::fs::write(
            path,
            format!(
                "{{\"auths\":{{\"{}\":{{\"auth\":\"{auth}\"}}}}}}\n",
                self.addr
            ),
        )
        .unwrap();
    }
}

impl Drop for CncfRegistry {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.child.id())])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if self.child.try_wait().ok().flatten().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The token service: `GET /token?service=…&scope=…`, HTTP Basic for a
/// user (anonymous otherwise), answering `{"token": JWT}` granting what
/// the user may of each scope asked for.
struct TokenService {
    addr: String,
    cert: PathBuf,
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicU32>,
}

impl TokenService {
    fn start(dir: &Path) -> TokenService {
        let key_pem = dir.join("token-key.pem");
        let cert = dir.join("token-cert.pem");
        let key_der = dir.join("token-key.p8");
        let ok = |c: &mut Command| {
            let o = c.stdin(Stdio::null()).output().expect("openssl");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        };
        ok(Command::new("openssl")
            .args([
                "ecparam",
                "-name",
                "prime256v1",
                "-genkey",
                "-noout",
                "-out",
            ])
            .arg(&key_pem));
        ok(Command::new("openssl")
            .args([
                "req",
                "-new",
                "-x509",
                "-days",
                "2",
                "-subj",
                "/CN=ferrofs-token",
                "-key",
            ])
            .arg(&key_pem)
            .arg("-out")
            .arg(&cert));
        ok(Command::new("openssl")
            .args(["pkcs8", "-topk8", "-nocrypt", "-outform", "DER", "-in"])
            .arg(&key_pem)
            .arg("-out")
            .arg(&key_der));
        let pkcs8 = std::fs::read(&key_der).unwrap();
        let rng = ring::rand::SystemRandom::new();
        let key = ring::signature::EcdsaKeyPair::from_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &pkcs8,
            &rng,
        )
        .unwrap();
        let pem = std::fs::read_to_string(&cert).unwrap();
        let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(AtomicU32::new(0));
        let (s2, r2) = (stop.clone(), refused.clone());
        let key = Arc::new(key);
        std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        let (k, c, r) = (key.clone(), b64.clone(), r2.clone());
                        std::thread::spawn(move || serve_token(conn, &k, &c, &r));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        TokenService {
            addr,
            cert,
            stop,
            refused,
        }
    }
}

impl Drop for TokenService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn b64url(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                out.push(u8::from_str_radix(h, 16).unwrap_or(b'?'));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn serve_token(
    mut conn: TcpStream,
    key: &ring::signature::EcdsaKeyPair,
    cert_b64: &str,
    refused: &AtomicU32,
) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut auth = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("authorization") {
                auth = Some(v.trim().to_owned());
            }
        }
    }
    let target = line.split_whitespace().nth(1).unwrap_or("");
    let query = target.split_once('?').map_or("", |(_, q)| q);
    let mut scopes = Vec::new();
    let mut service = String::new();
    for kv in query.split('&') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "scope" => scopes.push(unescape(v)),
            "service" => service = unescape(v),
            _ => {}
        }
    }
    let user = match auth.as_deref().and_then(|a| a.strip_prefix("Basic ")) {
        None => Some("".to_owned()),
        Some(b) => {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(b)
                .unwrap_or_default();
            let text = String::from_utf8_lossy(&raw).into_owned();
            match text.split_once(':') {
                Some((u, p)) if (u, p) == WRITER || (u, p) == READER => Some(u.to_owned()),
                _ => None,
            }
        }
    };
    let reply = |conn: &mut TcpStream, status: &str, body: &str| {
        let _ = write!(
            conn,
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    };
    let Some(user) = user.filter(|_| service == SERVICE) else {
        refused.fetch_add(1, Ordering::Relaxed);
        reply(
            &mut conn,
            "401 Unauthorized",
            "{\"details\":\"bad credentials\"}",
        );
        return;
    };
    let access: Vec<serde_json::Value> = scopes
        .iter()
        .filter_map(|s| {
            let mut parts = s.splitn(3, ':');
            let (t, name, actions) = (parts.next()?, parts.next()?, parts.next()?);
            let allowed: Vec<&str> = actions
                .split(',')
                .filter(|a| *a == "pull" || (*a == "push" && user == WRITER.0))
                .collect();
            Some(serde_json::json!({"type": t, "name": name, "actions": allowed}))
        })
        .collect();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = serde_json::json!({"typ": "JWT", "alg": "ES256", "x5c": [cert_b64]});
    let claims = serde_json::json!({
        "iss": ISSUER, "sub": user, "aud": SERVICE, "exp": now + 600, "nbf": now - 60,
        "iat": now, "jti": format!("{now}-{}", refused.load(Ordering::Relaxed)), "access": access,
    });
    let signing_input = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(claims.to_string().as_bytes())
    );
    let rng = ring::rand::SystemRandom::new();
    let sig = key.sign(&rng, signing_input.as_bytes()).unwrap();
    let token = format!("{signing_input}.{}", b64url(sig.as_ref()));
    reply(
        &mut conn,
        "200 OK",
        &serde_json::json!({"token": token, "expires_in": 600}).to_string(),
    );
}
