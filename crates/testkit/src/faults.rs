//! A fault-injecting HTTP/1.1 proxy for the network tests: in front of a
//! real server (SeaweedFS), it passes each request through or breaks it
//! as a rule says: an answer it makes up (a 500, a 503 or a 429 with
//! `Retry-After`), a connection dropped before the request reaches the
//! server or in the middle of the answer's body, a stall before the
//! answer, or an answer whose Content-Length is not its body's. The rule
//! sees every request (method, target, count) and may act before
//! answering (the tests replace an object between two requests that way).
//!
//! One request per connection: the request goes upstream with
//! `Connection: close` and the answer comes back with it, so the bytes of
//! one answer are exactly what the server sent until it closed. Headers
//! other than Connection pass unchanged (the Host header and the path
//! are signed by SigV4).

use std::io::{self, BufReader, Read, Write};

use crate::proxy::read_head;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a request was.
#[derive(Clone, Debug)]
pub struct Request {
    /// 1 for the first request the proxy saw.
    pub n: usize,
    pub method: String,
    /// The path and query.
    pub target: String,
}

impl Request {
    /// Whether the query holds `name` (as `name=` or a bare `name`).
    pub fn has_query(&self, name: &str) -> bool {
        self.target
            .split_once('?')
            .is_some_and(|(_, q)| q.split('&').any(|p| p.split('=').next() == Some(name)))
    }
}

/// What the proxy does with a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forward it and relay the answer.
    Pass,
    /// Answer it here with this status (and `Retry-After: SECS`), after
    /// reading its body; the server never sees it.
    Status(u16, Option<u64>),
    /// Close the connection once the request head has arrived (its body,
    /// if any, half sent), answering nothing.
    DropRequest,
    /// Forward it, relay the answer's head and this many body bytes, then
    /// close: a body cut short.
    CutBody(usize),
    /// Forward it, then wait this long before relaying the answer.
    Stall(Duration),
    /// Forward it, relay the answer with its Content-Length changed by
    /// this many bytes (the body as it is): a wrong-length answer.
    WrongLength(i64),
}

/// The rule: what to do with each request.
pub type Rule = dyn Fn(&Request) -> Fault + Send + Sync;

/// A running proxy; stops accepting when dropped.
pub struct FaultProxy {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    stop: Arc<AtomicBool>,
    /// Every request seen, with the fault it got.
    pub log: Arc<Mutex<Vec<(Request, Fault)>>>,
}

/// The head's lines without the final empty one.
fn lines(head: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(head)
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

fn header<'a>(lines: &'a [String], name: &str) -> Option<&'a str> {
    lines.iter().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// `lines` as a head again, with Connection replaced by `close` and, when
/// `length` is given, Content-Length by it.
fn rebuild(lines: &[String], length: Option<u64>) -> Vec<u8> {
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let name = l
            .split_once(':')
            .map(|(k, _)| k.trim().to_ascii_lowercase());
        if i > 0 && name.as_deref() == Some("connection") {
            continue;
        }
        if i > 0 && length.is_some() && name.as_deref() == Some("content-length") {
            continue;
        }
        out.push_str(l);
        out.push_str("\r\n");
    }
    if let Some(n) = length {
        out.push_str(&format!("Content-Length: {n}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    n: usize,
    rule: &Rule,
    log: &Mutex<Vec<(Request, Fault)>>,
) -> io::Result<()> {
    let mut reply = client.try_clone()?;
    let mut r = BufReader::new(client);
    let Some(head) = read_head(&mut r)? else {
        return Ok(());
    };
    let req_lines = lines(&head);
    let mut first = req_lines
        .first()
        .map(|l| l.split(' '))
        .into_iter()
        .flatten();
    let req = Request {
        n,
        method: first.next().unwrap_or_default().to_owned(),
        target: first.next().unwrap_or_default().to_owned(),
    };
    let body_len: usize = header(&req_lines, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let fault = rule(&req);
    log.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((req.clone(), fault.clone()));
    if fault == Fault::DropRequest {
        // Read a little of the body, as a connection lost mid-upload.
        let mut some = vec![0u8; body_len.min(64 << 10)];
        let _ = r.read(&mut some);
        return reply.shutdown(Shutdown::Both);
    }
    let mut body = vec![0u8; body_len];
    r.read_exact(&mut body)?;
    if let Fault::Status(code, after) = fault {
        let mut h =
            format!("HTTP/1.1 {code} Injected\r\nContent-Length: 0\r\nConnection: close\r\n");
        if let Some(s) = after {
            h.push_str(&format!("Retry-After: {s}\r\n"));
        }
        h.push_str("\r\n");
        reply.write_all(h.as_bytes())?;
        return reply.shutdown(Shutdown::Both);
    }
    let mut up = TcpStream::connect(upstream)?;
    up.write_all(&rebuild(&req_lines, None))?;
    up.write_all(&body)?;
    let mut answer = Vec::new();
    up.read_to_end(&mut answer)?;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(answer.len(), |i| i + 4);
    let (ahead, abody) = answer.split_at(split);
    let resp_lines = lines(ahead);
    match fault {
        Fault::Stall(d) => {
            std::thread::sleep(d);
            reply.write_all(ahead)?;
            reply.write_all(abody)?;
        }
        Fault::CutBody(keep) => {
            reply.write_all(ahead)?;
            reply.write_all(&abody[..keep.min(abody.len())])?;
        }
        Fault::WrongLength(delta) => {
            let declared = header(&resp_lines, "content-length")
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(abody.len() as i64);
            let len = declared.saturating_add(delta).max(0) as u64;
            reply.write_all(&rebuild(&resp_lines, Some(len)))?;
            reply.write_all(abody)?;
        }
        _ => {
            reply.write_all(&rebuild(&resp_lines, None))?;
            reply.write_all(abody)?;
        }
    }
    reply.flush()?;
    reply.shutdown(Shutdown::Both)
}

impl FaultProxy {
    /// Listens on a free port of 127.0.0.1 and serves each connection
    /// as `rule` says, forwarding to `upstream`.
    pub fn start(
        upstream: SocketAddr,
        rule: impl Fn(&Request) -> Fault + Send + Sync + 'static,
    ) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let rule: Arc<Rule> = Arc::new(rule);
        let count = Arc::new(AtomicUsize::new(0));
        let (s, l) = (stop.clone(), log.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = conn else { continue };
                let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                let (rule, log) = (rule.clone(), l.clone());
                std::thread::spawn(move || {
                    let _ = serve(client, upstream, n, &*rule, &log);
                });
            }
        });
        Ok(FaultProxy { port, stop, log })
    }

    /// `http://127.0.0.1:PORT`, the endpoint to give clients.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The faults dealt so far (not `Pass`), as `METHOD TARGET: FAULT`.
    pub fn dealt(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, f)| *f != Fault::Pass)
            .map(|(r, f)| format!("{} {}: {f:?}", r.method, r.target))
            .collect()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}
