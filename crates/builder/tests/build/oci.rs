//! `Input::Oci`: an OCI image layout written by the test (two tar
//! layers, plain or gzipped, their sha256 digests and diff_ids, a config,
//! a manifest named `latest`). The upper layer's whiteouts (`.wh.NAME`,
//! and `.wh..wh..opq` making a directory opaque) hide the lower layer's
//! files; the image reads back (reader, and kernel where it mounts) as the
//! overlay of the two trees. With `layer_images: Some(DIR)` (gzipped
//! layers) each layer becomes `DIR/layer-N.img` and the merged image, read
//! with those as its devices, is the same tree; its `Summary.layers`
//! counts as indexed the files with a block of data on a layer (smaller
//! ones, wholly inline there, are copied); the same with plain tar layers
//! (their blobs read to the end, so their digests are checked).

use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ferrofs_builder::source::tar::TarOptions;
use ferrofs_builder::{BuildOptions, Input, Mode, Summary};
use ferrofs_testkit::compare::list_tree;
use ferrofs_testkit::corpus::{self, set_mtime};
use ferrofs_testkit::tmp::finish;
use ferrofs_testkit::work_dir;
use sha2::{Digest, Sha256};

use crate::common;

/// Writes `bytes` as a blob of the layout `dir`; its descriptor's
/// digest (`sha256:HEX`) and size.
fn blob(dir: &Path, bytes: &[u8]) -> (String, usize) {
    let hex = format!("{:x}", Sha256::digest(bytes));
    fs::write(dir.join("blobs/sha256").join(&hex), bytes).unwrap();
    (format!("sha256:{hex}"), bytes.len())
}

/// An OCI image layout at `dir` whose image `latest` has the tar archives
/// of `layers` (bottom first) as its layers, gzipped or plain.
fn layout(dir: &Path, layers: &[PathBuf], gzip: bool) {
    fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let (mut descs, mut diff_ids) = (Vec::new(), Vec::new());
    for (i, l) in layers.iter().enumerate() {
        let tar = dir.join(format!("layer{i}.tar"));
        common::tar_of(l, &tar);
        let raw = fs::read(&tar).unwrap();
        fs::remove_file(&tar).unwrap();
        let (diff_id, _) = blob(dir, &raw);
        let (media, (digest, size)) = if gzip {
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(&raw).unwrap();
            fs::remove_file(dir.join("blobs/sha256").join(&diff_id[7..])).unwrap();
            ("tar+gzip", blob(dir, &z.finish().unwrap()))
        } else {
            ("tar", (diff_id.clone(), raw.len()))
        };
        descs.push(serde_json::json!({
            "mediaType": format!("application/vnd.oci.image.layer.v1.{media}"),
            "digest": digest, "size": size,
        }));
        diff_ids.push(diff_id);
    }
    let config = serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    });
    let (cd, cs) = blob(dir, config.to_string().as_bytes());
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
        "layers": descs,
    });
    let (md, ms) = blob(dir, manifest.to_string().as_bytes());
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": md, "size": ms,
            "annotations": {"org.opencontainers.image.ref.name": "latest"},
        }],
    });
    fs::write(dir.join("index.json"), index.to_string()).unwrap();
}

/// Paths the upper layer whites out, and the directory it makes opaque.
const WHITEOUTS: [&str; 2] = ["etc/hosts", "var/fifo"];
const OPAQUE: &str = "usr/share";

