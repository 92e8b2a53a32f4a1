//! A delaying HTTP/1.1 proxy for latency tests and benchmarks (the kernel
//! here has no netem): each request a client sends is held for a fixed
//! delay before it goes to the upstream server, as one round trip of a
//! slow link would hold it, and requests and response body bytes are
//! counted. Connections are proxied one to one, so a client's parallel
//! connections wait in parallel. `GET /.proxy-stats` is answered by the
//! proxy itself (not delayed, not counted): `REQUESTS BYTES\n`.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
}

/// A running proxy; stops accepting when dropped.
pub struct DelayProxy {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
}

/// The header block of a request or response (up to the empty line), or
/// `None` at a clean end of the stream (the fault proxy's too).
pub(crate) fn read_head(r: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    loop {
        let n = r.read_until(b'\n', &mut head)?;
        if n == 0 {
            return if head.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        if head.ends_with(b"\r\n\r\n") || head == b"\r\n" {
            return Ok(Some(head));
        }
    }
}

/// The Content-Length of a header block (0 when absent).
fn content_length(head: &[u8]) -> u64 {
    String::from_utf8_lossy(head)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Copies `n` bytes from `r` to `w`.
fn copy_body(r: &mut impl Read, w: &mut impl Write, n: u64) -> io::Result<()> {
    let copied = io::copy(&mut r.take(n), w)?;
    if copied < n {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// Requests from the client: delayed, counted, forwarded.
fn requests(
    client: TcpStream,
    mut upstream: TcpStream,
    delay: Duration,
    c: &Counters,
) -> io::Result<()> {
    let mut reply = client.try_clone()?;
    let mut r = BufReader::new(client);
    while let Some(head) = read_head(&mut r)? {
        if head.starts_with(b"GET /.proxy-stats ") {
            let body = format!(
                "{} {}\n",
                c.requests.load(Ordering::Relaxed),
                c.bytes.load(Ordering::Relaxed)
            );
            write!(
                reply,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )?;
            let _ = upstream.shutdown(Shutdown::Both);
            return Ok(());
        }
        std::thread::sleep(delay);
        c.requests.fetch_add(1, Ordering::Relaxed);
        upstream.write_all(&head)?;
        copy_body(&mut r, &mut upstream, content_length(&head))?;
    }
    upstream.shutdown(Shutdown::Write)
}

/// Responses from the server: forwarded, body bytes counted. A response
/// to HEAD or a 1xx/204/304 has no body but states no length either, so
/// Content-Length is taken as given (the tests and benchmarks send GET).
fn responses(upstream: TcpStream, mut client: TcpStream, c: &Counters) -> io::Result<()> {
    let mut r = BufReader::new(upstream);
    while let Some(head) = read_head(&mut r)? {
        let n = content_length(&head);
        client.write_all(&head)?;
        copy_body(&mut r, &mut client, n)?;
        c.bytes.fetch_add(n, Ordering::Relaxed);
    }
    client.shutdown(Shutdown::Write)
}

impl DelayProxy {
    /// Listens on 127.0.0.1 (`port`, 0 for any free one) and forwards to
    /// `upstream`, holding every request for `delay`.
    pub fn start(port: u16, upstream: SocketAddr, delay: Duration) -> io::Result<DelayProxy> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let port = listener.local_addr()?.port();
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counters.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = conn else { continue };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (c1, c2) = (c.clone(), c.clone());
                let (cl, sv) = match (client.try_clone(), server.try_clone()) {
                    (Ok(cl), Ok(sv)) => (cl, sv),
                    _ => continue,
                };
                std::thread::spawn(move || requests(client, server, delay, &c1));
                std::thread::spawn(move || responses(sv, cl, &c2));
            }
        });
        Ok(DelayProxy {
            port,
            counters,
            stop,
        })
    }

    /// Requests forwarded so far.
    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::Relaxed)
    }

    /// Response body bytes forwarded so far.
    pub fn bytes(&self) -> u64 {
        self.counters.bytes.load(Ordering::Relaxed)
    }

    /// `http://127.0.0.1:PORT/NAME`.
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accepting thread so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}
