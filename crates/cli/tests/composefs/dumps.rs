//! `--from-file`: a dump of an image (`composefs-info dump`) fed to both
//! tools, from a file and from standard input; hand-written dumps with
//! what directories cannot give (hard links, inline content up to 5000
//! bytes, files of 8 TiB and more without data, payloads without digests,
//! ids above 65535, escapes); and broken dumps, which both tools refuse
//! (ours with a message and status 1, never a crash).

use std::fs;
use std::path::Path;

use ferrofs_testkit::make_corner_tree;

use super::{compare_build, dropin, refs, run, work, Refs};

/// Builds from `dump` with both tools; `None` when both fail or both
/// give the same bytes.
fn compare_dump(refs: &Refs, w: &Path, dump: &[u8], opts: &[&str]) -> Option<String> {
    let d = w.join("input.dump");
    fs::write(&d, dump).unwrap();
    let mut all = vec!["--from-file"];
    all.extend_from_slice(opts);
    compare_build(refs, w, &d.display().to_string(), &all)
}

#[test]
fn dump_of_an_image_is_byte_identical() {
    let Some(refs) = refs() else { return };
    let w = work("dump-image");
    let src = w.path().join("tree");
    make_corner_tree(&src).unwrap();
    let img = w.path().join("src.cfs");
    let img_s = img.display().to_string();
    run(
        &refs.mkcomposefs,
        &[&src.display().to_string(), &img_s],
        None,
    )
    .unwrap();
    let dump = run(&refs.info, &["dump", &img_s], None).unwrap();
    assert!(dump.len() > 1000);
    for opts in [&[][..], &["--max-version=0"], &["--min-version=1"]] {
        assert_eq!(compare_dump(&refs, w.path(), &dump, opts), None);
    }
    // From standard input, to standard output.
    let bin = dropin(w.path());
    let theirs = run(&refs.mkcomposefs, &["--from-file", "-", "-"], Some(&dump)).unwrap();
    let ours = run(&bin, &["--from-file", "-", "-"], Some(&dump)).unwrap();
    assert!(theirs == ours, "stdin/stdout images differ");
}

fn digest(seed: u8) -> String {
    (0..32).map(|i| format!("{:02x}", i * 7 + seed)).collect()
}

/// A dump exercising what only dumps can say.
fn handwritten() -> Vec<u8> {
    let big = (1u64 << 43) + 1;
    let many_chunks = 1u64 << 52;
    let c5000 = "a".repeat(5000);
    let c4097 = "b".repeat(4097);
    let lines = [
        "/ 4096 40755 2 0 0 0 1000.0 - - - user.a=1 security.selinux=ctx".to_string(),
        format!("/big {big} 100644 1 0 0 0 1000.0 ab/cdef - {}", digest(1)),
        format!("/huge {many_chunks} 100644 1 0 0 0 1000.0 /abs/path - -"),
        "/nopayload 100 100644 1 0 0 0 1000.0 - - -".to_string(),
        format!("/withdigest 100 100644 1 0 0 0 1000.0 - - {}", digest(2)),
        "/inline 5 100644 1 0 0 0 1000.0 - hello -".to_string(),
        format!("/in5000 5000 100644 1 0 0 0 1000.0 - {c5000} -"),
        format!("/in4097 4097 100644 1 0 0 0 1000.0 - {c4097} -"),
        "/link 3 120777 1 0 0 0 1000.0 abc - -".to_string(),
        "/hl 0 @100644 0 0 0 0 0.0 /inline - -".to_string(),
        "/hl2 0 @100644 0 0 0 0 0.0 /hl - -".to_string(),
        "/dev 7 20644 1 0 0 1234 1000.0 - - -".to_string(),
        "/blk 0 60600 3 0 0 4294967295 1000.0 - - -".to_string(),
        "/wo 0 20000 1 0 0 0 1000.0 - - -".to_string(),
        "/sp\\x20ace\\n 0 10644 1 0 0 0 1000.0 - - -".to_string(),
        "/d 4096 40755 2 70000 70000 0 5.123 - - - trusted.overlay.x=\\x00\\x01 user.b=with\\x20space".to_string(),
        "/d/f 100 100644 70000 1 2 0 1000.999999999 xx/yy - -".to_string(),
        "/d/wo2 0 20000 1 0 0 0 1000.0 - - - user.x=1".to_string(),
        "/d/sock 0 140755 1 0 0 0 18446744073709551615.0 - - -".to_string(),
        "/d/hl3 0 @100644 0 0 0 0 0.0 /d/f - -".to_string(),
    ];
    (lines.join("\n") + "\n").into_bytes()
}

