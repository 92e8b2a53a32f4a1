//! `Input::Dir`: images the library builds from the testkit's corner-case
//! tree read back as the tree. Through the reader's front door
//! (`symlink_metadata`, `read_dir`, `read`, `open_file`, `read_link`,
//! `xattrs`) every entry is compared with the source: type, mode, owner,
//! link count, size, mtime with nanoseconds, device number, listing,
//! symlink target, bytes (whole, from a seek and with `read_at`), xattrs,
//! and hardlink groups (entries share an inode number in the image
//! exactly when they do in the source); where the kernel mounts images,
//! its mount equals the tree too (testkit's strict comparison). The
//! `Summary` agrees with the image: `bytes` is the file's length and
//! `blocks` times the block size, `inodes` what its tree reaches (plus the
//! packed inode), `compressed_files` and `pclusters` non-zero exactly when
//! compressing, no compact inodes with `force_extended`.
//!
//! Without root the tree has no devices, foreign owners or `trusted.*`
//! xattrs (the testkit leaves them out), and the rest is still checked.
//! One case per layout: plain, not inline, 1 KiB blocks, extended inodes,
//! chunk-based, every codec at two pcluster sizes, ztailpacking,
//! fragments, all-fragments, dedupe and all of them at once.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ferrofs::Image;
use ferrofs_builder::{BuildOptions, CompressOptions, Compressor, Summary};
use ferrofs_testkit::compare::list_tree;
use ferrofs_testkit::{corpus, TempDir};

use crate::common;

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
        sparse: ext.contains(&"sparse"),
    }
}

/// Builds an image of the corner tree with `opts` through `build_from`
/// and compares it with the tree (through the reader, and the kernel
/// where it mounts), and its `Summary` with what the image holds;
/// returns the failures.
fn build_and_compare(work: &Path, name: &str, opts: &BuildOptions) -> Vec<String> {
    let src = source();
    let img = work.join(format!("{name}.img"));
    let input = ferrofs_builder::Input::Dir(src);
    let mode = ferrofs_builder::Mode::Fresh;
    let s = match ferrofs_builder::build_from(input, mode, &img, opts, None, &|_| {}) {
        Ok(s) => s,
        Err(e) => return vec![format!("build: {e}")],
    };
    let image = match Image::open_path(&img) {
        Ok(i) => i,
        Err(e) => return vec![format!("open: {e}")],
    };
    let mut f = common::image_matches(&image, src);
    let entries = list_tree(src).unwrap().len();
    if entries < 3000 {
        f.push(format!("only {entries} entries in the corner tree"));
    }
    f.extend(check_summary(&s, &image, &img, opts));
    f.extend(common::kernel_matches(&img, &[], src));
    if f.is_empty() {
        let _ = fs::remove_file(&img);
    }
    f
}

/// The `Summary` against the image: its length, its blocks, the inodes
/// its tree reaches (with the packed inode when fragments made one), the
/// compressed files and inode forms the options call for (files wholly
/// in the packed inode have no pclusters of their own: `pclusters` may be
/// fewer than `compressed_files`).
fn check_summary(s: &Summary, image: &Image, img: &Path, opts: &BuildOptions) -> Vec<String> {
    let mut f = Vec::new();
    let len = fs::metadata(img).unwrap().len();
    if s.bytes != len || s.blocks * opts.block_size() != len {
        f.push(format!(
            "summary: {} bytes in {} blocks, the file has {len}",
            s.bytes, s.blocks
        ));
    }
    let packed = u64::from(image.superblock().packed_nid != 0);
    let reached = common::image_inodes(image);
    if s.inodes != reached + packed {
        f.push(format!(
            "summary: {} inodes, the tree reaches {reached} (+{packed} packed)",
            s.inodes
        ));
    }
    if s.meta_blocks == 0 || s.meta_blocks > s.blocks || s.compact_inodes > s.inodes {
        f.push(format!("summary: implausible {s:?}"));
    }
    if opts.force_extended && s.compact_inodes != 0 {
        f.push(format!("summary: {} compact inodes", s.compact_inodes));
    }
    match &opts.compress {
        Some(_) if s.compressed_files == 0 || s.pclusters == 0 => f.push(format!(
            "summary: {} compressed files in {} pclusters",
            s.compressed_files, s.pclusters
        )),
        None if s.compressed_files != 0 || s.pclusters != 0 => f.push(format!(
            "summary: an uncompressed build has {} compressed files",
            s.compressed_files
        )),
        _ => {}
    }
    if s.base.is_some() || s.layers.is_some() || s.incremental.is_some() || s.phases.is_empty() {
        f.push(format!("summary: parts of another kind of build: {s:?}"));
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