/// In `work`: the lower tree, the upper tree without its whiteouts
/// (`upper`), the layer with them (`layer2`), the layout `L` of the two
/// (`gzip`ped layers or plain ones) and the overlay the image must show
/// (`expect`).
fn layers(work: &Path, gzip: bool) -> PathBuf {
    let (lower, upper, layer2) = (work.join("lower"), work.join("upper"), work.join("layer2"));
    common::small_tree(&lower, 5);
    for d in ["etc", "var", "usr/bin", "usr/share/fresh", "added"] {
        fs::create_dir_all(upper.join(d)).unwrap();
    }
    fs::write(
        upper.join("usr/share/fresh/text"),
        corpus::text_bytes(9000, 6),
    )
    .unwrap();
    fs::write(upper.join("usr/bin/blob"), b"replaced\n").unwrap();
    fs::write(upper.join("added/big"), corpus::random_bytes(20_000, 7)).unwrap();
    common::set_times(&upper);
    // The layer: the upper tree and the whiteout files, its directories'
    // mtimes kept.
    common::cp_a(&upper, &layer2);
    for w in WHITEOUTS {
        let (dir, name) = w.rsplit_once('/').unwrap();
        fs::write(layer2.join(dir).join(format!(".wh.{name}")), b"").unwrap();
    }
    fs::write(layer2.join(OPAQUE).join(".wh..wh..opq"), b"").unwrap();
    for (rel, m) in list_tree(&upper).unwrap() {
        if m.is_dir() {
            set_mtime(&layer2.join(&rel), m.mtime(), m.mtime_nsec() as u32).unwrap();
        }
    }
    let root = fs::metadata(&upper).unwrap();
    set_mtime(&layer2, root.mtime(), root.mtime_nsec() as u32).unwrap();
    layout(&work.join("L"), &[lower.clone(), layer2], gzip);
    let expect = work.join("expect");
    common::overlay(&lower, &upper, &WHITEOUTS, &[OPAQUE], &expect);
    expect
}

/// Builds the layout `L` in `work` at `img` (its layers as images in
/// `layer_images` when given).
fn build_oci(work: &Path, img: &Path, layer_images: Option<&Path>) -> Summary {
    let layout = work.join("L");
    let input = Input::Oci {
        layout: &layout,
        reference: Some("latest"),
        opts: &TarOptions::default(),
        layer_images,
    };
    let opts = BuildOptions::default();
    ferrofs_builder::build_from(input, Mode::Fresh, img, &opts, None, &|_| {})
        .unwrap_or_else(|e| panic!("{}: {e}", img.display()))
}

#[test]
fn whiteouts_of_the_upper_layer_hide_lower_files() {
    let work = work_dir!("lib_oci");
    let expect = layers(&work, false);
    // The test's own premise: the overlay lacks what was whited out.
    assert!(!expect.join("etc/hosts").exists() && !expect.join("usr/share/doc").exists());
    assert!(expect.join("etc/tool").exists() && expect.join("usr/share/fresh").exists());
    let img = work.join("oci.img");
    let s = build_oci(&work, &img, None);
    let mut f = common::reads_back("oci", &img, &[], &expect);
    if s.layers.is_some() || s.bytes != fs::metadata(&img).unwrap().len() {
        f.push(format!("summary {s:?}"));
    }
    finish(&work, &f);
}

/// Builds the layout with `layer_images` and checks the layer images, the
/// merged image and its `Summary.layers`; the failures.
fn check_layer_images(work: &Path, expect: &Path) -> Vec<String> {
    let (img, dir) = (work.join("merged.img"), work.join("layers"));
    let s = build_oci(work, &img, Some(&dir));
    let names = common::names_in(&dir);
    assert_eq!(names, ["layer-1.img", "layer-2.img"]);
    let devices: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
    let mut f = common::reads_back("layer images", &img, &devices, expect);
    let bs = BuildOptions::default().block_size();
    let files = common::regular_files(expect);
    let big = files.iter().filter(|(_, len)| *len >= bs).count() as u64;
    match &s.layers {
        Some(l)
            if l.indexed_files == big && l.indexed_files + l.copied_files <= files.len() as u64 => {
        }
        other => f.push(format!(
            "{big} of {} files have a block of data; layers {other:?}",
            files.len()
        )),
    }
    f
}

#[test]
fn layer_images_are_written_and_their_files_indexed() {
    let work = work_dir!("lib_oci_layers");
    let expect = layers(&work, true);
    let f = check_layer_images(&work, &expect);
    finish(&work, &f);
}

/// The same with plain (uncompressed) tar layers: each layer's scan reads
/// its blob to the end (it once stopped at the end-of-archive blocks, and
/// the blob's check refused every plain layer).
#[test]
fn layer_images_of_plain_tar_layers() {
    let work = work_dir!("lib_oci_layers_plain");
    let expect = layers(&work, false);
    let f = check_layer_images(&work, &expect);
    finish(&work, &f);
}
