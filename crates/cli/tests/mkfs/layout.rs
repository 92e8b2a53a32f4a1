//! Layout options of mkfs (as mkfs.erofs spells them, run through the
//! drop-in): `--offset` (the image inside a larger file), `--sort=none`
//! (tar data in archive order) and `--dsunit` (aligned file data), each
//! checked against mkfs.erofs 1.8.6's images and read back through the
//! kernel.

use std::fs;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::mount::{can_mount, LoopDev, LoopMount};
use ferrofs_testkit::verify::run_ok as run;
use ferrofs_testkit::{corpus, tools, verify};

use crate::{dropin_link, FERROFS};
use ferrofs_testkit::work_dir;

/// Where the data of file `path` of `img` starts (`None`: no block data).
fn data_start(img: &Path, path: &str) -> Result<Option<u64>, String> {
    let out = run(Command::new(FERROFS)
        .args(["dump", "--json", "--path", path])
        .arg(img))?;
    let v: serde_json::Value = serde_json::from_slice(&out).map_err(|e| e.to_string())?;
    Ok(v["extents"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| matches!(e["map"]["type"].as_str(), Some("raw" | "pcluster")))
        .and_then(|e| e["map"]["pos"].as_u64()))
}

/// `--dsunit=4`: the data of every file with data in blocks (flat,
/// chunk-based, compressed, a long symlink's target) starts at a multiple
/// of 4 blocks, in our images and (but for chunk-based files, whose chunks
/// it lays out as one run) in mkfs.erofs 1.8.6's; the kernel and both
/// fscks read ours as the tree.
#[test]
fn dsunit_aligns_every_files_data() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("layout_dsunit");
    let src = work.join("tree");
    fs::create_dir_all(src.join("d")).unwrap();
    let files = ["a", "b", "d/c", "d/e", "long"];
    for (k, f) in files[..4].iter().enumerate() {
        let mut data = corpus::random_bytes(3000 + 7000 * k, k as u64);
        data.extend(std::iter::repeat_n(b'x', 20000 * k));
        fs::write(src.join(f), data).unwrap();
    }
    std::os::unix::fs::symlink("t".repeat(4000), src.join("long")).unwrap();
    let link = dropin_link(&work);
    let unit = 4 * 4096;
    let mut failures = Vec::new();
    for flags in [
        vec!["--dsunit=4"],
        vec!["--dsunit=4", "-zlz4hc", "-C16384"],
        vec!["--dsunit=4", "--chunksize=8192"],
    ] {
        let ours = work.join("ours.img");
        let _ = fs::remove_file(&ours);
        run(Command::new(&link).args(&flags).arg(&ours).arg(&src)).expect("mkfs");
        let mut imgs = vec![("ours", ours.clone())];
        let chunked = flags.iter().any(|f| f.starts_with("--chunksize"));
        if let (Some(up), false) = (tools::mkfs_upstream(), chunked) {
            let theirs = work.join("theirs.img");
            let _ = fs::remove_file(&theirs);
            run(Command::new(&up.path).args(&flags).arg(&theirs).arg(&src)).expect("upstream");
            imgs.push(("mkfs.erofs", theirs));
        }
        for (who, img) in &imgs {
            for f in files {
                match data_start(img, &format!("/{f}")) {
                    Ok(Some(pos)) if pos % unit != 0 => {
                        failures.push(format!("{flags:?} {who}: /{f} data at {pos}"))
                    }
                    Ok(_) => {}
                    Err(e) => failures.push(format!("{flags:?} {who}: dump /{f}: {e}")),
                }
            }
        }
        failures.extend(verify::image_reads_as_source(
            FERROFS.as_ref(),
            &flags.join(" "),
            &ours,
            &src,
            &work,
        ));
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// `--offset N`: the image starts N bytes into the file. Ours: the bytes
/// from N on are the image built without it and the bytes before are
/// zeros; the kernel (loop offset), `ferrofs fsck` and fsck.erofs 1.8.6
/// read it. mkfs.erofs 1.8.6's `--offset` image: `ferrofs fsck` accepts
/// it and `ferrofs extract --offset` gives what the kernel shows. (Of the
/// bundled example tree: on the corner tree mkfs.erofs 1.8.6 writes a
/// corrupt image with `--offset`, which the kernel and its own fsck.erofs
/// reject too.)
#[test]
fn offset_images_both_ways() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("dropin_offset");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    let link = dropin_link(&work);
    let flags = ["-zlz4hc", "-Eztailpacking", "--quiet"];
    let mut failures = Vec::new();
    let plain = work.join("plain.img");
    run(Command::new(&link).args(flags).arg(&plain).arg(&src)).expect("plain image");
    let plain = fs::read(&plain).unwrap();
    let kernel_reads =
        |img: &Path, off: usize, tree: &Path, failures: &mut Vec<String>| match LoopMount::new(
            img,
            &[&format!("offset={off}")],
        ) {
            Ok(m) => {
                for d in compare::compare_trees(tree, m.path(), &CompareOptions::strict()) {
                    failures.push(format!("{}: kernel: {d}", img.display()));
                }
            }
            Err(e) => failures.push(format!("{}: mount: {e}", img.display())),
        };
    for off in [1usize << 20, 12345] {
        let img = work.join(format!("o{off}.img"));
        run(Command::new(&link)
            .args(flags)
            .arg(format!("--offset={off}"))
            .arg(&img)
            .arg(&src))
        .expect("offset image");
        let bytes = fs::read(&img).unwrap();
        if bytes.len() != off + plain.len()
            || bytes[..off].iter().any(|&b| b != 0)
            || bytes[off..] != plain[..]
        {
            failures.push(format!(
                "--offset={off}: not zeros and then the plain image"
            ));
        }
        let fsck = Command::new(FERROFS)
            .args(["fsck", "--offset", &off.to_string()])
            .arg(&img)
            .output()
            .unwrap();
        if !fsck.status.success() {
            failures.push(format!("--offset={off}: ferrofs fsck: {fsck:?}"));
        }
        if let Some(up) = tools::fsck_upstream() {
            if let Err(e) = run(Command::new(&up.path)
                .arg(format!("--offset={off}"))
                .arg(&img))
            {
                failures.push(format!("--offset={off}: fsck.erofs {}: {e}", up.version));
            }
        }
        // A loop device's offset is in whole sectors.
        if off % 512 == 0 {
            kernel_reads(&img, off, &src, &mut failures);
        }
    }
    // An offset that leaves no room: refused, nothing written.
    let img = work.join("huge.img");
    let out = Command::new(&link)
        .args(["--offset=18446744073709551615", "--quiet"])
        .arg(&img)
        .arg(&src)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || !err.contains("--offset 18446744073709551615: ") || img.exists() {
        failures.push(format!("huge --offset: {}, stderr {err:?}", out.status));
    }
    if let Some(up) = tools::mkfs_upstream() {
        let off = 1 << 20;
        let img = work.join("upstream.img");
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tree");
        run(Command::new(&up.path)
            .args(flags)
            .arg(format!("--offset={off}"))
            .arg(&img)
            .arg(&example))
        .expect("mkfs.erofs --offset");
        let out = work.join("upstream-out");
        match run(Command::new(FERROFS)
            .args(["extract", "--offset", &off.to_string()])
            .arg(&img)
            .arg(&out))
        {
            Ok(_) => kernel_reads(&img, off, &out, &mut failures),
            Err(e) => failures.push(format!("extract --offset of mkfs.erofs's image: {e}")),
        }
        if let Err(e) = run(Command::new(FERROFS)
            .args(["fsck", "--offset", &off.to_string()])
            .arg(&img))
        {
            failures.push(format!("fsck --offset of mkfs.erofs's image: {e}"));
        }
    } else {
        println!("mkfs.erofs 1.8.6 not found: upstream image not read");
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// `--sort=none` with `--tar`, no compression and `-E noinline_data`: file
/// data in the order the archive holds it, as mkfs.erofs 1.8.6 lays it
/// out (data positions from `ferrofs dump` of both images); `--sort=path`
/// (the default) keeps path order; the kernel reads both as the tree.
#[test]
fn sort_none_keeps_archive_order() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("dropin_sort");
    let src = work.join("tree");
    fs::create_dir_all(src.join("m")).unwrap();
    let files = ["z.bin", "a.bin", "m/inner.bin", "b.bin"];
    for (k, f) in files.iter().enumerate() {
        fs::write(src.join(f), corpus::random_bytes(5000 + 4000 * k, k as u64)).unwrap();
    }
    // Whole seconds: a ustar header keeps no more.
    run(Command::new("touch")
        .args(["-d", "@1700000000"])
        .args(files.iter().map(|f| src.join(f)))
        .arg(src.join("m"))
        .arg(&src))
    .expect("touch");
    let archive = work.join("a.tar");
    run(Command::new("tar")
        .arg("-C")
        .arg(&src)
        .arg("-cf")
        .arg(&archive)
        .args([
            "--no-recursion",
            ".",
            "z.bin",
            "a.bin",
            "m",
            "m/inner.bin",
            "b.bin",
        ]))
    .expect("tar");
    let link = dropin_link(&work);
    // Where each file's data starts.
    let order = |img: &Path| -> Result<Vec<u64>, String> {
        files
            .iter()
            .map(|f| {
                let out = run(Command::new(FERROFS)
                    .args(["dump", "--json", "--path", &format!("/{f}")])
                    .arg(img))?;
                let v: serde_json::Value =
                    serde_json::from_slice(&out).map_err(|e| e.to_string())?;
                v["extents"][0]["map"]["pos"]
                    .as_u64()
                    .ok_or_else(|| format!("{f}: no data position"))
            })
            .collect()
    };
    let mut failures = Vec::new();
    for sort in ["none", "path"] {
        let flags = [
            "--tar",
            &format!("--sort={sort}"),
            "-Enoinline_data",
            "--quiet",
        ];
        let ours = work.join(format!("{sort}.img"));
        run(Command::new(&link).args(flags).arg(&ours).arg(&archive)).expect("mkfs --tar");
        let pos = order(&ours).expect("positions");
        let mut want = pos.clone();
        want.sort_unstable();
        // Archive order is the list order; path order puts z.bin last.
        let in_archive_order = pos == want;
        if in_archive_order != (sort == "none") {
            failures.push(format!(
                "--sort={sort}: data positions {pos:?} for {files:?}"
            ));
        }
        if let Some(up) = tools::mkfs_upstream() {
            let theirs = work.join(format!("u-{sort}.img"));
            run(Command::new(&up.path)
                .args(flags)
                .arg(&theirs)
                .arg(&archive))
            .expect("upstream");
            let up_pos = order(&theirs).expect("upstream positions");
            let rank = |p: &[u64]| {
                let mut idx: Vec<usize> = (0..p.len()).collect();
                idx.sort_by_key(|&i| p[i]);
                idx
            };
            if rank(&pos) != rank(&up_pos) {
                failures.push(format!(
                    "--sort={sort}: ours {pos:?}, mkfs.erofs {up_pos:?}"
                ));
            }
        }
        match LoopMount::new(&ours, &[]) {
            Ok(m) => {
                for d in compare::compare_trees(&src, m.path(), &CompareOptions::strict()) {
                    failures.push(format!("--sort={sort}: kernel vs tree: {d}"));
                }
            }
            Err(e) => failures.push(format!("--sort={sort}: mount: {e}")),
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// `--blobdev FILE --chunksize N`: the chunks go to FILE, the image's one
/// extra device. The kernel (the blob on a loop device) and `ferrofs mount
/// --device` show the tree;
/// `ferrofs fsck --device` and fsck.erofs 1.8.6 accept it; the image with
/// the blob appended (the device's mapped address) reads the same without
/// `--device`; mkfs.erofs 1.8.6's blob image is read as the kernel reads
/// it; without --chunksize the option is refused and nothing is written.
#[test]
fn blobdev_holds_the_chunks() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("layout_blobdev");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    let link = dropin_link(&work);
    let mut failures = Vec::new();
    let kernel_view = |img: &Path, blob: &Path, tree: &Path, failures: &mut Vec<String>| {
        let dev = match LoopDev::new(blob) {
            Ok(d) => d,
            Err(e) => return failures.push(format!("losetup {}: {e}", blob.display())),
        };
        match LoopMount::new(img, &[&format!("device={}", dev.0)]) {
            Ok(m) => {
                for d in compare::compare_trees(tree, m.path(), &CompareOptions::strict()) {
                    failures.push(format!(
                        "{}: kernel vs {}: {d}",
                        img.display(),
                        tree.display()
                    ));
                }
            }
            Err(e) => failures.push(format!("{}: mount: {e}", img.display())),
        }
    };
    let (img, blob) = (work.join("b.img"), work.join("b.blob"));
    run(Command::new(&link)
        .args(["--chunksize=8192", "--quiet"])
        .arg(format!("--blobdev={}", blob.display()))
        .arg(&img)
        .arg(&src))
    .expect("mkfs --blobdev");
    kernel_view(&img, &blob, &src, &mut failures);
    if let Err(e) = run(Command::new(FERROFS)
        .arg("fsck")
        .arg("--device")
        .arg(&blob)
        .arg(&img))
    {
        failures.push(format!("ferrofs fsck --device: {e}"));
    }
    if let Some(up) = tools::fsck_upstream() {
        if let Err(e) = run(Command::new(&up.path)
            .arg(format!("--device={}", blob.display()))
            .arg(&img))
        {
            failures.push(format!("fsck.erofs {} --device: {e}", up.version));
        }
    }
    // The FUSE mount with the blob as its device.
    let mnt = work.join("fuse");
    fs::create_dir_all(&mnt).unwrap();
    match run(Command::new(FERROFS)
        .arg("mount")
        .arg("--device")
        .arg(&blob)
        .arg(&img)
        .arg(&mnt))
    {
        Ok(_) => {
            for d in compare::compare_trees(&src, &mnt, &CompareOptions::strict()) {
                failures.push(format!("ferrofs mount --device vs source: {d}"));
            }
            let _ = Command::new("fusermount3").arg("-u").arg(&mnt).status();
        }
        Err(e) => failures.push(format!("ferrofs mount --device: {e}")),
    }
    // The blob appended: mapped after the image's own blocks.
    let flat = work.join("flat.img");
    let mut bytes = fs::read(&img).unwrap();
    bytes.extend(fs::read(&blob).unwrap());
    fs::write(&flat, bytes).unwrap();
    let out = work.join("flat-out");
    match run(Command::new(FERROFS).arg("extract").arg(&flat).arg(&out)) {
        Ok(_) => {
            for d in compare::compare_trees(&src, &out, &CompareOptions::strict()) {
                failures.push(format!("flat image: extract vs source: {d}"));
            }
        }
        Err(e) => failures.push(format!("extract of the flat image: {e}")),
    }
    if let Some(up) = tools::mkfs_upstream() {
        let (uimg, ublob) = (work.join("u.img"), work.join("u.blob"));
        // mkfs.erofs 1.8.6 writes into an existing blob file only.
        fs::write(&ublob, b"").unwrap();
        run(Command::new(&up.path)
            .args(["--chunksize=8192", "--quiet"])
            .arg(format!("--blobdev={}", ublob.display()))
            .arg(&uimg)
            .arg(&src))
        .expect("mkfs.erofs --blobdev");
        let out = work.join("u-out");
        match run(Command::new(FERROFS)
            .arg("extract")
            .arg("--device")
            .arg(&ublob)
            .arg(&uimg)
            .arg(&out))
        {
            Ok(_) => kernel_view(&uimg, &ublob, &out, &mut failures),
            Err(e) => failures.push(format!("extract --device of mkfs.erofs's image: {e}")),
        }
    }
    let (img, blob) = (work.join("n.img"), work.join("n.blob"));
    let o = Command::new(&link)
        .arg(format!("--blobdev={}", blob.display()))
        .arg(&img)
        .arg(&src)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.success() || !err.contains("--chunksize") || img.exists() || blob.exists() {
        failures.push(format!(
            "--blobdev without --chunksize: {}, {err:?}",
            o.status
        ));
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// A piped `--tar=f --sort=none -Enoinline_data` layer (containerd's
/// differ with `mkfs_options = ["--sort=none"]`) is written straight into
/// the image: while the archive is half fed, the build holds the staged
/// image and no unlinked scratch file (with `--sort=path` it spools, which
/// shows the probe sees one), and the image equals the one built from the
/// archive as a file, byte for byte; the kernel reads it as the tree.
#[test]
fn piped_archive_in_archive_order_is_not_spooled() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("tar_stream_in_place");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    for k in 0..8 {
        let f = src.join(format!("big{k}.bin"));
        fs::write(f, corpus::random_bytes(300_000 + 4097 * k, k as u64)).unwrap();
    }
    let archive = work.join("a.tar");
    // GNU tar warns (exit 1) about the socket it leaves out.
    let _ = ferrofs_testkit::process::sh(&format!(
        "tar --format=posix --xattrs --xattrs-include='*' --numeric-owner -C {} -cf {} .",
        src.display(),
        archive.display()
    ));
    let bytes = fs::read(&archive).unwrap();
    let mut failures = Vec::new();
    for sort in ["none", "path"] {
        let flags = [
            "mkfs",
            "--quiet",
            "--tar=f",
            &format!("--sort={sort}"),
            "-Enoinline_data",
        ];
        let piped = work.join(format!("{sort}-pipe.img"));
        let mut child = Command::new(FERROFS)
            .args(flags)
            .arg(&piped)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        use std::io::Write;
        let half = bytes.len() / 2;
        stdin.write_all(&bytes[..half]).unwrap();
        stdin.flush().unwrap();
        // Give the build time to take in the first half.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let scratch = unlinked_files(child.id());
        stdin.write_all(&bytes[half..]).unwrap();
        drop(stdin);
        assert!(child.wait().unwrap().success(), "--sort={sort} from a pipe");
        match (sort, scratch) {
            ("none", 0) | ("path", 1..) => {}
            (_, n) => failures.push(format!("--sort={sort}: {n} unlinked scratch files")),
        }
        let file = work.join(format!("{sort}-file.img"));
        run(Command::new(FERROFS).args(flags).arg(&file).arg(&archive)).expect("from the file");
        if fs::read(&piped).unwrap() != fs::read(&file).unwrap() {
            failures.push(format!("--sort={sort}: pipe and file images differ"));
        }
        let x = work.join(format!("{sort}-x"));
        fs::create_dir_all(&x).unwrap();
        run(Command::new("tar")
            .args(["--xattrs", "--xattrs-include=*", "--numeric-owner", "-xpf"])
            .arg(&archive)
            .arg("-C")
            .arg(&x))
        .expect("extract");
        match LoopMount::new(&piped, &[]) {
            Ok(m) => {
                for d in compare::compare_trees(&x, m.path(), &CompareOptions::strict()) {
                    failures.push(format!("--sort={sort}: kernel vs archive: {d}"));
                }
            }
            Err(e) => failures.push(format!("--sort={sort}: mount: {e}")),
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// How many deleted files process `pid` holds open (scratch files).
fn unlinked_files(pid: u32) -> usize {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    dir.filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.to_string_lossy().ends_with(" (deleted)"))
        .count()
}
