//! What a new user meets first: errors in their words (a file that is not
//! an image, a truncated image, a compressed archive without its flag, a
//! missing output directory), sizes with suffixes, many identical refusals
//! summarised, and `ls` printing what coreutils' `ls` prints of the
//! kernel's mount.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use ferrofs_testkit::corpus;
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::work_dir;

use super::FERROFS;

fn ferrofs(args: &[&str]) -> Output {
    Command::new(FERROFS).args(args).output().unwrap()
}

/// `ferrofs ARGS`, which must succeed.
fn ferrofs_ok(args: &[&str]) -> Output {
    let o = ferrofs(args);
    assert!(o.status.success(), "ferrofs {args:?}: {}", stderr(&o));
    o
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A small image of the corner-case tree (needs root for its devices and
/// owners; without root, a plain tree).
fn small_image(w: &Path) -> std::path::PathBuf {
    let src = w.join("tree");
    if ferrofs_testkit::is_root() {
        corpus::make_corner_tree(&src).unwrap();
    } else {
        fs::create_dir_all(src.join("d")).unwrap();
        fs::write(src.join("d/f"), corpus::text_bytes(100_000, 1)).unwrap();
    }
    lz4hc_image(&src, &w.join("small.img"))
}

/// `ferrofs mkfs -zlz4hc IMG SRC`, which must work.
fn lz4hc_image(src: &Path, img: &Path) -> std::path::PathBuf {
    ferrofs_ok(&[
        "mkfs",
        "--quiet",
        "-zlz4hc",
        img.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    img.to_path_buf()
}

#[test]
fn files_that_are_not_images_are_named_as_such() {
    let w = work_dir!("user_errors_not_image");
    let noise = w.join("noise");
    fs::write(&noise, corpus::random_bytes(100_000, 7)).unwrap();
    let short = w.join("short");
    fs::write(&short, b"hello").unwrap();
    let cases = [
        (
            noise.to_str().unwrap(),
            "not an EROFS image (no superblock magic at byte 1024)",
        ),
        (
            short.to_str().unwrap(),
            "not an EROFS image (5 bytes, too few for a superblock",
        ),
        (w.to_str().unwrap(), "it is a directory"),
        (
            "/no/such/image.erofs",
            "cannot open /no/such/image.erofs: No such file",
        ),
    ];
    for (path, want) in cases {
        for cmd in [&["ls"][..], &["fsck"], &["dump"]] {
            let o = ferrofs(&[cmd, &[path]].concat());
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{cmd:?} {path}: {e}");
            assert!(e.contains(path) && e.contains(want), "{cmd:?} {path}: {e}");
            assert!(!e.contains("I/O error reading"), "{cmd:?} {path}: {e}");
        }
    }
}

#[test]
fn a_truncated_image_is_refused_at_open_by_every_command() {
    let w = work_dir!("user_errors_truncated");
    let img = small_image(&w);
    let full = fs::metadata(&img).unwrap().len();
    let cut = w.join("cut.img");
    let mut bytes = fs::read(&img).unwrap();
    bytes.truncate(8192);
    fs::write(&cut, &bytes).unwrap();
    let want = format!("image truncated: 8192 bytes, the superblock says {full}");
    let cut_s = cut.to_str().unwrap();
    let out = w.join("out");
    for args in [
        vec!["ls", "-l", cut_s],
        vec!["fsck", cut_s],
        vec!["dump", cut_s],
        vec!["cat", cut_s, "x"],
        vec!["extract", cut_s, out.to_str().unwrap()],
    ] {
        let o = ferrofs(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(&want), "{args:?}: {e}");
    }
    // A mount fails before it starts serving (nothing to unmount).
    if Path::new("/dev/fuse").exists() {
        let mnt = w.join("mnt");
        fs::create_dir_all(&mnt).unwrap();
        let o = ferrofs(&["mount", cut_s, mnt.to_str().unwrap()]);
        let e = stderr(&o);
        assert!(!o.status.success() && e.contains(&want), "mount: {e}");
    } else {
        println!("skipped (mount part): no /dev/fuse");
    }
    // The whole image still opens (the last block may even be short).
    bytes = fs::read(&img).unwrap();
    bytes.truncate(full as usize - 100);
    fs::write(&cut, &bytes).unwrap();
    ferrofs_ok(&["ls", cut_s]);
}

#[test]
fn compressed_archives_without_their_flag_get_a_hint() {
    let w = work_dir!("user_errors_tar");
    let tree = w.join("t");
    fs::create_dir_all(&tree).unwrap();
    fs::write(tree.join("f"), b"some text\n").unwrap();
    let tar = w.join("a.tar");
    let st = Command::new("tar")
        .arg("-cf")
        .arg(&tar)
        .arg("-C")
        .arg(&tree)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    let mut cases = vec![];
    for (tool, ext, hint) in [
        ("gzip", "gz", "it is gzip-compressed: add --ungzip"),
        ("xz", "xz", "it is xz-compressed: add --unxz"),
        (
            "zstd",
            "zst",
            "it is zstd-compressed: decompress it on the way in",
        ),
    ] {
        let out = w.join(format!("a.tar.{ext}"));
        let made = Command::new(tool)
            .arg("-c")
            .arg(&tar)
            .output()
            .ok()
            .filter(|o| o.status.success());
        match made {
            Some(o) => {
                fs::write(&out, o.stdout).unwrap();
                cases.push((out, hint));
            }
            None => println!("skipped ({tool}): not installed"),
        }
    }
    for (archive, hint) in cases {
        let img = w.join("x.img");
        let o = ferrofs(&[
            "mkfs",
            "--tar",
            img.to_str().unwrap(),
            archive.to_str().unwrap(),
        ]);
        let e = stderr(&o);
        assert!(!o.status.success(), "{}", archive.display());
        assert!(
            e.contains(archive.to_str().unwrap())
                && e.contains("not a tar archive")
                && e.contains(hint),
            "{e}"
        );
        assert!(
            e.is_ascii(),
            "no raw bytes of the archive in the message: {e:?}"
        );
        assert!(!img.exists(), "nothing written");
    }
}

#[test]
fn output_errors_name_the_image_and_sizes_take_suffixes() {
    let w = work_dir!("user_errors_output");
    let src = w.join("t");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), corpus::text_bytes(300_000, 3)).unwrap();
    let src_s = src.to_str().unwrap();
    let missing = w.join("no-such-dir/x.img");
    let o = ferrofs(&["mkfs", missing.to_str().unwrap(), src_s]);
    let e = stderr(&o);
    assert!(!o.status.success());
    assert!(
        e.contains(missing.to_str().unwrap())
            && e.contains("does not exist")
            && !e.contains(".tmp"),
        "{e}"
    );
    let o = ferrofs(&["mkfs", w.to_str().unwrap(), src_s]);
    let e = stderr(&o);
    assert!(
        !o.status.success() && e.contains("is a directory") && !e.contains(".tmp"),
        "{e}"
    );
    // -C 64K is -C 65536, byte for byte.
    let (a, b) = (w.join("a.img"), w.join("b.img"));
    for (img, c) in [(&a, "64K"), (&b, "65536")] {
        ferrofs_ok(&[
            "mkfs",
            "--quiet",
            "-zlz4hc",
            "-C",
            c,
            img.to_str().unwrap(),
            src_s,
        ]);
    }
    assert!(fs::read(&a).unwrap() == fs::read(&b).unwrap());
    // Without -z: said, and an image all the same.
    let o = ferrofs_ok(&["mkfs", a.to_str().unwrap(), src_s]);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("no -z or --preset given"), "{said}");
    // Every preset builds an image that reads back.
    for p in ["fast", "balanced", "dense"] {
        let o = ferrofs_ok(&["mkfs", "--json", "--preset", p, a.to_str().unwrap(), src_s]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(v["compressed_files"].as_u64() >= Some(1), "{p}: {v}");
        // What the image uses: big pclusters, inline tails, fragments.
        let want = match p {
            "fast" => "5.13",
            "balanced" => "5.17",
            _ => "6.1",
        };
        assert_eq!(v["linux"]["oldest"], want, "{p}: {v}");
        let o = ferrofs(&["cat", a.to_str().unwrap(), "f"]);
        assert!(o.stdout == fs::read(src.join("f")).unwrap(), "{p}");
    }
    // The 2025 format's metabox: its version, and what 6.18 calls
    // experimental.
    let o = ferrofs(&[
        "mkfs",
        "--json",
        "--preset",
        "dense",
        "-m4096",
        "--zD",
        a.to_str().unwrap(),
        src_s,
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["linux"]["oldest"], "6.17", "{v}");
    let exp = v["linux"]["experimental"].to_string();
    assert!(
        exp.contains("48-bit layout") && exp.contains("metadata compression"),
        "{v}"
    );
}

/// Checks the kernel's log names exactly the features `mkfs` said it would.
#[test]
fn experimental_features_are_the_ones_the_kernel_logs() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let w = work_dir!("user_errors_experimental");
    let src = w.join("t");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), corpus::text_bytes(50_000, 4)).unwrap();
    for opts in [
        &["-zlz4hc", "-Eztailpacking"][..],
        &["-zdeflate"],
        &["-zlz4", "-E48bit"],
        &["-zlzma", "-m4096"],
    ] {
        let img = w.join("x.img");
        let o = Command::new(FERROFS)
            .args(["mkfs", "--json"])
            .args(opts)
            .arg(&img)
            .arg(&src)
            .output()
            .unwrap();
        assert!(o.status.success(), "{opts:?}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let said: Vec<String> = v["linux"]["experimental"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        let before = dmesg_lines();
        let m = LoopMount::new(&img, &[]).expect("mount");
        m.unmount().unwrap();
        // The lines after the last one seen before (the ring buffer may
        // have dropped old ones, so counting them would not do).
        let after = dmesg_lines();
        let start = before
            .last()
            .and_then(|last| after.iter().rposition(|l| l == last))
            .map_or(0, |k| k + 1);
        let logged: Vec<String> = after
            .into_iter()
            .skip(start)
            .filter_map(|l| {
                let rest = l.split("EXPERIMENTAL ").nth(1)?;
                Some(
                    rest.split(" support in use")
                        .next()?
                        .split(" feature in use")
                        .next()?
                        .to_string(),
                )
            })
            .collect();
        if before.is_empty() && logged.is_empty() && !said.is_empty() {
            println!("skipped ({opts:?}): the kernel log is not readable");
            continue;
        }
        // The kernel logs DEFLATE once per boot, the others at each mount.
        let once = |f: &String| f == "DEFLATE";
        assert!(
            logged.iter().all(|f| said.contains(f)),
            "{opts:?}: said {said:?}, logged {logged:?}"
        );
        assert!(
            said.iter().all(|f| logged.contains(f) || once(f)),
            "{opts:?}: said {said:?}, logged {logged:?}"
        );
    }
}

fn dmesg_lines() -> Vec<String> {
    Command::new("dmesg")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ls_prints_what_coreutils_ls_prints_of_the_kernel_mount() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let w = work_dir!("user_errors_ls");
    let src = w.join("tree");
    corpus::make_corner_tree(&src).unwrap();
    // An ACL (if setfacl is there), a dangling link, a link to a
    // directory, an old file.
    fs::write(src.join("ls-acl"), b"x").unwrap();
    let _ = Command::new("setfacl")
        .args(["-m", "u:1234:r"])
        .arg(src.join("ls-acl"))
        .status();
    let _ = std::os::unix::fs::symlink("/no/such/target", src.join("dangling"));
    let _ = std::os::unix::fs::symlink(".", src.join("self-link"));
    fs::write(src.join("old"), b"old").unwrap();
    corpus::set_mtime(&src.join("old"), 1_000_000_000, 0).unwrap();
    let img = lz4hc_image(&src, &w.join("ls.img"));
    let m = LoopMount::new(&img, &[]).expect("mount");
    let mut failures = Vec::new();
    for (opts, path) in [
        (&["-l"][..], None),
        (&["-lR"], None),
        (&["-li"], None),
        (&["-R"], None),
        (&["-n"], None),
        (&["-ld"], Some("self-link")),
        (&["-l"], Some("self-link")),
        (&["-lL"], None),
        (&["-ld"], Some(".")),
        (&["-lA"], None),
        (&["-laR"], Some("links")),
        (&["-la"], Some("names")),
    ] {
        let kernel = Command::new("ls")
            .args(opts)
            .args(path)
            .current_dir(m.path())
            .env("LC_ALL", "C")
            .env("TZ", "UTC")
            .output()
            .unwrap();
        let ours = Command::new(FERROFS)
            .arg("ls")
            .args(opts)
            .arg(&img)
            .args(path)
            .env("LC_ALL", "C")
            .env("TZ", "UTC")
            .output()
            .unwrap();
        if kernel.stdout != ours.stdout || kernel.status.code() != ours.status.code() {
            failures.push(format!(
                "ls {opts:?} {path:?}: kernel (status {:?}):\n{}\nferrofs (status {:?}):\n{}{}",
                kernel.status.code(),
                String::from_utf8_lossy(&kernel.stdout),
                ours.status.code(),
                String::from_utf8_lossy(&ours.stdout),
                stderr(&ours)
            ));
        }
    }
    m.unmount().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn many_identical_refusals_are_summarised() {
    if !ferrofs_testkit::is_root() {
        println!("skipped: not root");
        return;
    }
    // Symlinks cannot carry user.* xattrs on Linux: every one is refused
    // by the same reason.
    let w = work_dir!("user_errors_summarised");
    let py = r#"
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    for i in range(40):
        ti = tarfile.TarInfo(f"link{i:02}")
        ti.type = tarfile.SYMTYPE
        ti.linkname = "target"
        ti.pax_headers = {"SCHILY.xattr.user.note": "x"}
        t.addfile(ti)
"#;
    let tar = w.join("l.tar");
    let st = Command::new("python3").args(["-c", py]).arg(&tar).status();
    if !st.is_ok_and(|s| s.success()) {
        println!("skipped: python3 could not write the archive");
        return;
    }
    let img = w.join("l.img");
    ferrofs_ok(&[
        "mkfs",
        "--quiet",
        "--tar",
        img.to_str().unwrap(),
        tar.to_str().unwrap(),
    ]);
    let out = w.join("out");
    let o = ferrofs(&["extract", img.to_str().unwrap(), out.to_str().unwrap()]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    let lines = e
        .lines()
        .filter(|l| l.contains("xattr user.note not restored"))
        .count();
    assert_eq!(lines, 5, "{e}");
    assert!(
        e.contains("... and 35 more files whose xattr user.note was not restored"),
        "{e}"
    );
    assert!(e.contains("NOT restored: 40 xattrs"), "{e}");
}

#[test]
fn cat_writes_every_path_in_turn_and_names_the_ones_it_cannot() {
    let w = work_dir!("user_errors_cat_paths");
    let src = w.join("tree");
    fs::create_dir_all(src.join("d")).unwrap();
    let a = corpus::text_bytes(300_000, 1);
    let b = b"second file\n".to_vec();
    fs::write(src.join("d/a"), &a).unwrap();
    fs::write(src.join("b"), &b).unwrap();
    let img = lz4hc_image(&src, &w.join("cat.img"));
    let img = img.to_str().unwrap();
    // As cat concatenates: a, b, a again.
    let o = ferrofs(&["cat", img, "d/a", "b", "d/a"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout == [&a[..], &b, &a].concat(), "the files in turn");
    // One missing and one directory among them: reported by name, the
    // others still written, status 2.
    let o = ferrofs(&["cat", img, "b", "nope", "d", "d/a"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(o.stdout == [&b[..], &a].concat(), "the readable files");
    assert!(
        e.contains("nope: no such file or directory") && e.contains("d: is a directory"),
        "{e}"
    );
}
