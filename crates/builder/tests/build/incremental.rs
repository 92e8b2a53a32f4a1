//! `Mode::Incremental { zero_data: false }`: a directory appended to an
//! image the library built (uncompressed and lz4hc). The result reads back
//! (reader, and kernel where it mounts) as the overlay of the directory on
//! the image's tree; the old image's bytes outside block 0 are unchanged
//! and the file grew by `Summary.incremental.appended_bytes` (> 0), with
//! the old inodes kept counted; appending the same directory again
//! appends nothing and leaves the image as it was. `Input::Oci` and
//! `Input::Layers` with `Mode::Incremental`, and a directory with
//! `zero_data`, are refused with `BuildError::Option`, the image
//! untouched.

use std::fs;
use std::path::Path;

use ferrofs_builder::source::layers::DataMode;
use ferrofs_builder::source::tar::TarOptions;
use ferrofs_builder::{BuildError, BuildOptions, Input, Mode};
use ferrofs_testkit::corpus;
use ferrofs_testkit::tmp::finish;
use ferrofs_testkit::work_dir;

use crate::common;

/// Appends the directory `layer` to the image `img`.
fn append(
    img: &Path,
    layer: &Path,
    opts: &BuildOptions,
) -> ferrofs_builder::Result<ferrofs_builder::Summary> {
    let mode = Mode::Incremental { zero_data: false };
    ferrofs_builder::build_from(Input::Dir(layer), mode, img, opts, None, &|_| {})
}

/// The layer: a file replaced, files and a directory added.
fn layer_tree(dir: &Path) {
    for d in ["etc", "added/deep"] {
        fs::create_dir_all(dir.join(d)).unwrap();
    }
    fs::write(dir.join("etc/hosts"), b"192.168.0.1 gateway\n").unwrap();
    fs::write(dir.join("etc/motd"), corpus::text_bytes(10_000, 21)).unwrap();
    fs::write(
        dir.join("added/deep/blob"),
        corpus::random_bytes(50_000, 22),
    )
    .unwrap();
    common::set_times(dir);
}

#[test]
fn a_directory_appended_reads_as_the_overlay() {
    let work = work_dir!("lib_incremental");
    let (old, layer, expect) = (work.join("old"), work.join("layer"), work.join("expect"));
    common::small_tree(&old, 13);
    layer_tree(&layer);
    common::overlay(&old, &layer, &[], &[], &expect);
    let lz4hc = common::compressed("lz4hc", 65536);
    let mut f = Vec::new();
    for (name, opts) in [("plain", BuildOptions::default()), ("lz4hc", lz4hc)] {
        let img = work.join(format!("{name}.img"));
        common::build_dir(&old, &img, &opts);
        let before = fs::read(&img).unwrap();
        let s = match append(&img, &layer, &opts) {
            Ok(s) => s,
            Err(e) => {
                f.push(format!("{name}: {e}"));
                continue;
            }
        };
        let after = fs::read(&img).unwrap();
        f.extend(common::reads_back(name, &img, &[], &expect));
        if after.get(4096..before.len()) != before.get(4096..) {
            f.push(format!(
                "{name}: bytes of the old image outside block 0 changed"
            ));
        }
        match &s.incremental {
            Some(i)
                if i.appended_bytes > 0
                    && i.old_bytes == before.len() as u64
                    && i.old_bytes + i.appended_bytes == after.len() as u64
                    && i.kept_inodes > 0
                    && i.new_inodes > 0 => {}
            other => f.push(format!(
                "{name}: {} -> {} bytes, incremental {other:?}",
                before.len(),
                after.len()
            )),
        }
        // The same layer again: nothing to append.
        match append(&img, &layer, &opts) {
            Ok(s) => match &s.incremental {
                Some(i) if i.appended_bytes == 0 => {}
                other => f.push(format!("{name}: second append: {other:?}")),
            },
            Err(e) => f.push(format!("{name}: second append: {e}")),
        }
        if fs::read(&img).unwrap() != after {
            f.push(format!("{name}: the second append changed the image"));
        }
    }
    finish(&work, &f);
}

#[test]
fn sources_an_append_cannot_take_are_refused() {
    let work = work_dir!("lib_incremental_refused");
    let (tree, img) = (work.join("tree"), work.join("image.erofs"));
    common::small_tree(&tree, 14);
    let opts = BuildOptions::default();
    common::build_dir(&tree, &img, &opts);
    let before = fs::read(&img).unwrap();
    let (layout, images) = (work.join("L"), vec![img.clone()]);
    let tar_opts = TarOptions::default();
    let appending = Mode::Incremental { zero_data: false };
    let cases: [(&str, Input, Mode); 3] = [
        (
            "oci",
            Input::Oci {
                layout: &layout,
                reference: None,
                opts: &tar_opts,
                layer_images: None,
            },
            appending,
        ),
        (
            "layers",
            Input::Layers {
                images: &images,
                mode: DataMode::Full,
                strip_overlay: false,
            },
            appending,
        ),
        (
            "dir, zero_data",
            Input::Dir(&tree),
            Mode::Incremental { zero_data: true },
        ),
    ];
    let mut f = Vec::new();
    for (name, input, mode) in cases {
        match ferrofs_builder::build_from(input, mode, &img, &opts, None, &|_| {}) {
            Err(BuildError::Option(_)) => {}
            other => f.push(format!("{name}: {other:?}, not BuildError::Option")),
        }
        if fs::read(&img).unwrap() != before {
            f.push(format!("{name}: the image changed"));
        }
    }
    finish(&work, &f);
}
