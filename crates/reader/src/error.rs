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
    /// The inode concerned, when known.
    pub nid: Option<u64>,
    /// The byte concerned (of the image, or of the inode's data), when known.
    pub offset: Option<u64>,
}

impl Location {
    /// At inode `nid`.
    pub fn nid(nid: u64) -> Self {
        Self {
            nid: Some(nid),
            offset: None,
        }
    }
    /// At byte `offset`.
    pub fn at(offset: u64) -> Self {
        Self {
            nid: None,
            offset: Some(offset),
        }
    }
    /// The same place, narrowed to byte `offset`.
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
#[non_exhaustive]
pub enum Error {
    /// The image file could not be opened (missing, a directory, no
    /// permission).
    #[error("cannot open {}: {source}", path.display())]
    Open {
        /// The path given.
        path: std::path::PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// The source holds no EROFS image: no superblock magic where it
    /// belongs, or too few bytes for a superblock.
    #[error("{}not an EROFS image ({why})", path_prefix(path))]
    NotAnImage {
        /// The file, when opened by path.
        path: Option<std::path::PathBuf>,
        /// What was found instead.
        why: String,
    },
    /// The source is shorter than the superblock says the image is (a
    /// partial copy or download).
    #[error(
        "{}image truncated: {len} bytes, the superblock says {expected}",
        path_prefix(path)
    )]
    Truncated {
        /// The file, when opened by path.
        path: Option<std::path::PathBuf>,
        /// Bytes the source holds.
        len: u64,
        /// Bytes the superblock's block count covers.
        expected: u64,
    },
    /// An extra device given (`--device`) is not the one the image was
    /// built with: a blob of another build, or too short for what the
    /// image maps on it.
    #[error("extra device {device} (--device) is not the one this image was built with: {why}")]
    WrongDevice {
        /// Its position among the image's extra devices, from 1.
        device: usize,
        /// What does not match.
        why: String,
    },
    /// The source failed to deliver bytes.
    #[error("I/O error reading {len} bytes at byte {offset}: {source}")]
    Io {
        /// Where the read started.
        offset: u64,
        /// How many bytes were asked for.
        len: usize,
        /// What the source said.
        #[source]
        source: io::Error,
    },
    /// An on-disk structure does not decode (the image is damaged).
    #[error("corrupt image: {source}{at}")]
    Format {
        /// Where.
        at: Location,
        /// What the format layer found.
        #[source]
        source: FormatError,
    },
    /// The image breaks a rule of the format (it is damaged).
    #[error("corrupt image: {what}{at}")]
    Corrupt {
        /// Where.
        at: Location,
        /// Which rule.
        what: Cow<'static, str>,
    },
    /// The image uses a feature this reader does not implement.
    #[error("unsupported: {what}{at}")]
    Unsupported {
        /// Where.
        at: Location,
        /// Which feature.
        what: Cow<'static, str>,
    },
    /// Compressed data does not decode (the image is damaged).
    #[error("corrupt compressed data{at}: {source}")]
    Codec {
        /// Where.
        at: Location,
        /// What the decoder said.
        #[source]
        source: CodecError,
    },
    /// The path names nothing.
    #[error("{path}: no such file or directory")]
    NotFound {
        /// The path asked for.
        path: String,
    },
    /// A directory was needed (in the middle of a path, or to list).
    #[error("{path}: not a directory")]
    NotADirectory {
        /// The path asked for.
        path: String,
    },
    /// A file to read turned out to be a directory.
    #[error("{path}: is a directory")]
    IsADirectory {
        /// The path asked for.
        path: String,
    },
    /// `read_link` of something that is not a symlink.
    #[error("{path}: not a symbolic link")]
    NotASymlink {
        /// The path asked for.
        path: String,
    },
    /// `read_to_string` of a file that is not UTF-8 text.
    #[error("{path}: not valid UTF-8")]
    NotUtf8 {
        /// The path asked for.
        path: String,
    },
    /// Resolving the path followed more than 40 symlinks, or looked up
    /// more than [`crate::raw::MAX_PATH_STEPS`] components.
    #[error("{path}: too many levels of symbolic links")]
    TooManySymlinks {
        /// The path asked for.
        path: String,
    },
    /// Data lies on an extra device that was not given (the image was
    /// opened without device sources, and the primary source does not
    /// hold the devices concatenated after it either).
    #[error(
        "data{at} is on extra device {device} (tag {tag:?}), which was not given: \
         pass the image's extra devices, in device-table order (--device)"
    )]
    MissingDevice {
        /// Where.
        at: Location,
        /// The device's number (1 = the first extra device).
        device: u16,
        /// Its tag in the device table.
        tag: String,
    },
    /// Verified reads (see [`crate::verity`]): a block does not match the
    /// dm-verity hash tree (an integrity error naming the block), the root
    /// hash is wrong, or the tree cannot be found or read.
    #[error("{0}")]
    Verity(#[source] std::sync::Arc<ferrofs_verity::Error>),
    /// An inode-level call got an inode of the wrong type.
    #[error("nid {nid}: not a {expected}")]
    WrongType {
        /// The inode.
        nid: u64,
        /// The type the call needs.
        expected: &'static str,
    },
}

