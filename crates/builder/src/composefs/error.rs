//! Errors of the composefs writer: each names the input path (or the dump
//! file's line) and the reason, as mkcomposefs's messages do.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// Why a composefs image could not be written.
#[derive(Debug, Error)]
pub enum CfsError {
    /// Reading a source file or directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// A line of the dump file is not valid.
    #[error("line {line}: {reason}")]
    Dump {
        /// 1-based line number in the dump file.
        line: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The tree cannot be stored as composefs stores trees.
    #[error("{path}: {reason}")]
    Tree {
        /// The path in the image (`/` for the root).
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// Writing the image or an object of the store failed.
    #[error("writing {path}: {source}")]
    Output {
        /// The file being written.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// An option value is out of range.
    #[error("{0}")]
    Option(String),
}

impl CfsError {
    /// An [`CfsError::Io`] builder for `map_err`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> CfsError {
        let path = path.into();
        move |source| CfsError::Io { path, source }
    }

    /// An [`CfsError::Output`] builder for `map_err`.
    pub(crate) fn output(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> CfsError {
        let path = path.into();
        move |source| CfsError::Output { path, source }
    }

    /// A [`CfsError::Tree`] for the image path `path`.
    pub(crate) fn tree(path: impl Into<String>, reason: impl Into<String>) -> CfsError {
        CfsError::Tree {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// The composefs writer's result.
pub type CfsResult<T> = std::result::Result<T, CfsError>;
