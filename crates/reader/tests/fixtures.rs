//! The reader against the reference images in testdata/ (made by
//! mkfs.erofs 1.8.6 and 1.5 from the tree scripts/make-fixtures.sh builds)
//! and testdata/v19/ (mkfs.erofs 1.9.4, scripts/make-fixtures-19.sh: the
//! same tree plus new/, in the 48-bit, metabox, dot-omitted, --zD and --MZ
//! forms; the `*times*` images hold another tree and are tested apart):
//! contents, metadata and xattrs as that script wrote them, partial
//! decoding, the cache budget, and concurrent readers.

use std::path::PathBuf;
use std::sync::Arc;

use ferrofs::format::inode::FileType;
use ferrofs::{Image, OpenOptions};

fn images_in(dir: &str) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "erofs"))
        .collect();
    v.sort();
    v
}

/// Every image of the shared fixture tree, 1.8.6/1.5 and 1.9.4 ones.
fn fixture_paths() -> Vec<PathBuf> {
    let old = images_in("../../testdata");
    assert!(old.len() >= 8);
    let new: Vec<PathBuf> = images_in("../../testdata/v19")
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("times"))
        .collect();
    assert!(new.len() >= 20);
    old.into_iter().chain(new).collect()
}

fn open(p: &PathBuf, cache: usize) -> Image {
    let f = std::fs::File::open(p).unwrap();
    Image::open_with(
        Box::new(f),
        OpenOptions {
            cache_bytes: cache,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// text.txt as make-fixtures.sh writes it.
fn text() -> Vec<u8> {
    (1..=1500)
        .map(|i| format!("{i} the quick brown fox jumps over the lazy dog\n"))
        .collect::<String>()
        .into_bytes()
}

fn read(image: &Image, path: &str) -> Vec<u8> {
    image
        .raw()
        .open_path(path.as_bytes())
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .read_all()
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_fixture_reads_back_its_source_tree() {
    let text = text();
    for p in fixture_paths() {
        let name = p.display().to_string();
        let image = open(&p, 1 << 20);
        assert_eq!(read(&image, "text.txt"), text, "{name}");
        assert_eq!(read(&image, "dir/sub/copy.txt"), text, "{name}");
        assert_eq!(read(&image, "small.txt"), b"hello, erofs\n", "{name}");
        assert_eq!(read(&image, "dir/aaaa"), vec![b'a'; 9000], "{name}");
        assert_eq!(read(&image, "dir/random.bin").len(), 6000, "{name}");
        let mut sparse = vec![0u8; 40000];
        sparse[20000..20006].copy_from_slice(b"island");
        assert_eq!(read(&image, "sparse"), sparse, "{name}");

        // Symlinks: the target, and following it.
        let link = image.raw().lookup_path(b"link", false).unwrap();
        assert_eq!(link.file_type(), FileType::Symlink);
        assert_eq!(image.raw().read_link(&link).unwrap(), b"small.txt");
        assert_eq!(read(&image, "link"), b"hello, erofs\n", "{name}");
        let dangling = image.raw().lookup_path(b"dir/dangling", false).unwrap();
        assert_eq!(
            image.raw().read_link(&dangling).unwrap(),
            b"/nowhere/at/all"
        );
        assert!(image.raw().lookup_path(b"dir/dangling", true).is_err());

        // Hard links share the inode; nlink counts both names.
        let a = image.raw().lookup_path(b"small.txt", false).unwrap();
        let b = image.raw().lookup_path(b"dir/hardlink", false).unwrap();
        assert_eq!(a.nid(), b.nid(), "{name}");
        assert_eq!(a.nlink(), 2, "{name}");

        // Metadata as set by the script.
        assert_eq!(a.mtime(), 1700000000, "{name}");
        assert_eq!(a.permissions(), 0o644, "{name}");
        let fifo = image.raw().lookup_path(b"fifo", false).unwrap();
        assert_eq!(fifo.file_type(), FileType::Fifo);
        let root = image.raw().root().unwrap();
        let names: Vec<Vec<u8>> = image
            .raw()
            .read_dir(&root)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "{name}: dirents sorted");
        assert!(names.contains(&b"empty".to_vec()));

        // Xattrs: plain and behind a long prefix.
        for f in ["small.txt", "text.txt"] {
            let ino = image.raw().lookup_path(f.as_bytes(), false).unwrap();
            assert_eq!(
                image.raw().xattr(&ino, b"user.comment").unwrap().as_deref(),
                Some(&b"a comment"[..]),
                "{name} {f}"
            );
            assert_eq!(image.raw().xattr(&ino, b"user.missing").unwrap(), None);
        }
        let dir = image.raw().lookup_path(b"dir", false).unwrap();
        assert_eq!(
            image
                .raw()
                .xattr(&dir, b"trusted.overlay.opaque")
                .unwrap()
                .as_deref(),
            Some(&b"y"[..]),
            "{name}"
        );

        // Missing paths and non-directories.
        assert!(matches!(
            image.raw().lookup_path(b"nope", true),
            Err(ferrofs::Error::NotFound { .. })
        ));
        assert!(matches!(
            image.raw().lookup_path(b"small.txt/x", true),
            Err(ferrofs::Error::NotADirectory { .. })
        ));
    }
}

#[test]
fn a_small_read_decodes_one_pcluster_prefix() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/lz4hc-big.erofs");
    let image = open(&p, 1 << 20);
    let f = image.raw().open_path(b"text.txt").unwrap();
    let text = text();
    let off = 30_000u64;
    let ext = f.map(off).unwrap();
    let mut buf = [0u8; 100];
    assert_eq!(f.read_at(&mut buf, off).unwrap(), 100);
    assert_eq!(&buf[..], &text[off as usize..off as usize + 100]);
    let s = image.raw().cache_stats();
    assert_eq!(s.decodes, 1, "one pcluster decoded");
    assert_eq!(
        s.decoded_bytes,
        off + 100 - ext.logical,
        "decoding stopped at the end of the request"
    );
    // The neighbouring read is served from the cache when it fits the prefix.
    let mut small = [0u8; 10];
    f.read_at(&mut small, off + 50).unwrap();
    assert_eq!(image.raw().cache_stats().decodes, 1);
}

/// A read that gets a whole extent decoded into its own buffer leaves a
/// copy in the cache for the next reader, unless the caller keeps what it
/// reads itself (`cache_whole_reads: false`, the FUSE mount).
#[test]
fn whole_extent_reads_leave_a_copy_only_when_asked() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/lz4hc-big.erofs");
    let text = text();
    for keep in [true, false] {
        let image = Image::open_with(
            Box::new(std::fs::File::open(&p).unwrap()),
            OpenOptions {
                cache_whole_reads: keep,
                ..Default::default()
            },
        )
        .unwrap();
        let f = image.raw().open_path(b"text.txt").unwrap();
        let ext = f
            .extents()
            .map(|e| e.unwrap())
            .find(|e| matches!(e.kind, ferrofs::map::ExtentKind::Pcluster(_)))
            .unwrap();
        let mut buf = vec![0u8; ext.len as usize];
        for round in 1..=2u64 {
            assert_eq!(f.read_at(&mut buf, ext.logical).unwrap(), buf.len());
            let s = ext.logical as usize;
            assert_eq!(buf, text[s..s + buf.len()]);
            let st = image.raw().cache_stats();
            assert_eq!(st.entries, usize::from(keep), "keep {keep}: {st:?}");
            // Kept: the second read copies; not kept: it decodes again.
            assert_eq!(st.decodes, if keep { 1 } else { round }, "keep {keep}");
        }
    }
}

#[test]
fn sequential_reads_decode_each_pcluster_at_most_twice_and_respect_the_budget() {
    for p in fixture_paths() {
        let budget = 1 << 20;
        let image = open(&p, budget);
        let f = image.raw().open_path(b"text.txt").unwrap();
        let pclusters = |f: &ferrofs::raw::InodeFile| {
            f.extents()
                .filter(|e| {
                    matches!(
                        e.as_ref().unwrap().kind,
                        ferrofs::map::ExtentKind::Pcluster(_)
                    )
                })
                .count() as u64
        };
        // Fragments are decoded through the packed inode's pclusters, and
        // inodes of metabox images through the metabox's.
        let extents = pclusters(&f)
            + image.raw().packed_file().map_or(0, |p| pclusters(&p))
            + image.raw().metabox_file().map_or(0, |m| pclusters(&m));
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = f.read_at(&mut buf, got.len() as u64).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, text(), "{}", p.display());
        let s = image.raw().cache_stats();
        assert!(
            s.decodes <= 2 * extents,
            "{}: {} decodes for {extents} pclusters",
            p.display(),
            s.decodes
        );
        assert!(
            s.bytes <= budget,
            "{}: cache holds {} bytes",
            p.display(),
            s.bytes
        );
    }
}

