//! `mkfs --tar=i`, tar index layers as containerd 2.2+ makes them
//! (`mkfs.erofs --tar=i --aufs --quiet -b4096 -U UUID layer.erofs <
//! layer.tar`, then the archive appended to the index): archives of the
//! corner-case tree (GNU sparse members, PAX xattrs and long names, hard
//! links, devices) become indexes whose files point into the archive.
//! `[index][archive]` is mounted by the kernel and compared strictly with
//! the full-data image of the same archive; `ferrofs fsck`, `extract` and
//! the FUSE mount read it the same; a pipe and a file give the same bytes;
//! mkfs.erofs 1.9.4's index of the same archive shows the same tree. Two
//! aufs layers stack under overlayfs as their directory trees do. Modes
//! and combinations that are not supported are refused by name.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::fuse::FuseMount;
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::process::sh;
use ferrofs_testkit::verify::run_ok as run;
use ferrofs_testkit::{corpus, tools, work_dir};

use crate::{dropin_link, FERROFS};

/// `a` then `b`, concatenated into `out`.
fn cat(a: &Path, b: &Path, out: &Path) {
    let mut bytes = fs::read(a).unwrap();
    bytes.extend(fs::read(b).unwrap());
    fs::write(out, bytes).unwrap();
}

/// containerd's command line, the archive on standard input (a file, or a
/// pipe when `pipe`).
fn index_cmd(mkfs: &Path, tar: &Path, out: &Path, pipe: bool) -> Result<Vec<u8>, String> {
    let mut c = Command::new(mkfs);
    c.args([
        "--tar=i",
        "--aufs",
        "--quiet",
        "-b4096",
        "-U",
        "6f1c2a4e-3b5d-4c7e-9f80-112233445566",
    ])
    .arg(out);
    if pipe {
        let bytes = fs::read(tar).unwrap();
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let mut stdin = child.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(&bytes);
        });
        let o = child.wait_with_output().map_err(|e| e.to_string())?;
        feeder.join().unwrap();
        if !o.status.success() {
            return Err(String::from_utf8_lossy(&o.stderr).into_owned());
        }
        return Ok(o.stdout);
    }
    run(c.stdin(fs::File::open(tar).unwrap()))
}

