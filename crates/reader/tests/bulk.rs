//! The physical-order bulk reader (`ferrofs::bulk`) on every reference
//! image: the files it assembles from pieces equal what the path API
//! reads, each compressed pcluster is decoded once, the deliveries are the
//! same for any thread count and memory budget, and a damaged cluster is
//! reported for every file it serves. Also: random-order reads of small
//! files through the path API decode each shared pcluster once.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ferrofs::bulk::{Delivery, ReadPlan, RunOptions};
use ferrofs::map::{ExtentKind, PclusterFormat};
use ferrofs::{Image, OpenOptions};

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Every reference image: ferrofs's and mkfs.erofs 1.8.6's in testdata/,
/// erofs-utils 1.9.4's in testdata/v19.
fn images() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for dir in [testdata(), testdata().join("v19")] {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "erofs") {
                v.push(p);
            }
        }
    }
    v.sort();
    assert!(v.len() > 20, "reference images missing");
    v
}

fn open(p: &Path, cache: usize) -> Image {
    Image::open_with(
        Box::new(std::fs::File::open(p).unwrap()),
        OpenOptions {
            cache_bytes: cache,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Every regular file of the image (hard links once): path and inode.
fn regular_files(image: &Image) -> Vec<(Vec<u8>, ferrofs::raw::Inode)> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![(Vec::new(), image.raw().root().unwrap())];
    while let Some((path, dir)) = stack.pop() {
        for e in image.raw().read_dir(&dir).unwrap() {
            if e.is_dot() {
                continue;
            }
            let mut p = path.clone();
            if !p.is_empty() {
                p.push(b'/');
            }
            p.extend_from_slice(&e.name);
            let inode = image.raw().inode(e.nid).unwrap();
            if inode.is_dir() {
                stack.push((p, inode));
            } else if inode.is_reg() && seen.insert(e.nid) {
                out.push((p, inode));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// What a run delivered: each file's bytes, and the deliveries in the
/// order they came (file, offset, length) sorted for comparison.
struct Result_ {
    files: Vec<Vec<u8>>,
    pieces: Vec<(usize, u64, usize)>,
    stats: ferrofs::bulk::RunStats,
    pclusters: usize,
}

fn run_plan(image: &Image, opts: &RunOptions) -> Result_ {
    let files = regular_files(image);
    let mut plan = ReadPlan::new(image);
    let mut sizes = Vec::new();
    for (_, inode) in &files {
        let f = image.raw().open(inode.clone()).unwrap();
        let added = plan.add(&f).unwrap();
        assert_eq!(added.id.index(), sizes.len());
        sizes.push(inode.size() as usize);
    }
    let out: Vec<Mutex<Vec<u8>>> = sizes.iter().map(|&s| Mutex::new(vec![0; s])).collect();
    let pieces = Mutex::new(Vec::new());
    let stats = plan
        .run(opts, &|d: Delivery<'_>| match d {
            Delivery::Bytes {
                file, offset, data, ..
            } => {
                let mut f = out[file.index()].lock().unwrap();
                let at = offset as usize;
                f[at..at + data.len()].copy_from_slice(data);
                pieces
                    .lock()
                    .unwrap()
                    .push((file.index(), offset, data.len()));
                Ok(())
            }
            Delivery::Failed { error, .. } => Err(error.to_string()),
        })
        .unwrap();
    let mut pieces = pieces.into_inner().unwrap();
    pieces.sort_unstable();
    Result_ {
        files: out.into_iter().map(|m| m.into_inner().unwrap()).collect(),
        pieces,
        stats,
        pclusters: plan.pclusters(),
    }
}

/// Compressed pclusters of the files' data, counted independently: every
/// extent of every file, fragments resolved through the packed inode's
/// extents.
fn data_pclusters(image: &Image) -> usize {
    let mut set = HashSet::new();
    let packed: Vec<_> = image
        .raw()
        .packed_file()
        .map(|f| f.extents().map(|e| e.unwrap()).collect())
        .unwrap_or_default();
    for (_, inode) in regular_files(image) {
        let f = image.raw().open(inode).unwrap();
        for e in f.extents() {
            let e = e.unwrap();
            match e.kind {
                ExtentKind::Pcluster(p) if matches!(p.format, PclusterFormat::Codec(_)) => {
                    set.insert((p.at.bits(), p.len));
                }
                ExtentKind::Fragment { offset } => {
                    for pe in &packed {
                        let overlaps = pe.logical < offset + e.len && pe.end() > offset;
                        if let (true, ExtentKind::Pcluster(p)) = (overlaps, pe.kind) {
                            if matches!(p.format, PclusterFormat::Codec(_)) {
                                set.insert((p.at.bits(), p.len));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    set.len()
}

#[test]
fn plans_read_every_file_as_the_path_api_does_decoding_each_pcluster_once() {
    for p in images() {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let image = open(&p, 16 << 20);
        let one = run_plan(
            &image,
            &RunOptions {
                jobs: 1,
                ..Default::default()
            },
        );
        // The same image opened again (nothing cached), three threads and a
        // budget smaller than any cluster: every unit runs alone.
        let image3 = open(&p, 16 << 20);
        let three = run_plan(
            &image3,
            &RunOptions {
                jobs: 3,
                memory: 1,
                ..Default::default()
            },
        );
        let files = regular_files(&image);
        for (i, (path, _)) in files.iter().enumerate() {
            let want = image.read(Path::new("/").join(String::from_utf8_lossy(path).as_ref()));
            let want = want.unwrap();
            assert!(
                one.files[i] == want,
                "{name}: {:?} differs",
                String::from_utf8_lossy(path)
            );
            assert!(
                three.files[i] == want,
                "{name}: {:?} differs (-j3)",
                String::from_utf8_lossy(path)
            );
        }
        assert_eq!(
            one.pieces, three.pieces,
            "{name}: deliveries depend on threads"
        );
        let expect = data_pclusters(&image);
        assert_eq!(one.pclusters, expect, "{name}: pclusters planned");
        for (r, what) in [(&one, "-j1"), (&three, "-j3")] {
            let s = r.stats;
            assert!(
                s.pclusters_decoded <= expect as u64
                    && s.pclusters_decoded + s.pclusters_cached == expect as u64,
                "{name} {what}: {s:?}, {expect} pclusters"
            );
            let bytes: u64 = r.files.iter().map(|f| f.len() as u64).sum();
            assert!(s.bytes_delivered <= bytes, "{name} {what}: {s:?}");
        }
    }
}

/// A damaged pcluster shared by many files (the packed inode's) is decoded
/// once and reported once for each file it serves, with the same report
/// for any thread count.
#[test]
fn a_damaged_shared_pcluster_fails_every_file_it_serves_once() {
    let p = testdata().join("all-fragments.erofs");
    let mut bytes = std::fs::read(&p).unwrap();
    let image = open(&p, 1 << 20);
    let packed = image.raw().packed_file().expect("a packed inode");
    let (pe, pc) = packed
        .extents()
        .map(|e| e.unwrap())
        .find_map(|e| match e.kind {
            ExtentKind::Pcluster(pc) if matches!(pc.format, PclusterFormat::Codec(_)) => {
                Some((e, pc))
            }
            _ => None,
        })
        .expect("a compressed packed pcluster");
    // The files with a fragment in that pcluster's range.
    let users = regular_files(&image)
        .into_iter()
        .filter(|(_, inode)| {
            let f = image.raw().open(inode.clone()).unwrap();
            f.extents().any(|e| {
                let e = e.unwrap();
                matches!(e.kind, ExtentKind::Fragment { offset }
                    if offset < pe.end() && offset + e.len > pe.logical)
            })
        })
        .count();
    assert!(users > 1, "the fixture shares its packed pcluster");
    // Garble the compressed stream (past any zero padding).
    let start = pc.at.offset() as usize;
    let end = start + pc.len as usize;
    let first = start + bytes[start..end].iter().position(|&b| b != 0).unwrap();
    for b in &mut bytes[first..end] {
        *b = b.wrapping_mul(31).wrapping_add(7);
    }
    let mut reports = Vec::new();
    for jobs in [1, 4] {
        let image = Image::open_with(Box::new(bytes.clone()), OpenOptions::default()).unwrap();
        let files = regular_files(&image);
        let mut plan = ReadPlan::new(&image);
        for (_, inode) in &files {
            plan.add(&image.raw().open(inode.clone()).unwrap()).unwrap();
        }
        let failed = Mutex::new(BTreeMap::new());
        let stats = plan
            .run(
                &RunOptions {
                    jobs,
                    ..Default::default()
                },
                &|d: Delivery<'_>| -> Result<(), ()> {
                    if let Delivery::Failed { file, error, .. } = d {
                        let name = file.map(|f| files[f.index()].0.clone());
                        let mut m = failed.lock().unwrap();
                        *m.entry(name).or_insert(0) += 1;
                        assert!(error.is_corruption(), "{error}");
                    }
                    Ok(())
                },
            )
            .unwrap();
        let others = packed_codec_pclusters(&image) - 1;
        assert_eq!(
            stats.pclusters_decoded, others,
            "the damaged decode does not count"
        );
        let failed = failed.into_inner().unwrap();
        assert_eq!(failed.len(), users, "{failed:?}");
        assert!(failed.values().all(|&n| n == 1), "{failed:?}");
        reports.push(failed);
    }
    assert_eq!(reports[0], reports[1]);
}

fn packed_codec_pclusters(image: &Image) -> u64 {
    image
        .raw()
        .packed_file()
        .unwrap()
        .extents()
        .filter(|e| {
            matches!(e.as_ref().unwrap().kind,
                ExtentKind::Pcluster(pc) if matches!(pc.format, PclusterFormat::Codec(_)))
        })
        .count() as u64
}

/// A sink error stops the run, and the error returned is the one of the
/// first failing unit in physical order, whatever the thread count.
#[test]
fn a_sink_error_stops_the_run_with_the_first_failure_in_physical_order() {
    let p = testdata().join("v19/e48-libdeflate.erofs");
    let mut firsts = Vec::new();
    for jobs in [1, 2, 8] {
        let image = open(&p, 1 << 20);
        let files = regular_files(&image);
        let mut plan = ReadPlan::new(&image);
        for (_, inode) in &files {
            plan.add(&image.raw().open(inode.clone()).unwrap()).unwrap();
        }
        // Fail on every third delivery: the lowest failing unit decides.
        let n = std::sync::atomic::AtomicUsize::new(0);
        let err = plan
            .run(
                &RunOptions {
                    jobs,
                    ..Default::default()
                },
                &|d: Delivery<'_>| match d {
                    Delivery::Bytes { file, offset, .. } if file.index() % 3 == 1 => {
                        n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        Err((file.index(), offset))
                    }
                    _ => Ok(()),
                },
            )
            .unwrap_err();
        firsts.push(err);
    }
    assert!(firsts.windows(2).all(|w| w[0] == w[1]), "{firsts:?}");
}

/// Reading every small file of a dense image in a shuffled order through
/// the path API decodes each pcluster once while the cache holds them
/// (fragments share the packed inode's pclusters; a first small read used
/// to decode a prefix, the next one the whole pcluster again).
#[test]
fn random_order_reads_decode_each_shared_pcluster_once() {
    for name in [
        "all-fragments.erofs",
        "zstd-fragments.erofs",
        "v19/e48-lz4hc-C64k-frag.erofs",
    ] {
        let p = testdata().join(name);
        let image = open(&p, 256 << 20);
        // The small files: all their bytes in fragments (or inline).
        let mut files: Vec<_> = regular_files(&image)
            .into_iter()
            .filter(|(_, inode)| {
                let f = image.raw().open(inode.clone()).unwrap();
                f.extents().all(|e| {
                    matches!(
                        e.unwrap().kind,
                        ExtentKind::Fragment { .. } | ExtentKind::Inline { .. }
                    )
                })
            })
            .collect();
        assert!(files.len() > 2, "{name}: small files");
        // A fixed shuffle.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in (1..files.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            files.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for (path, _) in &files {
            let f = image.raw().open_path(path).unwrap();
            // Small reads, as a program reading headers would.
            let mut buf = [0u8; 100];
            let _ = f.read_at(&mut buf, 0).unwrap();
            let _ = f.read_at(&mut buf, f.size().saturating_sub(100)).unwrap();
        }
        let st = image.raw().cache_stats();
        let expect = packed_codec_pclusters(&image);
        assert!(
            st.decodes <= expect,
            "{name}: {st:?}, {expect} packed pclusters"
        );
    }
}

/// A damaged pcluster is decoded once however many readers want it: the
/// first failure is remembered and every later read of that much (or more)
/// of it gets the same error without decoding (before, each file of a
/// packed pcluster, each inode of a metabox pcluster, decoded it again:
/// seconds for a 1 MiB MicroLZMA pcluster shared by a few hundred files).
#[test]
fn a_damaged_pcluster_is_decoded_once_for_all_its_readers() {
    for name in ["all-fragments.erofs", "v19/e48-lz4hc-C64k-frag.erofs"] {
        let p = testdata().join(name);
        let mut bytes = std::fs::read(&p).unwrap();
        let image = open(&p, 1 << 20);
        let packed = image.raw().packed_file().expect("a packed inode");
        let (pe, pc) = packed
            .extents()
            .map(|e| e.unwrap())
            .find_map(|e| match e.kind {
                ExtentKind::Pcluster(pc) if matches!(pc.format, PclusterFormat::Codec(_)) => {
                    Some((e, pc))
                }
                _ => None,
            })
            .expect("a compressed packed pcluster");
        let users: Vec<_> = regular_files(&image)
            .into_iter()
            .filter(|(_, inode)| {
                let f = image.raw().open(inode.clone()).unwrap();
                f.extents().any(|e| {
                    let e = e.unwrap();
                    matches!(e.kind, ExtentKind::Fragment { offset }
                        if offset < pe.end() && offset + e.len > pe.logical)
                })
            })
            .collect();
        assert!(
            users.len() > 2,
            "{name}: the fixture shares its packed pcluster"
        );
        let start = pc.at.offset() as usize;
        let end = start + pc.len as usize;
        let first = start + bytes[start..end].iter().position(|&b| b != 0).unwrap();
        for b in &mut bytes[first..end] {
            *b = b.wrapping_mul(31).wrapping_add(7);
        }
        let image = Image::open_with(Box::new(bytes), OpenOptions::default()).unwrap();
        let mut errors = HashSet::new();
        let mut failed = 0;
        for (path, _) in &users {
            let f = image.raw().open_path(path).unwrap();
            let mut buf = vec![0u8; f.size() as usize];
            // A short prefix of a garbled LZ4 stream may still decode.
            if let Err(e) = f.read_at(&mut buf, 0) {
                errors.insert(e.to_string());
                failed += 1;
            }
        }
        let st = image.raw().cache_stats();
        assert!(
            failed > 2,
            "{name}: {failed} of {} reads failed",
            users.len()
        );
        assert_eq!(st.decode_failures, 1, "{name}: {st:?}");
        assert_eq!(errors.len(), 1, "{name}: one error for all: {errors:?}");
    }
}
