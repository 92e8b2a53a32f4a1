//! The `walk` example (examples/walk.rs), written only against the path
//! API, prints for every reference image exactly the listing that `std::fs`
//! gives on the kernel's mount of it: every entry's type, mode, owner,
//! size, mtime, link count, and content hash or symlink target.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use ferrofs_testkit::compare::list_tree;
use ferrofs_testkit::mount::{can_mount, LoopMount};

#[allow(dead_code)]
#[path = "../examples/walk.rs"]
mod walk;

/// The same listing, built from the kernel's mount with `std::fs`.
fn kernel_listing(mnt: &Path, skip_bytes: &[&str]) -> String {
    let mut entries = list_tree(mnt).unwrap();
    // The example prints a directory's entries in sorted order before
    // descending (depth first, sorted): reproduce that order.
    entries.sort_by_key(|e| order_key(&e.0));
    let mut out = String::new();
    for (rel, m) in &entries {
        let t = m.file_type();
        let path = Path::new("/").join(rel);
        let extra = if t.is_file() && !skip_bytes.iter().any(|s| rel == Path::new(s)) {
            let mut h = walk::Fnv::default();
            let mut f = fs::File::open(mnt.join(rel)).unwrap();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = f.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
            format!("fnv64={:016x}", h.0)
        } else if t.is_symlink() {
            format!("-> {}", fs::read_link(mnt.join(rel)).unwrap().display())
        } else {
            String::new()
        };
        let row = walk::Row {
            path: &path,
            kind: walk::kind(
                t.is_dir(),
                t.is_symlink(),
                t.is_char_device() || t.is_block_device(),
                t.is_fifo(),
                t.is_socket(),
            ),
            mode: m.mode(),
            uid: m.uid(),
            gid: m.gid(),
            size: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            nlink: m.nlink(),
            extra,
        };
        out.push_str(&format!("{row}\n"));
    }
    out
}

/// Sort key giving the example's order: each directory's entries as one
/// sorted block, the blocks in depth-first order of their directories
/// (which is the order of the directories' component lists).
fn order_key(rel: &Path) -> (Vec<Vec<u8>>, Vec<u8>) {
    use std::os::unix::ffi::OsStrExt;
    let mut comps: Vec<Vec<u8>> = rel.iter().map(|c| c.as_bytes().to_vec()).collect();
    let name = comps.pop().unwrap_or_default();
    (comps, name)
}

#[test]
fn walk_example_prints_what_the_kernel_shows() {
    if let Err(why) = can_mount() {
        eprintln!("skipped: {why}");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let mut images: Vec<PathBuf> = Vec::new();
    for dir in [root.clone(), root.join("v19")] {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "erofs") {
                images.push(p);
            }
        }
    }
    images.sort();
    for img in images {
        // 6.18 cannot read two files of this image (see fixtures_v19.rs).
        let skip: &[&str] = if img.ends_with("e48-libdeflate.erofs") {
            &["text.txt", "dir/sub/copy.txt"]
        } else {
            &[]
        };
        let image = ferrofs::Image::open_path(&img).unwrap();
        let mut ours = Vec::new();
        walk::walk(&image, &mut ours).unwrap();
        let mut ours = String::from_utf8(ours).unwrap();
        for s in skip {
            // Drop the hash of the files the kernel cannot read.
            let prefix = format!("/{s} file ");
            ours = ours
                .lines()
                .map(|l| {
                    if l.starts_with(&prefix) {
                        l.rsplit_once(' ').map_or(l, |(a, _)| a).to_string()
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n";
        }
        let mnt = LoopMount::new(&img, &[]).unwrap();
        let kernel = kernel_listing(mnt.path(), skip);
        assert_eq!(ours, kernel, "{}", img.display());
    }
}
