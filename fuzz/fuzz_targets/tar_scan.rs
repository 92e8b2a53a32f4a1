//! Read an arbitrary byte stream as a tar archive (the input side of
//! `mkfs --tar`): ustar, GNU and PAX headers, long names, sparse maps,
//! hard links and whiteouts. A bad archive must be an error, never a
//! panic or an allocation sized by a header field.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use ferrofs_builder::source::tar::{scan_stream, TarOptions};
use ferrofs_builder::BuildOptions;
use libfuzzer_sys::fuzz_target;

/// Where file data read from the stream is spooled (an unlinked file per run).
fn spool_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("ferrofs-fuzz-tar-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("spool directory");
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let opts = BuildOptions::default();
    // Byte 0 chooses the whiteout handling, the rest is the archive.
    let (aufs, archive) = match data.split_first() {
        Some((b, rest)) => (b & 1 == 1, rest),
        None => (false, data),
    };
    let tar_opts = TarOptions {
        aufs,
        ovlfs_strip: aufs,
        ..Default::default()
    };
    let r = Box::new(std::io::Cursor::new(archive.to_vec()));
    let _ = scan_stream(r, None, "fuzz.tar".into(), &opts, &tar_opts, spool_dir());
});
