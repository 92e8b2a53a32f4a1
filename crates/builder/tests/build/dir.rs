//! Images built by the library (`ferrofs_builder::build`) from the
//! testkit's corner-case tree, read back through the reader's front door
//! (`Image::open_path`, `symlink_metadata`, `read_dir`, `read`,
//! `open_file`, `read_link`, `xattrs`) and compared with the source tree
//! entry by entry: type, mode, owner, link count, size, mtime with
//! nanoseconds, device number, listing, symlink target, bytes (whole, from
//! a seek and with `read_at`), xattrs, and hardlink groups (entries share
//! an inode number in the image exactly when they do in the source).
//!
//! No kernel and no root needed: without root the tree has no devices,
//! foreign owners or `trusted.*` xattrs (the testkit leaves them out), and
//! everything else is still checked. One case per layout: plain, not
//! inline, 1 KiB blocks, chunk-based, every codec at two pcluster sizes,
//! ztailpacking, fragments, all-fragments, dedupe and all of them at once.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ferrofs::Image;
use ferrofs_builder::BuildOptions;
use ferrofs_builder::{CompressOptions, Compressor};
use ferrofs_testkit::compare::list_tree;
use ferrofs_testkit::{corpus, xattr, TempDir};

/// The corner tree, made once for all tests of this binary.
/// It is removed when the process exits.
fn source() -> &'static Path {
    static TREE: OnceLock<PathBuf> = OnceLock::new();
    TREE.get_or_init(|| {
        let mut dir = TempDir::new("ferrofs-builder-read-back").expect("temp dir");
        dir.keep();
        ferrofs_testkit::tmp::remove_at_exit(dir.path());
        let tree = dir.path().join("tree");
        corpus::make_corner_tree(&tree).expect("corner tree");
        if !ferrofs_testkit::is_root() {
            let_owner_read(&tree);
        }
        tree
    })
}

/// Without root the tree's mode-0 files and directories cannot be read
/// by the build either (nor by mkfs.erofs): gives their owner read (and,
/// for directories, search) permission, as a user would before building.
/// Modes change, mtimes do not; the comparison is with the changed tree.
fn let_owner_read(root: &Path) {
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let m = fs::symlink_metadata(&path).unwrap();
            let need = if m.is_dir() {
                dirs.push(path.clone());
                0o500
            } else if m.is_file() {
                0o400
            } else {
                continue;
            };
            if m.mode() & need != need {
                let mode = (m.mode() | need) & 0o7777;
                fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            }
        }
    }
}

/// Compression settings: `alg` (mkfs.erofs spelling), pcluster size, and
/// the `-E` features named in `ext` (`ztailpacking`, `fragments`,
/// `all-fragments`).
fn compressed(alg: &str, pcluster: u64, ext: &[&str]) -> CompressOptions {
    CompressOptions {
        compressors: vec![Compressor::parse(alg).expect("compressor")],
        pcluster_bytes: pcluster,
        ztailpacking: ext.contains(&"ztailpacking"),
        fragments: ext.contains(&"fragments") || ext.contains(&"all-fragments"),
        all_fragments: ext.contains(&"all-fragments"),
        packed_pcluster: None,
        hints: Vec::new(),
        max_extent_bytes: None,
        legacy_compress: false,
    }
}

/// The xattrs of a source entry, by name.
fn source_xattrs(path: &Path) -> BTreeMap<OsString, Vec<u8>> {
    let mut out = BTreeMap::new();
    for name in xattr::list(path).into_iter().flatten() {
        let value = xattr::get(path, &name).ok().flatten().unwrap_or_default();
        out.insert(name, value);
    }
    out
}

/// Compares a regular file's bytes read three ways with the source's.
fn check_bytes(image: &Image, rel: &Path, want: &[u8], f: &mut Vec<String>) {
    let what = Path::new("/").join(rel);
    let what = what.display();
    match image.read(rel) {
        Ok(got) if got == want => {}
        Ok(got) => f.push(format!(
            "{what}: read gives {} bytes, not the source's {}",
            got.len(),
            want.len()
        )),
        Err(e) => return f.push(format!("{what}: read: {e}")),
    }
    let mut file = match image.open_file(rel) {
        Ok(file) => file,
        Err(e) => return f.push(format!("{what}: open_file: {e}")),
    };
    // From an odd offset a third in, through `Seek` + `Read`.
    let mid = (want.len() / 3) | 1;
    let mut rest = Vec::new();
    let seek = file.seek(SeekFrom::Start(mid as u64));
    if seek.is_err()
        || file.read_to_end(&mut rest).is_err()
        || rest != want.get(mid..).unwrap_or_default()
    {
        f.push(format!(
            "{what}: seek to {mid} and read_to_end differ from the source"
        ));
    }
    // A piece crossing block boundaries, with `read_at`.
    let mut buf = vec![0u8; 9000];
    let end = (mid + buf.len()).min(want.len());
    match file.read_at(&mut buf, mid as u64) {
        Ok(n) if buf[..n] == *want.get(mid..end).unwrap_or_default() => {}
        Ok(n) => f.push(format!(
            "{what}: read_at({mid}) gives {n} bytes unlike the source's"
        )),
        Err(e) => f.push(format!("{what}: read_at({mid}): {e}")),
    }
}

