//! `ferrofs mkfs --tar`: archives of the corner-case tree written by GNU
//! tar (gnu and posix formats, sparse files, xattrs), bsdtar and Python's
//! tarfile are built into images, read from the file and from a pipe.
//! Each image is mounted by the kernel and compared strictly with the
//! image `ferrofs mkfs` builds from the same archive extracted by GNU tar;
//! file and pipe input give identical images; fsck.erofs 1.8.6 passes.
//! Broken archives fail with the member and the reason, never a panic;
//! memory stays flat for a large archive on a pipe. Compressed archives
//! (`--ungzip`, `--unxz`) give the plain archive's image.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::{corpus, tools};

use crate::FERROFS;
use ferrofs_testkit::process::sh;
use ferrofs_testkit::work_dir;

const PY_TAR: &str = r#"
import sys, tarfile, os
fmt = {"gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}[sys.argv[1]]
src, out = sys.argv[2], sys.argv[3]
with tarfile.open(out, "w", format=fmt) as t:
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for n in sorted(dirs + files):
            p = os.path.join(root, n)
            if os.path.islink(p) or not os.path.isdir(p):
                import stat
                if stat.S_ISSOCK(os.lstat(p).st_mode):
                    continue
            t.add(p, arcname=os.path.relpath(p, src), recursive=False)
"#;

#[test]
fn tar_archives_match_extracted_trees() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("mkfs_tar");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    fs::write(work.join("mk.py"), PY_TAR).unwrap();
    let s = src.display();
    let w = work.display();
    let mut makers: Vec<(&str, String)> = vec![
        (
            "gnu",
            format!("tar --format=gnu --sparse --numeric-owner -C {s} -cf {w}/gnu.tar ."),
        ),
        (
            "posix",
            format!(
                "tar --format=posix --sparse --xattrs --xattrs-include='*' --numeric-owner \
                 -C {s} -cf {w}/posix.tar ."
            ),
        ),
        (
            // The same archive into the 2025 format (48-bit, metabox,
            // compressed directories, encoded extents).
            "posix48",
            format!(
                "tar --format=posix --sparse --xattrs --xattrs-include='*' --numeric-owner \
                 -C {s} -cf {w}/posix48.tar ."
            ),
        ),
        (
            "posix-acls",
            format!("tar --format=posix --acls --numeric-owner -C {s} -cf {w}/posix-acls.tar ."),
        ),
        ("pygnu", format!("python3 {w}/mk.py gnu {s} {w}/pygnu.tar")),
        ("pypax", format!("python3 {w}/mk.py pax {s} {w}/pypax.tar")),
    ];
    if Command::new("bsdtar").arg("--version").output().is_ok() {
        makers.push((
            "bsdtar",
            format!("bsdtar --format=pax --numeric-owner -C {s} -cf {w}/bsdtar.tar ."),
        ));
    } else {
        println!("bsdtar not installed: its archive is not tested");
    }
    let fsck = tools::fsck_upstream();
    let mut failures = Vec::new();
    for (name, make) in &makers {
        // GNU tar warns (exit 1) about the socket it leaves out.
        let _ = sh(make);
        let tar = work.join(format!("{name}.tar"));
        if !tar.exists() {
            failures.push(format!("{name}: archive not written"));
            continue;
        }
        let x = work.join(format!("{name}-x"));
        fs::create_dir_all(&x).unwrap();
        // Each archive is extracted by the kind of tool that wrote it.
        let extract = if name.starts_with("py") {
            format!(
                "python3 -c 'import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2], numeric_owner=True)' {} {}",
                tar.display(),
                x.display()
            )
        } else if *name == "bsdtar" {
            format!(
                "bsdtar --numeric-owner --xattrs -xpf {} -C {}",
                tar.display(),
                x.display()
            )
        } else {
            let what = if name.ends_with("acls") {
                "--acls"
            } else {
                "--xattrs --xattrs-include='*'"
            };
            format!(
                "tar {what} --numeric-owner -xpf {} -C {}",
                tar.display(),
                x.display()
            )
        };
        if let Err(e) = sh(&extract) {
            failures.push(format!("{name}: extract: {e}"));
            continue;
        }
        let extra: &[&str] = match *name {
            "posix" => &["-zlz4hc", "-C65536", "-Efragments"],
            "posix48" => &[
                "-zzstd",
                "-C65536",
                "-Efragments,dedupe,48bit",
                "-m4096:lz4hc",
                "--zD",
            ],
            _ => &[],
        };
        let img_file = work.join(format!("{name}-file.img"));
        let img_pipe = work.join(format!("{name}-pipe.img"));
        let img_dir = work.join(format!("{name}-dir.img"));
        // A fixed build time: archives without a root entry give the root
        // the build time (as mkfs.erofs does), and file and pipe builds
        // must not differ by the second they ran in.
        let e = format!("-T 1700000000 --mkfs-time {}", extra.join(" "));
        let steps = [
            format!(
                "{FERROFS} mkfs --quiet {e} --tar {} {}",
                img_file.display(),
                tar.display()
            ),
            format!(
                "cat {} | {FERROFS} mkfs --quiet -j1 {e} --tar=f {} -",
                tar.display(),
                img_pipe.display()
            ),
            format!(
                "{FERROFS} mkfs --quiet {e} {} {}",
                img_dir.display(),
                x.display()
            ),
        ];
        if let Some(err) = steps.iter().find_map(|c| sh(c).err()) {
            failures.push(format!("{name}: {err}"));
            continue;
        }
        if fs::read(&img_file).ok() != fs::read(&img_pipe).ok() {
            failures.push(format!("{name}: file and pipe input give different images"));
        }
        // Python's archives have no entry for the root, and Python keeps
        // mtimes as floats and sets none on symlinks when extracting, so
        // its reference tree cannot be exact about times (the GNU tar and
        // bsdtar archives check them to the nanosecond).
        let mut opts = CompareOptions::strict();
        if name.starts_with("py") {
            opts.skip_root_mode_owner = true;
            opts.compare_mtime = false;
        }
        if *name == "bsdtar" {
            // bsdtar does not restore the time of the directory it
            // extracts into, and libarchive writes times before 1970 as
            // `SECONDS.NANOS` with a negative SECONDS where PAX (and GNU
            // tar) mean the decimal number: those four files read back
            // differently by design.
            opts.skip_root_mtime = true;
            opts.ignore_paths = ["minus_one", "before_1970", "dir_before_1970", "fifo_1969"]
                .iter()
                .map(|n| PathBuf::from("times").join(n))
                .collect();
        }
        match (
            LoopMount::new(&img_file, &[]),
            LoopMount::new(&img_dir, &[]),
        ) {
            (Ok(a), Ok(b)) => {
                for d in compare::compare_trees(b.path(), a.path(), &opts) {
                    failures.push(format!("{name}: extracted tree vs tar image: {d}"));
                }
            }
            (a, b) => failures.push(format!("{name}: mount {:?} {:?}", a.err(), b.err())),
        }
        let fsck = match *name {
            "posix48" => tools::fsck_next(),
            _ => fsck.clone(),
        };
        if let Some(f) = &fsck {
            if let Err(e) = sh(&format!("{} {}", f.path.display(), img_file.display())) {
                failures.push(format!("{name}: fsck.erofs: {e}"));
            }
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// A 256 MiB archive on a pipe: data goes to the spool file, memory stays flat.
#[test]
fn piped_archive_memory_stays_flat() {
    let work = work_dir!("mkfs_tar_mem");
    let d = work.join("d");
    fs::create_dir_all(&d).unwrap();
    let chunk = corpus::random_bytes(1 << 20, 5);
    let mut f = fs::File::create(d.join("big.bin")).unwrap();
    for _ in 0..256 {
        std::io::Write::write_all(&mut f, &chunk).unwrap();
    }
    drop(f);
    let img = work.join("m.img");
    let out = sh(&format!(
        "tar -C {} -cf - . | /usr/bin/time -f '%M' {FERROFS} mkfs --quiet --tar {} - 2>&1 >/dev/null",
        d.display(),
        img.display()
    ))
    .expect("mkfs --tar from a pipe");
    let kb: u64 = out
        .trim()
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .parse()
        .expect("rss");
    assert!(kb < 100 * 1024, "peak RSS {kb} KiB for a 256 MiB archive");
    assert!(fs::metadata(&img).unwrap().len() >= 256 << 20);
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// `--aufs` and `--ovlfs-strip` give the tree mkfs.erofs 1.8.6 gives, for
/// an aufs layer (`.wh.NAME`, `.wh..wh..opq`) and an overlayfs one
/// (character device 0:0, `trusted.overlay.opaque`). Times are whole
/// seconds: mkfs.erofs 1.8.6 misreads PAX fractions that GNU tar writes
/// without trailing zeros (`.78441241` as .078441241 s).
#[test]
fn overlay_metadata_like_upstream() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let Some(up) = tools::mkfs_upstream() else {
        println!("skipped: mkfs.erofs 1.8.6 not found");
        return;
    };
    let work = work_dir!("mkfs_tar_ovl");
    let w = work.display();
    sh(&format!(
        "set -e; cd {w}; mkdir -p aufs/d aufs/e ovl/x ovl/y; echo hi > aufs/d/keep; \
         touch aufs/d/.wh.gone aufs/e/.wh..wh..opq; echo a > ovl/x/f; mknod ovl/x/gone c 0 0; \
         setfattr -n trusted.overlay.opaque -v y ovl/y; \
         find aufs ovl -exec touch -h -d @1700000000 {{}} +; \
         tar -C aufs -cf aufs.tar .; \
         tar --format=posix --xattrs --xattrs-include='*' -C ovl -cf ovl.tar ."
    ))
    .expect("layers");
    let mut failures = Vec::new();
    for (tar, flags) in [
        ("aufs.tar", &["--aufs"][..]),
        ("aufs.tar", &["--aufs", "--ovlfs-strip=1"][..]),
        ("ovl.tar", &[][..]),
        ("ovl.tar", &["--ovlfs-strip=1"][..]),
    ] {
        let ours = work.join("ours.img");
        let theirs = work.join("theirs.img");
        let f = flags.join(" ");
        if let Err(e) = sh(&format!(
            "{FERROFS} mkfs --quiet --tar {f} {} {w}/{tar} && {} --quiet --tar=f {f} {} {w}/{tar}",
            ours.display(),
            up.path.display(),
            theirs.display()
        )) {
            failures.push(e);
            continue;
        }
        match (LoopMount::new(&theirs, &[]), LoopMount::new(&ours, &[])) {
            (Ok(a), Ok(b)) => {
                for d in compare::compare_trees(a.path(), b.path(), &CompareOptions::strict()) {
                    failures.push(format!("{tar} {f}: upstream vs ours: {d}"));
                }
            }
            (a, b) => failures.push(format!("{tar} {f}: mount {:?} {:?}", a.err(), b.err())),
        }
    }
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `--ungzip`, `--unxz` and `--unlzma` (mkfs.erofs's spellings): a gzip (also
/// multi-member), xz, lzma or lzip archive, from a file or a pipe, gives
/// the very image its plain archive gives; a plain archive passes through;
/// `=FILE` writes the plain archive there; corrupt or truncated streams
/// fail with the archive's name and leave no image; and mkfs.erofs 1.8.6's
/// image of the same `.tar.gz` reads back equal through the kernel.
#[test]
fn compressed_archives_give_the_plain_archives_image() {
    let work = work_dir!("mkfs_tar_z");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    let w = work.display();
    // GNU tar warns (exit 1) about the socket it leaves out.
    let _ = sh(&format!(
        "tar --format=posix --sparse --xattrs --xattrs-include='*' --numeric-owner \
         -C {} -cf {w}/plain.tar .",
        src.display()
    ));
    sh(&format!(
        "set -e; cd {w}; gzip -c plain.tar > a.tar.gz; \
         head -c 100000 plain.tar | gzip -c > m.tar.gz; tail -c +100001 plain.tar | gzip -c >> m.tar.gz; \
         xz -c plain.tar > a.tar.xz; xz --format=lzma -c plain.tar > a.tar.lzma"
    ))
    .expect("compressed archives");
    let mut cases = vec![
        ("a.tar.gz", "--ungzip"),
        ("m.tar.gz", "--ungzip"),
        ("plain.tar", "--ungzip"),
        ("a.tar.xz", "--unxz"),
        ("a.tar.lzma", "--unlzma"),
        ("plain.tar", "--unxz"),
    ];
    if sh(&format!("cd {w}; lzip -c plain.tar > a.tar.lz")).is_ok() {
        cases.push(("a.tar.lz", "--unxz"));
    } else {
        println!("lzip not installed: lzip input is not tested");
    }
    let reference = work.join("ref.img");
    sh(&format!(
        "{FERROFS} mkfs --quiet -zlz4hc --tar {} {w}/plain.tar",
        reference.display()
    ))
    .expect("image of the plain archive");
    let want = fs::read(&reference).unwrap();
    let mut failures = Vec::new();
    let img = work.join("z.img");
    for (archive, flag) in &cases {
        for pipe in [false, true] {
            let cmd = if pipe {
                format!(
                    "cat {w}/{archive} | {FERROFS} mkfs --quiet -zlz4hc --tar {flag} {} -",
                    img.display()
                )
            } else {
                format!(
                    "{FERROFS} mkfs --quiet -zlz4hc --tar {flag} {} {w}/{archive}",
                    img.display()
                )
            };
            match sh(&cmd) {
                Ok(_) if fs::read(&img).unwrap() == want => {}
                Ok(_) => failures.push(format!("{archive} {flag} (pipe {pipe}): other image")),
                Err(e) => failures.push(e),
            }
        }
    }
    // The decompressed archive written out, and data read from it.
    let copy = work.join("copy.tar");
    match sh(&format!(
        "cat {w}/a.tar.gz | {FERROFS} mkfs --quiet -zlz4hc --tar --ungzip={} {} -",
        copy.display(),
        img.display()
    )) {
        Ok(_) => {
            if fs::read(&img).unwrap() != want {
                failures.push("--ungzip=FILE: other image".into());
            }
            if fs::read(&copy).unwrap() != fs::read(work.join("plain.tar")).unwrap() {
                failures.push("--ungzip=FILE: the copy is not the plain archive".into());
            }
        }
        Err(e) => failures.push(e),
    }
    // Broken streams, and a copy that would overwrite the archive.
    let gz = fs::read(work.join("a.tar.gz")).unwrap();
    let mut flipped = gz.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x55;
    fs::write(work.join("bad.tar.gz"), &flipped).unwrap();
    let xz = fs::read(work.join("a.tar.xz")).unwrap();
    fs::write(work.join("short.tar.xz"), &xz[..xz.len() / 2]).unwrap();
    for (archive, flags) in [
        ("bad.tar.gz", "--ungzip".to_string()),
        ("short.tar.xz", "--unxz".to_string()),
        ("a.tar.gz", format!("--ungzip={w}/a.tar.gz")),
    ] {
        let bad = work.join(format!("{archive}.img"));
        let out = Command::new("bash")
            .args([
                "-c",
                &format!(
                    "{FERROFS} mkfs --quiet --tar {flags} {} {w}/{archive}",
                    bad.display()
                ),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !err.contains(archive) || bad.exists() {
            failures.push(format!(
                "{archive} {flags}: status {:?}, stderr {err:?}, image left: {}",
                out.status.code(),
                bad.exists()
            ));
        }
    }
    if fs::read(work.join("a.tar.gz")).unwrap() != gz {
        failures.push("the archive was overwritten".into());
    }
    // mkfs.erofs 1.8.6 on the same .tar.gz (a tree of whole-second times:
    // see overlay_metadata_like_upstream).
    match (can_mount(), tools::mkfs_upstream()) {
        (Ok(()), Some(up)) => {
            let r = sh(&format!(
                "set -e; cd {w}; mkdir -p s/d; echo hello > s/d/a.txt; seq 1 50000 > s/n.txt; \
                 ln -s d/a.txt s/link; head -c 70000 /dev/urandom > s/d/r.bin; \
                 find s -exec touch -h -d @1700000000 {{}} +; tar -C s -czf s.tar.gz .; \
                 {FERROFS} mkfs --quiet -zlz4hc --tar --ungzip ours.img s.tar.gz; \
                 {} --quiet -zlz4hc --tar=f --ungzip theirs.img s.tar.gz",
                up.path.display()
            ));
            match r {
                Err(e) => failures.push(e),
                Ok(_) => match (
                    LoopMount::new(&work.join("theirs.img"), &[]),
                    LoopMount::new(&work.join("ours.img"), &[]),
                ) {
                    (Ok(a), Ok(b)) => {
                        for d in
                            compare::compare_trees(a.path(), b.path(), &CompareOptions::strict())
                        {
                            failures.push(format!("s.tar.gz: upstream vs ours: {d}"));
                        }
                    }
                    (a, b) => failures.push(format!("mount {:?} {:?}", a.err(), b.err())),
                },
            }
        }
        (Err(why), _) => println!("upstream comparison skipped: {why}"),
        (_, None) => println!("upstream comparison skipped: mkfs.erofs 1.8.6 not found"),
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// An archive without a root entry and with members whose parents have no
/// entries (as Python's tarfile and many layer tools write them): the root
/// (0777, build time) and the implicit directories (0755 plus the parent's
/// group/other write bits, the parent's owner and mtime) are as mkfs.erofs
/// 1.8.6 makes them, compared through the kernel.
#[test]
fn implicit_directories_like_upstream() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let Some(up) = tools::mkfs_upstream() else {
        println!("skipped: mkfs.erofs 1.8.6 not found");
        return;
    };
    let work = work_dir!("mkfs_tar_implicit");
    let w = work.display();
    let py = r#"
import sys, tarfile, io
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    d = tarfile.TarInfo("x"); d.type = tarfile.DIRTYPE; d.mode = 0o770; d.uid = 5; d.gid = 6; d.mtime = 1000
    t.addfile(d)
    for name, mtime in [("x/y/z", 2000), ("a/b/c/f", 3000), ("x/w/v/u", 4000)]:
        f = tarfile.TarInfo(name); f.size = 3; f.mtime = mtime; f.uid = 7
        t.addfile(f, io.BytesIO(b"abc"))
"#;
    fs::write(work.join("mk.py"), py).unwrap();
    let ours = work.join("ours.img");
    let theirs = work.join("theirs.img");
    let mut failures = Vec::new();
    match sh(&format!(
        "set -e; cd {w}; python3 mk.py p.tar; export SOURCE_DATE_EPOCH=1600000000; \
         {FERROFS} mkfs --quiet --tar {} p.tar; {} --quiet --tar=f {} p.tar",
        ours.display(),
        up.path.display(),
        theirs.display()
    )) {
        Err(e) => failures.push(e),
        Ok(_) => match (LoopMount::new(&theirs, &[]), LoopMount::new(&ours, &[])) {
            (Ok(a), Ok(b)) => {
                for d in compare::compare_trees(a.path(), b.path(), &CompareOptions::strict()) {
                    failures.push(format!("upstream vs ours: {d}"));
                }
                // What the comparison covers, spelled out.
                use std::os::unix::fs::MetadataExt;
                let m = |p: &str| fs::metadata(b.path().join(p)).unwrap();
                let got =
                    [m("."), m("x/y"), m("a/b")].map(|m| (m.mode() & 0o7777, m.uid(), m.mtime()));
                let want = [
                    (0o777, 0, 1_600_000_000),
                    (0o775, 5, 1000),
                    (0o777, 0, 1_600_000_000),
                ];
                if got != want {
                    failures.push(format!("root, x/y, a/b: {got:?}, want {want:?}"));
                }
            }
            (a, b) => failures.push(format!("mount {:?} {:?}", a.err(), b.err())),
        },
    }
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
