//! Images over HTTP(S): [`HttpSource`] is a [`ferrofs::ReadAt`] that reads
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
pub mod source;
pub mod tls;

pub use cache::Cache;
pub use error::{RemoteError, Result};
pub use http::HttpOptions;
pub use source::{HttpSource, RemoteOptions, Stats};

/// Whether `s` names a URL (`scheme://…`) rather than a file: an image
/// argument that does is read with [`HttpSource`] (which refuses schemes
/// other than http and https).
pub fn is_url(s: &str) -> bool {
    http::scheme(s).is_some()
}
