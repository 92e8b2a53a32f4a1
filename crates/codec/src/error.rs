//! The crate's error type.

use crate::Algorithm;

/// Why a stream could not be decoded, or input could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The stream is malformed (bad header, bad symbol, bad back-reference,
    /// truncated, or it decodes past the requested length).
    #[error("corrupt {alg} stream: {detail}")]
    Corrupt {
        /// Algorithm of the stream.
        alg: Algorithm,
        /// What the decoder found wrong.
        detail: String,
    },
    /// The stream ended (or its input ran out) before producing the
    /// requested number of bytes.
    #[error("{alg} stream produced {got} bytes, {want} were expected")]
    ShortOutput {
        /// Algorithm of the stream.
        alg: Algorithm,
        /// Bytes produced before the stream ended.
        got: usize,
        /// Bytes requested.
        want: usize,
    },
    /// In [`DecodeMode::Exact`](crate::DecodeMode::Exact) the stream holds
    /// more than the requested number of bytes.
    #[error("{alg} stream holds more than the expected {want} bytes")]
    LongOutput {
        /// Algorithm of the stream.
        alg: Algorithm,
        /// Bytes requested.
        want: usize,
    },
    /// In [`DecodeMode::Exact`](crate::DecodeMode::Exact) the stream ended
    /// before the end of its input.
    #[error("{alg} stream ends after {used} of its {len} input bytes (trailing data)")]
    TrailingInput {
        /// Algorithm of the stream.
        alg: Algorithm,
        /// Input bytes the stream used.
        used: usize,
        /// Input bytes given.
        len: usize,
    },
    /// A buffer is larger than the underlying library can address.
    #[error("{alg}: a {len}-byte buffer is larger than the codec supports")]
    TooLarge {
        /// Algorithm asked for.
        alg: Algorithm,
        /// The offending length.
        len: usize,
    },
    /// The encoder configuration is invalid (e.g. a level out of range).
    #[error("invalid {alg} encoder configuration: {detail}")]
    InvalidConfig {
        /// Algorithm asked for.
        alg: Algorithm,
        /// What is wrong with it.
        detail: String,
    },
    /// The underlying library could not allocate its working memory.
    #[error("{alg}: out of memory")]
    OutOfMemory {
        /// Algorithm asked for.
        alg: Algorithm,
    },
    /// The underlying library failed in a way that does not depend on the
    /// input (a bug or an unsupported build).
    #[error("{alg} library failure: {detail}")]
    Internal {
        /// Algorithm asked for.
        alg: Algorithm,
        /// What the library reported.
        detail: String,
    },
}

impl CodecError {
    pub(crate) fn corrupt(alg: Algorithm, detail: impl Into<String>) -> Self {
        Self::Corrupt {
            alg,
            detail: detail.into(),
        }
    }

    pub(crate) fn internal(alg: Algorithm, detail: impl Into<String>) -> Self {
        Self::Internal {
            alg,
            detail: detail.into(),
        }
    }

    pub(crate) fn invalid_config(alg: Algorithm, detail: impl Into<String>) -> Self {
        Self::InvalidConfig {
            alg,
            detail: detail.into(),
        }
    }

    /// The algorithm the error is about.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Self::Corrupt { alg, .. }
            | Self::ShortOutput { alg, .. }
            | Self::LongOutput { alg, .. }
            | Self::TrailingInput { alg, .. }
            | Self::TooLarge { alg, .. }
            | Self::InvalidConfig { alg, .. }
            | Self::OutOfMemory { alg }
            | Self::Internal { alg, .. } => *alg,
        }
    }

    /// True when the error says the stream itself is bad (as opposed to a
    /// configuration, size-limit or memory problem).
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            Self::Corrupt { .. }
                | Self::ShortOutput { .. }
                | Self::LongOutput { .. }
                | Self::TrailingInput { .. }
        )
    }
}
