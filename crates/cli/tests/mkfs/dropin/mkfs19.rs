//! The drop-in against mkfs.erofs 1.9.4: command lines run by both, the
//! kernel's views of the two images compared, and the option handling
//! 1.9.4 has (a repeated option, `-V`, `--compress-hints`,
//! `-E legacy-compress`, `--help`).

use super::*;

/// Runs each command line through the drop-in and mkfs.erofs 1.9.4 (into
/// `<tag><i>.img` in `work`), mounts both images and compares the trees
/// the kernel shows; then, where `same_as` names an equivalent command
/// line for the drop-in, the two drop-in images must be equal byte for
/// byte. Returns the differences found.
fn against_next(
    work: &Path,
    link: &Path,
    src: &Path,
    tag: &str,
    lines: &[(Vec<String>, Option<Vec<String>>)],
) -> Vec<String> {
    let mut failures = Vec::new();
    let next = tools::mkfs_next();
    if next.is_none() {
        println!("mkfs.erofs 1.9.x not found: upstream comparison skipped");
    }
    for (i, (flags, same_as)) in lines.iter().enumerate() {
        let ours = work.join(format!("{tag}{i}.img"));
        if let Err(e) = run(Command::new(link).args(flags).arg(&ours).arg(src)) {
            failures.push(format!("{flags:?}: drop-in: {e}"));
            continue;
        }
        if let Some(other) = same_as {
            let alt = work.join(format!("{tag}{i}-alt.img"));
            match run(Command::new(link).args(other).arg(&alt).arg(src)) {
                Ok(_) if fs::read(&ours).ok() == fs::read(&alt).ok() => {}
                Ok(_) => failures.push(format!("{flags:?} and {other:?} differ")),
                Err(e) => failures.push(format!("{other:?}: drop-in: {e}")),
            }
        }
        let Some(up) = &next else { continue };
        let theirs = work.join(format!("{tag}{i}-up.img"));
        if let Err(e) = run(Command::new(&up.path).args(flags).arg(&theirs).arg(src)) {
            failures.push(format!("{flags:?}: mkfs.erofs {}: {e}", up.version));
            continue;
        }
        match (LoopMount::new(&ours, &[]), LoopMount::new(&theirs, &[])) {
            (Ok(a), Ok(b)) => {
                let diffs = compare::compare_trees(b.path(), a.path(), &CompareOptions::strict());
                for d in diffs {
                    failures.push(format!("{flags:?}: mkfs.erofs 1.9 vs drop-in: {d}"));
                }
            }
            (a, b) => failures.push(format!("{flags:?}: mount: {:?} {:?}", a.err(), b.err())),
        }
    }
    failures
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// getopt keeps the last of a repeated option (mkfs.erofs 1.9.4 builds
/// `-zlz4hc -zlz4` as lz4): the drop-in builds the same image as with the
/// last one alone, and the kernel shows what mkfs.erofs 1.9.4 builds.
#[test]
fn dropin_repeated_option_keeps_the_last() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("dropin_repeat");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    let link = dropin_link(&work);
    let q = ["-T0", "-Uclear", "--quiet"];
    let line = |flags: &[&str], last: &[&str]| {
        let mut a = strings(&q);
        a.extend(strings(flags));
        let mut b = strings(&q);
        b.extend(strings(last));
        (a, Some(b))
    };
    let lines = vec![
        line(&["-zlz4hc", "-zlz4", "-C16384"], &["-zlz4", "-C16384"]),
        line(&["-zlzma", "-C65536", "-C16384"], &["-zlzma", "-C16384"]),
        line(&["-x1", "-x1"], &["-x1"]),
        line(&["-x-1", "-x2"], &["-x2"]),
        line(&["-b4096", "-b4096"], &["-b4096"]),
        line(&["-b1024", "-b4096"], &["-b4096"]),
        line(&["-T5", "-T0", "-Lone", "-Ltwo"], &["-T0", "-Ltwo"]),
        line(
            &["--chunksize=8192", "--chunksize=4096"],
            &["--chunksize=4096"],
        ),
    ];
    let failures = against_next(&work, &link, &src, "r", &lines);
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// `mkfs.erofs -V`: upstream's form on the first line (wrappers take the
/// third word as the erofs-utils version), ferrofs's version after it,
/// the compressors on the second line, as mkfs.erofs 1.9.4 prints them.
#[test]
fn dropin_version_line_has_upstreams_form() {
    let work = work_dir!("dropin_version");
    let link = dropin_link(&work);
    let version_of = |prog: &Path| {
        let out = Command::new(prog).arg("-V").output().unwrap();
        assert!(
            out.status.success(),
            "{} -V: {}",
            prog.display(),
            out.status
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let ours = version_of(&link);
    let mut lines = ours.lines();
    let first: Vec<&str> = lines.next().unwrap_or_default().split(' ').collect();
    assert_eq!(&first[..2], ["mkfs.erofs", "(erofs-utils)"], "{ours:?}");
    let nums: Vec<u32> = first[2].split('.').map(|n| n.parse().unwrap()).collect();
    assert_eq!(nums.len(), 3, "{ours:?}");
    // 1.9.4: the release whose command line the drop-in implements
    // (incremental, rebuild with --clean, --tar=i; its S3 and OCI sources
    // are build-time options there too), not ferrofs's own 0.1.0.
    assert_eq!(nums, vec![1, 9, 4], "{ours:?}");
    assert_eq!(
        first[3..].join(" "),
        format!("(ferrofs {})", env!("CARGO_PKG_VERSION"))
    );
    assert!(
        lines
            .next()
            .unwrap_or_default()
            .starts_with("available compressors: lz4, lz4hc, lzma"),
        "{ours:?}"
    );
    if let Some(up) = tools::mkfs_next() {
        let theirs = version_of(&up.path);
        let t: Vec<&str> = theirs
            .lines()
            .next()
            .unwrap_or_default()
            .split(' ')
            .collect();
        assert_eq!(t[..2], first[..2], "{theirs:?}");
        assert_eq!(t[2], up.version, "{theirs:?}");
        assert!(theirs
            .lines()
            .nth(1)
            .unwrap_or_default()
            .starts_with("available compressors: "));
    }
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// The layout `ferrofs dump` reports for `path` in `img` (`flat_plain`,
/// `flat_inline`, `compressed_full`, ...).
fn layout(img: &Path, path: &str) -> String {
    let out = Command::new(FERROFS)
        .args(["dump", "--json", "--path", path])
        .arg(img)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["layout"].as_str().unwrap_or("?").to_string()
}

/// `--compress-hints` read as mkfs.erofs 1.9.4 reads it: a pcluster size
/// of 0 stores the file uncompressed, a size that is not a multiple of the
/// block size is warned about and its line ignored, blanks inside a line
/// and comments as upstream takes them. The kernel shows the same tree for
/// both images, and the files the 0 line matches are stored flat in both.
/// (mkfs.erofs 1.9.4 crashes on any line with a compressor index, so the
/// three-field form is compared with 1.8.6 in the test above.)
#[test]
fn dropin_compress_hints_read_as_mkfs_1_9() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("dropin_hints");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    let text = b"a compressible line of text, said twice; ".repeat(3000);
    fs::create_dir_all(src.join("notes")).unwrap();
    fs::write(src.join("notes/long.txt"), &text).unwrap();
    fs::write(src.join("notes/long.log"), &text).unwrap();
    let link = dropin_link(&work);
    let hints = work.join("hints");
    fs::write(
        &hints,
        "# per-file pclusters\n\
         \n\
         0 .*\\.txt$\n\
         6000 \\.log$\n\
         16384\t^notes/\n\
         8192 .*\n",
    )
    .unwrap();
    let hints = format!("--compress-hints={}", hints.display());
    let lines = vec![
        (
            strings(&["-zlz4hc", "-C8192", &hints, "-T0", "--quiet"]),
            None,
        ),
        (
            strings(&["-zlzma", "-b4096", &hints, "-T0", "--quiet"]),
            None,
        ),
    ];
    let mut failures = against_next(&work, &link, &src, "h", &lines);
    let next = tools::mkfs_next().is_some();
    for i in 0..lines.len() {
        let ours = work.join(format!("h{i}.img"));
        let theirs = work.join(format!("h{i}-up.img"));
        for f in ["/notes/long.txt", "/dup/a/same.txt"] {
            let a = layout(&ours, f);
            if !a.starts_with("flat") {
                failures.push(format!("line {i}: {f} is {a} (a size-0 hint)"));
            }
            if next && layout(&theirs, f) != a {
                failures.push(format!("line {i}: {f}: upstream {}", layout(&theirs, f)));
            }
        }
        // The 6000 line is ignored: long.log takes the 16384 line.
        let a = layout(&ours, "/notes/long.log");
        if !a.starts_with("compressed") || (next && layout(&theirs, "/notes/long.log") != a) {
            failures.push(format!("line {i}: long.log is {a}"));
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// `-E legacy-compress`: mkfs.erofs 1.9.4 writes every compressed file
/// with full (not compact) indexes; so does the drop-in. The kernel shows
/// the same tree for both images, and no compressed file of either has
/// compact indexes.
#[test]
fn dropin_legacy_compress_as_mkfs_1_9() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("dropin_legacy");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    let link = dropin_link(&work);
    let lines = vec![
        (
            strings(&["-zlz4hc", "-Elegacy-compress", "-T0", "--quiet"]),
            None,
        ),
        (
            strings(&[
                "-zlzma",
                "-C65536",
                "-Elegacy-compress,ztailpacking",
                "--quiet",
            ]),
            None,
        ),
        (
            strings(&[
                "-zlz4",
                "-Elegacy-compress",
                "-E^legacy-compress",
                "--quiet",
            ]),
            Some(strings(&["-zlz4", "--quiet"])),
        ),
    ];
    let mut failures = against_next(&work, &link, &src, "l", &lines);
    let stats = |img: &Path| -> serde_json::Value {
        let out = Command::new(FERROFS)
            .args(["dump", "--json"])
            .arg(img)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v["statistics"]["inodes_by_layout"].clone()
    };
    let next = tools::mkfs_next().is_some();
    for i in 0..2 {
        let mut imgs = vec![work.join(format!("l{i}.img"))];
        if next {
            imgs.push(work.join(format!("l{i}-up.img")));
        }
        for img in imgs {
            let s = stats(&img);
            if s["compressed_compact"].as_u64().unwrap_or(0) != 0
                || s["compressed_full"].as_u64().unwrap_or(0) == 0
            {
                failures.push(format!("{}: layouts {s}", img.display()));
            }
        }
    }
    let s = stats(&work.join("l2.img"));
    if s["compressed_compact"].as_u64().unwrap_or(0) == 0 {
        failures.push(format!("^legacy-compress: layouts {s}"));
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// Scripts grep `mkfs.erofs --help` for features: every option mkfs.erofs
/// 1.9.4's help lists appears in the drop-in's help, spelled the same.
/// `--async-queue-limit` is taken and changes nothing; the options
/// ferrofs lacks are refused by name and write nothing.
#[test]
fn dropin_help_lists_every_upstream_option() {
    let work = work_dir!("dropin_help");
    let link = dropin_link(&work);
    let out = Command::new(&link).arg("--help").output().unwrap();
    assert!(out.status.success());
    let ours = String::from_utf8_lossy(&out.stdout).into_owned();
    match tools::mkfs_next() {
        Some(up) => {
            let o = Command::new(&up.path).arg("--help").output().unwrap();
            let theirs = String::from_utf8_lossy(&o.stdout).into_owned()
                + &String::from_utf8_lossy(&o.stderr);
            let mut n = 0;
            for line in theirs.lines() {
                let t = line.trim_start();
                if !t.starts_with('-') {
                    continue;
                }
                // The option's spelling: its first word, and the next
                // one after a comma (`-V, --version`).
                let mut words = t.split_whitespace();
                let mut parts = vec![words.next().unwrap_or_default()];
                if parts[0].ends_with(',') {
                    parts[0] = parts[0].trim_end_matches(',');
                    parts.extend(words.next());
                }
                for part in parts {
                    n += 1;
                    assert!(ours.contains(part), "{part:?} is not in the drop-in's help");
                }
            }
            assert!(n > 50, "only {n} options found in mkfs.erofs --help");
        }
        None => println!("mkfs.erofs 1.9.x not found: help comparison skipped"),
    }
    // --async-queue-limit: accepted, the same image.
    let src = work.join("tree");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/f"), b"data\n".repeat(1000)).unwrap();
    let build = |extra: &[&str], img: &str| {
        let img = work.join(img);
        let st = Command::new(&link)
            .args(["-zlz4", "-T0", "-Uclear", "--quiet"])
            .args(extra)
            .arg(&img)
            .arg(&src)
            .status()
            .unwrap();
        assert!(st.success(), "{extra:?}");
        fs::read(img).unwrap()
    };
    let plain = build(&[], "a.img");
    assert_eq!(build(&["--async-queue-limit=8"], "b.img"), plain);
    assert_eq!(build(&["--async-queue-limit", "8"], "c.img"), plain);
    // --zD is implemented: a directory goes into the packed inode.
    assert_ne!(build(&["--zD"], "zd.img"), plain);
    for bad in ["--s3=x", "--oci", "--gzinfo", "--fsalignblks=4"] {
        let img = work.join("bad.img");
        let out = Command::new(&link)
            .arg(bad)
            .arg(&img)
            .arg(&src)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let name = bad.split('=').next().unwrap();
        assert!(
            !out.status.success() && err.contains("not supported by ferrofs") && err.contains(name),
            "{bad}: {} {err}",
            out.status
        );
        assert!(!img.exists(), "{bad}: an image was written");
    }
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}
