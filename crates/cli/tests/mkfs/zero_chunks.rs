//! With `--chunksize`, a chunk of zeros is a hole (a null index), from a
//! directory and from a tar archive, and chunks merge to the largest size
//! that describes the file, as mkfs.erofs 1.9.4 does: 20 MiB of zeros
//! take five null 4 MiB chunks, not 20 MiB. The chunk tables equal
//! mkfs.erofs 1.9.4's, the kernel reads the files back byte for byte, and
//! fsck.erofs 1.9.4 passes the images.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::tools;

use crate::FERROFS;
use ferrofs_testkit::work_dir;

/// (chunk size, [first block of each chunk or null]) of `path` in `img`.
fn chunk_table(img: &Path, path: &str) -> (u64, Vec<Option<u64>>) {
    let out = Command::new(FERROFS)
        .args(["dump", "--json", "--path", path])
        .arg(img)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let cs = v["chunks"]["chunk_size"].as_u64().unwrap_or(0);
    let ext = v["extents"].as_array().cloned().unwrap_or_default();
    (cs, ext.iter().map(|e| e["map"]["pos"].as_u64()).collect())
}

fn random(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn zero_chunks_are_holes_as_mkfs_erofs_makes_them() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("zero_chunks");
    let src = work.join("tree");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("zeros"), vec![0u8; 20 << 20]).unwrap();
    // Distinct seeds: mkfs.erofs also dedupes equal chunks across files.
    let mut mixed = random(8192, 11);
    mixed.extend(vec![0u8; 65536]);
    mixed.extend(random(5000, 13));
    fs::write(src.join("mixed"), &mixed).unwrap();
    // Zeros between data in every other 64 KiB.
    let mut f = fs::File::create(src.join("striped")).unwrap();
    for k in 0..16 {
        let piece = if k % 2 == 0 {
            random(65536, 101 + 2 * k)
        } else {
            vec![0; 65536]
        };
        f.write_all(&piece).unwrap();
    }
    drop(f);
    fs::File::create(src.join("sparse"))
        .unwrap()
        .set_len(10 << 20)
        .unwrap();
    fs::write(src.join("small"), b"not zero\n").unwrap();
    let tar = work.join("t.tar");
    // Not --sparse: mkfs.erofs 1.9.4 leaves GNU sparse members out of
    // the image (silently); the zeros are in the archive.
    let st = Command::new("tar")
        .args(["-C"])
        .arg(&src)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());

    let mut failures = Vec::new();
    let next = tools::mkfs_next();
    for cs in ["4096", "65536"] {
        for from_tar in [false, true] {
            let tag = format!("{cs}{}", if from_tar { "-tar" } else { "" });
            let ours = work.join(format!("o{tag}.img"));
            let mut cmd = Command::new(FERROFS);
            cmd.args(["mkfs", "--quiet", "-T0", &format!("--chunksize={cs}")]);
            if from_tar {
                cmd.arg("--tar").arg(&ours).arg(&tar);
            } else {
                cmd.arg(&ours).arg(&src);
            }
            assert!(cmd.status().unwrap().success(), "{tag}");
            // Data: 2 + 2 blocks of mixed, 8 x 64 KiB of striped, small.
            let len = fs::metadata(&ours).unwrap().len();
            if len > 700 << 10 {
                failures.push(format!("{tag}: image is {len} bytes"));
            }
            match LoopMount::new(&ours, &[]) {
                Ok(m) => {
                    let o = CompareOptions {
                        compare_owner: false,
                        compare_mtime: false,
                        skip_root_mode_owner: true,
                        compare_xattrs: false,
                        ..CompareOptions::strict()
                    };
                    for d in compare::compare_trees(&src, m.path(), &o) {
                        failures.push(format!("{tag}: kernel: {d}"));
                    }
                }
                Err(e) => failures.push(format!("{tag}: mount: {e}")),
            }
            if let Some(f) = tools::fsck_next() {
                if let Err(e) = f.run(&[ours.as_os_str()]) {
                    failures.push(format!("{tag}: {e}"));
                }
            }
            let Some(up) = &next else { continue };
            let theirs = work.join(format!("u{tag}.img"));
            let mut args = vec!["-T0".to_string(), format!("--chunksize={cs}")];
            if from_tar {
                args.push("--tar=f".into());
            }
            args.push(theirs.to_string_lossy().into_owned());
            args.push(
                if from_tar { &tar } else { &src }
                    .to_string_lossy()
                    .into_owned(),
            );
            if let Err(e) = up.run(&args) {
                failures.push(format!("{tag}: {e}"));
                continue;
            }
            for f in ["/zeros", "/mixed", "/striped", "/sparse"] {
                let (a, b) = (chunk_table(&ours, f), chunk_table(&theirs, f));
                // Same chunk size, holes in the same places.
                let holes = |t: &(u64, Vec<Option<u64>>)| -> (u64, Vec<bool>) {
                    (t.0, t.1.iter().map(Option::is_none).collect())
                };
                if holes(&a) != holes(&b) || a.0 == 0 {
                    failures.push(format!("{tag}: {f}: ours {a:?}, mkfs.erofs {b:?}"));
                }
            }
        }
    }
    if next.is_none() {
        println!("mkfs.erofs 1.9.x not found: upstream comparison skipped");
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}
