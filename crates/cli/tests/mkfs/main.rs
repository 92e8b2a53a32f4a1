//! `ferrofs mkfs` (and the `mkfs.erofs` drop-in): images built from trees,
//! archives and OCI layouts, checked against their source with the kernel's
//! EROFS driver as the oracle, the reference tools and ferrofs's own readers.
//! One test binary; each module is one area (its doc says what it checks).
//! Tests that need root or the kernel print `skipped: REASON` without them.

/// The binary under test.
const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

mod android_block_list;
mod android_fs_config;
mod base;
mod compressed;
mod data_loss;
mod dense;
mod density;
mod dropin;
mod failures;
mod format19;
mod images;
mod incremental;
mod layout;
mod library;
mod oci;
mod pinned;
mod profile;
mod rebuild;
mod sparse;
mod tar;
mod tar_broken;
mod tar_index;
mod timings;
mod zero_chunks;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A symlink named mkfs.erofs to the binary under test, in `dir`: the
/// drop-in.
fn dropin_link(dir: &Path) -> PathBuf {
    let link = dir.join("mkfs.erofs");
    std::os::unix::fs::symlink(FERROFS, &link).unwrap();
    link
}

/// `cp -a FROM TO`: a copy of a tree with its metadata.
fn cp_a(from: &Path, to: &Path) {
    let st = Command::new("cp").arg("-a").arg(from).arg(to).status();
    assert!(st.is_ok_and(|s| s.success()), "cp -a {from:?} {to:?}");
}

/// `ferrofs dump ARGS --json`, parsed.
fn dump_json(args: &[&str]) -> Result<serde_json::Value, String> {
    let out = ferrofs_testkit::verify::run_ok(
        Command::new(FERROFS).arg("dump").args(args).arg("--json"),
    )?;
    serde_json::from_slice(&out).map_err(|e| e.to_string())
}
