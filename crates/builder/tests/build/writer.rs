//! The streaming writer (`ferrofs_builder::writer`): the entries of the
//! corner tree, appended children first and in reverse name order (file
//! data from readers, sparse files from their paths), build the image
//! `build` makes of the tree, byte for byte, over the option sets of the
//! pinned-image test; into a `Write + Seek` too; bad entries are typed
//! errors naming the path.

use std::collections::HashMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use ferrofs_builder::writer::{Device, EntryMeta, ImageWriter};
use ferrofs_builder::{
    BuildError, BuildOptions, CompressOptions, Compressor, MetaboxOptions, TimePolicy,
};
use ferrofs_testkit::{corpus, TempDir};

fn meta_of(path: &Path, m: &fs::Metadata) -> EntryMeta {
    let mut e = EntryMeta::from_metadata(m);
    for name in xattr::list(path).unwrap() {
        let v = xattr::get(path, &name).unwrap().unwrap_or_default();
        e = e.xattr(name.as_bytes(), v);
    }
    e
}

/// Every path under `root` (the root as ""), deepest and last-named
/// first: children before their directories.
fn entries(root: &Path) -> Vec<PathBuf> {
    let mut all = vec![PathBuf::new()];
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(root.join(&rel)).unwrap() {
            let e = e.unwrap();
            let r = rel.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                stack.push(r.clone());
            }
            all.push(r);
        }
    }
    all.sort();
    all.reverse();
    all
}

/// Appends the tree at `root` to `w`, as the module docs say.
fn append_tree(w: &mut ImageWriter, root: &Path) {
    let mut links: HashMap<(u64, u64), PathBuf> = HashMap::new();
    for rel in entries(root) {
        let path = root.join(&rel);
        let m = fs::symlink_metadata(&path).unwrap();
        let meta = meta_of(&path, &m);
        let name = Path::new("/").join(&rel);
        let ft = m.file_type();
        if !m.is_dir() && m.nlink() > 1 {
            if let Some(first) = links.get(&(m.dev(), m.ino())) {
                w.append_link(&name, first).unwrap();
                continue;
            }
            links.insert((m.dev(), m.ino()), name.clone());
        }
        if ft.is_dir() {
            w.append_dir(&name, &meta).unwrap();
        } else if ft.is_file() && m.blocks() * 512 < m.len() {
            w.append_path(&name, &meta, &path).unwrap();
        } else if ft.is_file() {
            let f = fs::File::open(&path).unwrap();
            w.append_file(&name, &meta, m.len(), f).unwrap();
        } else if ft.is_symlink() {
            let t = fs::read_link(&path).unwrap();
            w.append_symlink(&name, &meta, t.as_os_str().as_bytes())
                .unwrap();
        } else if ft.is_char_device() || ft.is_block_device() {
            let kind = if ft.is_char_device() {
                Device::Char
            } else {
                Device::Block
            };
            let rdev = m.rdev();
            let (major, minor) = (rustix::fs::major(rdev), rustix::fs::minor(rdev));
            w.append_device(&name, &meta, kind, major, minor).unwrap();
        } else if ft.is_fifo() {
            w.append_fifo(&name, &meta).unwrap();
        } else if ft.is_socket() {
            w.append_socket(&name, &meta).unwrap();
        }
    }
}

/// The option sets of the pinned-image test that a directory build takes.
fn option_sets() -> Vec<(&'static str, BuildOptions)> {
    let c = |alg: &str, pcl: u64| Some(CompressOptions::new(Compressor::parse(alg).unwrap(), pcl));
    let base = BuildOptions {
        uuid: Some([7; 16]),
        time: TimePolicy::BuildTimeOnly(1_700_000_000),
        ..Default::default()
    };
    let with = |f: &dyn Fn(&mut BuildOptions)| {
        let mut o = base.clone();
        f(&mut o);
        o
    };
    vec![
        ("plain", base.clone()),
        ("block-1k", with(&|o| o.blkszbits = 10)),
        ("chunks", with(&|o| o.chunk_size = Some(8192))),
        ("lz4", with(&|o| o.compress = c("lz4", 4096))),
        ("lz4hc", with(&|o| o.compress = c("lz4hc,12", 65536))),
        ("lzma", with(&|o| o.compress = c("lzma,6", 131072))),
        ("deflate", with(&|o| o.compress = c("deflate", 4096))),
        ("zstd", with(&|o| o.compress = c("zstd,10", 65536))),
        (
            "ztailpacking",
            with(&|o| {
                o.compress = c("lz4hc", 65536);
                if let Some(z) = &mut o.compress {
                    z.ztailpacking = true;
                }
            }),
        ),
        (
            "48bit",
            with(&|o| {
                o.compress = c("lz4hc", 4096);
                o.bit48 = true;
            }),
        ),
        ("offset", with(&|o| o.offset = 8192)),
        (
            "fragments-dedupe",
            with(&|o| {
                o.compress = c("lz4hc", 65536);
                if let Some(z) = &mut o.compress {
                    z.fragments = true;
                }
                o.dedupe = true;
            }),
        ),
        (
            "metabox-zD",
            with(&|o| {
                o.compress = c("lzma", 65536);
                o.metabox = Some(MetaboxOptions {
                    pcluster_bytes: 4096,
                    compressor: Some(0),
                });
                o.compress_dirs = true;
            }),
        ),
        // The blob's path is set per build below.
        ("chunks-blobdev", with(&|o| o.chunk_size = Some(8192))),
        ("preset-dense", {
            let mut o = BuildOptions::preset("dense").unwrap();
            o.uuid = base.uuid;
            o.time = base.time;
            o
        }),
    ]
}

