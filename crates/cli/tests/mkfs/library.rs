//! The builder library gives `ferrofs mkfs`'s bytes: `BuildOptions::preset`
//! through `Build` and through the streaming writer (the tree's entries
//! appended by hand) build, for each preset, the image `mkfs --preset`
//! builds of the same tree with the same UUID and build time.

use std::fs;
use std::path::Path;
use std::process::Command;

use ferrofs_builder::writer::{EntryMeta, ImageWriter};
use ferrofs_builder::{Build, BuildOptions, Input, TimePolicy};
use ferrofs_testkit::work_dir;

use crate::FERROFS;

/// A tree of text, repeated blocks, an empty file, a symlink, nested
/// directories, with fixed modes and times.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for i in 0..20 {
        let body = format!("file {i}: ").repeat(200 + i * 37).into_bytes();
        files.push((format!("d{}/f{i}.txt", i % 3), body));
    }
    files.push(("d0/empty".into(), Vec::new()));
    files.push(("big.bin".into(), vec![7u8; 300_000]));
    for (p, b) in &files {
        let path = dir.join(p);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, b).unwrap();
    }
    std::os::unix::fs::symlink("d0/f0.txt", dir.join("link")).unwrap();
    Command::new("chmod")
        .args(["-R", "u=rwX,go=rX"])
        .arg(dir)
        .status()
        .unwrap();
    Command::new("find")
        .arg(dir)
        .args(["-exec", "touch", "-h", "-d", "@1600000000", "{}", "+"])
        .status()
        .unwrap();
    files
}

#[test]
fn presets_build_mkfs_bytes_through_build_and_the_writer() {
    let work = work_dir!("library_presets");
    let src = work.join("tree");
    let files = tree(&src);
    let mut failures = Vec::new();
    for preset in ["fast", "balanced", "dense"] {
        let cli = work.join(format!("{preset}.cli.img"));
        let out = Command::new(FERROFS)
            .args(["mkfs", "--quiet", "--preset", preset])
            .args([
                "-U",
                "07070707-0707-0707-0707-070707070707",
                "-T",
                "1700000000",
                "--mkfs-time",
            ])
            .arg(&cli)
            .arg(&src)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let opts = BuildOptions {
            uuid: Some([7; 16]),
            time: TimePolicy::BuildTimeOnly(1_700_000_000),
            ..BuildOptions::preset(preset).unwrap()
        };
        let lib = work.join(format!("{preset}.lib.img"));
        Build::new(Input::Dir(&src))
            .options(&opts)
            .write_to(&lib)
            .unwrap();
        if fs::read(&lib).unwrap() != fs::read(&cli).unwrap() {
            failures.push(format!("{preset}: Build differs from mkfs"));
        }
        // The same entries by hand, files from memory.
        let w_img = work.join(format!("{preset}.writer.img"));
        let mut w = ImageWriter::create(&w_img, opts.clone()).unwrap();
        let meta = |p: &Path| EntryMeta::from_metadata(&fs::symlink_metadata(p).unwrap());
        for (p, body) in files.iter().rev() {
            w.append_file(p, &meta(&src.join(p)), body.len() as u64, &body[..])
                .unwrap();
        }
        w.append_symlink("link", &meta(&src.join("link")), "d0/f0.txt")
            .unwrap();
        for d in ["d0", "d1", "d2", "/"] {
            w.append_dir(d, &meta(&src.join(d.trim_start_matches('/'))))
                .unwrap();
        }
        w.finish().unwrap();
        if fs::read(&w_img).unwrap() != fs::read(&cli).unwrap() {
            failures.push(format!("{preset}: the writer differs from mkfs"));
        }
    }
    assert!(BuildOptions::preset("fastest").is_err());
    ferrofs_testkit::tmp::finish(&work, &failures);
}
