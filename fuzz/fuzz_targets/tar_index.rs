//! Tar index layers (`mkfs --tar=i`, the archive appended) on hostile
//! input. The input is an archive: its index is built, and then either
//! (byte 0 even) the index with the archive appended must read exactly as
//! the full-data image of the same archive (every file's bytes), or (byte
//! 0 odd) the archive appended after the index is damaged (bytes flipped,
//! cut short, at places bytes 1-8 choose), as a corrupt or partial blob
//! would be: every read is then an error or bytes, never a panic.
#![no_main]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ferrofs_builder::source::tar::{TarInput, TarOptions};
use ferrofs_builder::{build_from, BuildOptions, Input, Mode};
use libfuzzer_sys::fuzz_target;

/// Files read per image, so a directory cycle cannot run forever.
const MAX_ENTRIES: usize = 512;

fn work_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("ferrofs-fuzz-tari-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("work directory");
        d
    })
}

/// Builds an image of `tar` (an index when `index`) at `out`.
fn build(tar: &Path, out: &Path, index: bool) -> Option<()> {
    let mut opts = BuildOptions {
        workers: 1,
        ..Default::default()
    };
    if index {
        opts.blkszbits = 9;
    }
    let input = TarInput::Path(tar.to_path_buf());
    let t = TarOptions {
        index,
        ..Default::default()
    };
    let source = Input::Tar {
        input: &input,
        opts: &t,
    };
    build_from(source, Mode::Fresh, out, &opts, None, &|_| {}).ok()?;
    Some(())
}

/// Every regular file's path and bytes (a read error as `None`).
fn files(image: &ferrofs::Image) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut found = Vec::new();
    let mut stack = vec![PathBuf::from("/")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = image.read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let Ok(e) = e else { break };
            if found.len() + stack.len() > MAX_ENTRIES {
                return found;
            }
            let path = e.path();
            let Ok(meta) = image.symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let data = image.open_file(&path).ok().and_then(|mut f| {
                    let mut v = Vec::new();
                    f.read_to_end(&mut v).ok().map(|_| v)
                });
                found.push((path, data));
            }
        }
    }
    found.sort();
    found
}

fn open(path: &Path) -> Option<ferrofs::Image> {
    let bytes = std::fs::read(path).ok()?;
    ferrofs::Image::open_with(Box::new(bytes), ferrofs::OpenOptions::default()).ok()
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (knobs, archive) = if mode & 1 == 1 && rest.len() >= 8 {
        rest.split_at(8)
    } else {
        (&[][..], rest)
    };
    let dir = work_dir();
    let (tar, idx, full) = (dir.join("in.tar"), dir.join("index"), dir.join("full"));
    std::fs::write(&tar, archive).expect("write the archive");
    if build(&tar, &idx, true).is_none() {
        return;
    }
    let mut layer = std::fs::read(&idx).expect("read the index");
    let mut appended = archive.to_vec();
    if !knobs.is_empty() && !appended.is_empty() {
        let at = u32::from_le_bytes([knobs[0], knobs[1], knobs[2], knobs[3]]) as usize;
        let cut = u32::from_le_bytes([knobs[4], knobs[5], knobs[6], knobs[7]]) as usize;
        let n = appended.len();
        appended[at % n] ^= 0x5a;
        appended.truncate(n - cut % (n / 2 + 1));
    }
    layer.extend_from_slice(&appended);
    let Ok(image) = ferrofs::Image::open_with(Box::new(layer), ferrofs::OpenOptions::default())
    else {
        assert!(!knobs.is_empty(), "the index of an archive does not open");
        return;
    };
    let indexed = files(&image);
    let _ = ferrofs_check::fsck::check(&image, ferrofs_check::fsck::Options::default(), None);
    if !knobs.is_empty() || build(&tar, &full, false).is_none() {
        return;
    }
    let Some(whole) = open(&full) else {
        return;
    };
    let copied = files(&whole);
    assert_eq!(
        indexed.len(),
        copied.len(),
        "the index and the full image hold other files"
    );
    for ((p, a), (q, b)) in indexed.iter().zip(&copied) {
        assert_eq!(p, q, "the index and the full image name other files");
        if let (Some(a), Some(b)) = (a, b) {
            assert!(a == b, "{}: the index reads other bytes", p.display());
        }
    }
});
