//! `--incremental` on images whose metadata passes 2 MiB (a new root
//! after the image would not have a 16-bit nid): ferrofs keeps the root in
//! block 0, so only block 0 changes; a root whose xattrs do not fit there
//! is rewritten where it is, the one record outside block 0 that changes.

use std::fs;
use std::path::Path;
use std::process::Command;

use ferrofs::Image;
use ferrofs_testkit::corpus;
use ferrofs_testkit::tmp::finish;
use ferrofs_testkit::{tools, verify};

use super::{check_result, incremental_j1_j2, kernel, mkfs, n, nid, path_str, summary};
use crate::{cp_a, FERROFS};

/// 30 directories of 100 small files with inline tails under `old` (more
/// than 2 MiB of metadata: a new root after the image would be beyond nid
/// 65535), and `new`: its copy with one file changed and one added.
fn large_meta_trees(old: &Path, new: &Path) {
    for d in 0..30 {
        let dir = old.join(format!("d{d:02}"));
        fs::create_dir_all(&dir).unwrap();
        for k in 0..100u64 {
            let body = corpus::random_bytes(900 + (k as usize % 7) * 100, d * 1000 + k);
            fs::write(dir.join(format!("f{k:03}")), body).unwrap();
        }
    }
    cp_a(old, new);
    fs::write(new.join("d07/f010"), b"changed\n").unwrap();
    fs::write(new.join("d29/added"), b"added\n").unwrap();
}

/// The byte position of `img`'s root inode and its `meta_blkaddr`.
fn root_place(img: &Path) -> (u64, u32) {
    let image = Image::open_path(img).unwrap();
    let pos = image.raw().root().unwrap().pos().offset();
    (pos, image.superblock().meta_blkaddr)
}

/// The 4 KiB blocks of `old` whose bytes differ in `new`.
fn changed_blocks(old: &Path, new: &Path) -> Vec<usize> {
    let (a, b) = (fs::read(old).unwrap(), fs::read(new).unwrap());
    a.chunks(4096)
        .zip(b.chunks(4096))
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(k, _)| k)
        .collect()
}

#[test]
fn root_in_block0_keeps_large_metadata_images_in_place() {
    // ferrofs keeps the root inode in block 0 (nids count from byte 0): an
    // incremental build of an image with more than 2 MiB of metadata
    // writes its new root there, and no other block of the image changes.
    let work = ferrofs_testkit::work_dir!("incr_root0");
    let (old, new) = (work.join("old"), work.join("new"));
    large_meta_trees(&old, &new);
    let mounts = kernel();
    let mut failures = Vec::new();
    for (name, opts) in [
        ("plain", &[][..]),
        ("lz4hc-64k", &["-zlz4hc,12", "-C65536"][..]),
    ] {
        let o = work.join(format!("{name}-old.img"));
        let mut args: Vec<&str> = opts.to_vec();
        args.extend([path_str(&o), path_str(&old)]);
        match summary(&args) {
            Ok(s) if n(&s, "meta_blocks") * 4096 <= 2 << 20 => {
                failures.push(format!("{name}: not more than 2 MiB of metadata: {s}"));
            }
            Ok(_) => {}
            Err(e) => {
                failures.push(format!("{name}: old image: {e}"));
                continue;
            }
        }
        let (pos, meta_blkaddr) = root_place(&o);
        if pos >= 4096 || meta_blkaddr != 0 {
            failures.push(format!(
                "{name}: root at byte {pos}, meta_blkaddr {meta_blkaddr}: not in block 0"
            ));
        }
        if mounts {
            let fresh = format!("{name}-fresh");
            failures.extend(verify::image_reads_as_source(
                Path::new(FERROFS),
                &fresh,
                &o,
                &old,
                &work,
            ));
        } else if let Some(fsck) = tools::fsck_next() {
            if let Err(e) = verify::run_ok(Command::new(&fsck.path).arg(&o)) {
                failures.push(format!("{name}: fsck.erofs {} (fresh): {e}", fsck.version));
            }
        }
        let Some((img, s)) = incremental_j1_j2(name, &o, opts, &new, &work, &mut failures) else {
            continue;
        };
        let (img, s) = (&img, &s);
        if s["root_in_place"] != true || n(s, "rewritten_outside_block0") != 0 {
            failures.push(format!("{name}: summary {s}"));
        }
        // Only block 0 of the old image changed (it must: the new root).
        let changed = changed_blocks(&o, img);
        if changed != [0] {
            failures.push(format!("{name}: old blocks changed: {changed:?}"));
        }
        if root_place(img) != (pos, 0) {
            failures.push(format!("{name}: the root moved to {:?}", root_place(img)));
        }
        // Directories the layer leaves alone keep their nids.
        if nid(&o, "d15") != nid(img, "d15") {
            failures.push(format!("{name}: an untouched directory moved"));
        }
        failures.extend(check_result(name, &o, img, &new, &work, mounts));
    }
    finish(&work, &failures);
}

#[test]
fn root_rewritten_in_place_when_no_16_bit_nid_is_left() {
    // A root whose xattrs do not fit in block 0 stays in the metadata area
    // (nids count from its start); with more than 2 MiB of metadata before
    // the image's end, a new root after the image would be beyond nid
    // 65535, so it is rewritten where it is: the one record outside
    // block 0 that changes.
    let work = ferrofs_testkit::work_dir!("incr_root");
    let (old, new) = (work.join("old"), work.join("new"));
    fs::create_dir_all(&old).unwrap();
    if let Err(e) = ferrofs_testkit::xattr::set(&old, "user.big", &corpus::text_bytes(3000, 9)) {
        println!("skipped: user xattrs not supported here: {e}");
        return;
    }
    large_meta_trees(&old, &new);
    let mounts = kernel();
    let mut failures = Vec::new();
    let (o, img) = (work.join("old.img"), work.join("new.img"));
    match mkfs(&[path_str(&o), path_str(&old)]) {
        Err(e) => failures.push(format!("old image: {e}")),
        Ok(_) => {
            fs::copy(&o, &img).unwrap();
            let (root_pos, meta_blkaddr) = root_place(&o);
            if root_pos < 4096 || meta_blkaddr == 0 {
                failures.push(format!("root at {root_pos}: in block 0 despite its xattrs"));
            }
            match mkfs(&["--incremental", path_str(&img), path_str(&new)]) {
                Ok(s) => {
                    let n_out = n(&s, "rewritten_outside_block0");
                    if s["root_in_place"] != true || n_out == 0 || n_out > 4096 {
                        failures.push(format!("summary {s}"));
                    }
                    // Only block 0 and the old root's record differ.
                    let (a, b) = (fs::read(&o).unwrap(), fs::read(&img).unwrap());
                    let root = root_pos as usize..(root_pos + n_out) as usize;
                    if let Some(i) = (4096..a.len()).find(|&i| a[i] != b[i] && !root.contains(&i)) {
                        failures.push(format!("old byte {i} changed (root record at {root:?})"));
                    }
                    // Directories the layer leaves alone keep their nids.
                    if nid(&o, "d15") != nid(&img, "d15") {
                        failures.push("an untouched directory moved".into());
                    }
                    if mounts {
                        failures.extend(verify::image_reads_as_source(
                            Path::new(FERROFS),
                            "root-in-place",
                            &img,
                            &new,
                            &work,
                        ));
                    }
                }
                Err(e) => failures.push(format!("incremental: {e}")),
            }
        }
    }
    finish(&work, &failures);
}
