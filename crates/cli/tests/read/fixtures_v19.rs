//! Every reference image of testdata/v19/ (mkfs.erofs 1.9.4: 48-bit
//! layout and encoded extents, dot-omitted directories, metabox, --zD,
//! --MZ, plain prefixes, inode digests) read by ferrofs exactly as the
//! kernel reads it: `ferrofs extract` equals the loop mount (contents,
//! modes, owners, mtimes with nanoseconds, xattrs, hard links, devices),
//! `ferrofs cat` prints the kernel's bytes of every regular file, and
//! `ferrofs fsck` accepts the image.
//!
//! One known kernel bug is stepped around: 6.18 fails (EUCLEAN) to read a
//! 254-byte deflate extent that ends one byte into a page in
//! e48-libdeflate.erofs (text.txt and its copy); there the two files are
//! compared with the same bytes in e48-zstd-C128k.erofs instead.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::compare::{compare_trees, list_tree, CompareOptions};
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::verify::run_ok;

use crate::FERROFS;

fn images() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/v19");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "erofs"))
        .collect();
    v.sort();
    assert!(v.len() >= 25, "testdata/v19 images missing");
    v
}

/// The files the kernel cannot read in `name` (see the module docs).
fn kernel_bug(name: &str) -> &'static [&'static str] {
    if name == "e48-libdeflate.erofs" {
        &["text.txt", "dir/sub/copy.txt"]
    } else {
        &[]
    }
}

#[test]
fn v19_images_read_as_the_kernel_reads_them() {
    if let Err(why) = can_mount() {
        return println!("skipped: {why}");
    }
    let work = ferrofs_testkit::work_dir!("fixtures_v19");
    let mut failures = Vec::new();
    for img in images() {
        let name = img.file_name().unwrap().to_string_lossy().into_owned();
        let skip = kernel_bug(&name);
        if let Err(e) = run_ok(Command::new(FERROFS).arg("fsck").arg(&img)) {
            failures.push(format!("{name}: ferrofs fsck: {e}"));
        }
        let mnt = match LoopMount::new(&img, &[]) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{name}: mount: {e}"));
                continue;
            }
        };
        let out = work.join(&name);
        match run_ok(Command::new(FERROFS).arg("extract").arg(&img).arg(&out)) {
            Ok(_) => {
                let opts = CompareOptions {
                    ignore_paths: skip.iter().map(PathBuf::from).collect(),
                    ..CompareOptions::strict()
                };
                for d in compare_trees(mnt.path(), &out, &opts) {
                    failures.push(format!("{name}: extract vs kernel: {d}"));
                }
            }
            Err(e) => failures.push(format!("{name}: extract: {e}")),
        }
        for (rel, meta) in list_tree(mnt.path()).unwrap() {
            if !meta.is_file() || skip.iter().any(|s| Path::new(s) == rel) {
                continue;
            }
            let want = std::fs::read(mnt.path().join(&rel)).unwrap();
            let mut arg = b"/".to_vec();
            arg.extend_from_slice(rel.as_os_str().as_bytes());
            let got = run_ok(
                Command::new(FERROFS)
                    .arg("cat")
                    .arg(&img)
                    .arg(std::ffi::OsStr::from_bytes(&arg)),
            );
            if got.as_deref().ok() != Some(&want[..]) {
                failures.push(format!(
                    "{name}: cat /{} differs from the kernel",
                    rel.display()
                ));
            }
        }
        for s in skip {
            // The same bytes, read by the kernel from another image.
            let other = img.with_file_name("e48-zstd-C128k.erofs");
            let m2 = LoopMount::new(&other, &[]).unwrap();
            let want = std::fs::read(m2.path().join(s)).unwrap();
            if std::fs::read(out.join(s)).ok() != Some(want) {
                failures.push(format!(
                    "{name}: {s} differs from its bytes in {}",
                    other.display()
                ));
            }
        }
        let _ = ferrofs_testkit::tmp::remove_tree(&out);
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}