/// Compares one entry of the image with the source; `inos` pairs image
/// inode numbers (`true`) with source ones (`false`) both ways, so hardlink
/// groups must match.
fn check_entry(
    image: &Image,
    src: &Path,
    rel: &Path,
    want: &fs::Metadata,
    inos: &mut HashMap<(bool, u64), u64>,
    f: &mut Vec<String>,
) {
    let what = Path::new("/").join(rel);
    let what = what.display();
    let got = match image.symlink_metadata(rel) {
        Ok(m) => m,
        Err(e) => return f.push(format!("{what}: symlink_metadata: {e}")),
    };
    let (t, wt) = (got.file_type(), want.file_type());
    let kind =
        |a: bool, b: bool, c: bool, d: bool, e: bool, g: bool, h: bool| [a, b, c, d, e, g, h];
    let got_kind = kind(
        t.is_file(),
        t.is_dir(),
        t.is_symlink(),
        t.is_fifo(),
        t.is_socket(),
        t.is_char_device(),
        t.is_block_device(),
    );
    let want_kind = kind(
        wt.is_file(),
        wt.is_dir(),
        wt.is_symlink(),
        wt.is_fifo(),
        wt.is_socket(),
        wt.is_char_device(),
        wt.is_block_device(),
    );
    if got_kind != want_kind {
        return f.push(format!("{what}: type {got_kind:?}, source {want_kind:?}"));
    }
    if got.mode() != want.mode() {
        f.push(format!(
            "{what}: mode {:#o}, source {:#o}",
            got.mode(),
            want.mode()
        ));
    }
    let pairs = [
        ("uid", i64::from(got.uid()), i64::from(want.uid())),
        ("gid", i64::from(got.gid()), i64::from(want.gid())),
        ("nlink", got.nlink() as i64, want.nlink() as i64),
        ("mtime", got.mtime(), want.mtime()),
        ("mtime_nsec", got.mtime_nsec(), want.mtime_nsec()),
    ];
    for (field, g, w) in pairs {
        if g != w {
            f.push(format!("{what}: {field} {g}, source {w}"));
        }
    }
    if !wt.is_dir() && got.len() != want.len() {
        f.push(format!("{what}: len {}, source {}", got.len(), want.len()));
    }
    if (wt.is_char_device() || wt.is_block_device()) && got.rdev() != want.rdev() {
        f.push(format!(
            "{what}: rdev {:#x}, source {:#x}",
            got.rdev(),
            want.rdev()
        ));
    }
    // Image inode numbers and source ones pair one to one.
    let image_side = *inos.entry((true, got.ino())).or_insert(want.ino());
    let source_side = *inos.entry((false, want.ino())).or_insert(got.ino());
    if (image_side, source_side) != (want.ino(), got.ino()) {
        f.push(format!(
            "{what}: hardlink groups differ (image inode {}, source inode {})",
            got.ino(),
            want.ino()
        ));
    }
    let path = src.join(rel);
    if wt.is_dir() {
        let mut names = Vec::new();
        for e in image.read_dir(rel).into_iter().flatten() {
            match e.and_then(|e| Ok((e.file_name(), e.file_type()?.is_dir()))) {
                Ok(n) => names.push(n),
                Err(e) => f.push(format!("{what}: read_dir: {e}")),
            }
        }
        let mut want_names: Vec<(OsString, bool)> = fs::read_dir(&path)
            .unwrap()
            .map(|e| {
                e.map(|e| (e.file_name(), e.file_type().unwrap().is_dir()))
                    .unwrap()
            })
            .collect();
        names.sort();
        want_names.sort();
        if names != want_names {
            f.push(format!(
                "{what}: read_dir lists {} entries, the source {}",
                names.len(),
                want_names.len()
            ));
        }
    } else if wt.is_symlink() {
        let target = image.read_link(rel).map_err(|e| e.to_string());
        if target != Ok(fs::read_link(&path).unwrap()) {
            f.push(format!("{what}: read_link {target:?}"));
        }
    } else if wt.is_file() {
        check_bytes(image, rel, &fs::read(&path).unwrap(), f);
    }
    if !wt.is_symlink() {
        match image.xattrs(rel) {
            Ok(got) => {
                let got: BTreeMap<OsString, Vec<u8>> = got.into_iter().collect();
                let want = source_xattrs(&path);
                if got != want {
                    f.push(format!(
                        "{what}: xattrs {:?}, source {:?}",
                        got.keys(),
                        want.keys()
                    ));
                }
            }
            Err(e) => f.push(format!("{what}: xattrs: {e}")),
        }
    }
}

