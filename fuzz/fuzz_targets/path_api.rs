//! Open an arbitrary image and use it as a library user would: walk it
//! with the path API (`read_dir`, `symlink_metadata`, `read_link`,
//! `xattrs`), open every regular file and read it through `Read + Seek`
//! and `read_at`. Errors are fine; panics, hangs and runaway memory are bugs.
#![no_main]

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;

/// Entries visited per input, so a directory cycle cannot run forever (each
/// entry's path is resolved from the root, so a cycle costs entries x depth
/// lookups: kept to a fraction of a second per input in the debug build).
const MAX_ENTRIES: usize = 1024;
/// Directory depth walked.
const MAX_DEPTH: usize = 16;

fuzz_target!(|data: &[u8]| {
    let opts = ferrofs::OpenOptions {
        verify_checksum: false,
        cache_bytes: 1 << 20,
        ..Default::default()
    };
    let Ok(image) = ferrofs::Image::open_with(Box::new(data.to_vec()), opts) else {
        return;
    };
    let mut stack = vec![(PathBuf::from("/"), 0usize)];
    let mut seen = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = image.read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            seen += 1;
            if seen > MAX_ENTRIES {
                return;
            }
            let Ok(entry) = entry else { break };
            let path = entry.path();
            let Ok(meta) = image.symlink_metadata(&path) else {
                continue;
            };
            let _ = image.xattrs(&path);
            if meta.is_dir() {
                if depth < MAX_DEPTH {
                    stack.push((path, depth + 1));
                }
            } else if meta.is_symlink() {
                let _ = image.read_link(&path);
            } else if meta.is_file() {
                if let Ok(mut f) = image.open_file(&path) {
                    let mut buf = vec![0u8; 8192];
                    let _ = f.read(&mut buf);
                    let _ = f.seek(SeekFrom::End(-100));
                    let _ = f.read(&mut buf);
                    let _ = f.read_at(&mut buf, meta.len() / 2);
                }
            }
        }
    }
});
