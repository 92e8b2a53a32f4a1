//! Build errors: every one names the path it concerns and the cause.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// Why a build failed. Nothing is left at the output path when it does.
#[derive(Debug, Error)]
pub enum BuildError {
    /// Reading an input failed.
    #[error("{path}: {source}")]
    Io {
        /// The input (a file of the source, an archive, a list).
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// An input is not what it should be (a bad archive member, a bad
    /// line of a configuration file, a file the options cannot store).
    #[error("{path}: {reason}")]
    Input {
        /// The input concerned.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A source file changed while the image was being written.
    #[error("{path}: changed while being read ({reason})")]
    Changed {
        /// The file.
        path: PathBuf,
        /// What changed.
        reason: String,
    },
    /// Writing the image (or the blob device, or the block list) failed.
    #[error("writing {path}: {source}")]
    Output {
        /// The file being written.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// The build was asked to stop (the `interrupted` flag of [`build`]).
    ///
    /// [`build`]: crate::build
    #[error("interrupted; {path} was not written")]
    Interrupted {
        /// The image that was not written.
        path: PathBuf,
    },
    /// The image would exceed what the format addresses.
    #[error("the image would be too large: {0}")]
    TooLarge(String),
    /// The `--base` image cannot be used at all.
    #[error("--base {path}: {reason}")]
    Base {
        /// The base image.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
    /// `--incremental`: the destination image cannot take this build.
    #[error("--incremental {path}: {reason}")]
    Incremental {
        /// The destination image.
        path: PathBuf,
        /// Why it cannot take the build.
        reason: String,
    },
    /// Another process holds a lock on the image (a writer changing it,
    /// or a reader of it); nothing was written.
    #[error("{path} is {by}; try again when it has finished")]
    Locked {
        /// The image.
        path: PathBuf,
        /// Who holds it, how ("being changed by process PID (COMMAND)").
        by: String,
    },
    /// The options contradict each other or the format.
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
    /// The error of a failed write (or create, sync, rename) of `path`, an
    /// output of the build.
    pub fn output(path: impl Into<PathBuf>) -> impl Fn(io::Error) -> BuildError {
        let path = path.into();
        move |source| BuildError::Output {
            path: path.clone(),
            source,
        }
    }
    pub(crate) fn input(path: impl Into<PathBuf>, reason: impl Into<String>) -> BuildError {
        BuildError::Input {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// The builder's result type.
pub type Result<T, E = BuildError> = std::result::Result<T, E>;
