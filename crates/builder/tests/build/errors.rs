//! Builds that fail, each with its `BuildError` variant and path, leaving
//! the output directory as it was (no image, no temporary file): a
//! missing source directory (`Io`, naming it), an output in a missing
//! directory (`Output`, naming the image), options out of range (block
//! size 2^13, a 16-byte label, a chunk size that is not a power of two:
//! `Option`, before any source is read, an archive's too), and an `interrupted` flag set before the build
//! (`Interrupted`, naming the image; an image already at the path keeps
//! its bytes).

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use ferrofs_builder::source::tar::{TarInput, TarOptions};
use ferrofs_builder::{build_from, BuildError, BuildOptions, Input, Mode};
use ferrofs_testkit::tmp::finish;
use ferrofs_testkit::work_dir;

use crate::common;

/// `work` with an empty `out` directory and the small tree (made with
/// `seed`) in `tree`: (work, out, tree).
fn setup(work: PathBuf, seed: u64) -> (PathBuf, PathBuf, PathBuf) {
    let (out, tree) = (work.join("out"), work.join("tree"));
    fs::create_dir(&out).unwrap();
    common::small_tree(&tree, seed);
    (work, out, tree)
}

#[test]
fn a_missing_source_or_output_directory_is_named() {
    let (work, out, tree) = setup(work_dir!("lib_errors_paths"), 15);
    let opts = BuildOptions::default();
    let img = out.join("image.erofs");
    let missing = work.join("no-such-dir");
    let e = common::fails_leaving_nothing(&out, || {
        build_from(
            Input::Dir(&missing),
            Mode::Fresh,
            &img,
            &opts,
            None,
            &|_| {},
        )
    });
    assert!(
        matches!(&e, BuildError::Io { path, source } if *path == missing && source.kind() == std::io::ErrorKind::NotFound),
        "{e:?}"
    );
    let img = work.join("no-such-dir/image.erofs");
    let e = common::fails_leaving_nothing(&work, || {
        build_from(Input::Dir(&tree), Mode::Fresh, &img, &opts, None, &|_| {})
    });
    assert!(
        matches!(&e, BuildError::Output { path, .. } if *path == img),
        "{e:?}"
    );
    assert!(!missing.exists());
    finish(&work, &[]);
}

#[test]
fn options_out_of_range_are_refused() {
    let (work, out, tree) = setup(work_dir!("lib_errors_options"), 16);
    let img = out.join("image.erofs");
    let cases = [
        (
            "2^13 blocks",
            BuildOptions {
                blkszbits: 13,
                ..Default::default()
            },
        ),
        (
            "16-byte label",
            BuildOptions {
                label: b"sixteen-bytes-xx".to_vec(),
                ..Default::default()
            },
        ),
        (
            "chunk size 12288",
            BuildOptions {
                chunk_size: Some(12288),
                ..Default::default()
            },
        ),
    ];
    // An archive that is not there: the options are refused before any
    // source is read (a long scan does not come first).
    let missing = TarInput::Path(work.join("no-such.tar"));
    let tar = TarOptions::default();
    for (name, opts) in cases {
        let e = common::fails_leaving_nothing(&out, || {
            build_from(Input::Dir(&tree), Mode::Fresh, &img, &opts, None, &|_| {})
        });
        assert!(matches!(e, BuildError::Option(_)), "{name}: {e:?}");
        let archive = Input::Tar {
            input: &missing,
            opts: &tar,
        };
        let e = common::fails_leaving_nothing(&out, || {
            build_from(archive, Mode::Fresh, &img, &opts, None, &|_| {})
        });
        assert!(matches!(e, BuildError::Option(_)), "{name}, tar: {e:?}");
    }
    // At the limits they build.
    let opts = BuildOptions {
        blkszbits: 9,
        label: b"fifteen-bytes-x".to_vec(),
        ..Default::default()
    };
    common::build_dir(&tree, &img, &opts);
    finish(&work, &[]);
}

#[test]
fn an_interrupted_build_writes_nothing() {
    let (work, out, tree) = setup(work_dir!("lib_errors_interrupted"), 18);
    let img = out.join("image.erofs");
    let opts = BuildOptions::default();
    let stop = AtomicBool::new(true);
    let interrupted = || {
        build_from(
            Input::Dir(&tree),
            Mode::Fresh,
            &img,
            &opts,
            Some(&stop),
            &|_| {},
        )
    };
    let e = common::fails_leaving_nothing(&out, interrupted);
    assert!(
        matches!(&e, BuildError::Interrupted { path } if *path == img),
        "{e:?}"
    );
    // Over an existing image: it keeps its bytes.
    fs::write(&img, b"an older image").unwrap();
    let e = common::fails_leaving_nothing(&out, interrupted);
    assert!(matches!(e, BuildError::Interrupted { .. }), "{e:?}");
    assert_eq!(fs::read(&img).unwrap(), b"an older image");
    finish(&work, &[]);
}
