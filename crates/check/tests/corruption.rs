//! Corruption sweep: thousands of damaged copies of real images (made by
//! mkfs.erofs, in testdata/) are opened, walked, checked, dumped and read.
//! Errors are expected; a panic, a hang or a slow case is a bug.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferrofs::{Image, OpenOptions};

/// Deterministic xorshift64* generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The reference images of testdata/ (mkfs.erofs 1.5 and 1.8.6) and
/// testdata/v19/ (mkfs.erofs 1.9.4: 48-bit, extents, metabox, ...).
fn fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("testdata/ exists")
        .chain(std::fs::read_dir(dir.join("v19")).expect("testdata/v19/ exists"))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "erofs"))
        .map(|p| {
            let rel = p.strip_prefix(&dir).unwrap_or(&p);
            (
                rel.to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    assert!(
        out.len() >= 8,
        "expected the reference images in {}",
        dir.display()
    );
    out
}

/// Opens, checks, dumps, extracts-to-nowhere and reads an image; returns
/// whether it was accepted as clean.
fn exercise(bytes: Vec<u8>, verify_checksum: bool, extract_to: Option<&Path>) -> bool {
    let opts = OpenOptions {
        verify_checksum,
        cache_bytes: 1 << 20,
        ..OpenOptions::default()
    };
    let Ok(image) = Image::open_with(Box::new(bytes), opts) else {
        return false;
    };
    let report = ferrofs_check::fsck::check(&image, Default::default(), None);
    // The parallel data pass of extract as well: any error is fine, a
    // panic or a hang is not.
    if let Some(dir) = extract_to {
        let _ = ferrofs_check::extract::extract(&image, dir, Default::default(), None);
        let _ = std::fs::remove_dir_all(dir);
    }
    let _ = ferrofs_check::dump::superblock(&image);
    let _ = ferrofs_check::dump::statistics(&image);
    // The per-inode dump too: extent tables (v19 big.txt) and chunk tables.
    for p in [&b"new/big.txt"[..], b"text.txt", b"sparse"] {
        if let Ok(inode) = image.raw().lookup_path(p, false) {
            let _ = ferrofs_check::dump::inode(&image, &inode);
        }
    }
    // Random-offset reads through the path API as well.
    if let Ok(f) = image.raw().open_path(b"text.txt") {
        let mut buf = [0u8; 777];
        for off in [0u64, 1, 4095, 4096, 30000, 60000] {
            let _ = f.read_at(&mut buf, off);
        }
    }
    for p in [
        &b"link"[..],
        b"dir/dangling",
        b"dir/sub/copy.txt",
        b"nothing/here",
    ] {
        let _ = image.raw().lookup_path(p, true);
    }
    report.is_clean()
}

const CASE_LIMIT: Duration = Duration::from_secs(5);

#[test]
fn pristine_fixtures_are_clean() {
    for (name, bytes) in fixtures() {
        assert!(
            exercise(bytes, true, None),
            "{name}: fsck found problems in a pristine image"
        );
    }
}

#[test]
fn corrupted_images_never_panic_or_hang() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut failures = Vec::new();
    let mut cases = 0u32;
    let mut rejected = 0u32;
    let started = Instant::now();
    // On a tmpfs where there is one: hundreds of small extractions.
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let scratch = base.join(format!("ferrofs-corruption-{}", std::process::id()));
    for (name, pristine) in fixtures() {
        let len = pristine.len() as u64;
        for case in 0..320u32 {
            let mut img = pristine.clone();
            let what = match case % 8 {
                // Truncation anywhere, biased to block boundaries.
                0 => {
                    let cut = if rng.below(2) == 0 {
                        rng.below(len / 512 + 1) * 512
                    } else {
                        rng.below(len)
                    };
                    img.truncate(cut as usize);
                    format!("truncate to {cut}")
                }
                // Single bit flips, mostly in the metadata at the front.
                1..=4 => {
                    let span = if rng.below(4) == 0 {
                        len
                    } else {
                        len.min(8192)
                    };
                    let pos = rng.below(span) as usize;
                    let bit = rng.below(8);
                    img[pos] ^= 1 << bit;
                    format!("flip bit {bit} of byte {pos}")
                }
                // Several flips at once.
                5 => {
                    let mut v = Vec::new();
                    for _ in 0..1 + rng.below(16) {
                        let pos = rng.below(len) as usize;
                        img[pos] ^= rng.next() as u8 | 1;
                        v.push(pos);
                    }
                    format!("flip bytes {v:?}")
                }
                // A field overwritten with an extreme value.
                6 => {
                    let pos = (rng.below(len.min(16384)) & !3) as usize;
                    let val: u32 =
                        [0, u32::MAX, 0x8000_0000, 0x7FFF_FFFF, 1, 0x800][rng.below(6) as usize];
                    let end = (pos + 4).min(img.len());
                    img[pos..end].copy_from_slice(&val.to_le_bytes()[..end - pos]);
                    format!("write {val:#x} at {pos}")
                }
                // A random run of garbage.
                _ => {
                    let pos = rng.below(len) as usize;
                    let n = (1 + rng.below(64) as usize).min(img.len() - pos);
                    for b in &mut img[pos..pos + n] {
                        *b = rng.next() as u8;
                    }
                    format!("garbage {n} bytes at {pos}")
                }
            };
            cases += 1;
            let verify = case % 2 == 0;
            let t = Instant::now();
            // Every fourth case is also extracted.
            let target = (case % 4 == 3).then(|| scratch.join(format!("{cases}")));
            let r = catch_unwind(AssertUnwindSafe(|| {
                exercise(img, verify, target.as_deref())
            }));
            let took = t.elapsed();
            match r {
                Err(_) => failures.push(format!("{name}: PANIC after {what}")),
                Ok(clean) => rejected += u32::from(!clean),
            }
            if took > CASE_LIMIT {
                failures.push(format!("{name}: {what} took {took:?}"));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    eprintln!(
        "corruption sweep: {cases} cases, {rejected} reported as damaged, {:?}",
        started.elapsed()
    );
    assert!(cases >= 3000, "only {cases} cases");
    assert!(
        rejected > cases / 4,
        "suspiciously few damaged images detected: {rejected}"
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
