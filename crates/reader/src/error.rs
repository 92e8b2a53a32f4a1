//! Typed errors of the reader: what went wrong and where (nid, byte offset).

use std::borrow::Cow;
use std::fmt;
use std::io;

use ferrofs_codec::CodecError;
use ferrofs_format::FormatError;
use thiserror::Error;

/// Where in the image a problem was found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Location {
    pub nid: Option<u64>,
    pub offset: Option<u64>,
}

impl Location {
    pub fn nid(nid: u64) -> Self {
        Self {
            nid: Some(nid),
            offset: None,
        }
    }
    pub fn at(offset: u64) -> Self {
        Self {
            nid: None,
            offset: Some(offset),
        }
    }
    pub fn with_offset(mut self, offset: u64) -> Self {
        self.offset = Some(offset);
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.nid, self.offset) {
            (Some(n), Some(o)) => write!(f, " (nid {n}, byte {o})"),
            (Some(n), None) => write!(f, " (nid {n})"),
            (None, Some(o)) => write!(f, " (byte {o})"),
            (None, None) => Ok(()),
        }
    }
}

/// Everything that can go wrong while reading an image.
#[derive(Debug, Error)]
pub enum Error {
    #[error("I/O error reading {len} bytes at byte {offset}: {source}")]
    Io {
        offset: u64,
        len: usize,
        #[source]
        source: io::Error,
    },
    #[error("corrupt image: {source}{at}")]
    Format {
        at: Location,
        #[source]
        source: FormatError,
    },
    #[error("corrupt image: {what}{at}")]
    Corrupt {
        at: Location,
        what: Cow<'static, str>,
    },
    #[error("unsupported: {what}{at}")]
    Unsupported {
        at: Location,
        what: Cow<'static, str>,
    },
    #[error("corrupt compressed data{at}: {source}")]
    Codec {
        at: Location,
        #[source]
        source: CodecError,
    },
    #[error("{path}: no such file or directory")]
    NotFound { path: String },
    #[error("{path}: not a directory")]
    NotADirectory { path: String },
    #[error("{path}: too many levels of symbolic links")]
    TooManySymlinks { path: String },
    #[error("nid {nid}: not a {expected}")]
    WrongType { nid: u64, expected: &'static str },
}

impl Error {
    pub(crate) fn corrupt(at: Location, what: impl Into<Cow<'static, str>>) -> Self {
        Error::Corrupt {
            at,
            what: what.into(),
        }
    }
    pub(crate) fn unsupported(at: Location, what: impl Into<Cow<'static, str>>) -> Self {
        Error::Unsupported {
            at,
            what: what.into(),
        }
    }
    pub(crate) fn format(at: Location, source: FormatError) -> Self {
        Error::Format { at, source }
    }
    /// Whether this error says the image is damaged (as opposed to a missing
    /// path, an unsupported feature or an I/O failure of the source).
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            Error::Corrupt { .. } | Error::Format { .. } | Error::Codec { .. }
        ) || matches!(self, Error::Io { source, .. } if source.kind() == io::ErrorKind::UnexpectedEof)
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        let kind = match &e {
            Error::Io { source, .. } => source.kind(),
            Error::NotFound { .. } => io::ErrorKind::NotFound,
            Error::NotADirectory { .. } => io::ErrorKind::NotADirectory,
            Error::Unsupported { .. } => io::ErrorKind::Unsupported,
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, e)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