#[test]
fn concurrent_readers_see_the_same_bytes() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/lzma-ztail.erofs");
    let image = open(&p, 32 << 10);
    let text = Arc::new(text());
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let image = image.clone();
            let text = text.clone();
            std::thread::spawn(move || {
                let f = image.raw().open_path(b"text.txt").unwrap();
                let mut seed = t * 7919 + 1;
                for _ in 0..300 {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let off = (seed >> 33) % text.len() as u64;
                    let len = ((seed >> 13) % 9000) as usize;
                    let mut buf = vec![0u8; len];
                    let n = f.read_at(&mut buf, off).unwrap();
                    let end = (off as usize + len).min(text.len());
                    assert_eq!(&buf[..n], &text[off as usize..end]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Single-flight: 16 threads that read the same pcluster at the same moment
/// (whole extents, decoded straight into their buffers, and short prefixes
/// through the cache) cost one decode per pcluster.
#[test]
fn concurrent_readers_of_one_pcluster_share_one_decode() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/lz4hc-big.erofs");
    let text = Arc::new(text());
    for whole in [true, false] {
        let image = open(&p, 4 << 20);
        let f = image.raw().open_path(b"text.txt").unwrap();
        let extents: Vec<(u64, u64)> = f
            .extents()
            .map(|e| e.unwrap())
            .filter(|e| matches!(e.kind, ferrofs::map::ExtentKind::Pcluster(_)))
            .map(|e| (e.logical, e.len))
            .collect();
        assert!(!extents.is_empty());
        for &(logical, len) in &extents {
            let n = if whole { len as usize } else { 100 };
            let barrier = Arc::new(std::sync::Barrier::new(16));
            let threads: Vec<_> = (0..16)
                .map(|_| {
                    let image = image.clone();
                    let text = text.clone();
                    let barrier = barrier.clone();
                    std::thread::spawn(move || {
                        let f = image.raw().open_path(b"text.txt").unwrap();
                        let mut buf = vec![0u8; n];
                        barrier.wait();
                        let got = f.read_at(&mut buf, logical).unwrap();
                        let s = logical as usize;
                        assert_eq!(&buf[..got], &text[s..s + got]);
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
        }
        let s = image.raw().cache_stats();
        assert_eq!(
            s.decodes,
            extents.len() as u64,
            "whole {whole}: {} decodes for {} pclusters read by 16 threads each",
            s.decodes,
            extents.len()
        );
    }
}