/// `"PATH: "` for an error that names its file, else nothing.
fn path_prefix(path: &Option<std::path::PathBuf>) -> String {
    path.as_ref()
        .map(|p| format!("{}: ", p.display()))
        .unwrap_or_default()
}

impl Error {
    /// An owned copy of the error, for reporting one failure in several
    /// places (every file a damaged cluster serves). An I/O error keeps
    /// its kind and message but not its inner source.
    pub fn clone_lossy(&self) -> Self {
        match self {
            Error::Open { path, source } => Error::Open {
                path: path.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            Error::NotAnImage { path, why } => Error::NotAnImage {
                path: path.clone(),
                why: why.clone(),
            },
            Error::Truncated {
                path,
                len,
                expected,
            } => Error::Truncated {
                path: path.clone(),
                len: *len,
                expected: *expected,
            },
            Error::WrongDevice { device, why } => Error::WrongDevice {
                device: *device,
                why: why.clone(),
            },
            Error::Io {
                offset,
                len,
                source,
            } => Error::Io {
                offset: *offset,
                len: *len,
                source: io::Error::new(source.kind(), source.to_string()),
            },
            Error::Format { at, source } => Error::Format {
                at: *at,
                source: source.clone(),
            },
            Error::Corrupt { at, what } => Error::Corrupt {
                at: *at,
                what: what.clone(),
            },
            Error::Unsupported { at, what } => Error::Unsupported {
                at: *at,
                what: what.clone(),
            },
            Error::Codec { at, source } => Error::Codec {
                at: *at,
                source: source.clone(),
            },
            Error::NotFound { path } => Error::NotFound { path: path.clone() },
            Error::NotADirectory { path } => Error::NotADirectory { path: path.clone() },
            Error::IsADirectory { path } => Error::IsADirectory { path: path.clone() },
            Error::NotASymlink { path } => Error::NotASymlink { path: path.clone() },
            Error::NotUtf8 { path } => Error::NotUtf8 { path: path.clone() },
            Error::TooManySymlinks { path } => Error::TooManySymlinks { path: path.clone() },
            Error::MissingDevice { at, device, tag } => Error::MissingDevice {
                at: *at,
                device: *device,
                tag: tag.clone(),
            },
            Error::WrongType { nid, expected } => Error::WrongType {
                nid: *nid,
                expected,
            },
            Error::Verity(e) => Error::Verity(e.clone()),
        }
    }

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
    /// The broad class of the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            _ if self.is_corruption() => ErrorKind::Corrupt,
            Error::Open { source, .. } if source.kind() == io::ErrorKind::NotFound => {
                ErrorKind::NotFound
            }
            Error::Io { .. } | Error::Open { .. } => ErrorKind::Io,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::NotADirectory { .. } => ErrorKind::NotADirectory,
            Error::IsADirectory { .. } => ErrorKind::IsADirectory,
            _ => ErrorKind::InvalidInput,
        }
    }

    /// Whether this error says the image is damaged (as opposed to a missing
    /// path, an unsupported feature or an I/O failure of the source).
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            Error::Corrupt { .. }
                | Error::Format { .. }
                | Error::Codec { .. }
                | Error::NotAnImage { .. }
                | Error::Truncated { .. }
        ) || matches!(self, Error::Verity(e) if e.is_integrity())
            || matches!(self, Error::Io { source, .. } if source.kind() == io::ErrorKind::UnexpectedEof)
    }
}

/// The broad classes of [`enum@Error`], for callers that branch on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The source could not be read.
    Io,
    /// The image is damaged (a truncated image included).
    Corrupt,
    /// The image uses a feature this reader does not implement.
    Unsupported,
    /// The path names nothing.
    NotFound,
    /// A directory was needed.
    NotADirectory,
    /// A file was needed, and the path names a directory.
    IsADirectory,
    /// The request does not fit what the path names (not a symlink, not
    /// UTF-8, too many symlinks, an inode of the wrong type).
    InvalidInput,
}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        let kind = match &e {
            Error::Io { source, .. } | Error::Open { source, .. } => source.kind(),
            Error::NotFound { .. } => io::ErrorKind::NotFound,
            Error::NotADirectory { .. } => io::ErrorKind::NotADirectory,
            Error::IsADirectory { .. } => io::ErrorKind::IsADirectory,
            Error::NotASymlink { .. } | Error::WrongType { .. } => io::ErrorKind::InvalidInput,
            Error::Unsupported { .. } => io::ErrorKind::Unsupported,
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, e)
    }
}

/// The reader's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Turns the `None` (or `Err`) of checked arithmetic and conversions on
/// image values into a corrupt-image error naming what and where.
pub(crate) trait OrCorrupt<T> {
    fn or_corrupt(self, at: Location, what: &'static str) -> Result<T>;
}

impl<T> OrCorrupt<T> for Option<T> {
    fn or_corrupt(self, at: Location, what: &'static str) -> Result<T> {
        self.ok_or_else(|| Error::corrupt(at, what))
    }
}

impl<T, E> OrCorrupt<T> for std::result::Result<T, E> {
    fn or_corrupt(self, at: Location, what: &'static str) -> Result<T> {
        self.map_err(|_| Error::corrupt(at, what))
    }
}
