//! Where an image's bytes come from: the one place that turns an image or
//! device argument into a reader source, a local file or, for an
//! `http://`/`https://` URL or an `s3://BUCKET/KEY` object, a lazily
//! fetched remote object.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use crate::verified::{TreeSources, VerityArgs};
use anyhow::{Context, Result};
use ferrofs::source::Offset;
use ferrofs::{Image, OpenOptions, ReadAt};
use ferrofs_remote::{Cache, HttpOptions, HttpSource, RemoteError, RemoteOptions};

/// Options of images read over HTTP(S).
#[derive(clap::Args, Clone)]
pub struct RemoteArgs {
    /// For an image (or device) given as an http:// or https:// URL: keep
    /// the fetched chunks in DIR, shared by later runs (default: a
    /// temporary directory removed at exit).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Most bytes the cache directory may hold; the least recently used
    /// chunks are removed beyond it.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = crate::size::parse)]
    cache_dir_size: usize,
    /// Do not fetch the hot ranges a `mkfs --profile` image names (its
    /// recorded start-up's data) up front.
    #[arg(long)]
    no_hot_prefetch: bool,
    /// Per-request timeout of a URL's server: the longest wait to connect,
    /// for a response's headers, and for any read of its body.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = parse_secs)]
    http_timeout: Duration,
    /// Low-speed limit: a response body slower than this many bytes per
    /// second over --http-speed-time is abandoned (and retried); 0: none.
    #[arg(long, value_name = "BYTES", default_value = "1K", value_parser = crate::size::parse_u64)]
    http_speed_limit: u64,
    /// The window of --http-speed-limit.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = parse_secs)]
    http_speed_time: Duration,
    /// Total deadline of one request, its 5 attempts and their backoff
    /// included: the longest a request to a URL's server takes to fail
    /// (after such a failure the server is not asked for that long).
    #[arg(long, value_name = "SECS", default_value = "120", value_parser = parse_secs)]
    http_deadline: Duration,
    #[command(flatten)]
    pub s3: S3Args,
    /// Whether this process fetches the hot ranges (not the mount command
    /// that only checks the image before its daemon serves it).
    #[arg(skip = true)]
    pub prefetch_here: bool,
}

/// Where an s3://BUCKET/KEY object is and whose keys sign its requests.
#[derive(clap::Args, Clone)]
pub struct S3Args {
    /// For s3:// URLs: the S3-compatible endpoint, http(s)://HOST[:PORT]
    /// (default: $AWS_ENDPOINT_URL, else AWS in --s3-region).
    #[arg(long, value_name = "URL")]
    s3_endpoint: Option<String>,
    /// For s3:// URLs: the region (default: $AWS_REGION, else
    /// $AWS_DEFAULT_REGION; us-east-1 with an endpoint).
    #[arg(long, value_name = "REGION")]
    s3_region: Option<String>,
    /// For s3:// URLs: the profile of the shared credentials file
    /// ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) whose keys
    /// sign (default: $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY/
    /// $AWS_SESSION_TOKEN, else the profile $AWS_PROFILE or default).
    #[arg(long, value_name = "NAME")]
    s3_profile: Option<String>,
    /// For s3:// URLs: name the bucket in the path (ENDPOINT/BUCKET/KEY,
    /// the default with an endpoint) or in the host name
    /// (BUCKET.HOST/KEY, the default on AWS).
    #[arg(long, value_name = "HOW")]
    s3_addressing: Option<S3Addressing>,
}

/// `--s3-addressing`.
#[derive(clap::ValueEnum, Clone, Copy)]
enum S3Addressing {
    Path,
    Virtual,
}

impl S3Args {
    /// The S3 options these arguments ask for.
    pub fn options(&self) -> ferrofs_remote::s3::S3Options {
        use ferrofs_remote::s3::Addressing;
        ferrofs_remote::s3::S3Options {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            profile: self.s3_profile.clone(),
            addressing: self.s3_addressing.map(|a| match a {
                S3Addressing::Path => Addressing::Path,
                S3Addressing::Virtual => Addressing::Virtual,
            }),
        }
    }
}

