//! Publishing an image to S3, atomically: one signed `PUT` for an image
//! of at most one part, else a multipart upload whose parts go up in
//! parallel and which is completed only when every part is in (the object
//! appears then, whole) or aborted (no object, no parts left behind) on
//! any failure or a stop request. Also the few bucket operations tests
//! and tools need (create a bucket, list its unfinished uploads, HEAD).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrofs::ReadAt;
use ureq::Agent;

use super::{sigv4, xml, Answer, Target};
use crate::error::{RemoteError, Result};
use crate::http::{agent, HttpOptions};

/// S3's limit on the number of parts of one upload.
pub const MAX_PARTS: u64 = 10_000;

/// How an image is uploaded.
#[derive(Clone, Debug)]
pub struct PushOptions {
    /// Bytes per part; an image of at most this many bytes goes up in one
    /// `PUT`. Grown for an image that would need more than [`MAX_PARTS`].
    pub part_size: u64,
    /// Parts in flight at once.
    pub parallel: usize,
    /// Timeouts and attempts of each request.
    pub http: HttpOptions,
    /// A pause before each part (tests interrupt uploads in flight).
    pub part_delay: Duration,
    /// Sign the image's bytes as `UNSIGNED-PAYLOAD` instead of their
    /// SHA-256 (as curl does): no hashing here, and none by the server,
    /// which then cannot check the bytes it got against the signature.
    pub unsigned_payload: bool,
}

impl Default for PushOptions {
    /// 16 MiB parts, 4 at a time.
    fn default() -> Self {
        PushOptions {
            part_size: 16 << 20,
            parallel: 4,
            http: HttpOptions::default(),
            part_delay: Duration::ZERO,
            unsigned_payload: false,
        }
    }
}

/// What a push did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    pub bytes: u64,
    /// Parts of the multipart upload; 0 for a single `PUT`.
    pub parts: u64,
    /// The object's ETag, as the server gave it.
    pub etag: Option<String>,
}

/// An unfinished multipart upload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    pub key: String,
    pub upload_id: String,
    /// When it was started, as the server says (ISO 8601), if it does.
    pub initiated: Option<String>,
}

/// The unfinished uploads a `ListMultipartUploads` answer lists (those
/// without a key or an id are left out).
pub fn parse_uploads(body: &str) -> Vec<Upload> {
    xml::all(body, "Upload")
        .filter_map(|u| {
            Some(Upload {
                key: xml::first(&u, "Key")?,
                upload_id: xml::first(&u, "UploadId").filter(|i| !i.is_empty())?,
                initiated: xml::first(&u, "Initiated"),
            })
        })
        .collect()
}

/// Signed requests about one object and its bucket.
pub struct Uploader {
    agent: Agent,
    t: Arc<Target>,
    opts: PushOptions,
}

/// A request's body: none, or bytes.
type Body<'a> = Option<&'a [u8]>;

/// What a request sends: small bytes of ours, or a span of the image,
/// read as it is sent (after a first pass that hashes it, unless the
/// payload goes unsigned).
#[derive(Clone, Copy)]
enum Payload<'a> {
    Bytes(&'a [u8]),
    Image {
        src: &'a (dyn ReadAt + Sync),
        start: u64,
        len: u64,
    },
}

/// Bytes `pos..end` of an image as a reader.
struct Span<'a> {
    src: &'a (dyn ReadAt + Sync),
    pos: u64,
    end: u64,
}

