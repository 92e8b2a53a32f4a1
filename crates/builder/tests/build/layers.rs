//! `Input::Layers` (rebuild mode): two images the library builds from a
//! lower and an upper tree (the upper one replacing files, adding a
//! directory and files, and, as root, whiting out a lower file with a
//! character device 0:0) merged with `strip_overlay`, in both
//! `DataMode`s. Each merge reads back (reader, and kernel where it
//! mounts) as the overlay of the two trees: with `BlobIndex` read with the
//! two layer images as its devices (the image's device table has both),
//! its `Summary.layers` counting as indexed the files with a block of data
//! on a layer; with `Full` alone (no devices), every non-empty file
//! copied.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_builder::source::layers::DataMode;
use ferrofs_builder::{BuildOptions, Input, Mode};
use ferrofs_testkit::corpus::{self, set_mtime};
use ferrofs_testkit::tmp::finish;
use ferrofs_testkit::work_dir;

use crate::common;

/// The upper tree at `upper`; the paths it whites out.
fn upper_tree(upper: &Path) -> Vec<&'static str> {
    for d in ["etc", "usr/bin", "new/sub"] {
        fs::create_dir_all(upper.join(d)).unwrap();
    }
    fs::write(upper.join("etc/hosts"), b"10.0.0.1 other\n").unwrap();
    fs::write(upper.join("usr/bin/blob"), corpus::random_bytes(9000, 11)).unwrap();
    fs::write(upper.join("new/sub/text"), corpus::text_bytes(30_000, 12)).unwrap();
    let mut whiteouts = Vec::new();
    if ferrofs_testkit::is_root() {
        let st = Command::new("mknod")
            .arg(upper.join("etc/dangling"))
            .args(["c", "0", "0"])
            .status();
        assert!(st.is_ok_and(|s| s.success()), "mknod");
        whiteouts.push("etc/dangling");
    }
    common::set_times(upper);
    whiteouts
}

#[test]
fn merged_images_read_back_as_the_overlay() {
    let work = work_dir!("lib_layers");
    let (lower, upper) = (work.join("lower"), work.join("upper"));
    common::small_tree(&lower, 9);
    let whiteouts = upper_tree(&upper);
    // The overlay, the whiteout itself left out as strip_overlay does.
    let expect = work.join("expect");
    common::overlay(&lower, &upper, &whiteouts, &[], &expect);
    for w in &whiteouts {
        fs::remove_file(expect.join(w)).unwrap();
        let parent = Path::new(w).parent().unwrap();
        let m = fs::metadata(upper.join(parent)).unwrap();
        set_mtime(&expect.join(parent), m.mtime(), m.mtime_nsec() as u32).unwrap();
    }
    let opts = BuildOptions::default();
    let images: Vec<PathBuf> = [&lower, &upper]
        .iter()
        .map(|t| {
            let img = t.with_extension("img");
            common::build_dir(t, &img, &opts);
            img
        })
        .collect();
    let bs = opts.block_size();
    // Empty files have no data to index or copy.
    let files: Vec<u64> = common::regular_files(&expect)
        .into_iter()
        .map(|(_, len)| len)
        .filter(|&len| len > 0)
        .collect();
    let big = files.iter().filter(|&&len| len >= bs).count() as u64;
    let mut f = Vec::new();
    for (name, mode, devices) in [
        ("index", DataMode::BlobIndex, images.clone()),
        ("full", DataMode::Full, Vec::new()),
    ] {
        let img = work.join(format!("{name}.img"));
        let input = Input::Layers {
            images: &images,
            mode,
            strip_overlay: true,
        };
        let s = match ferrofs_builder::build_from(input, Mode::Fresh, &img, &opts, None, &|_| {}) {
            Ok(s) => s,
            Err(e) => {
                f.push(format!("{name}: {e}"));
                continue;
            }
        };
        f.extend(common::reads_back(name, &img, &devices, &expect));
        let table = common::open(&img, &devices).devices().len();
        if table != devices.len() {
            f.push(format!("{name}: {table} devices in the image's table"));
        }
        let Some(l) = s.layers else {
            f.push(format!("{name}: no layer stats in {s:?}"));
            continue;
        };
        let n = files.len() as u64;
        let ok = match mode {
            DataMode::BlobIndex => l.indexed_files == big && l.copied_files <= n - big,
            DataMode::Full => l.indexed_files == 0 && l.copied_files == n,
        };
        if !ok {
            f.push(format!(
                "{name}: {big} of {n} files have a block of data; layers {l:?}"
            ));
        }
    }
    finish(&work, &f);
}