impl RemoteArgs {
    /// `--cache-dir`, if given.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// The remote source's options these arguments ask for.
    pub fn options(&self) -> RemoteOptions {
        RemoteOptions {
            http: HttpOptions {
                timeout: self.http_timeout,
                speed_limit: self.http_speed_limit,
                speed_time: self.http_speed_time,
                deadline: self.http_deadline,
                ..HttpOptions::default()
            },
            ..RemoteOptions::default()
        }
    }
}

/// `s` as a duration: seconds (`30`, `1.5`, `30s`) or milliseconds
/// (`500ms`), more than 0 and at most a day.
fn parse_secs(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix("ms") {
        Some(n) => (n, 0.001),
        None => (t.strip_suffix('s').unwrap_or(t), 1.0),
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .map(|n| n * scale)
        .filter(|&n| n > 0.0 && n <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            format!("invalid duration {s:?} (seconds, e.g. 30 or 1.5, or milliseconds, e.g. 500ms)")
        })
}

/// Every remote source opened, to ask whether its object changed.
static REMOTES: Mutex<Vec<Weak<HttpSource>>> = Mutex::new(Vec::new());

/// Adds `src` to [`REMOTES`] (its object checked for changes, its fetches
/// counted).
pub(crate) fn remember(src: &Arc<HttpSource>) {
    REMOTES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Arc::downgrade(src));
}

/// The change of a remote image (or device) any source of this process
/// has seen: what was read is a mix of two objects, not a damaged image.
pub fn remote_change() -> Option<RemoteError> {
    let remotes = REMOTES.lock().unwrap_or_else(PoisonError::into_inner);
    remotes
        .iter()
        .filter_map(Weak::upgrade)
        .find_map(|src| src.changed())
}

/// The first failed read of a remote image (or device) by any source of
/// this process, as its error said: what read the image missed some of it.
pub fn remote_failure() -> Option<String> {
    let remotes = REMOTES.lock().unwrap_or_else(PoisonError::into_inner);
    remotes
        .iter()
        .filter_map(Weak::upgrade)
        .find_map(|src| src.failed())
}

/// Requests made and bytes received by every remote source of this
/// process still open; `None` when none was opened.
pub fn remote_stats() -> Option<ferrofs_remote::Stats> {
    let remotes = REMOTES.lock().unwrap_or_else(PoisonError::into_inner);
    let live: Vec<_> = remotes.iter().filter_map(Weak::upgrade).collect();
    (!live.is_empty()).then(|| {
        live.iter().fold(ferrofs_remote::Stats::default(), |a, s| {
            let b = s.stats();
            ferrofs_remote::Stats {
                requests: a.requests + b.requests,
                bytes: a.bytes + b.bytes,
            }
        })
    })
}

/// The prefetching threads and their stop flags.
type Prefetches = Vec<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>;
static PREFETCHES: Mutex<Prefetches> = Mutex::new(Vec::new());

/// Stops the prefetching threads (after their requests in flight) and
/// waits for them, so the sources and a temporary cache directory are
/// dropped (and removed) before the process exits.
pub fn stop_prefetches() {
    let jobs = std::mem::take(&mut *PREFETCHES.lock().unwrap_or_else(PoisonError::into_inner));
    for (stop, _) in &jobs {
        stop.store(true, Ordering::Relaxed);
    }
    for (_, job) in jobs {
        let _ = job.join();
    }
}

/// Fetches the hot ranges a `mkfs --profile` image (starting `at` bytes
/// into `src`) records, in the background: reads that need a chunk it is
/// fetching wait for that chunk's request only. Stopped and joined by
/// [`stop_prefetches`] at exit.
pub(crate) fn prefetch_hot(src: &Arc<HttpSource>, at: u64) {
    prefetch_hot_of(src, at, None)
}

