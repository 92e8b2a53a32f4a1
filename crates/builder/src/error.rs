//! Build errors: every one names the path it concerns and the cause.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum BuildError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: {reason}")]
    Input { path: PathBuf, reason: String },
    #[error("{path}: changed while being read ({reason})")]
    Changed { path: PathBuf, reason: String },
    #[error("writing {path}: {source}")]
    Output {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("interrupted; {path} was not written")]
    Interrupted { path: PathBuf },
    #[error("the image would be too large: {0}")]
    TooLarge(String),
    /// The `--base` image cannot be used at all.
    #[error("--base {path}: {reason}")]
    Base { path: PathBuf, reason: String },
    /// `--incremental`: the destination image cannot take this build.
    #[error("--incremental {path}: {reason}")]
    Incremental { path: PathBuf, reason: String },
    #[error("invalid option: {0}")]
    Option(String),
    /// A check of the builder's own bookkeeping failed (a bug).
    #[error("internal error: {0}")]
    Internal(String),
}

impl BuildError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> BuildError {
        let path = path.into();
        move |source| BuildError::Io { path, source }
    }
    pub(crate) fn input(path: impl Into<PathBuf>, reason: impl Into<String>) -> BuildError {
        BuildError::Input {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

pub type Result<T, E = BuildError> = std::result::Result<T, E>;
