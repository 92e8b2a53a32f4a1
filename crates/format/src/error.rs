//! Errors of pure decoding: what field is wrong and with which value.

use thiserror::Error;

/// A structure failed validation while being decoded from bytes.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FormatError {
    #[error("bad magic {0:#010x} (expected 0xe0f5e1e2)")]
    BadMagic(u32),
    #[error("unsupported block size 2^{0} (this reader handles 512..=4096)")]
    BadBlockSize(u8),
    #[error("superblock checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadChecksum { stored: u32, computed: u32 },
    #[error("unknown incompatible feature bits {bits:#x} ({names})")]
    UnknownIncompat { bits: u32, names: String },
    #[error("unsupported feature: {0}")]
    UnsupportedFeature(&'static str),
    #[error("invalid {field}: {value}")]
    Invalid { field: &'static str, value: u64 },
    #[error("structure truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
}

impl FormatError {
    pub(crate) fn invalid(field: &'static str, value: impl Into<u64>) -> Self {
        FormatError::Invalid {
            field,
            value: value.into(),
        }
    }
}