/// Builds an image of the corner tree with `opts` and compares it with the
/// tree; returns the failures.
fn build_and_compare(work: &Path, name: &str, opts: &BuildOptions) -> Vec<String> {
    let src = source();
    let img = work.join(format!("{name}.img"));
    if let Err(e) = ferrofs_builder::build(src, &img, opts, None, &|_| {}) {
        return vec![format!("build: {e}")];
    }
    let image = match Image::open_path(&img) {
        Ok(i) => i,
        Err(e) => return vec![format!("open: {e}")],
    };
    let mut f = Vec::new();
    let mut inos = HashMap::new();
    let root = fs::symlink_metadata(src).unwrap();
    check_entry(&image, src, Path::new(""), &root, &mut inos, &mut f);
    let entries = list_tree(src).unwrap();
    for (rel, want) in &entries {
        check_entry(&image, src, rel, want, &mut inos, &mut f);
    }
    if entries.len() < 3000 {
        f.push(format!("only {} entries in the corner tree", entries.len()));
    }
    if f.is_empty() {
        let _ = fs::remove_file(&img);
    }
    f
}

/// Runs every case on two threads; panics listing each case's failures
/// (keeping the images) if there are any.
fn run_cases(what: &str, cases: Vec<(String, BuildOptions)>) {
    let mut work = TempDir::new(what).expect("temp dir");
    let labels = cases.iter().map(|(name, _)| name.clone()).collect();
    let results = ferrofs_testkit::tmp::check_cases(what, labels, |i| {
        build_and_compare(work.path(), &cases[i].0, &cases[i].1)
    });
    if results.iter().any(|(_, f)| !f.is_empty()) {
        work.keep();
    }
    ferrofs_testkit::tmp::report_cases(work.path(), what, results);
}

/// Uncompressed layouts: inline tails, no inlining, 1 KiB blocks and
/// chunk-based files with chunk indexes.
#[test]
fn uncompressed_images_read_back_as_the_source() {
    let default = BuildOptions::default();
    let cases = vec![
        ("plain".to_string(), default.clone()),
        (
            "no_inline".into(),
            BuildOptions {
                inline_data: false,
                ..default.clone()
            },
        ),
        (
            "b1024".into(),
            BuildOptions {
                blkszbits: 10,
                ..default.clone()
            },
        ),
        (
            "extended".into(),
            BuildOptions {
                force_extended: true,
                ..default.clone()
            },
        ),
        (
            "chunks_64k".into(),
            BuildOptions {
                chunk_size: Some(65536),
                chunk_indexes: true,
                ..default.clone()
            },
        ),
        (
            "chunks_4k".into(),
            BuildOptions {
                chunk_size: Some(4096),
                ..default
            },
        ),
    ];
    run_cases("uncompressed", cases);
}

/// Every codec at a one-block and a 64 KiB pcluster.
#[test]
fn compressed_images_read_back_as_the_source() {
    let mut cases = Vec::new();
    for alg in ["lz4", "lz4hc,9", "lz4hc,12", "lzma", "deflate", "zstd"] {
        for pcluster in [4096u64, 65536] {
            let opts = BuildOptions {
                compress: Some(compressed(alg, pcluster, &[])),
                ..Default::default()
            };
            cases.push((format!("{alg}_{pcluster}"), opts));
        }
    }
    run_cases("compressed", cases);
}

/// The dense layouts: ztailpacking, fragments, all-fragments, dedupe, and
/// all of them together.
#[test]
fn dense_images_read_back_as_the_source() {
    let case = |name: &str, alg: &str, ext: &[&str], dedupe: bool| {
        let opts = BuildOptions {
            compress: Some(compressed(alg, 65536, ext)),
            dedupe,
            ..Default::default()
        };
        (name.to_string(), opts)
    };
    let cases = vec![
        case("ztailpacking", "lz4hc", &["ztailpacking"], false),
        case("fragments", "lzma", &["fragments"], false),
        case("all_fragments", "zstd", &["all-fragments"], false),
        case("dedupe", "lz4", &[], true),
        case("dense", "lz4hc", &["fragments", "ztailpacking"], true),
        case(
            "dense_deflate",
            "deflate",
            &["fragments", "ztailpacking"],
            true,
        ),
    ];
    run_cases("dense", cases);
}