/// [`prefetch_hot`] of an image of `len` bytes (what follows it in the
/// object, a dm-verity tree, is not the image's).
pub(crate) fn prefetch_hot_of(src: &Arc<HttpSource>, at: u64, len: Option<u64>) {
    let hot = match len {
        Some(l) => src.hot_ranges_of(at, l),
        None => src.hot_ranges(at),
    };
    match hot {
        Err(why) => eprintln!("warning: {}: hot-range record ignored: {why}", src.url()),
        Ok(Some(hot)) => {
            let bg = src.clone();
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            let job = std::thread::spawn(move || {
                if let Err(e) = bg.prefetch(&hot, &s) {
                    eprintln!("warning: {}: prefetch: {e}", bg.url());
                }
            });
            PREFETCHES
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((stop, job));
        }
        Ok(None) => {}
    }
}

/// A source read here and by a prefetching thread.
struct Shared(Arc<HttpSource>);

impl ReadAt for Shared {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }

    fn len(&self) -> std::io::Result<u64> {
        ReadAt::len(&*self.0)
    }
}

/// Bytes per fetch of [`Sources::open_blockwise`]: a hash block.
const BLOCKWISE: u64 = 4096;

/// Opens image and device arguments, all URLs sharing one chunk cache.
pub struct Sources<'a> {
    args: &'a RemoteArgs,
    cache: Option<Arc<Cache>>,
}

impl<'a> Sources<'a> {
    pub fn new(args: &'a RemoteArgs) -> Self {
        Sources { args, cache: None }
    }

    /// The chunk cache every remote source of this run shares.
    pub fn shared_cache(&mut self) -> Result<Arc<Cache>> {
        self.cache()
    }

    fn cache(&mut self) -> Result<Arc<Cache>> {
        if let Some(c) = &self.cache {
            return Ok(c.clone());
        }
        let limit = self.args.cache_dir_size as u64;
        let cache = Arc::new(match &self.args.cache_dir {
            Some(dir) => Cache::open(dir, limit)?,
            None => Cache::temporary(limit)?,
        });
        self.cache = Some(cache.clone());
        Ok(cache)
    }

    /// For a URL, the object `arg` names opened again with fetches of one
    /// 4 KiB block (a hash tree's block) instead of cache chunks, sharing
    /// the chunk cache; `None` for a local file, or a server without range
    /// requests (whose whole object the cache holds already).
    pub fn open_blockwise(&mut self, arg: &Path, what: &str) -> Result<Option<Box<dyn ReadAt>>> {
        let Some(url) = arg.to_str().filter(|s| ferrofs_remote::is_url(s)) else {
            return Ok(None);
        };
        let cache = self.cache()?;
        let opts = RemoteOptions {
            chunk_size: BLOCKWISE,
            whole_download: false,
            ..self.args.options()
        };
        let src =
            match ferrofs_remote::open(url, &self.args.s3.options(), cache, &opts, &mut |_| {}) {
                Ok(src) => Arc::new(src),
                Err(RemoteError::NoRangeSupport { .. }) => return Ok(None),
                Err(e) => return Err(e).with_context(|| format!("cannot open {what}{url}")),
            };
        remember(&src);
        Ok(Some(Box::new(Shared(src))))
    }

