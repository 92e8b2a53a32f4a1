//! Images in states Linux refuses (mount fails) or serves wrongly (a
//! listed name the kernel cannot look up, a symlink target it cuts short):
//! `ferrofs fsck` must report each, naming the problem, and `ferrofs
//! extract` must fail the same way instead of writing a tree the kernel
//! would not show. Each state is made by patching an image built in the
//! test; where the kernel can mount, the test confirms that it indeed
//! refuses or misreads the patched image, so the checks follow the kernel
//! rather than guesses (issue 29).

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Output};

use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::work_dir;

use crate::FERROFS;

/// What the kernel does with a patched image.
enum Kernel {
    /// Refuses to mount it.
    MountFails,
    /// Mounts it and lists `name` in `dir`, but a lookup of it fails.
    LookupFails {
        dir: &'static str,
        name: &'static str,
    },
    /// Mounts it and reads the symlink `path` as `target`.
    ReadlinkIs {
        path: &'static str,
        target: &'static [u8],
    },
    /// Nothing to confirm through a mount.
    Unchecked,
}

struct Case {
    name: &'static str,
    /// Options of `ferrofs mkfs` (besides -Enosbcrc, so superblock
    /// patches need no new checksum).
    mkfs: &'static [&'static str],
    patch: fn(&mut Vec<u8>),
    /// fsck's and extract's output must contain this.
    says: &'static str,
    kernel: Kernel,
}

/// Offset of the first compression record (the LZ4 one) after the
/// superblock and its extension slots.
fn first_compression_record(img: &[u8]) -> usize {
    let sb_size = 128 + 16 * usize::from(img[1024 + 0x0D]);
    (1024 + sb_size).next_multiple_of(4)
}

fn find(img: &[u8], what: &[u8]) -> usize {
    let mut hits = img
        .windows(what.len())
        .enumerate()
        .filter(|(_, w)| *w == what);
    let (at, _) = hits
        .next()
        .unwrap_or_else(|| panic!("{what:?} not in the image"));
    assert!(hits.next().is_none(), "{what:?} twice in the image");
    at
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "lz4-max-pclusterblks-257",
            mkfs: &["-zlz4", "-C65536"],
            // 257 blocks of 4 KiB: past the kernel's 1 MiB pcluster limit.
            patch: |b| {
                let at = first_compression_record(b) + 4;
                b[at..at + 2].copy_from_slice(&257u16.to_le_bytes());
            },
            says: "max_pclusterblks 257",
            kernel: Kernel::MountFails,
        },
        Case {
            name: "xattr-prefix-count-127-without-the-feature",
            mkfs: &["-zlz4", "-C65536"],
            // Linux reads 127 long prefixes from xattr_prefix_start (0)
            // although XATTR_PREFIXES is not set, and finds none.
            patch: |b| b[1024 + 0x5B] = 127,
            says: "xattr_prefix_count 127",
            kernel: Kernel::MountFails,
        },
        Case {
            name: "xattr-prefix-count-127",
            mkfs: &["-zlz4", "-C65536", "--xattr-prefix", "trusted.overlay."],
            patch: |b| b[1024 + 0x5B] = 127,
            says: "xattr_prefix_count 127",
            kernel: Kernel::MountFails,
        },
        Case {
            name: "dirents-out-of-order",
            mkfs: &[],
            // aaa1 and aaa2 swap names (each keeps its nid): the block
            // lists aaa2 before aaa1, and a binary search misses aaa1.
            patch: |b| {
                let at = find(b, b"aaa1aaa2aaa3");
                b[at..at + 8].copy_from_slice(b"aaa2aaa1");
            },
            says: "entries out of order",
            kernel: Kernel::LookupFails {
                dir: "d",
                name: "aaa1",
            },
        },
        Case {
            name: "bytes-past-a-directorys-end",
            mkfs: &[],
            // Non-zero bytes after the directory's last name in its raw
            // last block (r's xattr leaves no room to inline it): Linux's
            // lookup reads the name on into them.
            patch: |b| {
                let at = find(b, b"bbb1bbb2bbb3");
                assert_eq!(b[at + 12..at + 16], [0; 4]);
                b[at + 12..at + 16].copy_from_slice(b"XXXX");
            },
            says: "looks it up as \"bbb3XXXX\"",
            kernel: Kernel::LookupFails {
                dir: "r",
                name: "bbb3",
            },
        },
        Case {
            name: "dot-pointing-elsewhere",
            mkfs: &[],
            // The "." dirent (the block's first) of d names another nid.
            patch: |b| {
                let names = find(b, b"...aaa1aaa2aaa3");
                let first = names - 5 * 12;
                b[first] ^= 1;
            },
            says: "'.' points to nid",
            kernel: Kernel::Unchecked,
        },
        Case {
            name: "fingerprint-mismatch",
            mkfs: &["--xattr-inode-digest"],
            // A byte of /file's (uncompressed) data: its fingerprint no
            // longer matches (the kernel reads the changed byte).
            patch: |b| {
                let at = b.windows(4096).position(|w| w == [b'x'; 4096]).unwrap();
                b[at] = b'y';
            },
            says: "fingerprint does not match",
            kernel: Kernel::Unchecked,
        },
        Case {
            name: "nul-in-a-name",
            mkfs: &[],
            // aaa1 becomes "aa\01", still in order: the kernel lists and
            // finds it as "aa".
            patch: |b| {
                let at = find(b, b"aaa1aaa2aaa3");
                b[at + 2] = 0;
            },
            says: "bad name",
            kernel: Kernel::Unchecked,
        },
        Case {
            name: "slash-in-a-name",
            mkfs: &[],
            // aaa1 becomes "aa/1", still in order.
            patch: |b| {
                let at = find(b, b"aaa1aaa2aaa3");
                b[at + 2] = b'/';
            },
            says: "bad name",
            kernel: Kernel::Unchecked,
        },
        Case {
            name: "nul-in-a-symlink-target",
            mkfs: &[],
            patch: |b| {
                let at = find(b, b"symlink-target-xyz");
                b[at + 7] = 0;
            },
            says: "NUL byte at offset 7",
            kernel: Kernel::ReadlinkIs {
                path: "lnk",
                target: b"symlink",
            },
        },
    ]
}

