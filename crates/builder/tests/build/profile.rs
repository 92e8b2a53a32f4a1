//! `BuildOptions.profile`: a trace written by the test (`ferrofs_trace`'s
//! format: three files of `data/`, out of path order, one of them read in
//! a piece) loaded with `Profile::load` drives the layout. The image
//! reads back as the tree (reader, and kernel where it mounts), plain and
//! with lz4hc; in the uncompressed one the traced files have the first
//! inode numbers after their directories and the first data blocks, both
//! in trace order (a build without the profile has them in path order).
//! A trace line that does not parse is refused by `Profile::load` with
//! `BuildError::Input` naming the trace.

use std::fs;
use std::sync::Arc;

use ferrofs::map::ExtentKind;
use ferrofs::Image;
use ferrofs_builder::{BuildError, BuildOptions, Profile};
use ferrofs_testkit::corpus;
use ferrofs_testkit::tmp::finish;
use ferrofs_testkit::work_dir;

use crate::common;

/// The traced files, in the order the trace reads them.
const TRACED: [&str; 3] = ["data/f5", "data/f2", "data/f7"];

/// Where the first block of `path`'s data is in `image`.
fn first_block(image: &Image, path: &str) -> u64 {
    let f = image.raw().open_path(path.as_bytes()).unwrap();
    let first = f.extents().next().unwrap().unwrap();
    match first.kind {
        ExtentKind::Raw { pos, .. } => pos,
        other => panic!("{path}: first extent {other:?}"),
    }
}

/// (inode number, first data byte) of each `data/fK` in `image`, by K.
fn places(image: &Image) -> Vec<(u64, u64)> {
    (0..8)
        .map(|k| {
            let p = format!("data/f{k}");
            (image.metadata(&p).unwrap().ino(), first_block(image, &p))
        })
        .collect()
}

#[test]
fn a_profile_puts_traced_files_first() {
    let work = work_dir!("lib_profile");
    let src = work.join("tree");
    common::small_tree(&src, 19);
    fs::create_dir(src.join("data")).unwrap();
    for k in 0..8u64 {
        let data = corpus::text_bytes(20_000 + k as usize * 1000, 50 + k);
        fs::write(src.join(format!("data/f{k}")), data).unwrap();
    }
    common::set_times(&src);
    let trace = work.join("trace.txt");
    let mut text = format!("{}\n", TRACED[0]);
    text.push_str(&ferrofs_trace::format_read(
        TRACED[1].as_bytes(),
        4096,
        8192,
    ));
    text.push_str(&format!("{}\n", TRACED[2]));
    fs::write(&trace, text).unwrap();
    let profile = Arc::new(Profile::load(std::slice::from_ref(&trace)).unwrap());
    assert_eq!(profile.len(), 3);
    let mut f = Vec::new();
    for (name, base) in [
        ("plain", BuildOptions::default()),
        ("lz4hc", common::compressed("lz4hc", 16384)),
    ] {
        let img = work.join(format!("{name}.img"));
        let opts = BuildOptions {
            profile: Some(profile.clone()),
            ..base
        };
        common::build_dir(&src, &img, &opts);
        f.extend(common::reads_back(name, &img, &[], &src));
    }
    // Traced files first, in trace order; the rest after them.
    let plain = work.join("unprofiled.img");
    common::build_dir(&src, &plain, &BuildOptions::default());
    let by_path = places(&Image::open_path(&plain).unwrap());
    let profiled = places(&Image::open_path(work.join("plain.img")).unwrap());
    let k = |p: &str| p[6..].parse::<usize>().unwrap();
    let traced: Vec<(u64, u64)> = TRACED.iter().map(|p| profiled[k(p)]).collect();
    let rest = (0..8).filter(|i| !TRACED.iter().any(|p| k(p) == *i));
    let (min_ino, min_pos) = rest.fold((u64::MAX, u64::MAX), |(i, p), r| {
        (i.min(profiled[r].0), p.min(profiled[r].1))
    });
    let increasing = |v: Vec<u64>| v.windows(2).all(|w| w[0] < w[1]);
    if !increasing(traced.iter().map(|t| t.0).chain([min_ino]).collect())
        || !increasing(traced.iter().map(|t| t.1).chain([min_pos]).collect())
    {
        f.push(format!(
            "profiled (inode, data) of data/f0..f7: {profiled:?}"
        ));
    }
    if !increasing(by_path.iter().map(|t| t.1).collect()) {
        f.push(format!(
            "unprofiled (inode, data) of data/f0..f7: {by_path:?}"
        ));
    }
    // A trace that does not parse.
    let bad = work.join("bad.txt");
    fs::write(&bad, "data/f1\tnot-a-number\t4\n").unwrap();
    match Profile::load(std::slice::from_ref(&bad)) {
        Err(BuildError::Input { path, .. }) if path == bad => {}
        other => f.push(format!("a bad trace: {other:?}")),
    }
    finish(&work, &f);
}
