//! `ferrofs mkfs --incremental`: a layer put over an existing image, only
//! what changed appended. For images made by ferrofs (several option sets)
//! and by mkfs.erofs 1.9.4: the kernel reads the result exactly as the
//! layered tree (contents and metadata), fsck.erofs 1.9.4 and ferrofs fsck
//! accept it, every byte of the old image outside block 0 is unchanged,
//! unchanged files keep their inodes (their data is not appended again; a
//! file with only a new mode points at the old blocks),
//! and -j1 and -j2 give the same bytes. ferrofs keeps the root inode in
//! block 0, so an image with more than 2 MiB of metadata changes only
//! there too (unless its root's xattrs do not fit in block 0). A tar layer's whiteouts and opaque
//! directories delete from the image's tree. Failures (a broken archive,
//! a full disk, options the image cannot take) leave the image byte for
//! byte as it was. Needs root and loop devices for the kernel comparison;
//! otherwise prints why it skips.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs::Image;
use ferrofs_testkit::corpus;
use ferrofs_testkit::mount::can_mount;
use ferrofs_testkit::{tools, verify};

use super::{cp_a, FERROFS};

use ferrofs_testkit::tmp::finish;

mod root;

/// The old tree: the corner tree and files of several sizes.
fn old_tree(dir: &Path) {
    corpus::make_corner_tree(dir).unwrap();
    let t = dir.join("text");
    fs::create_dir_all(t.join("sub")).unwrap();
    for (k, size) in [100usize, 4097, 70000, 300_000, 5 << 20]
        .into_iter()
        .enumerate()
    {
        fs::write(t.join(format!("t{k}")), corpus::text_bytes(size, k as u64)).unwrap();
    }
    fs::write(t.join("sub/keep"), b"kept\n").unwrap();
}

