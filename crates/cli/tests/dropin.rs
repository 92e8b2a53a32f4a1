//! `mkfs.erofs` drop-in: the binary invoked through a symlink named
//! mkfs.erofs takes upstream's command lines. Each command line is run by
//! the drop-in and by mkfs.erofs 1.8.6; both images are mounted by the
//! kernel and must show the same tree (contents and metadata), and the
//! drop-in's image must equal `ferrofs mkfs` with the same flags byte for
//! byte. Unsupported options are refused by name and write nothing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::{corpus, tools};

const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

fn work_dir(name: &str) -> PathBuf {
    ferrofs_testkit::tmp::fresh_run_dir(&Path::new(env!("CARGO_TARGET_TMPDIR")).join(name))
}

use ferrofs_testkit::verify::run_ok as run;

#[test]
fn dropin_takes_upstream_command_lines() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir("dropin");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    fs::write(
        src.join("hints"),
        "65536 0 .*\\.txt$\n4096 1 ^dir\n".as_bytes(),
    )
    .unwrap();
    let link = work.join("mkfs.erofs");
    std::os::unix::fs::symlink(FERROFS, &link).unwrap();
    let hints = src.join("hints").to_string_lossy().into_owned();
    let lines: Vec<Vec<String>> = vec![
        vec!["-zlz4hc,12", "-C65536", "-Eztailpacking", "-T0", "-d0"],
        vec!["-zlzma,level=6", "-C16384", "-Efragments", "--quiet"],
        vec!["-zzstd", "-Ededupe", "-b", "4096", "-Lmylabel", "-d2"],
        vec![
            "-zlz4hc:lzma",
            "-C65536",
            "--compress-hints",
            &hints,
            "--all-root",
            "--quiet",
        ],
        vec![
            "-zdeflate",
            "-U",
            "6f1c5c3e-8a51-4f34-9b2e-1c8d0e5f7a21",
            "--exclude-path=dir",
            "--exclude-regex=^sym",
            "--preserve-mtime",
            "--quiet",
        ],
        vec!["-b2048", "-Eforce-inode-extended,noinline_data", "--quiet"],
        vec!["-zlz4", "-C4096", "--max-extent-bytes=16384", "--quiet"],
        vec![
            "--chunksize=8192",
            "-Eforce-chunk-indexes",
            "-T0",
            "--quiet",
        ],
        vec![
            "-Eforce-inode-compact,force-inode-blockmap",
            "--chunksize=4096",
            "-T1000000000",
            "--all-root",
            "--quiet",
        ],
        vec![
            "-zlz4",
            "--hard-dereference",
            "-Enosbcrc,^xattr-name-filter",
            "-Uclear",
            "-T1000000000",
            "--all-time",
            "--sort=path",
            "--quiet",
            "--quiet",
        ],
    ]
    .into_iter()
    .map(|l| l.into_iter().map(String::from).collect())
    .collect();
    let upstream = tools::mkfs_upstream();
    if upstream.is_none() {
        println!("mkfs.erofs 1.8.6 not found: upstream comparison skipped");
    }
    let mut failures = Vec::new();
    for (i, flags) in lines.iter().enumerate() {
        let ours = work.join(format!("d{i}.img"));
        let direct = work.join(format!("f{i}.img"));
        if let Err(e) = run(Command::new(&link).args(flags).arg(&ours).arg(&src)) {
            failures.push(format!("{flags:?}: drop-in: {e}"));
            continue;
        }
        let flags_direct: Vec<&String> = flags
            .iter()
            .filter(|f| {
                !f.starts_with("-d")
                    && !["--preserve-mtime", "--quiet", "--all-time", "--sort=path"]
                        .contains(&f.as_str())
            })
            .collect();
        match run(Command::new(FERROFS)
            .arg("mkfs")
            .arg("--quiet")
            .args(&flags_direct)
            .arg(&direct)
            .arg(&src))
        {
            Ok(_) if fs::read(&ours).ok() == fs::read(&direct).ok() => {}
            Ok(_) => failures.push(format!("{flags:?}: drop-in and ferrofs mkfs differ")),
            Err(e) => failures.push(format!("{flags:?}: ferrofs mkfs: {e}")),
        }
        let Some(up) = &upstream else { continue };
        let theirs = work.join(format!("u{i}.img"));
        if let Err(e) = run(Command::new(&up.path).args(flags).arg(&theirs).arg(&src)) {
            failures.push(format!("{flags:?}: mkfs.erofs {}: {e}", up.version));
            continue;
        }
        // What the superblocks say: features (checksum, xattr filter) and
        // the uuid when one was given; what the statistics say of forced
        // forms (chunk tables, inode sizes).
        let dump = |img: &Path| -> Option<serde_json::Value> {
            let out = Command::new(FERROFS)
                .args(["dump", "--json"])
                .arg(img)
                .output()
                .ok()?;
            serde_json::from_slice(&out.stdout).ok()
        };
        let mut keys = vec![("superblock", "feature_compat")];
        if flags.iter().any(|f| f.starts_with("-U")) {
            keys.push(("superblock", "uuid"));
        }
        let forced = |e: &str| flags.iter().any(|f| f.starts_with("-E") && f.contains(e));
        if forced("force-chunk-indexes") || forced("force-inode-blockmap") {
            keys.push(("statistics", "chunk_tables"));
        }
        if forced("force-inode-compact") {
            keys.push(("statistics", "extended_inodes"));
        }
        if let (Some(a), Some(b)) = (dump(&ours), dump(&theirs)) {
            for (part, k) in keys {
                if a[part][k] != b[part][k] {
                    failures.push(format!(
                        "{flags:?}: {k}: ours {} upstream {}",
                        a[part][k], b[part][k]
                    ));
                }
            }
            let tables = &a["statistics"]["chunk_tables"];
            let expect = if forced("force-chunk-indexes") {
                Some(("indexes", "block_map"))
            } else if forced("force-inode-blockmap") {
                Some(("block_map", "indexes"))
            } else {
                None
            };
            if let Some((on, off)) = expect {
                if tables[on].as_u64().unwrap_or(0) == 0 || !tables[off].is_null() {
                    failures.push(format!("{flags:?}: chunk tables {tables}"));
                }
            }
            if forced("force-inode-compact") && a["statistics"]["extended_inodes"] != 0 {
                failures.push(format!("{flags:?}: extended inodes in a compact image"));
            }
        } else {
            failures.push(format!("{flags:?}: dump --json failed"));
        }
        match (LoopMount::new(&ours, &[]), LoopMount::new(&theirs, &[])) {
            (Ok(a), Ok(b)) => {
                let diffs = compare::compare_trees(b.path(), a.path(), &CompareOptions::strict());
                for d in diffs {
                    failures.push(format!("{flags:?}: upstream vs drop-in: {d}"));
                }
            }
            (a, b) => failures.push(format!("{flags:?}: mount: {:?} {:?}", a.err(), b.err())),
        }
    }
    // Refused by name, nothing written.
    // Compression options without -z: mkfs.erofs ignores them, so the
    // drop-in warns and builds the plain image; `ferrofs mkfs` refuses.
    let plain = work.join("plain.img");
    let ignored = work.join("ignored.img");
    let fixed = ["-T0", "-Uclear", "--quiet"];
    match (
        run(Command::new(&link).args(fixed).arg(&plain).arg(&src)),
        run(Command::new(&link)
            .args(fixed)
            .args(["-C16384", "-Eztailpacking,fragments"])
            .arg(&ignored)
            .arg(&src)),
    ) {
        (Ok(_), Ok(_)) if fs::read(&plain).ok() == fs::read(&ignored).ok() => {}
        (a, b) => failures.push(format!("-C without -z in the drop-in: {a:?} {b:?}")),
    }
    if run(Command::new(FERROFS)
        .args(["mkfs", "--quiet", "-C16384"])
        .arg(work.join("refused.img"))
        .arg(&src))
    .is_ok()
    {
        failures.push("ferrofs mkfs -C without -z was accepted".into());
    }
    // -U random: a fresh version-4 uuid each time.
    let uuids: Vec<String> = (0..2)
        .map(|k| {
            let img = work.join(format!("r{k}.img"));
            run(Command::new(&link)
                .args(["-Urandom", "--quiet"])
                .arg(&img)
                .arg(&src))
            .unwrap();
            let out = Command::new(FERROFS)
                .args(["dump", "--json"])
                .arg(&img)
                .output()
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            v["superblock"]["uuid"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    if uuids[0] == uuids[1] || uuids[0].chars().nth(14) != Some('4') {
        failures.push(format!("-Urandom gave {uuids:?}"));
    }
    for bad in ["--blobdev=x.blob", "--dsunit=8", "-Mjunk", "-Ebogus"] {
        let img = work.join("bad.img");
        let out = Command::new(&link)
            .arg(bad)
            .arg(&img)
            .arg(&src)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let name = bad.split('=').next().unwrap();
        let name = if name.starts_with("-M") { "-M" } else { name };
        let name = name.trim_start_matches("-E");
        if out.status.success() || !err.contains(name) || img.exists() {
            failures.push(format!("{bad}: status {}, stderr {err:?}", out.status));
        }
    }
    // -E force-inode-compact over a file that needs the extended form
    // (the corner tree has a uid above 65535): refused, naming the file
    // and the reason, nothing written; mkfs.erofs refuses it too.
    let compact = |mkfs: &Path, img: &Path| {
        Command::new(mkfs)
            .args(["-Eforce-inode-compact", "-T0"])
            .arg(img)
            .arg(&src)
            .output()
            .unwrap()
    };
    let img = work.join("compact.img");
    let out = compact(&link, &img);
    let err = String::from_utf8_lossy(&out.stderr);
    let named = err.contains(&*src.to_string_lossy()) && err.contains("uid is above 65535");
    if out.status.success() || !named || img.exists() {
        failures.push(format!(
            "force-inode-compact: {}, stderr {err:?}",
            out.status
        ));
    }
    if let Some(up) = &upstream {
        if compact(&up.path, &work.join("ucompact.img"))
            .status
            .success()
        {
            failures.push("force-inode-compact: mkfs.erofs accepted the tree".into());
        }
    }
    if failures.is_empty() {
        let _ = ferrofs_testkit::tmp::remove_tree(&work);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
    let work = work_dir("dropin_offset");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    let link = work.join("mkfs.erofs");
    std::os::unix::fs::symlink(FERROFS, &link).unwrap();
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
    if failures.is_empty() {
        let _ = ferrofs_testkit::tmp::remove_tree(&work);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
    let work = work_dir("dropin_sort");
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
    let link = work.join("mkfs.erofs");
    std::os::unix::fs::symlink(FERROFS, &link).unwrap();
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
    if failures.is_empty() {
        let _ = ferrofs_testkit::tmp::remove_tree(&work);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
