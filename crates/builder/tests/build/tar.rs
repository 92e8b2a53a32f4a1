//! `Input::Tar`: a PAX archive GNU tar writes of a small tree (files
//! around block sizes, a hard link, symlinks, a fifo, devices and foreign
//! owners as root, `user.*` xattrs, odd modes, mtimes with nanoseconds)
//! builds, plain and with lz4hc, into an image that reads back as the
//! tree (reader, and kernel where it mounts). A truncated archive and one
//! with a corrupt header fail with a `BuildError` whose path is the
//! archive's (and the member's) and leave nothing in the output
//! directory.

use std::fs;
use std::path::{Path, PathBuf};

use ferrofs_builder::source::tar::{TarInput, TarOptions};
use ferrofs_builder::{BuildError, BuildOptions, Input, Mode};
use ferrofs_testkit::tmp::finish;
use ferrofs_testkit::work_dir;

use crate::common;

/// Builds the archive at `archive` into `img` (a fresh image).
fn build_tar(
    archive: &Path,
    img: &Path,
    opts: &BuildOptions,
) -> ferrofs_builder::Result<ferrofs_builder::Summary> {
    let input = TarInput::Path(archive.to_path_buf());
    let tar_opts = TarOptions::default();
    let input = Input::Tar {
        input: &input,
        opts: &tar_opts,
    };
    ferrofs_builder::build_from(input, Mode::Fresh, img, opts, None, &|_| {})
}

/// The small tree (made with `seed`) in `work/src` and its archive
/// `work/src.tar`.
fn archived_tree(work: &Path, seed: u64) -> (PathBuf, PathBuf) {
    let (src, archive) = (work.join("src"), work.join("src.tar"));
    common::small_tree(&src, seed);
    common::tar_of(&src, &archive);
    (src, archive)
}

#[test]
fn an_archive_reads_back_as_its_directory() {
    let work = work_dir!("lib_tar");
    let (src, archive) = archived_tree(&work, 1);
    let lz4hc = common::compressed("lz4hc,12", 16384);
    let mut f = Vec::new();
    for (name, opts) in [("plain", BuildOptions::default()), ("lz4hc", lz4hc)] {
        let img = work.join(format!("{name}.img"));
        match build_tar(&archive, &img, &opts) {
            Ok(s) => {
                if s.bytes != fs::metadata(&img).unwrap().len()
                    || (opts.compress.is_some() != (s.compressed_files > 0))
                {
                    f.push(format!("{name}: summary {s:?}"));
                }
                f.extend(common::reads_back(name, &img, &[], &src));
            }
            Err(e) => f.push(format!("{name}: {e}")),
        }
    }
    finish(&work, &f);
}

#[test]
fn a_broken_archive_is_named_and_leaves_nothing() {
    let work = work_dir!("lib_tar_broken");
    let (_, archive) = archived_tree(&work, 2);
    let whole = fs::read(&archive).unwrap();
    let out = work.join("out");
    fs::create_dir(&out).unwrap();
    // Cut in the middle of a member's data; a header's name changed
    // (its checksum no longer matches).
    let mut corrupt = whole.clone();
    corrupt[0] ^= 0x20;
    for (name, bytes) in [
        ("truncated.tar", whole[..whole.len() / 2].to_vec()),
        ("corrupt.tar", corrupt),
    ] {
        let bad = work.join(name);
        fs::write(&bad, bytes).unwrap();
        let img = out.join("image.erofs");
        let e =
            common::fails_leaving_nothing(&out, || build_tar(&bad, &img, &BuildOptions::default()));
        let path = match &e {
            BuildError::Input { path, .. } | BuildError::Io { path, .. } => path,
            other => panic!("{name}: {other:?}, not an input error"),
        };
        assert!(
            path.to_string_lossy().starts_with(&*bad.to_string_lossy()),
            "{name}: the error's path {path:?} is not the archive's ({e})"
        );
    }
    finish(&work, &[]);
}