#[test]
fn entries_build_the_image_of_their_tree() {
    let dir = TempDir::new("ferrofs-builder-writer").unwrap();
    let tree = dir.path().join("tree");
    corpus::make_corner_tree(&tree).unwrap();
    if !ferrofs_testkit::is_root() {
        println!("skipped: the corner tree's owners, devices and trusted.* xattrs need root");
        return;
    }
    let mut failures = Vec::new();
    for (name, opts) in option_sets() {
        let want = dir.path().join(format!("{name}.dir.img"));
        let got = dir.path().join(format!("{name}.writer.img"));
        let blob = |img: &Path| img.with_extension("blob");
        let (mut o_want, mut o_got) = (opts.clone(), opts.clone());
        if name == "chunks-blobdev" {
            o_want.blobdev = Some(blob(&want));
            o_got.blobdev = Some(blob(&got));
        }
        ferrofs_builder::build(&tree, &want, &o_want, None, &|_| {}).unwrap();
        let mut w = ImageWriter::create(&got, o_got).unwrap();
        append_tree(&mut w, &tree);
        w.finish().unwrap();
        if fs::read(&want).unwrap() != fs::read(&got).unwrap() {
            failures.push(format!(
                "{name}: the writer's image differs from the directory's"
            ));
        }
        if name == "chunks-blobdev" {
            let (a, b) = (
                fs::read(blob(&want)).unwrap(),
                fs::read(blob(&got)).unwrap(),
            );
            if a != b || a.is_empty() {
                failures.push(format!("{name}: the blobs differ or are empty"));
            }
        }
    }
    // Into a Write + Seek.
    let opts = option_sets()
        .into_iter()
        .find(|(n, _)| *n == "lz4hc")
        .map(|(_, o)| o)
        .unwrap();
    let mut w = ImageWriter::new(std::io::Cursor::new(Vec::new()), opts.clone()).unwrap();
    append_tree(&mut w, &tree);
    let s = w.finish().unwrap();
    assert!(s.bytes > 0);
    assert!(failures.is_empty(), "{failures:#?}");
}

fn input_error(e: BuildError) -> (PathBuf, String) {
    match e {
        BuildError::Input { path, reason } => (path, reason),
        e => panic!("not an input error: {e}"),
    }
}

#[test]
fn bad_entries_are_refused_naming_the_path() {
    let dir = TempDir::new("ferrofs-builder-writer-bad").unwrap();
    let mut w = ImageWriter::create(dir.path().join("x.img"), BuildOptions::default()).unwrap();
    let m = EntryMeta::new(0o644);
    let long = "x".repeat(256);
    let cases: Vec<(Result<(), BuildError>, &str, &str)> = vec![
        (w.append_file("a/../b", &m, 0, &b""[..]), "a/../b", "`..`"),
        (
            w.append_file(std::ffi::OsStr::from_bytes(b"n\0ul"), &m, 0, &b""[..]),
            "n\0ul",
            "NUL",
        ),
        (w.append_dir(&long, &m), &long, "255 bytes"),
        (
            w.append_file("short", &m, 10, &b"12345"[..]),
            "short",
            "5 of 10",
        ),
        (w.append_link("l", "missing"), "l", "not appended"),
        (w.append_symlink("s", &m, ""), "s", "symlink target"),
        (
            w.append_fifo("f", &EntryMeta::new(0o10644)),
            "f",
            "out of range",
        ),
    ];
    for (res, path, why) in cases {
        let (p, reason) = input_error(res.unwrap_err());
        assert_eq!(p, Path::new(path));
        assert!(reason.contains(why), "{path}: {reason}");
    }
    w.append_file("twice", &m, 1, &b"1"[..]).unwrap();
    let (p, reason) = input_error(w.append_file("/twice", &m, 1, &b"1"[..]).unwrap_err());
    assert_eq!(p, Path::new("twice"));
    assert!(reason.contains("twice"), "{reason}");
    let (_, reason) = input_error(w.append_file("twice/below", &m, 0, &b""[..]).unwrap_err());
    assert!(reason.contains("not a directory"), "{reason}");
    w.append_dir("d", &m).unwrap();
    let (_, reason) = input_error(w.append_link("d2", "d").unwrap_err());
    assert!(reason.contains("directory"), "{reason}");
    // What was appended well still builds.
    w.finish().unwrap();
    let img = ferrofs::Image::open_path(dir.path().join("x.img")).unwrap();
    assert_eq!(img.read("/twice").unwrap(), b"1");
}
