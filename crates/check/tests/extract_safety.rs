//! extract must never write outside its target: a crafted image whose
//! directory holds the name "../x" is refused, and nothing lands beside the
//! target directory. Also: a non-empty target is refused.

use std::path::PathBuf;

use ferrofs::Image;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata")
            .join(name),
    )
    .unwrap()
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ferrofs-extract-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_name_with_a_slash_is_refused() {
    let mut img = fixture("plain.erofs");
    // The root directory block holds the names back to back; "link" is
    // followed by "small.txt". Rewrite it to "../x" (same length).
    let at = img
        .windows(13)
        .position(|w| w == b"linksmall.txt")
        .expect("root dirent names in the fixture");
    img[at..at + 4].copy_from_slice(b"../x");
    // An attacker fixes the superblock checksum as well.
    let crc = ferrofs::format::superblock::compute_checksum(&img[1024..4096]);
    img[1028..1032].copy_from_slice(&crc.to_le_bytes());
    let image = Image::open(img).unwrap();
    let base = tempdir("escape");
    let target = base.join("out");
    let err = ferrofs_check::extract::extract(&image, &target, Default::default(), None)
        .expect_err("the crafted name must be refused");
    let msg = err.to_string();
    assert!(msg.contains("../x"), "error names the entry: {msg}");
    assert!(
        !base.join("x").exists(),
        "nothing written outside the target"
    );
    // fsck reports the bad name too.
    let report = ferrofs_check::fsck::check(&image, Default::default(), None);
    assert!(report.problems.iter().any(|p| p.message.contains("../x")));
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn a_non_empty_target_is_refused() {
    let image = Image::open(fixture("plain.erofs")).unwrap();
    let base = tempdir("nonempty");
    std::fs::write(base.join("keep"), b"x").unwrap();
    let err = ferrofs_check::extract::extract(&image, &base, Default::default(), None).unwrap_err();
    assert!(err.to_string().contains("not empty"));
    assert_eq!(std::fs::read(base.join("keep")).unwrap(), b"x");
    std::fs::remove_dir_all(&base).unwrap();
}

/// An extraction stopped by its cancel flag (a signal, in the CLI) ends at
/// the next cluster with an error that says what it finished.
#[test]
fn an_interrupted_extraction_says_what_it_finished() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let image = Image::open(
        std::fs::read(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../testdata/v19/e48-libdeflate.erofs"),
        )
        .unwrap(),
    )
    .unwrap();
    let base = tempdir("interrupt");
    let stop = Arc::new(AtomicBool::new(false));
    let opts = ferrofs_check::extract::Options {
        jobs: 1,
        cancel: Some(stop.clone()),
        ..Default::default()
    };
    // The first bytes written raise the flag.
    let tick = |_: u64| stop.store(true, Ordering::Relaxed);
    let err = ferrofs_check::extract::extract(&image, &base.join("out"), opts, Some(&tick))
        .expect_err("interrupted");
    match err {
        ferrofs_check::extract::ExtractError::Interrupted {
            files_done,
            files,
            bytes,
        } => {
            assert!(
                bytes > 0 && files_done < files,
                "{files_done}/{files}, {bytes}"
            );
        }
        e => panic!("not an interruption: {e}"),
    }
    std::fs::remove_dir_all(&base).unwrap();
}