#[test]
fn handwritten_dumps_are_byte_identical() {
    let Some(refs) = refs() else { return };
    let w = work("dump-hand");
    let dump = handwritten();
    for opts in [&[][..], &["--max-version=0"], &["--min-version=1"]] {
        assert_eq!(compare_dump(&refs, w.path(), &dump, opts), None);
    }
    // Without a trailing newline, and with lenient fields mkcomposefs
    // accepts (a bad GID with a non-zero UID reads as 0).
    let mut d2 = dump.clone();
    d2.pop();
    d2.extend_from_slice(b"\n/lenient 0 100644 1 5 nope 0 1000.0 - - -");
    assert_eq!(compare_dump(&refs, w.path(), &d2, &[]), None);
    // Both tools agree the image is built (not a double failure).
    let bin = dropin(w.path());
    let f = w.path().join("input.dump");
    run(
        &bin,
        &[
            "--from-file",
            &f.display().to_string(),
            &w.path().join("x.cfs").display().to_string(),
        ],
        None,
    )
    .unwrap();
}

/// Dumps both tools refuse.
const BROKEN: &[&str] = &[
    "",
    "\n",
    "/a 0 100644 1 0 0 0 0.0 - - -\n",
    "/ 0 100644 1 0 0 0 0.0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/ 0 40755 1 0 0 0 0.0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/x 0 170644 1 0 0 0 0.0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/x 0 1x0644 1 0 0 0 0.0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/x 0 100644 1 0 0 0 0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/x 0 100644 1 0 0 0 0.x - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/x 3 100644 1 0 0 0 0.0 - ab -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/x 0 100644 1 0 0 0 0.0 - - - user.a\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/x 0 100644 1 0 0 0 0.0 - - - user.a=\\q\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/x 0 100644 1 0 0 0 0.0 - - - user.a=\\x4\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/x\\x00y 0 100644 1 0 0 0 0.0 - - -\n/x 0 100644 1 0 0 0 0.0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/x 0 100644 1 0 0 0 0.0 - - -\n/x 0 100644 1 0 0 0 0.0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/a/b 0 100644 1 0 0 0 0.0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/f 0 100644 1 0 0 0 0.0 - - -\n/f/b 0 100644 1 0 0 0 0.0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/.. 0 100644 1 0 0 0 0.0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/d 0 @40755 1 0 0 0 0.0 / - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/h 0 @100644 1 0 0 0 0.0 /nothere - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/h 0 @100644 1 0 0 0 0.0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/h 0 @100644 1 0 0 0 0.0 /h - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/l 0 120777 1 0 0 0 0.0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/a 0 @100644 0 0 0 0 0.0 /b - -\n/b 0 @100644 0 0 0 0 0.0 /a - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/x 9999999999999999999 100644 1 0 0 0 0.0 - - -\n",
    "/ 0 40755 1 0 0 0 0.0 - - -\n/x\0 0 100644 1 0 0 0 0.0 - - -\n",
];

#[test]
fn broken_dumps_are_refused_by_both() {
    let Some(refs) = refs() else { return };
    let w = work("dump-broken");
    let bin = dropin(w.path());
    let d = w.path().join("bad.dump");
    let out = w.path().join("bad.cfs");
    let mut failures = Vec::new();
    let mut long = b"/ 0 40755 1 0 0 0 0.0 - - - ".to_vec();
    long.extend(std::iter::repeat_n(b'x', 70_000));
    let payload = format!(
        "/ 0 40755 1 0 0 0 0.0 - - -\n/x 1 100644 1 0 0 0 0.0 {} - -\n",
        "p".repeat(4096)
    );
    let content = format!(
        "/ 0 40755 1 0 0 0 0.0 - - -\n/x 5001 100644 1 0 0 0 0.0 - {} -\n",
        "c".repeat(5001)
    );
    let cases: Vec<Vec<u8>> = BROKEN
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([long, payload.into_bytes(), content.into_bytes()])
        .collect();
    for (n, case) in cases.iter().enumerate() {
        fs::write(&d, case).unwrap();
        let args = [
            "--from-file",
            &d.display().to_string(),
            &out.display().to_string(),
        ];
        if run(&refs.mkcomposefs, &args, None).is_ok() {
            failures.push(format!("case {n}: mkcomposefs accepted it"));
        }
        let o = std::process::Command::new(&bin)
            .args(args)
            .output()
            .unwrap();
        if o.status.code() != Some(1) || o.stderr.is_empty() {
            failures.push(format!(
                "case {n}: ours: {:?} {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