#[test]
fn tar_index_layers_read_as_their_archives() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("mkfs_tar_index");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    let (s, w) = (src.display(), work.display());
    let link = dropin_link(&work);
    let up = tools::mkfs_next();
    if up.is_none() {
        println!("mkfs.erofs 1.9.4 not found: upstream's index is not compared");
    }
    let mut failures = Vec::new();
    for (name, make, upstream_too) in [
        (
            "gnu-sparse",
            format!("tar --format=gnu --sparse --numeric-owner -C {s} -cf {w}/gnu-sparse.tar ."),
            // mkfs.erofs reads no GNU sparse members.
            false,
        ),
        (
            "posix",
            format!(
                "tar --format=posix --xattrs --xattrs-include='*' --numeric-owner \
                 -C {s} -cf {w}/posix.tar ."
            ),
            true,
        ),
    ] {
        // GNU tar warns (exit 1) about the socket it leaves out.
        let _ = sh(&make);
        let tar = work.join(format!("{name}.tar"));
        let p = |k: &str| work.join(format!("{name}-{k}"));
        let full = p("full.img");
        let step = run(Command::new(&link)
            .args(["--tar=f", "--aufs", "--quiet"])
            .arg(&full)
            .arg(&tar))
        .and_then(|_| index_cmd(&link, &tar, &p("idx"), false))
        .and_then(|_| index_cmd(&link, &tar, &p("idx-pipe"), true));
        if let Err(e) = step {
            failures.push(format!("{name}: {e}"));
            continue;
        }
        if fs::read(p("idx")).unwrap() != fs::read(p("idx-pipe")).unwrap() {
            failures.push(format!(
                "{name}: the index from a pipe differs from the file's"
            ));
        }
        let idx_len = fs::metadata(p("idx")).unwrap().len();
        if idx_len % 512 != 0 || idx_len * 4 > fs::metadata(&tar).unwrap().len() {
            failures.push(format!("{name}: index of {idx_len} bytes"));
        }
        cat(&p("idx"), &tar, &p("layer"));
        let (a, b) = (
            LoopMount::new(&full, &[]).unwrap(),
            LoopMount::new(&p("layer"), &[]).unwrap(),
        );
        for d in compare::compare_trees(a.path(), b.path(), &CompareOptions::strict()) {
            failures.push(format!("{name}: full image vs index: {d}"));
        }
        // ferrofs's own readers of [index][archive].
        let x = p("x");
        let readers = run(Command::new(FERROFS).arg("fsck").arg(p("layer")))
            .and_then(|_| run(Command::new(FERROFS).arg("extract").arg(p("layer")).arg(&x)));
        match readers {
            Err(e) => failures.push(format!("{name}: {e}")),
            Ok(_) => {
                for d in compare::compare_trees(b.path(), &x, &CompareOptions::strict()) {
                    failures.push(format!("{name}: kernel vs extract: {d}"));
                }
            }
        }
        let fm = FuseMount::new(Path::new(FERROFS), p("layer").as_os_str(), &p("fuse"), &[]);
        for d in compare::compare_trees(b.path(), &fm.dir, &CompareOptions::strict()) {
            failures.push(format!("{name}: kernel vs FUSE: {d}"));
        }
        fm.unmount();
        if let (Some(up), true) = (&up, upstream_too) {
            match index_cmd(&up.path, &tar, &p("up-idx"), false) {
                Err(e) => failures.push(format!("{name}: mkfs.erofs 1.9.4: {e}")),
                Ok(_) => {
                    cat(&p("up-idx"), &tar, &p("up-layer"));
                    let u = LoopMount::new(&p("up-layer"), &[]).unwrap();
                    for d in compare::compare_trees(u.path(), b.path(), &CompareOptions::strict()) {
                        failures.push(format!("{name}: upstream's index vs ours: {d}"));
                    }
                    let (ours, theirs) = (idx_len, fs::metadata(p("up-idx")).unwrap().len());
                    println!("{name}: index {ours} bytes, mkfs.erofs 1.9.4's {theirs}");
                }
            }
        }
        drop((a, b));
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// containerd 2.2's steps for a two-layer image: each layer's archive
/// (aufs whiteouts and an opaque directory in the upper one) indexed with
/// `--tar=i --aufs`, appended, loop-mounted, and the two stacked with
/// overlayfs: the result equals overlayfs over the full-data layers and
/// over mkfs.erofs 1.9.4's indexes.
#[test]
fn tar_index_layers_stack_under_overlayfs() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("mkfs_tar_index_stack");
    let (l1, l2) = (work.join("l1"), work.join("l2"));
    for d in ["etc", "var/lib/gone", "opq"] {
        fs::create_dir_all(l1.join(d)).unwrap();
    }
    for (f, body) in [
        ("etc/keep", "keep\n"),
        ("etc/del", "deleted above\n"),
        ("var/lib/gone/x", "x\n"),
        ("opq/old", "hidden by the opaque dir\n"),
    ] {
        fs::write(l1.join(f), body).unwrap();
    }
    for d in ["etc", "var/lib", "opq"] {
        fs::create_dir_all(l2.join(d)).unwrap();
    }
    for f in ["etc/.wh.del", "var/lib/.wh.gone", "opq/.wh..wh..opq"] {
        fs::write(l2.join(f), "").unwrap();
    }
    fs::write(l2.join("etc/new"), "new\n".repeat(300)).unwrap();
    fs::write(l2.join("opq/fresh"), "fresh\n").unwrap();
    let link = dropin_link(&work);
    let mut failures = Vec::new();
    let mut tools: Vec<(&str, PathBuf)> = vec![("ours", link.clone())];
    match tools::mkfs_next() {
        Some(up) => tools.push(("upstream", up.path)),
        None => println!("mkfs.erofs 1.9.4 not found: its indexes are not compared"),
    }
    let mut stacks = Vec::new();
    for l in ["l1", "l2"] {
        let tar = work.join(format!("{l}.tar"));
        sh(&format!(
            "tar --format=posix --numeric-owner -C {} -cf {} .",
            work.join(l).display(),
            tar.display()
        ))
        .expect("tar");
        run(Command::new(&link)
            .args(["--tar=f", "--aufs", "--quiet"])
            .arg(work.join(format!("{l}-full.img")))
            .arg(&tar))
        .expect("full layer");
        for (who, mkfs) in &tools {
            let idx = work.join(format!("{l}-{who}.idx"));
            if let Err(e) = index_cmd(mkfs, &tar, &idx, true) {
                failures.push(format!("{who} {l}: {e}"));
            }
            cat(&idx, &tar, &work.join(format!("{l}-{who}.layer")));
        }
    }
    if !failures.is_empty() {
        ferrofs_testkit::tmp::finish(&work, &failures);
    }
    for kind in ["full.img", "ours.layer", "upstream.layer"] {
        let img = |l: &str| work.join(format!("{l}-{kind}"));
        if !img("l1").exists() {
            continue;
        }
        let m1 = LoopMount::new(&img("l1"), &[]).unwrap();
        let m2 = LoopMount::new(&img("l2"), &[]).unwrap();
        let o = LoopMount::overlay(&[m2.path(), m1.path()]).unwrap();
        stacks.push((kind, o, m2, m1));
    }
    let (first, rest) = stacks.split_first().unwrap();
    for (kind, o, _, _) in rest {
        // mkfs.erofs 1.9.4 keeps whole seconds of a PAX mtime only.
        let cmp = CompareOptions {
            compare_nsec: !kind.starts_with("upstream"),
            ..CompareOptions::strict()
        };
        for d in compare::compare_trees(first.1.path(), o.path(), &cmp) {
            failures.push(format!("stacked {} vs {kind}: {d}", first.0));
        }
    }
    let mut listed = Vec::new();
    let root = stacks[1].1.path().to_path_buf();
    let mut todo = vec![root.clone()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            listed.push(p.strip_prefix(&root).unwrap().display().to_string());
            if p.is_dir() {
                todo.push(p);
            }
        }
    }
    listed.sort();
    let want = [
        "etc",
        "etc/keep",
        "etc/new",
        "opq",
        "opq/fresh",
        "var",
        "var/lib",
    ];
    if listed != want {
        failures.push(format!("stacked indexes list {listed:?}, want {want:?}"));
    }
    drop(stacks);
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// What `--tar=i` does not take, refused by name before anything is
/// written: mkfs.erofs's headerball mode, block map files, an incremental
/// build, a `--blobdev` (mkfs.erofs 1.9.4 writes nothing for one either).
#[test]
fn tar_index_refusals_name_the_option() {
    let work = work_dir!("mkfs_tar_index_refused");
    let src = work.join("t");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), "f\n").unwrap();
    let tar = work.join("t.tar");
    sh(&format!("tar -C {} -cf {} .", src.display(), tar.display())).expect("tar");
    let img = work.join("out.img");
    run(Command::new(FERROFS)
        .args(["mkfs", "--quiet"])
        .arg(&img)
        .arg(&src))
    .expect("base image");
    let before = fs::read(&img).unwrap();
    for (args, says) in [
        (vec!["--tar=headerball"], "--tar=headerball"),
        (vec!["--tar=i,blocks.map"], "block map files"),
        (vec!["--tar=x"], "--tar=x"),
        (vec!["--tar=i", "--incremental"], "incrementally"),
        (
            vec!["--tar=i", "--chunksize=4096", "--blobdev=blob"],
            "--blobdev is not taken",
        ),
    ] {
        let o = Command::new(FERROFS)
            .args(["mkfs", "--quiet"])
            .args(&args)
            .arg(&img)
            .arg(&tar)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(
            fs::read(&img).unwrap(),
            before,
            "{args:?} changed the image"
        );
    }
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// An index whose appended archive is cut short (a partial copy) fails
/// saying so, naming the file whose data is missing; an index with no
/// archive at all says the extra device was not given.
#[test]
fn a_cut_archive_is_named_as_such() {
    let work = work_dir!("mkfs_tar_index_cut");
    let src = work.join("tree");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("first"), corpus::mixed_bytes(40_000, 1)).unwrap();
    fs::write(src.join("last"), corpus::mixed_bytes(40_000, 2)).unwrap();
    let tar = work.join("t.tar");
    sh(&format!(
        "tar --format=posix -C {} -cf {} first last",
        src.display(),
        tar.display()
    ))
    .unwrap();
    let idx = work.join("idx");
    run(Command::new(FERROFS)
        .args(["mkfs", "--tar=i", "--quiet"])
        .arg(&idx)
        .stdin(fs::File::open(&tar).unwrap()))
    .unwrap();
    let mut failures = Vec::new();
    let layer = work.join("layer");
    let whole = fs::read(&idx).unwrap();
    let archive = fs::read(&tar).unwrap();
    for (what, cut, says) in [
        ("cut mid-way", archive.len() / 2, "is cut short"),
        ("absent", 0, "which was not given"),
    ] {
        let mut bytes = whole.clone();
        bytes.extend_from_slice(&archive[..cut]);
        fs::write(&layer, &bytes).unwrap();
        let o = Command::new(FERROFS)
            .args(["cat"])
            .arg(&layer)
            .arg("/last")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        if o.status.success() || !err.contains(says) || !err.contains("/last") {
            failures.push(format!(
                "archive {what}: cat /last: {:?}: {err}",
                o.status.code()
            ));
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}
