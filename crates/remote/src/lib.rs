//! Images over HTTP(S) and in S3 object storage (`s3://BUCKET/KEY`, every
//! request SigV4-signed, [`s3`]): [`HttpSource`] is a [`ferrofs::ReadAt`] that reads
//! an image lazily with range requests, keeps fetched chunks in a bounded
//! on-disk [`Cache`], coalesces adjacent misses into one request and runs
//! large reads' requests in parallel, retries transient failures with
//! backoff within a total deadline (every wait bounded by a timeout and a
//! low-speed limit, see [`HttpOptions`]), and refuses to mix data of an
//! object that changed under it.

pub mod cache;
pub mod error;
pub mod hot;
pub mod http;
pub mod plan;
pub mod registry;
pub mod s3;
pub mod source;
pub mod tls;

pub use cache::Cache;
pub use error::{RemoteError, Result};
pub use http::HttpOptions;
pub use source::{HttpSource, RemoteOptions, Stats};

/// Opens `url`: an `s3://BUCKET/KEY` object (located and signed as `s3`
/// says, see [`s3::S3Options::resolve`]) or an `http://`/`https://` URL
/// (`before_whole` as for [`HttpSource::open_noting`]).
pub fn open(
    url: &str,
    s3: &s3::S3Options,
    cache: std::sync::Arc<Cache>,
    opts: &RemoteOptions,
    before_whole: &mut dyn FnMut(u64),
) -> Result<HttpSource> {
    if is_s3(url) {
        HttpSource::open_s3(s3.resolve(url)?, cache, opts)
    } else {
        HttpSource::open_noting(url, cache, opts, before_whole)
    }
}

/// Whether `s` is an `s3://` URL.
pub fn is_s3(s: &str) -> bool {
    http::scheme(s).is_some_and(|sc| sc.eq_ignore_ascii_case("s3"))
}

/// Whether `s` names a URL (`scheme://…`) rather than a file: an image
/// argument that does is read with [`HttpSource`] (`s3://` through [`open`]; other schemes
/// than http, https and s3 are refused).
pub fn is_url(s: &str) -> bool {
    http::scheme(s).is_some()
}