impl std::io::Read for Span<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.end.saturating_sub(self.pos);
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        if n == 0 {
            return Ok(0);
        }
        self.src.read_exact_at(&mut buf[..n], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Read size of the image: hashing and sending.
const BLOCK: usize = 1 << 20;

impl Uploader {
    pub fn new(t: Target, opts: PushOptions) -> Uploader {
        Uploader {
            agent: agent(&opts.http),
            t: Arc::new(t),
            opts,
        }
    }

    /// The object.
    pub fn target(&self) -> &Target {
        &self.t
    }

    /// One signed request (retried on a dropped connection, a 5xx, a 408
    /// or a 429, `attempts` times in all, after the server's Retry-After
    /// when it gives a longer one than the backoff): the answer whatever
    /// its status.
    fn request(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        body: Body,
    ) -> Result<Answer> {
        self.send(method, path, query, Payload::Bytes(body.unwrap_or(&[])))
    }

    /// [`Uploader::request`] sending `body`: the image's bytes are hashed
    /// in a first pass (unless the payload goes unsigned), then read as
    /// they are sent.
    fn send(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        body: Payload,
    ) -> Result<Answer> {
        let (hash, len) = match body {
            Payload::Bytes(b) => (sigv4::sha256_hex(b), b.len() as u64),
            Payload::Image { len, .. } if self.opts.unsigned_payload => {
                ("UNSIGNED-PAYLOAD".to_owned(), len)
            }
            Payload::Image { src, start, len } => (self.hash(src, start, len)?, len),
        };
        let url = self.t.url(path, query);
        let attempts = self.opts.http.attempts.max(1);
        let mut wait = self.opts.http.backoff;
        let mut n = 1;
        loop {
            let mut b = ureq::http::Request::builder()
                .method(method)
                .uri(&url)
                .header("content-length", len);
            for (name, value) in self.t.sign(method, path, query, &hash) {
                b = b.header(name, value);
            }
            let mut reader: Box<dyn std::io::Read + '_> = match body {
                Payload::Bytes(b) => Box::new(b),
                Payload::Image { src, start, len } => Box::new(std::io::BufReader::with_capacity(
                    BLOCK,
                    Span {
                        src,
                        pos: start,
                        end: start.saturating_add(len),
                    },
                )),
            };
            let sent = match b.body(ureq::SendBody::from_reader(&mut reader)) {
                Ok(req) => self.agent.run(req),
                Err(e) => {
                    return Err(RemoteError::BadResponse {
                        url: self.t.display().to_owned(),
                        what: format!("cannot build the {method} request: {e}"),
                    })
                }
            };
            let failure = match sent {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let etag = resp
                        .headers()
                        .get("etag")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let asked = resp
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(crate::http::retry_after)
                        .unwrap_or(Duration::ZERO);
                    let text = super::read_small(resp.into_body().into_reader());
                    // A server asking for a longer wait than a request's
                    // deadline gets its answer taken as it is.
                    let retry = matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
                        && asked <= self.opts.http.deadline;
                    if !retry || n >= attempts {
                        return Ok(Answer {
                            status,
                            etag,
                            body: text,
                        });
                    }
                    wait = wait.max(asked);
                    None
                }
                Err(e) => {
                    let transient = matches!(
                        e,
                        ureq::Error::Io(_)
                            | ureq::Error::ConnectionFailed
                            | ureq::Error::Timeout(_)
                    );
                    let err = RemoteError::Transport {
                        url: self.t.display().to_owned(),
                        attempts: n,
                        source: e,
                    };
                    if !transient || n >= attempts {
                        return Err(err);
                    }
                    Some(err)
                }
            };
            drop(failure);
            std::thread::sleep(wait);
            wait = wait.saturating_mul(2);
            n += 1;
        }
    }

    /// The answer if it is a success, else the error it says.
    fn ok(&self, what: &str, a: Answer) -> Result<Answer> {
        // CompleteMultipartUpload may fail with a 200 and an <Error> body.
        if (200..300).contains(&a.status) && !a.body.contains("<Error>") {
            Ok(a)
        } else {
            let status = if a.status == 200 { 500 } else { a.status };
            Err(self.t.failure(what, status, &a.body))
        }
    }

    /// Uploads the `len` bytes of `src` as the object: returns once the
    /// object is there whole. `progress(n)` is told of every `n` bytes
    /// sent; `stop` set (by a signal handler) ends the upload, aborted,
    /// with [`RemoteError::Interrupted`].
    pub fn push(
        &self,
        src: &(dyn ReadAt + Sync),
        len: u64,
        progress: &(dyn Fn(u64) + Sync),
        stop: &AtomicBool,
    ) -> Result<Pushed> {
        let part = self.opts.part_size.max(1).max(len.div_ceil(MAX_PARTS));
        if len <= part {
            let data = Payload::Image { src, start: 0, len };
            let a = self.send("PUT", &self.t.object_path(), &[], data)?;
            let a = self.ok("PUT object", a)?;
            progress(len);
            return Ok(Pushed {
                bytes: len,
                parts: 0,
                etag: a.etag,
            });
        }
        let parts = len.div_ceil(part);
        let a = self.request("POST", &self.t.object_path(), &[("uploads", "")], Some(&[]))?;
        let a = self.ok("CreateMultipartUpload", a)?;
        let Some(id) = xml::first(&a.body, "UploadId").filter(|i| !i.is_empty()) else {
            return Err(RemoteError::BadResponse {
                url: self.t.display().to_owned(),
                what: "CreateMultipartUpload answered without an UploadId".into(),
            });
        };
        let etags = self.upload_parts(src, (len, part, parts), &id, progress, stop);
        let etags = match etags {
            Ok(e) => e,
            Err(e) => {
                self.abort(&id);
                return Err(e);
            }
        };
        let mut doc = String::from("<CompleteMultipartUpload>");
        for (i, etag) in etags.iter().enumerate() {
            doc.push_str(&format!(
                "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>",
                i + 1,
                xml::escape(etag)
            ));
        }
        doc.push_str("</CompleteMultipartUpload>");
        let done = self
            .request(
                "POST",
                &self.t.object_path(),
                &[("uploadId", &id)],
                Some(doc.as_bytes()),
            )
            .and_then(|a| self.ok("CompleteMultipartUpload", a));
        match done {
            Ok(a) => Ok(Pushed {
                bytes: len,
                parts,
                etag: xml::first(&a.body, "ETag").or(a.etag),
            }),
            Err(e) => {
                self.abort(&id);
                Err(e)
            }
        }
    }

    /// SHA-256 (hex) of bytes `start..start+len` of `src`.
    fn hash(&self, src: &(dyn ReadAt + Sync), start: u64, len: u64) -> Result<String> {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        let mut buf = vec![0u8; BLOCK];
        let mut pos = start;
        let end = start.saturating_add(len);
        while pos < end {
            let n = usize::try_from(end - pos).unwrap_or(BLOCK).min(BLOCK);
            src.read_exact_at(&mut buf[..n], pos)
                .map_err(|e| RemoteError::ImageRead {
                    url: self.t.display().to_owned(),
                    start: pos,
                    end: pos + n as u64,
                    source: e,
                })?;
            h.update(&buf[..n]);
            pos += n as u64;
        }
        Ok(sigv4::hex(&h.finalize()))
    }

    /// Uploads every part, `parallel` at once; their ETags in order.
    fn upload_parts(
        &self,
        src: &(dyn ReadAt + Sync),
        (len, part, parts): (u64, u64, u64),
        id: &str,
        progress: &(dyn Fn(u64) + Sync),
        stop: &AtomicBool,
    ) -> Result<Vec<String>> {
        let next = AtomicU64::new(0);
        let failed: Mutex<Option<RemoteError>> = Mutex::new(None);
        let give_up = AtomicBool::new(false);
        let etags: Mutex<Vec<Option<String>>> =
            Mutex::new(vec![None; usize::try_from(parts).unwrap_or(0)]);
        let worker = || loop {
            if give_up.load(Ordering::Relaxed) {
                return;
            }
            if stop.load(Ordering::Relaxed) {
                give_up.store(true, Ordering::Relaxed);
                return;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= parts {
                return;
            }
            if !self.opts.part_delay.is_zero() {
                std::thread::sleep(self.opts.part_delay);
            }
            let start = i * part;
            let n = part.min(len - start);
            let number = (i + 1).to_string();
            let data = Payload::Image { src, start, len: n };
            let res = (|| {
                let a = self.send(
                    "PUT",
                    &self.t.object_path(),
                    &[("partNumber", &number), ("uploadId", id)],
                    data,
                )?;
                let a = self.ok("UploadPart", a)?;
                a.etag.ok_or_else(|| RemoteError::BadResponse {
                    url: self.t.display().to_owned(),
                    what: format!("UploadPart {number} answered without an ETag"),
                })
            })();
            match res {
                Ok(etag) => {
                    if let Some(slot) = etags
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_mut(i as usize)
                    {
                        *slot = Some(etag);
                    }
                    progress(n);
                }
                Err(e) => {
                    give_up.store(true, Ordering::Relaxed);
                    failed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                    return;
                }
            }
        };
        std::thread::scope(|s| {
            for _ in 0..self.opts.parallel.max(1) {
                s.spawn(worker);
            }
        });
        if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        if stop.load(Ordering::Relaxed) {
            return Err(RemoteError::Interrupted {
                url: self.t.display().to_owned(),
            });
        }
        let etags = etags.into_inner().unwrap_or_else(|e| e.into_inner());
        etags
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| RemoteError::Interrupted {
                url: self.t.display().to_owned(),
            })
    }

    /// Aborts upload `id` (its parts are deleted); tried a few times, and
    /// a failure to is only reported on stderr (the upload's own error is
    /// the one returned).
    pub fn abort(&self, id: &str) {
        let mut last = None;
        for _ in 0..3 {
            match self
                .request("DELETE", &self.t.object_path(), &[("uploadId", id)], None)
                .and_then(|a| self.ok("AbortMultipartUpload", a))
            {
                Ok(_) => return,
                Err(RemoteError::S3NotFound { .. }) => return,
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        if let Some(e) = last {
            eprintln!("warning: {e}: the unfinished upload's parts may be left in the bucket");
        }
    }

    /// Creates the bucket (an existing one of ours is fine).
    pub fn create_bucket(&self) -> Result<()> {
        let a = self.request("PUT", &self.t.bucket_path(), &[], None)?;
        if a.body.contains("BucketAlreadyOwnedByYou") {
            return Ok(());
        }
        self.ok("CreateBucket", a).map(|_| ())
    }

    /// The bucket's unfinished multipart uploads (the first page).
    pub fn list_uploads(&self) -> Result<Vec<Upload>> {
        let a = self.request("GET", &self.t.bucket_path(), &[("uploads", "")], None)?;
        let a = self.ok("ListMultipartUploads", a)?;
        Ok(parse_uploads(&a.body))
    }

    /// Aborts the unfinished multipart uploads of this object's key (those
    /// a killed push left: their parts cost storage and never become the
    /// object) and returns them. A push of the same key running at this
    /// moment elsewhere loses its upload too (it then fails, and nothing
    /// is published): two pushes of one key race anyway.
    pub fn abort_abandoned(&self) -> Result<Vec<Upload>> {
        let key = self.t.key.as_str();
        let a = self.request(
            "GET",
            &self.t.bucket_path(),
            &[("prefix", key), ("uploads", "")],
            None,
        )?;
        let a = self.ok("ListMultipartUploads", a)?;
        let mine: Vec<Upload> = parse_uploads(&a.body)
            .into_iter()
            .filter(|u| u.key == key)
            .collect();
        for u in &mine {
            self.abort(&u.upload_id);
        }
        Ok(mine)
    }

    /// Whether the object exists (a signed `HEAD`).
    pub fn exists(&self) -> Result<bool> {
        let a = self.request("HEAD", &self.t.object_path(), &[], None)?;
        match a.status {
            404 => Ok(false),
            _ => self.ok("HEAD object", a).map(|_| true),
        }
    }

    /// Deletes the object.
    pub fn delete(&self) -> Result<()> {
        let a = self.request("DELETE", &self.t.object_path(), &[], None)?;
        self.ok("DELETE object", a).map(|_| ())
    }
}

/// Seconds since `t`, for reports.
pub fn since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}
