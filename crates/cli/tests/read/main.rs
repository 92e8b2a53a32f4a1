//! The reading side of the `ferrofs` binary (fsck, extract, dump, ls, cat)
//! on images by the reference mkfs.erofs (1.5, 1.8.6, 1.9.4) and on damaged
//! or unusual images, with the kernel's EROFS driver as the oracle where it
//! can mount them. One test binary; each module is one area. Tests that need
//! root or the kernel print `skipped: REASON` without them.

/// The binary under test.
const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

mod closed_pipe;
mod composefs;
mod decode_once;
mod dump_v19;
mod export;
mod extract_batches;
mod extract_xattrs;
mod fixtures_v19;
mod fsck_warnings;
mod hostile_findings;
mod kernel_refused;
mod ls_json;
mod manual;
mod remote_errors;
mod unsupported_features;
mod upstream_images;
mod user_errors;
mod verity;
mod verity_tamper;