    /// The source `arg` names (`what` says which argument, for errors).
    /// `image_at`: the image starts this many bytes into it (its hot-range
    /// record is used); `None` for an extra device.
    pub fn open(
        &mut self,
        arg: &Path,
        what: &str,
        image_at: Option<u64>,
    ) -> Result<Box<dyn ReadAt>> {
        match arg.to_str().filter(|s| ferrofs_remote::is_url(s)) {
            Some(url) => {
                let cache = self.cache()?;
                let mut say = |len: u64| {
                    eprintln!(
                        "note: {url}: the server does not do range requests: downloading the \
                         whole image ({len} bytes) into the cache"
                    )
                };
                let src = Arc::new(ferrofs_remote::open(
                    url,
                    &self.args.s3.options(),
                    cache,
                    &self.args.options(),
                    &mut say,
                )?);
                remember(&src);
                if let Some(at) = image_at {
                    if self.args.prefetch_here && !self.args.no_hot_prefetch {
                        prefetch_hot(&src, at);
                    } else if let Err(why) = src.hot_ranges(at) {
                        eprintln!("warning: {url}: hot-range record ignored: {why}");
                    }
                }
                Ok(Box::new(Shared(src)))
            }
            None => {
                let f = std::fs::File::open(arg)
                    .with_context(|| format!("cannot open {what}{}", arg.display()))?;
                if f.metadata().is_ok_and(|m| m.is_dir()) {
                    anyhow::bail!("cannot open {what}{}: it is a directory", arg.display());
                }
                // A writer changing the image in place (`mkfs --incremental`)
                // holds an exclusive lock: wait for it rather than read a
                // half-appended image. Held while `f` is open.
                ferrofs::lock::shared_waiting(&f, |holder| {
                    eprintln!(
                        "note: waiting for {} to finish changing {}",
                        holder.map_or_else(|| "another process".into(), |h| h.to_string()),
                        arg.display()
                    )
                })
                .with_context(|| format!("cannot lock {what}{}", arg.display()))?;
                Ok(Box::new(f))
            }
        }
    }
}

/// Opens the image `image` (starting `offset` bytes in) with the extra
/// devices `devices`, files or URLs alike, every block checked against a
/// dm-verity tree when `verity` asks for it.
pub fn open_image(
    image: &Path,
    devices: &[PathBuf],
    offset: u64,
    (remote, verity): (&RemoteArgs, &VerityArgs),
    mut opts: OpenOptions,
) -> Result<Image> {
    // An EROFS-native image in a registry: its layers merged, read
    // lazily where their trees vouch for them (this machine's platform,
    // the default credentials; `mount` takes the registry options).
    if let Some(reference) = image.to_str().filter(|s| crate::registry::is_docker(s)) {
        if verity.is_on() || !devices.is_empty() || offset != 0 {
            anyhow::bail!("a docker:// image takes no --device, --offset or --verity");
        }
        let reg = crate::registry::RegistryArgs::default();
        return crate::lazy::open(reference, &reg, remote, false, false, opts);
    }
    if verity.is_on() && !devices.is_empty() {
        // Their blocks are no part of the image's tree.
        anyhow::bail!(
            "--verity checks the image's own blocks; its extra devices (--device) would be read \
             unverified: not supported"
        );
    }
    let mut sources = Sources::new(remote);
    let primary = sources.open(image, "", Some(offset))?;
    // A remote tree is read a hash block at a time: a cold read then
    // fetches the few blocks on its path, not a cache chunk around each.
    let tree = match verity.hash_file() {
        _ if !verity.is_on() => TreeSources::default(),
        Some(f) => TreeSources {
            hash_file: Some(match sources.open_blockwise(f, "verity hash file ")? {
                Some(fine) => fine,
                None => sources.open(f, "verity hash file ", None)?,
            }),
            tree_reader: None,
        },
        None => TreeSources {
            hash_file: None,
            tree_reader: sources.open_blockwise(image, "")?,
        },
    };
    let primary = verity
        .wrap(primary, offset, tree)
        .with_context(|| image.display().to_string())?;
    for d in devices {
        opts.devices.push(sources.open(d, "device ", None)?);
    }
    let source = Offset::new(primary, offset);
    Image::open_with(Box::new(source), opts).with_context(|| image.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_secs("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_secs("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_secs("500ms"), Ok(Duration::from_millis(500)));
        for bad in ["0", "-1", "soon", "", "1e9", "NaN", "inf"] {
            assert!(parse_secs(bad).is_err(), "{bad}");
        }
    }
}
