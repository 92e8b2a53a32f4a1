//! The small HTTP servers the source's tests run against (std
//! TcpListener, one thread per connection), and the options, objects and
//! caches they share.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrofs_remote::{Cache, HttpOptions, RemoteError, RemoteOptions};

/// What a request asked for.
pub struct Req {
    /// `Range: bytes=A-B` as (A, B + 1).
    pub range: Option<(u64, u64)>,
    pub if_range: Option<String>,
}

/// What the server sends back.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// (A status of 0: close the connection without answering.)
    /// Announce this Content-Length (default: the body's) and close
    /// after the body, so a shorter body is a truncation.
    pub declared: Option<usize>,
    /// Send the body one byte at a time, this long apart (a trickle).
    pub pace: Option<Duration>,
}

pub type Handler = dyn Fn(&Req, usize) -> Reply + Send + Sync;

/// A test server: requests seen (with their Range header), and the most
/// handled at once.
pub struct Server {
    pub url: String,
    pub log: Arc<Mutex<Vec<String>>>,
    pub peak: Arc<AtomicUsize>,
}

impl Server {
    pub fn start(
        path: &str,
        delay: Duration,
        handler: impl Fn(&Req, usize) -> Reply + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}{path}", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let peak = Arc::new(AtomicUsize::new(0));
        let now = Arc::new(AtomicUsize::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let (l, p) = (log.clone(), peak.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (l, p, now, h) = (l.clone(), p.clone(), now.clone(), handler.clone());
                std::thread::spawn(move || {
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    p.fetch_max(n, Ordering::SeqCst);
                    serve(conn, &l, delay, &*h);
                    now.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Server { url, log, peak }
    }

    pub fn requests(&self) -> usize {
        self.log.lock().unwrap().len()
    }

    pub fn ranges(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// Answers one request on `conn` (then closes it).
pub fn serve(conn: TcpStream, log: &Mutex<Vec<String>>, delay: Duration, h: &Handler) {
    let mut r = BufReader::new(conn.try_clone().unwrap());
    let mut req = Req {
        range: None,
        if_range: None,
    };
    let mut range_text = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim();
            if k.eq_ignore_ascii_case("range") {
                range_text = v.to_owned();
                req.range = v.strip_prefix("bytes=").and_then(|s| {
                    let (a, b) = s.split_once('-')?;
                    Some((a.parse().ok()?, b.parse::<u64>().ok()? + 1))
                });
            } else if k.eq_ignore_ascii_case("if-range") {
                req.if_range = Some(v.to_owned());
            }
        }
    }
    let n = {
        let mut l = log.lock().unwrap();
        l.push(range_text);
        l.len()
    };
    std::thread::sleep(delay);
    let reply = h(&req, n);
    if reply.status == 0 {
        // Close without answering.
        return;
    }
    let mut out = conn;
    let mut head = format!(
        "HTTP/1.1 {} X\r\nConnection: close\r\nContent-Length: {}\r\n",
        reply.status,
        reply.declared.unwrap_or(reply.body.len())
    );
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = out.write_all(head.as_bytes());
    match reply.pace {
        None => {
            let _ = out.write_all(&reply.body);
        }
        Some(gap) => {
            for b in &reply.body {
                if out.write_all(&[*b]).and_then(|_| out.flush()).is_err() {
                    return;
                }
                std::thread::sleep(gap);
            }
        }
    }
}

/// A server that honours Range and If-Range for `data` with ETag `etag`.
pub fn ranged(data: &[u8], etag: &str, req: &Req) -> Reply {
    let headers = |extra: Option<String>| {
        let mut h = vec![
            ("ETag".to_owned(), etag.to_owned()),
            (
                "Last-Modified".to_owned(),
                "Mon, 23 Nov 2026 20:00:00 GMT".to_owned(),
            ),
        ];
        h.extend(extra.map(|cr| ("Content-Range".to_owned(), cr)));
        h
    };
    let whole = || Reply {
        status: 200,
        headers: headers(None),
        body: data.to_vec(),
        declared: None,
        pace: None,
    };
    if req.if_range.as_deref().is_some_and(|v| v != etag) {
        return whole();
    }
    match req.range {
        // As real servers do, a range running past the end is cut there.
        Some((a, b)) if a < b && a < data.len() as u64 => {
            let b = b.min(data.len() as u64);
            Reply {
                status: 206,
                headers: headers(Some(format!("bytes {a}-{}/{}", b - 1, data.len()))),
                body: data[a as usize..b as usize].to_vec(),
                declared: None,
                pace: None,
            }
        }
        _ => whole(),
    }
}

pub fn status(code: u16) -> Reply {
    Reply {
        status: code,
        headers: Vec::new(),
        body: b"no\n".to_vec(),
        declared: None,
        pace: None,
    }
}

/// Bytes that differ at every offset of a few MiB (no two chunks equal).
pub fn object(len: usize) -> Arc<Vec<u8>> {
    Arc::new(
        (0..len)
            .map(|i| (i % 251) as u8 ^ (i >> 12) as u8)
            .collect(),
    )
}

pub fn quick() -> RemoteOptions {
    RemoteOptions {
        http: HttpOptions {
            attempts: 3,
            backoff: Duration::from_millis(10),
            timeout: Duration::from_secs(10),
            speed_limit: 0,
            speed_time: Duration::from_secs(10),
            deadline: Duration::from_secs(60),
        },
        chunk_size: 64 << 10,
        max_request: 1 << 20,
        parallel: 4,
        whole_download: true,
    }
}

pub fn cache() -> Arc<Cache> {
    Arc::new(Cache::temporary(64 << 20).unwrap())
}

/// The typed error inside a read's `io::Error`.
pub fn remote(e: &std::io::Error) -> &RemoteError {
    e.get_ref()
        .and_then(|i| i.downcast_ref::<RemoteError>())
        .unwrap_or_else(|| panic!("not a remote error: {e}"))
}
