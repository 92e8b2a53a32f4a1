//! The bytes mkfs writes, pinned: the corner-case tree built with a
//! dozen option sets (plain, 1 KiB blocks, chunks in a blob, each codec,
//! ztailpacking, fragments with dedupe, 48-bit, metabox with compressed
//! directories, `--offset`, a tar source, the dense preset) must hash to
//! what `testdata/pinned-images.txt` lists. A change to the builder that
//! is meant to leave images alone (a refactor) must keep every line; one
//! that changes images on purpose updates the list in the same commit
//! (`FERROFS_UPDATE_PINS=1` rewrites it) and says why. Every image is also
//! checked for what it should be (the kernel reads the tree, ferrofs's
//! fsck accepts it), so a pinned hash is one of a good image.
//!
//! The corner tree is deterministic only as root (owners, devices,
//! `trusted.*` xattrs); elsewhere the test prints why it skips.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::{corpus, verify, work_dir};

use crate::FERROFS;

/// The option sets, by name. `BLOB` stands for the blob's path.
const CASES: &[(&str, &[&str])] = ferrofs_testkit::tools::PINNED_OPTION_SETS;

fn pins_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pinned-images.txt")
}

fn sha256(path: &Path) -> Result<String, String> {
    let out = verify::run_ok(Command::new("sha256sum").arg(path))?;
    let text = String::from_utf8_lossy(&out);
    text.split_whitespace()
        .next()
        .map(str::to_string)
        .ok_or_else(|| format!("sha256sum {}: no output", path.display()))
}

/// A tar of `src`, the same bytes on every run (GNU tar, sorted names,
/// numeric owners, no atime/ctime records), and the tree GNU tar
/// extracts from it (`TAR` with the extension `.tree`).
fn make_tar(src: &Path, tar: &Path) -> Result<(), String> {
    verify::run_ok(
        Command::new("tar")
            .args([
                "--sort=name",
                "--format=pax",
                "--numeric-owner",
                "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
                "--xattrs",
                "--xattrs-include=*",
                "-cf",
            ])
            .arg(tar)
            .arg("-C")
            .arg(src)
            .arg("."),
    )
    .map(|_| ())?;
    let tree = tar.with_extension("tree");
    fs::create_dir_all(&tree).map_err(|e| e.to_string())?;
    verify::run_ok(
        Command::new("tar")
            .args(["-xpf"])
            .arg(tar)
            .args(["--numeric-owner", "--xattrs", "--xattrs-include=*", "-C"])
            .arg(&tree),
    )
    .map(|_| ())
}

/// Builds case `name` into `work`; the files whose hashes are pinned
/// (the image, and the blob) and the failures of its checks.
fn build(
    name: &str,
    opts: &[&str],
    src: &Path,
    tar: &Path,
    work: &Path,
) -> Result<Vec<(String, PathBuf)>, String> {
    let img = work.join(format!("{name}.img"));
    let blob = work.join(format!("{name}.blob"));
    let args: Vec<String> = opts
        .iter()
        .map(|o| o.replace("BLOB", &blob.display().to_string()))
        .collect();
    // The tar case reads the archive; its tree is what GNU tar gives back
    // of it (no sockets, no hard links between fifos), extracted beside it.
    let (input, tree) = if name == "tar" {
        (tar, tar.with_extension("tree"))
    } else {
        (src, src.to_path_buf())
    };
    verify::run_ok(
        Command::new(FERROFS)
            .args(["mkfs", "--quiet"])
            .args(&args)
            .arg(&img)
            .arg(input)
            .env_remove("SOURCE_DATE_EPOCH"),
    )
    .map_err(|e| format!("{name}: mkfs: {e}"))?;
    let mut files = vec![(name.to_string(), img.clone())];
    // What the image should be: the kernel reads the tree (where the
    // image stands alone), ferrofs's fsck accepts it.
    let mut fsck = Command::new(FERROFS);
    fsck.arg("fsck");
    if name == "chunks-blobdev" {
        fsck.arg("--device").arg(&blob);
        files.push((format!("{name}.blob"), blob));
    }
    if name == "offset" {
        fsck.arg("--offset=8192");
    }
    verify::run_ok(fsck.arg(&img)).map_err(|e| format!("{name}: fsck: {e}"))?;
    if !matches!(name, "chunks-blobdev" | "offset") {
        let fails: Vec<String> =
            verify::image_reads_as_source(Path::new(FERROFS), name, &img, &tree, work)
                .into_iter()
                // fsck.erofs 1.8.6 refuses every 1 KiB-block image,
                // mkfs.erofs's own included.
                .filter(|f| !f.contains("invalid sb_extslots 0"))
                .collect();
        if !fails.is_empty() {
            return Err(fails.join("\n"));
        }
    }
    Ok(files)
}

#[test]
fn images_hash_to_their_pinned_values() {
    if !ferrofs_testkit::is_root() {
        return println!(
            "skipped: not running as root (the corner tree's owners, devices and trusted.* \
             xattrs, and the kernel checks, need it)"
        );
    }
    if let Err(why) = ferrofs_testkit::can_mount() {
        return println!("skipped: {why}");
    }
    let work = work_dir!("mkfs_pinned");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    let tar = work.join("tree.tar");
    make_tar(&src, &tar).expect("tar of the corner tree");
    let mut failures = Vec::new();
    let mut got: Vec<(String, String)> = Vec::new();
    for (name, opts) in CASES {
        match build(name, opts, &src, &tar, &work) {
            Ok(files) => {
                for (what, path) in files {
                    match sha256(&path) {
                        Ok(h) => got.push((what, h)),
                        Err(e) => failures.push(e),
                    }
                }
            }
            Err(e) => failures.push(e),
        }
    }
    let listed: Vec<(String, String)> = fs::read_to_string(pins_path())
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.to_string(), f.next()?.to_string()))
        })
        .collect();
    if std::env::var_os("FERROFS_UPDATE_PINS").is_some() {
        let mut text = String::from(
            "# sha256 of the images crates/cli/tests/mkfs/pinned.rs builds from the corner tree.\n\
             # A change that alters them on purpose updates this list and says why.\n",
        );
        for (what, h) in &got {
            text.push_str(&format!("{what} {h}\n"));
        }
        fs::write(pins_path(), text).unwrap();
        println!("wrote {} pins to {}", got.len(), pins_path().display());
    } else if failures.is_empty() {
        for (what, h) in &got {
            match listed.iter().find(|(w, _)| w == what) {
                Some((_, want)) if want == h => {}
                Some((_, want)) => failures.push(format!(
                    "{what}: sha256 {h}, pinned {want} (the image changed; if on purpose, \
                     rerun with FERROFS_UPDATE_PINS=1 and say why in the commit)"
                )),
                None => failures.push(format!("{what}: no pinned hash (FERROFS_UPDATE_PINS=1)")),
            }
        }
        for (what, _) in &listed {
            if !got.iter().any(|(w, _)| w == what) {
                failures.push(format!("{what}: pinned but no longer built"));
            }
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}