/// The new tree: `old` copied, two files rewritten, one file's mode
/// changed, files and a directory added (nothing removed: a directory
/// layer only adds and replaces).
fn new_tree(old: &Path, new: &Path) {
    cp_a(old, new);
    let t = new.join("text");
    fs::write(t.join("t1"), corpus::text_bytes(9000, 77)).unwrap();
    fs::write(t.join("t3"), corpus::mixed_bytes(300_000, 78)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(t.join("t2"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::create_dir(new.join("added")).unwrap();
    for k in 0..3u64 {
        fs::write(
            new.join(format!("added/n{k}")),
            corpus::text_bytes(20000 << k, 300 + k),
        )
        .unwrap();
    }
    fs::write(t.join("sub/new"), b"new file\n").unwrap();
}

/// Runs `ferrofs mkfs --json ARGS`; its summary.
fn summary(args: &[&str]) -> Result<serde_json::Value, String> {
    let out = verify::run_ok(Command::new(FERROFS).args(["mkfs", "--json"]).args(args))?;
    serde_json::from_slice(&out).map_err(|e| format!("summary: {e}"))
}

/// Runs `ferrofs mkfs --json ARGS`; the `incremental` part of the summary.
fn mkfs(args: &[&str]) -> Result<serde_json::Value, String> {
    Ok(summary(args)?["incremental"].clone())
}

fn n(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(u64::MAX)
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The checks every incremental result gets: the old image's bytes
/// outside block 0 unchanged, the kernel and the fscks read the layered
/// tree `expect`.
fn check_result(
    name: &str,
    old_img: &Path,
    new_img: &Path,
    expect: &Path,
    work: &Path,
    mounts: bool,
) -> Vec<String> {
    let mut f = Vec::new();
    let (a, b) = (fs::read(old_img).unwrap(), fs::read(new_img).unwrap());
    if b.len() < a.len() || a[4096..] != b[4096..a.len()] {
        f.push(format!(
            "{name}: bytes of the old image outside block 0 changed"
        ));
    }
    if mounts {
        f.extend(verify::image_reads_as_source(
            Path::new(FERROFS),
            name,
            new_img,
            expect,
            work,
        ));
    } else if let Some(fsck) = tools::fsck_next() {
        if let Err(e) = verify::run_ok(Command::new(&fsck.path).arg(new_img)) {
            f.push(format!("{name}: fsck.erofs {}: {e}", fsck.version));
        }
    }
    f
}

/// Whether the kernel can mount images here (why not is printed).
fn kernel() -> bool {
    let mounts = can_mount();
    if let Err(why) = &mounts {
        println!("kernel comparison skipped: {why}");
    }
    mounts.is_ok()
}

/// The nid `path` has in `img`.
fn nid(img: &Path, path: &str) -> u64 {
    let image = Image::open_path(img).unwrap();
    let ino = image.raw().lookup_path(path.as_bytes(), false).unwrap();
    ino.nid().0
}

/// `--incremental` with `opts` and `layer` over copies of `old_img`, at -j1
/// and at -j2: the -j1 result and its summary, when both ran (a failure
/// recorded otherwise, and when they differ).
fn incremental_j1_j2(
    name: &str,
    old_img: &Path,
    opts: &[&str],
    layer: &Path,
    work: &Path,
    failures: &mut Vec<String>,
) -> Option<(PathBuf, serde_json::Value)> {
    let mut results = Vec::new();
    for j in ["1", "2"] {
        let img = work.join(format!("{name}-j{j}.img"));
        fs::copy(old_img, &img).unwrap();
        let mut args: Vec<&str> = opts.to_vec();
        args.extend(["--incremental", "-j", j, path_str(&img), path_str(layer)]);
        match mkfs(&args) {
            Ok(s) => results.push((img, s)),
            Err(e) => failures.push(format!("{name} -j{j}: incremental: {e}")),
        }
    }
    let [(img, s), (img2, _)] = <[_; 2]>::try_from(results).ok()?;
    if fs::read(&img).unwrap() != fs::read(&img2).unwrap() {
        failures.push(format!("{name}: -j1 and -j2 give other images"));
    }
    Some((img, s))
}

#[test]
fn layers_over_ferrofs_images() {
    let work = ferrofs_testkit::work_dir!("incr_ferrofs");
    let (old, new) = (work.join("old"), work.join("new"));
    old_tree(&old);
    new_tree(&old, &new);
    let mounts = kernel();
    let mut failures = Vec::new();
    for (name, opts) in [
        ("plain", &[][..]),
        ("lz4hc-64k", &["-zlz4hc,12", "-C65536"][..]),
        ("lz4-ztail", &["-zlz4", "-Eztailpacking"][..]),
        ("zstd-48bit", &["-zzstd", "-C16384", "-E48bit"][..]),
    ] {
        let o = work.join(format!("{name}-old.img"));
        let mut args: Vec<&str> = opts.to_vec();
        args.extend([path_str(&o), path_str(&old)]);
        if let Err(e) = mkfs(&args) {
            failures.push(format!("{name}: old image: {e}"));
            continue;
        }
        let Some((img, s)) = incremental_j1_j2(name, &o, opts, &new, &work, &mut failures) else {
            continue;
        };
        let (img, s) = (&img, &s);
        failures.extend(check_result(name, &o, img, &new, &work, mounts));
        // Unchanged files keep their inodes; t4 (5 MiB) is not appended.
        for p in ["text/t4", "text/t0", "text/sub/keep"] {
            if nid(&o, p) != nid(img, p) {
                failures.push(format!("{name}: unchanged {p} got a new inode"));
            }
        }
        if n(s, "appended_bytes") > 2 << 20 || n(s, "unchanged_files") < 100 {
            failures.push(format!("{name}: summary {s}"));
        }
        // t2 changed only its mode: a new inode, on the image's blocks
        // when they are flat.
        if *name == *"plain" {
            let blk = |img: &Path| {
                let image = Image::open_path(img).unwrap();
                let ino = image.raw().lookup_path(b"text/t2", false).unwrap();
                ino.startblk()
            };
            if n(s, "shared_files") != 1 || blk(&o).is_none() || blk(&o) != blk(img) {
                failures.push(format!("{name}: text/t2 not on the old blocks: {s}"));
            }
        }
        if n(s, "old_bytes") != fs::metadata(&o).unwrap().len() {
            failures.push(format!("{name}: old_bytes in {s}"));
        }
        // The same layer again changes nothing: the image is left as it is.
        let again = work.join(format!("{name}-again.img"));
        fs::copy(img, &again).unwrap();
        let mut args: Vec<&str> = opts.to_vec();
        args.extend(["--incremental", path_str(&again), path_str(&new)]);
        match mkfs(&args) {
            Ok(s) if n(&s, "appended_bytes") == 0 && n(&s, "new_inodes") == 0 => {
                if fs::read(img).unwrap() != fs::read(&again).unwrap() {
                    failures.push(format!("{name}: the same layer again changed the image"));
                }
            }
            Ok(s) => failures.push(format!("{name}: the same layer again wrote {s}")),
            Err(e) => failures.push(format!("{name}: the same layer again: {e}")),
        }
    }
    finish(&work, &failures);
}

#[test]
fn layers_over_mkfs_erofs_images() {
    let Some(up) = tools::mkfs_next() else {
        println!("mkfs.erofs 1.9.x not found: skipped");
        return;
    };
    let work = ferrofs_testkit::work_dir!("incr_upstream");
    let (old, new) = (work.join("old"), work.join("new"));
    old_tree(&old);
    new_tree(&old, &new);
    let mounts = kernel();
    let mut failures = Vec::new();
    for (name, opts) in [("plain", &[][..]), ("lz4", &["-zlz4"][..])] {
        let o = work.join(format!("{name}-old.img"));
        if let Err(e) = tools::build_image(&up, opts, &old, &o) {
            failures.push(format!("{name}: mkfs.erofs: {e}"));
            continue;
        }
        let img = work.join(format!("{name}.img"));
        fs::copy(&o, &img).unwrap();
        let mut args: Vec<&str> = opts.to_vec();
        args.extend(["--incremental=data", path_str(&img), path_str(&new)]);
        match mkfs(&args) {
            Ok(s) => {
                // mkfs.erofs keeps the root in block 0: it is rewritten
                // there, and directories the layer leaves alone stay.
                if s["root_in_place"] != true {
                    failures.push(format!("{name}: root not rewritten in place: {s}"));
                }
                if nid(&o, "special") != nid(&img, "special") {
                    failures.push(format!("{name}: an untouched directory moved"));
                }
                failures.extend(check_result(name, &o, &img, &new, &work, mounts));
            }
            Err(e) => failures.push(format!("{name}: incremental: {e}")),
        }
    }
    finish(&work, &failures);
}

/// Writes a tar archive of `dir`'s contents (paths relative to it).
fn tar_of(dir: &Path, out: &Path) {
    let st = Command::new("tar")
        .args(["--format=pax", "-C"])
        .arg(dir)
        .arg("-cf")
        .arg(out)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn tar_layer_whiteouts_and_opaque_directories() {
    let work = ferrofs_testkit::work_dir!("incr_tar");
    let old = work.join("old");
    for d in ["a/deep", "b", "c"] {
        fs::create_dir_all(old.join(d)).unwrap();
    }
    fs::write(old.join("a/x"), corpus::text_bytes(10000, 1)).unwrap();
    fs::write(old.join("a/deep/y"), b"y\n").unwrap();
    fs::write(old.join("b/gone"), b"gone\n").unwrap();
    fs::write(old.join("b/stays"), b"stays\n").unwrap();
    fs::write(old.join("c/hidden"), b"hidden\n").unwrap();
    fs::write(old.join("top"), b"top\n").unwrap();
    // The layer: delete b/gone and a (a directory), make c opaque with a
    // new file in it, add d/new.
    let layer = work.join("layer");
    for d in ["b", "c", "d"] {
        fs::create_dir_all(layer.join(d)).unwrap();
    }
    fs::write(layer.join("b/.wh.gone"), b"").unwrap();
    fs::write(layer.join(".wh.a"), b"").unwrap();
    fs::write(layer.join("c/.wh..wh..opq"), b"").unwrap();
    fs::write(layer.join("c/fresh"), b"fresh\n").unwrap();
    fs::write(layer.join("d/new"), corpus::text_bytes(50000, 2)).unwrap();
    // What the layered tree is: old with the layer applied by hand
    // (directories the layer names take its metadata).
    let expect = work.join("expect");
    cp_a(&old, &expect);
    fs::remove_dir_all(expect.join("a")).unwrap();
    fs::remove_file(expect.join("b/gone")).unwrap();
    fs::remove_file(expect.join("c/hidden")).unwrap();
    fs::create_dir_all(expect.join("d")).unwrap();
    fs::copy(layer.join("c/fresh"), expect.join("c/fresh")).unwrap();
    fs::copy(layer.join("d/new"), expect.join("d/new")).unwrap();
    let tarball = work.join("layer.tar");
    // Fixed times everywhere, so the expected tree's metadata is known.
    for root in [&old, &layer, &expect] {
        let st = Command::new("find")
            .arg(root)
            .args(["-exec", "touch", "-h", "-d", "@1700000000", "{}", "+"])
            .status()
            .unwrap();
        assert!(st.success());
    }
    tar_of(&layer, &tarball);
    let mounts = kernel();
    let mut failures = Vec::new();
    let o = work.join("old.img");
    let img = work.join("new.img");
    if let Err(e) = mkfs(&[path_str(&o), path_str(&old)]) {
        failures.push(format!("old image: {e}"));
    } else {
        fs::copy(&o, &img).unwrap();
        match mkfs(&[
            "--tar=f",
            "--incremental",
            path_str(&img),
            path_str(&tarball),
        ]) {
            Ok(_) => failures.extend(check_result("tar", &o, &img, &expect, &work, mounts)),
            Err(e) => failures.push(format!("incremental: {e}")),
        }
    }
    finish(&work, &failures);
}

#[test]
fn failures_leave_the_image_as_it_was() {
    let work = ferrofs_testkit::work_dir!("incr_fail");
    let old = work.join("old");
    fs::create_dir_all(&old).unwrap();
    fs::write(old.join("f"), corpus::text_bytes(30000, 5)).unwrap();
    let o = work.join("old.img");
    let mut failures = Vec::new();
    if let Err(e) = mkfs(&[path_str(&o), path_str(&old)]) {
        finish(&work, &[format!("old image: {e}")]);
        return;
    }
    let before = fs::read(&o).unwrap();
    let unchanged = |what: &str, failures: &mut Vec<String>| {
        if fs::read(&o).unwrap() != before {
            failures.push(format!("{what}: the image changed"));
        }
    };
    // A truncated archive (cut in a member's data).
    let layer = work.join("layer");
    fs::create_dir_all(&layer).unwrap();
    fs::write(layer.join("big"), corpus::random_bytes(100_000, 3)).unwrap();
    let tarball = work.join("layer.tar");
    tar_of(&layer, &tarball);
    let cut = work.join("cut.tar");
    fs::write(&cut, &fs::read(&tarball).unwrap()[..60_000]).unwrap();
    match mkfs(&["--tar=f", "--incremental", path_str(&o), path_str(&cut)]) {
        Ok(s) => failures.push(format!("truncated archive accepted: {s}")),
        Err(_) => unchanged("truncated archive", &mut failures),
    }
    // A new root too large for its room in block 0 (3000 bytes of xattrs).
    let big_root = work.join("big-root");
    fs::create_dir_all(&big_root).unwrap();
    match ferrofs_testkit::xattr::set(&big_root, "user.big", &corpus::text_bytes(3000, 9)) {
        Ok(()) => match mkfs(&["--incremental", path_str(&o), path_str(&big_root)]) {
            Ok(s) => failures.push(format!("a root too large for block 0 accepted: {s}")),
            Err(e) if !e.contains("root inode needs") => {
                failures.push(format!("a root too large for block 0: error {e}"))
            }
            Err(_) => unchanged("a root too large for block 0", &mut failures),
        },
        Err(e) => println!("large root case skipped: no user xattrs here: {e}"),
    }
    // Options the image cannot take: named in the error.
    for (opts, word) in [
        (&["-zlz4hc", "-Efragments"][..], "fragments"),
        (&["-zlz4"][..], "compress"),
        (&["-E48bit"][..], "48-bit"),
    ] {
        let mut args = opts.to_vec();
        args.extend(["--incremental", path_str(&o), path_str(&layer)]);
        match mkfs(&args) {
            Ok(s) => failures.push(format!("{opts:?} accepted: {s}")),
            Err(e) if !e.contains(word) => failures.push(format!("{opts:?}: error {e}")),
            Err(_) => unchanged(&format!("{opts:?}"), &mut failures),
        }
    }
    // A full disk: the image on a small tmpfs, a layer that does not fit.
    if ferrofs_testkit::is_root() {
        let mnt = work.join("small");
        fs::create_dir_all(&mnt).unwrap();
        let size = format!("size={}k", before.len() / 1024 + 64);
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &size, "tmpfs"])
            .arg(&mnt)
            .status();
        if st.is_ok_and(|s| s.success()) {
            let img = mnt.join("img");
            fs::write(&img, &before).unwrap();
            fs::write(layer.join("big"), corpus::random_bytes(1 << 20, 4)).unwrap();
            match mkfs(&["--incremental", path_str(&img), path_str(&layer)]) {
                Ok(s) => failures.push(format!("full disk: accepted: {s}")),
                Err(_) if fs::read(&img).unwrap() != before => {
                    failures.push("full disk: the image changed".into())
                }
                Err(_) => {}
            }
            let _ = Command::new("umount").arg(&mnt).status();
        } else {
            println!("full-disk case skipped: tmpfs mount failed");
        }
    } else {
        println!("full-disk case skipped: not root");
    }
    finish(&work, &failures);
}

#[test]
fn dropin_takes_incremental() {
    let work = ferrofs_testkit::work_dir!("incr_dropin");
    let (old, new) = (work.join("old"), work.join("new"));
    fs::create_dir_all(&old).unwrap();
    fs::write(old.join("a"), b"a\n").unwrap();
    cp_a(&old, &new);
    fs::write(new.join("b"), b"b\n").unwrap();
    let link = work.join("mkfs.erofs");
    std::os::unix::fs::symlink(FERROFS, &link).unwrap();
    let o = work.join("old.img");
    let img = work.join("new.img");
    let mut failures = Vec::new();
    let run = |args: &[&Path]| verify::run_ok(Command::new(&link).args(args));
    if let Err(e) = run(&[&o, &old]) {
        failures.push(format!("old image: {e}"));
    } else {
        fs::copy(&o, &img).unwrap();
        match run(&[Path::new("--incremental"), &img, &new]) {
            Ok(_) => failures.extend(check_result(
                "dropin",
                &o,
                &img,
                &new,
                &work,
                can_mount().is_ok(),
            )),
            Err(e) => failures.push(format!("incremental: {e}")),
        }
    }
    finish(&work, &failures);
}