fn run(args: &[&str], img: &Path, more: &[&Path]) -> Output {
    Command::new(FERROFS)
        .args(args)
        .arg(img)
        .args(more)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn source_tree(src: &Path) {
    fs::create_dir_all(src.join("d")).unwrap();
    for n in ["aaa1", "aaa2", "aaa3"] {
        fs::write(src.join("d").join(n), format!("{n} contents\n").repeat(50)).unwrap();
    }
    // A directory whose last block cannot be inline: 32 + 12 + 4000 bytes
    // of inode and xattrs leave less than its 75 bytes of entries.
    fs::create_dir_all(src.join("r")).unwrap();
    for n in ["bbb1", "bbb2", "bbb3"] {
        fs::write(src.join("r").join(n), n).unwrap();
    }
    let pad = "p".repeat(3990);
    let set = Command::new("setfattr")
        .args(["-n", "user.pad", "-v", &pad])
        .arg(src.join("r"))
        .status()
        .expect("setfattr");
    assert!(set.success(), "setfattr user.pad on r");
    fs::write(src.join("file"), b"x".repeat(200_000)).unwrap();
    std::os::unix::fs::symlink("symlink-target-xyz", src.join("lnk")).unwrap();
}

#[test]
fn fsck_and_extract_refuse_what_the_kernel_refuses() {
    let w = work_dir!("kernel_refused");
    let src = w.join("src");
    source_tree(&src);
    let kernel = can_mount();
    if let Err(why) = &kernel {
        println!("kernel checks skipped: {why}");
    }
    let mut failures = Vec::new();
    for case in cases() {
        let pristine = w.join(format!("{}-pristine.img", case.name));
        let o = Command::new(FERROFS)
            .args(["mkfs", "--quiet", "-Enosbcrc"])
            .args(case.mkfs)
            .arg(&pristine)
            .arg(&src)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}: mkfs: {}", case.name, text(&o));
        // The untouched image passes both.
        let o = run(&["fsck"], &pristine, &[]);
        assert!(o.status.success(), "{}: pristine: {}", case.name, text(&o));

        let mut bytes = fs::read(&pristine).unwrap();
        (case.patch)(&mut bytes);
        let img = w.join(format!("{}.img", case.name));
        fs::write(&img, &bytes).unwrap();

        let o = run(&["fsck"], &img, &[]);
        let t = text(&o);
        // Damage, whether found at open or in the walk: exit 1.
        if o.status.code() != Some(1) || !t.contains(case.says) {
            failures.push(format!("{}: fsck {:?}: {t}", case.name, o.status.code()));
        }
        let out = w.join(format!("{}-out", case.name));
        let o = run(&["extract"], &img, &[&out]);
        let t = text(&o);
        if o.status.success() || !t.contains(case.says) {
            failures.push(format!("{}: extract {:?}: {t}", case.name, o.status.code()));
        }
        let _ = fs::remove_dir_all(&out);

        if kernel.is_err() {
            continue;
        }
        let mounted = LoopMount::new(&img, &[]);
        match (&case.kernel, mounted) {
            (Kernel::MountFails, Ok(_)) => {
                failures.push(format!("{}: the kernel mounted it", case.name))
            }
            (Kernel::MountFails, Err(_)) | (Kernel::Unchecked, _) => {}
            (_, Err(e)) => failures.push(format!("{}: the kernel refused it: {e}", case.name)),
            (Kernel::LookupFails { dir, name }, Ok(m)) => {
                let listed = fs::read_dir(m.path().join(dir))
                    .unwrap()
                    .any(|e| e.unwrap().file_name().as_bytes() == name.as_bytes());
                let found = fs::symlink_metadata(m.path().join(dir).join(name));
                if !listed || found.is_ok() {
                    failures.push(format!(
                        "{}: kernel lists {name}: {listed}, looks it up: {found:?}",
                        case.name
                    ));
                }
            }
            (Kernel::ReadlinkIs { path, target }, Ok(m)) => {
                let got = fs::read_link(m.path().join(path)).unwrap();
                if got.as_os_str().as_bytes() != *target {
                    failures.push(format!("{}: kernel reads the link as {got:?}", case.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Deterministic xorshift64*, so a failing case reproduces.
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

/// The mutation sweep over images in the 2025 format (48-bit layout,
/// metabox, directories and tails in the packed inode), as a smoke test:
/// damaged copies never panic or hang; whenever fsck reports damage,
/// extract fails too; whenever fsck passes, extract succeeds and (with the
/// kernel) the kernel mounts the image and resolves every path extract
/// wrote.
#[test]
fn mutated_2025_format_images_fsck_and_extract_agree() {
    let w = work_dir!("mutation_2025");
    let src = w.join("src");
    source_tree(&src);
    for i in 0..40 {
        let d = src.join(format!("dir{:02}", i % 7));
        fs::create_dir_all(&d).unwrap();
        fs::write(
            d.join(format!("f{i:03}")),
            format!("file {i}\n").repeat(i * 37),
        )
        .unwrap();
    }
    let kernel = can_mount().is_ok();
    let mut failures = Vec::new();
    let (mut cases, mut damaged, mut clean, mut resolved) = (0u32, 0u32, 0u32, 0usize);
    let started = std::time::Instant::now();
    for (k, opts) in [
        &[
            "-zlz4hc",
            "-C65536",
            "-Efragments,ztailpacking,48bit",
            "-m4096",
            "--zD",
        ][..],
        &[
            "-zlzma",
            "-C65536",
            "-Efragments,dot-omitted",
            "-m4096:lzma",
        ][..],
        // Uncompressed: directory blocks (last in ferrofs images) raw.
        &["-E48bit,noinline_data"][..],
        &["-E48bit,dot-omitted"][..],
    ]
    .into_iter()
    .enumerate()
    {
        let pristine = w.join(format!("pristine{k}.img"));
        let o = Command::new(FERROFS)
            .args(["mkfs", "--quiet", "-T", "1700000000"])
            .args(opts)
            .arg(&pristine)
            .arg(&src)
            .output()
            .unwrap();
        assert!(o.status.success(), "{opts:?}: {}", text(&o));
        let orig = fs::read(&pristine).unwrap();
        let len = orig.len() as u64;
        // Where the entry names are stored (uncompressed directories):
        // a flipped bit there makes names the kernel cannot look up.
        let names: Vec<usize> = (0..40)
            .map(|i| format!("f{i:03}"))
            .chain((0..7).map(|i| format!("dir{i:02}")))
            .flat_map(|n| {
                let n = n.into_bytes();
                orig.windows(n.len())
                    .enumerate()
                    .filter(|(_, w)| *w == &n[..])
                    .map(|(at, _)| at)
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ k as u64);
        for case in 0..60u32 {
            let mut img = orig.clone();
            let what = match case % 5 {
                4 if !names.is_empty() => {
                    let at = names[rng.below(names.len() as u64) as usize] + rng.below(4) as usize;
                    let bit = rng.below(8);
                    img[at] ^= 1 << bit;
                    format!("flip bit {bit} of name byte {at}")
                }
                // Metadata lives at both ends of these images: flips
                // anywhere, biased to the superblock block.
                0 | 1 => {
                    let pos = match rng.below(3) {
                        0 => rng.below(4096),
                        // Directory blocks and inodes come last.
                        1 => len - 1 - rng.below(len.min(16384)),
                        _ => rng.below(len),
                    };
                    let bit = rng.below(8);
                    img[pos as usize] ^= 1 << bit;
                    format!("flip bit {bit} of byte {pos}")
                }
                2 => {
                    let pos = (rng.below(len) & !3) as usize;
                    let end = (pos + 4).min(img.len());
                    let v = [0u32, u32::MAX, 0x8000_0000, 1][rng.below(4) as usize];
                    img[pos..end].copy_from_slice(&v.to_le_bytes()[..end - pos]);
                    format!("write {v:#x} at {pos}")
                }
                _ => {
                    let pos = rng.below(len) as usize;
                    let n = (1 + rng.below(32) as usize).min(img.len() - pos);
                    for b in &mut img[pos..pos + n] {
                        *b = rng.next() as u8;
                    }
                    format!("garbage {n} bytes at {pos}")
                }
            };
            cases += 1;
            let t = std::time::Instant::now();
            let name = format!("{k}-{case}");
            let path = w.join(format!("{name}.img"));
            fs::write(&path, &img).unwrap();
            let fsck = run(&["fsck"], &path, &[]);
            let out = w.join(format!("{name}-out"));
            let ext = run(&["extract"], &path, &[&out]);
            let took = t.elapsed();
            if took > std::time::Duration::from_secs(10) {
                failures.push(format!("{opts:?} {what}: took {took:?}"));
            }
            for (cmd, o) in [("fsck", &fsck), ("extract", &ext)] {
                // 101: a Rust panic; a signal: a crash.
                if matches!(o.status.code(), Some(101) | None) {
                    failures.push(format!("{opts:?} {what}: {cmd} crashed: {}", text(o)));
                }
            }
            match (fsck.status.success(), ext.status.success()) {
                (false, true) => failures.push(format!(
                    "{opts:?} {what}: fsck reports damage but extract succeeded: {}",
                    text(&fsck)
                )),
                (true, false) => failures.push(format!(
                    "{opts:?} {what}: fsck passed but extract failed: {}",
                    text(&ext)
                )),
                (false, false) => damaged += 1,
                (true, true) => {
                    clean += 1;
                    if kernel {
                        resolved += check_paths_resolve(
                            &path,
                            &out,
                            &format!("{opts:?} {what}"),
                            &mut failures,
                        );
                    }
                }
            }
            let _ = fs::remove_dir_all(&out);
            let _ = fs::remove_file(&path);
        }
    }
    eprintln!(
        "2025-format mutations: {cases} cases, {damaged} damaged, {clean} clean, \
         {resolved} extracted paths resolved through the kernel, {:?}",
        started.elapsed()
    );
    if kernel {
        assert!(
            resolved > clean as usize * 40,
            "only {resolved} paths resolved"
        );
    }
    assert!(
        damaged > cases / 10,
        "only {damaged} of {cases} reported damaged"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every path of `extracted` resolves through the kernel's mount of `img`
/// with the same file type.
/// Returns how many paths it resolved.
fn check_paths_resolve(
    img: &Path,
    extracted: &Path,
    what: &str,
    failures: &mut Vec<String>,
) -> usize {
    let m = match LoopMount::new(img, &[]) {
        Ok(m) => m,
        Err(e) => {
            failures.push(format!(
                "{what}: fsck passed but the kernel refused it: {e}"
            ));
            return 0;
        }
    };
    let mut resolved = 0;
    let mut stack = vec![std::path::PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = fs::read_dir(extracted.join(&rel)) else {
            continue;
        };
        for e in entries.flatten() {
            let r = rel.join(e.file_name());
            let ours = e.file_type().unwrap();
            match fs::symlink_metadata(m.path().join(&r)) {
                Ok(k) if k.file_type() == ours => resolved += 1,
                got => failures.push(format!(
                    "{what}: /{} extracted as {ours:?}, the kernel says {got:?}",
                    r.display()
                )),
            }
            if ours.is_dir() {
                stack.push(r);
            }
        }
    }
    resolved
}
