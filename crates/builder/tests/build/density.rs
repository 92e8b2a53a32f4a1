//! The dense layouts through `BuildOptions` and `CompressOptions`: a tree
//! of small text files in many directories with whole duplicates, built
//! with lz4hc, then adding dedupe, fragments, ztailpacking, and the
//! metabox with directories compressed (`metabox`, `compress_dirs`), each
//! image reading back as the tree (reader, and kernel where it mounts).
//! Each step is no larger than the one before (`Summary.bytes`), dedupe
//! and fragments strictly smaller; deduped copies share their data.

use std::fs;
use std::path::Path;

use ferrofs::map::ExtentKind;
use ferrofs::Image;
use ferrofs_builder::{BuildOptions, MetaboxOptions};
use ferrofs_testkit::corpus;
use ferrofs_testkit::tmp::finish;
use ferrofs_testkit::work_dir;

use crate::common;

/// 12 directories of 20 small text files, and 30 KiB files copied three
/// times under other names.
fn dense_tree(dir: &Path) {
    common::small_tree(dir, 23);
    for d in 0..12u64 {
        let sub = dir.join(format!("docs/d{d:02}"));
        fs::create_dir_all(&sub).unwrap();
        for k in 0..20u64 {
            let body = corpus::text_bytes(300 + (k as usize * 137) % 3000, d * 100 + k);
            fs::write(sub.join(format!("note{k:02}.txt")), body).unwrap();
        }
    }
    fs::create_dir(dir.join("dup")).unwrap();
    for k in 0..4u64 {
        let body = corpus::mixed_bytes(30_000, 70 + k);
        for copy in ["a", "b", "c"] {
            fs::write(dir.join(format!("dup/{copy}{k}")), &body).unwrap();
        }
    }
    common::set_times(dir);
}

/// Where the stored bytes of `path`'s first extent are.
fn first_extent(image: &Image, path: &str) -> String {
    let f = image.raw().open_path(path.as_bytes()).unwrap();
    match f.extents().next().unwrap().unwrap().kind {
        ExtentKind::Pcluster(pc) => format!("{:?}", pc.at),
        other => format!("{other:?}"),
    }
}

#[test]
fn each_dense_option_makes_the_image_smaller() {
    let work = work_dir!("lib_density");
    let src = work.join("tree");
    dense_tree(&src);
    let lz4hc = common::compressed("lz4hc", 16384);
    let dedupe = BuildOptions {
        dedupe: true,
        ..lz4hc.clone()
    };
    let mut fragments = dedupe.clone();
    fragments.compress.as_mut().unwrap().fragments = true;
    let mut ztail = fragments.clone();
    ztail.compress.as_mut().unwrap().ztailpacking = true;
    let metabox = BuildOptions {
        metabox: Some(MetaboxOptions {
            pcluster_bytes: 4096,
            compressor: Some(0),
        }),
        compress_dirs: true,
        ..ztail.clone()
    };
    let steps = [
        ("lz4hc", lz4hc, false),
        ("dedupe", dedupe, true),
        ("fragments", fragments, true),
        ("ztailpacking", ztail, false),
        ("metabox-zD", metabox, false),
    ];
    let mut f = Vec::new();
    let mut last = u64::MAX;
    for (name, opts, strictly) in steps {
        let img = work.join(format!("{name}.img"));
        let s = common::build_dir(&src, &img, &opts);
        f.extend(common::reads_back(name, &img, &[], &src));
        if s.bytes > last || (strictly && s.bytes == last) {
            f.push(format!("{name}: {} bytes, the step before {last}", s.bytes));
        }
        last = s.bytes;
        if name == "dedupe" {
            let image = Image::open_path(&img).unwrap();
            let at: Vec<String> = ["a0", "b0", "c0"]
                .iter()
                .map(|c| first_extent(&image, &format!("dup/{c}")))
                .collect();
            if at[0] != at[1] || at[1] != at[2] {
                f.push(format!("{name}: copies stored apart: {at:?}"));
            }
        }
    }
    finish(&work, &f);
}
