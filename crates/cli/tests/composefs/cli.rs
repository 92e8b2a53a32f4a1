//! The command lines: `--print-digest` and `--print-digest-only` print
//! what mkcomposefs prints; `ferrofs mkcomposefs --json` writes the same
//! image as the drop-in and a summary; errors name the path and leave no
//! image behind.

use std::fs;
use std::path::Path;
use std::process::Command;

use super::{dropin, refs, run, work, FERROFS};

#[test]
fn print_digest_matches_mkcomposefs() {
    let Some(refs) = refs() else { return };
    let w = work("digest");
    let src = w.path().join("tree");
    ferrofs_testkit::make_corner_tree(&src).unwrap();
    let s = src.display().to_string();
    let bin = dropin(w.path());
    let theirs = run(&refs.mkcomposefs, &["--print-digest-only", &s], None).unwrap();
    let ours = run(&bin, &["--print-digest-only", &s], None).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&theirs),
        String::from_utf8_lossy(&ours)
    );
    assert_eq!(theirs.len(), 65, "a sha256 in hex and a newline");
    let img = w.path().join("x.cfs").display().to_string();
    let with_image = run(&bin, &["--print-digest", &s, &img], None).unwrap();
    assert_eq!(with_image, ours);
    // The digest is the image's fs-verity digest.
    let fsverity = ferrofs_testkit::tools::next_tool("fsverity");
    if let Some(fv) = fsverity {
        let out = run(&fv, &["digest", &img], None).unwrap();
        let hex = String::from_utf8_lossy(&ours).trim().to_string();
        assert!(String::from_utf8_lossy(&out).contains(&hex));
    }
}

#[test]
fn ferrofs_mkcomposefs_writes_the_same_image_and_a_summary() {
    let w = work("subcommand");
    let src = w.path().join("tree");
    ferrofs_testkit::make_corner_tree(&src).unwrap();
    let s = src.display().to_string();
    let (a, b) = (w.path().join("a.cfs"), w.path().join("b.cfs"));
    let a_s = a.display().to_string();
    let out = run(
        Path::new(FERROFS),
        &["mkcomposefs", "--json", &s, &a_s],
        None,
    )
    .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(j["format_version"], 0);
    assert_eq!(j["bytes"].as_u64(), Some(fs::metadata(&a).unwrap().len()));
    assert!(j["inodes"].as_u64().unwrap() > 256);
    run(&dropin(w.path()), &[&s, &b.display().to_string()], None).unwrap();
    assert!(fs::read(&a).unwrap() == fs::read(&b).unwrap());
}

#[test]
fn errors_name_the_path_and_write_nothing() {
    let w = work("errors");
    let bin = dropin(w.path());
    let img = w.path().join("out.cfs");
    let img_s = img.display().to_string();
    let missing = w.path().join("no-such-dir");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![missing.display().to_string(), img_s.clone()],
            "no-such-dir",
        ),
        (
            vec![
                "--from-file".into(),
                missing.display().to_string(),
                img_s.clone(),
            ],
            "no-such-dir",
        ),
        (vec![w.path().display().to_string()], "destination"),
        (
            vec![
                "--max-version=2".into(),
                w.path().display().to_string(),
                img_s.clone(),
            ],
            "version",
        ),
        (
            vec![
                "--bogus".into(),
                w.path().display().to_string(),
                img_s.clone(),
            ],
            "--bogus",
        ),
        (
            vec![
                "--threads=0".into(),
                w.path().display().to_string(),
                img_s.clone(),
            ],
            "threads",
        ),
        (
            vec![
                w.path().display().to_string(),
                w.path().join("nodir/x.cfs").display().to_string(),
            ],
            "nodir",
        ),
    ];
    for (args, needle) in cases {
        let o = Command::new(&bin).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!img.exists(), "{args:?} left an image");
    }
}
