//! composefs images read through their object store (`mount --basedir`)
//! on hostile input: every regular file's backing (its metacopy digest and
//! redirect) is parsed; a redirect that is accepted must name a path
//! inside the store (relative, no `.`/`..`/empty component, no NUL), and
//! the object it names is opened and read from a real store directory.
#![no_main]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use ferrofs::composefs::{backing, Header};
use libfuzzer_sys::fuzz_target;

/// Inodes looked at per input.
const MAX_INODES: usize = 2048;

/// A store with a few objects (as `--digest-store` lays them out).
fn store() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("ferrofs-fuzz-store-{}", std::process::id()));
        for (name, body) in [("00/aa", &b"object"[..]), ("ab/cdef", b"more bytes")] {
            let p = d.join(name);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("store");
            std::fs::write(p, body).expect("object");
        }
        d
    })
}

fn inside(store: &Path, rel: &[u8]) -> bool {
    let p = Path::new(OsStr::from_bytes(rel));
    !rel.is_empty()
        && !rel.contains(&0)
        && p.components().all(|c| matches!(c, Component::Normal(_)))
        && store.join(p).starts_with(store)
}

fuzz_target!(|data: &[u8]| {
    let opts = ferrofs::OpenOptions {
        verify_checksum: false,
        cache_bytes: 1 << 20,
        ..Default::default()
    };
    let Ok(image) = ferrofs::Image::open_with(Box::new(data.to_vec()), opts) else {
        return;
    };
    let _ = Header::of(&image);
    let raw = image.raw();
    let store = store();
    let mut stack = vec![image.root_nid()];
    let mut seen = 0usize;
    while let Some(nid) = stack.pop() {
        seen += 1;
        if seen > MAX_INODES {
            return;
        }
        let Ok(inode) = raw.inode(nid) else { continue };
        if inode.is_dir() {
            let Ok(entries) = raw.read_dir(&inode) else {
                continue;
            };
            for e in entries {
                if e.name != b"." && e.name != b".." {
                    stack.push(e.nid);
                }
            }
            continue;
        }
        let Ok(Some(b)) = backing(&raw, &inode) else {
            continue;
        };
        let _ = b.digest_hex();
        if let Some(rel) = &b.object {
            assert!(inside(store, rel), "redirect {rel:?} leaves the store");
            let _ = std::fs::read(store.join(OsStr::from_bytes(rel)));
        }
    }
});
