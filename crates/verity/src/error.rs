//! Typed errors of the verity crate: what is wrong, and which block.

use std::io;

use thiserror::Error;

/// Everything that can go wrong parsing, building or checking a tree.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The 512 bytes where a verity superblock belongs are not one.
    #[error("no verity superblock at byte {offset}: {why}")]
    BadSuperblock {
        /// Where the superblock was looked for.
        offset: u64,
        /// What was found instead.
        why: String,
    },
    /// Parameters that no tree can have (block sizes, salt, algorithm).
    #[error("invalid verity parameters: {0}")]
    Params(String),
    /// A root hash or salt given as text does not decode.
    #[error("invalid {what} {text:?}: {why}")]
    BadHex {
        /// What the text is (root hash, salt).
        what: &'static str,
        /// The text given.
        text: String,
        /// Why it does not decode.
        why: &'static str,
    },
    /// The tree's top block (or the only data block) does not hash to the
    /// root hash given: a wrong root hash, or a damaged tree.
    // What the tree gives is not shown: copying it would accept a forged tree.
    #[error(
        "the verity root hash does not match: the tree's top block (or its only data block) \
         does not hash to {expected} (a wrong root hash, or a damaged tree or verity superblock)"
    )]
    WrongRoot {
        /// The root hash given.
        expected: String,
        /// What the tree hashes to (for debugging; not in the message).
        actual: String,
    },
    /// A data block does not match its digest in the (verified) tree.
    #[error(
        "integrity error: data block {block} (bytes {offset}..{end}) does not match the verity \
         hash tree",
        end = offset.saturating_add(u64::from(*size))
    )]
    DataMismatch {
        /// The data block's number.
        block: u64,
        /// Its first byte.
        offset: u64,
        /// The data block size.
        size: u32,
    },
    /// A hash block does not match its digest one level up.
    #[error(
        "integrity error: hash block {index} of tree level {level} (at byte {offset} of the hash \
         device) does not match the verity hash tree"
    )]
    HashMismatch {
        /// The tree level (0: the one over the data).
        level: usize,
        /// The block's number within its level.
        index: u64,
        /// Where it is stored.
        offset: u64,
    },
    /// A read beyond what the tree covers.
    #[error("read of {len} bytes at byte {offset} goes beyond the {covered} bytes the verity tree covers")]
    OutOfRange {
        /// Where the read started.
        offset: u64,
        /// Its length.
        len: u64,
        /// Bytes the tree covers.
        covered: u64,
    },
    /// The data or hash device could not be read or written.
    #[error("I/O error on the {what} at byte {offset}: {source}")]
    Io {
        /// Which device (data, hash).
        what: &'static str,
        /// Where.
        offset: u64,
        /// What the system said.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// Whether this error says bytes do not match the tree (as opposed to
    /// bad parameters or a failed read).
    pub fn is_integrity(&self) -> bool {
        matches!(
            self,
            Error::WrongRoot { .. } | Error::DataMismatch { .. } | Error::HashMismatch { .. }
        )
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        let kind = match &e {
            Error::Io { source, .. } => source.kind(),
            Error::OutOfRange { .. } => io::ErrorKind::UnexpectedEof,
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, e)
    }
}

/// The verity crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
