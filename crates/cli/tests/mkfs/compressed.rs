//! `ferrofs mkfs` with compression against the kernel: every algorithm x
//! pcluster size (4 KiB ... 1 MiB) x ztailpacking on the testkit's corner
//! tree plus compressible text files around block and pcluster boundaries.
//! For each image: the kernel mount equals the source strictly, fsck.erofs
//! 1.8.6 accepts it, `ferrofs fsck` passes and `ferrofs extract` equals the
//! mount, the dump shows pclusters of the requested algorithm (and inline
//! tails with ztailpacking), and `-j1` and `-j2` give identical bytes.
//! Also: --compress-hints with two algorithms, and incompressible files,
//! compressed formats and files compression does not shrink stored flat. Needs root and loop devices; otherwise prints why it skips.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::corpus;
use ferrofs_testkit::process::run_with_timeout;
use ferrofs_testkit::{can_mount, LoopMount};
use ferrofs_testkit::{tools, verify};

use crate::{dump_json, FERROFS};
use ferrofs_testkit::work_dir;
const LIMIT: Duration = Duration::from_secs(600);

fn run(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let o = run_with_timeout(cmd, LIMIT).map_err(|e| format!("{cmd:?}: {e}"))?;
    if o.status.is_some_and(|s| s.success()) {
        Ok(o.stdout)
    } else {
        Err(format!(
            "{cmd:?} failed ({:?}): {}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

fn text(lines: usize, seed: usize) -> Vec<u8> {
    (0..lines)
        .map(|i| {
            format!(
                "{} the quick brown fox {} jumps over the lazy dog {}\n",
                i + seed,
                i * 7 % 13,
                seed
            )
        })
        .collect::<String>()
        .into_bytes()
}

/// The kernel's mount of `img` equals `src` strictly, and fsck.erofs
/// (when installed) accepts the image.
fn kernel_and_fsck_accept(img: &Path, src: &Path) {
    let mnt = LoopMount::new(img, &[]).expect("kernel mount");
    let d = compare::compare_trees(src, mnt.path(), &CompareOptions::strict());
    assert!(d.is_empty(), "kernel vs source: {d:?}");
    drop(mnt);
    if let Some(fsck) = tools::fsck_upstream() {
        run(Command::new(&fsck.path).arg(img)).unwrap();
    }
}

/// Compressible files of sizes around block and pcluster boundaries.
fn add_text_files(dir: &Path) {
    let t = dir.join("text");
    fs::create_dir_all(&t).unwrap();
    let body = text(60_000, 3); // ~3.2 MiB
    for (name, size) in [
        ("empty", 0usize),
        ("one", 1),
        ("b4095", 4095),
        ("b4096", 4096),
        ("b4097", 4097),
        ("b5000", 5000),
        ("p16383", 16383),
        ("p16385", 16385),
        ("p65535", 65535),
        ("p65537", 65537),
        ("m1plus3", (1 << 20) + 3),
        ("exact3blocks", 3 * 4096),
        // Two whole 1 MiB pclusters and half a third.
        ("big2m5", (5 << 20) / 2),
    ] {
        fs::write(t.join(name), &body[..size]).unwrap();
    }
    let mut half = body[..300_000].to_vec();
    half.extend(corpus::random_bytes(300_000, 9));
    fs::write(t.join("half-random"), half).unwrap();
    fs::write(t.join("zeros"), vec![0u8; 3 << 20]).unwrap();
    // Real machine code (this test's own executable): binary data, which
    // LZ4HC level 12 compresses with ferrofs's own encoder. 1.5 MiB: one
    // whole 1 MiB pcluster and a part.
    let exe = fs::read(std::env::current_exe().unwrap()).unwrap();
    fs::write(t.join("elf"), &exe[..exe.len().min(3 << 19)]).unwrap();
}

struct Case {
    alg: &'static str,
    pcluster: u64,
    ztail: bool,
}

fn check(work: &Path, src: &Path, c: &Case) -> Vec<String> {
    let mut f = Vec::new();
    let name = format!(
        "{}-{}{}",
        c.alg.replace(',', "_"),
        c.pcluster,
        if c.ztail { "-zt" } else { "" }
    );
    let img = work.join(format!("{name}.img"));
    let mut opts = vec![format!("-z{}", c.alg), format!("-C{}", c.pcluster)];
    if c.ztail {
        opts.push("-Eztailpacking".into());
    }
    f.extend(verify::build_and_read_back(
        FERROFS.as_ref(),
        &name,
        &opts,
        &img,
        src,
        work,
    ));
    if !img.exists() {
        return f;
    }
    let alg_name = match c.alg.split(',').next().unwrap_or("") {
        "lz4hc" => "lz4",
        a => a,
    };
    let img_s = img.to_string_lossy().into_owned();
    match dump_json(&[&img_s]) {
        Ok(v) => {
            let n = v["statistics"]["pclusters"][alg_name]["pclusters"]
                .as_u64()
                .unwrap_or(0);
            if n == 0 {
                f.push(format!("{name}: no {alg_name} pclusters in the dump"));
            }
        }
        Err(e) => f.push(format!("{name}: dump: {e}")),
    }
    if c.ztail {
        match dump_json(&[&img_s, "--path", "text/b5000"]) {
            Ok(v) if !v["compression"]["inline_tail"].is_null() => {}
            Ok(v) => f.push(format!(
                "{name}: text/b5000 has no inline tail: {}",
                v["compression"]
            )),
            Err(e) => f.push(format!("{name}: dump --path: {e}")),
        }
    }
    let _ = fs::remove_file(&img);
    f
}

#[test]
fn compressed_images_match_kernel() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("mkfs_compressed");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    add_text_files(&src);
    let mut cases = Vec::new();
    for alg in ["lz4", "lz4hc,9", "lz4hc,12", "lzma", "deflate", "zstd"] {
        for pcluster in [4096u64, 16384, 65536, 1 << 20] {
            for ztail in [false, true] {
                cases.push(Case {
                    alg,
                    pcluster,
                    ztail,
                });
            }
        }
    }
    ferrofs_testkit::tmp::parallel_checks(&work, cases.len(), |i| check(&work, &src, &cases[i]));
}

#[test]
fn hints_pick_algorithms_and_incompressible_files_stay_flat() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("mkfs_hints");
    let src = work.join("tree");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("notes.txt"), text(50_000, 1)).unwrap();
    fs::write(src.join("data.log"), text(50_000, 2)).unwrap();
    fs::write(src.join("random.bin"), corpus::random_bytes(2 << 20, 5)).unwrap();
    let hints = work.join("hints");
    fs::write(&hints, "65536 1 \\.txt$\n").unwrap();
    let img = work.join("hints.img");
    run(Command::new(FERROFS)
        .args([
            "mkfs",
            "--quiet",
            "-zlz4hc:lzma",
            "-C16384",
            "--compress-hints",
        ])
        .arg(&hints)
        .arg(&img)
        .arg(&src))
    .unwrap();
    let img_s = img.to_string_lossy().into_owned();
    let v = dump_json(&[&img_s]).unwrap();
    for alg in ["lz4", "lzma"] {
        assert!(
            v["statistics"]["pclusters"][alg]["pclusters"]
                .as_u64()
                .unwrap_or(0)
                > 0,
            "no {alg} pclusters: {}",
            v["statistics"]["pclusters"]
        );
    }
    let txt = dump_json(&[&img_s, "--path", "notes.txt"]).unwrap();
    assert_eq!(txt["compression"]["algorithms"][0], "lzma");
    let log = dump_json(&[&img_s, "--path", "data.log"]).unwrap();
    assert_eq!(log["compression"]["algorithms"][0], "lz4");
    let rnd = dump_json(&[&img_s, "--path", "random.bin"]).unwrap();
    let layout = rnd["layout"].as_str().unwrap_or("");
    assert!(layout.starts_with("flat"), "random.bin stored as {layout}");
    kernel_and_fsck_accept(&img, &src);
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// `--max-extent-bytes` bounds what any pcluster decodes to (3 MB of zeros
/// would otherwise fit in one block); and a file whose start does not
/// compress but whose middle does (short lines, then long ones) is still
/// compressed, as mkfs.erofs compresses it: the sample asks the middle too.
#[test]
fn extent_cap_and_a_slow_start() {
    let work = work_dir!("mkfs_compressed_cap");
    let src = work.join("tree");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("zeros"), vec![0u8; 3_000_000]).unwrap();
    let nums: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
    fs::write(src.join("nums"), nums.as_bytes()).unwrap();
    let mut failures = Vec::new();
    let capped = work.join("capped.img");
    let plain = work.join("plain.img");
    for (img, extra) in [
        (&capped, &["--max-extent-bytes=16384"][..]),
        (&plain, &[][..]),
    ] {
        if let Err(e) = run(Command::new(FERROFS)
            .args(["mkfs", "--quiet", "-zlz4", "-C4096"])
            .args(extra)
            .arg(img)
            .arg(&src))
        {
            failures.push(e);
        }
    }
    let extents = |img: &Path, path: &str| -> Vec<(u64, String)> {
        dump_json(&["--path", path, img.to_str().unwrap()])
            .ok()
            .and_then(|v| v["extents"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|e| {
                let len = e["len"].as_u64().unwrap_or(0);
                (len, e["map"]["type"].as_str().unwrap_or("").to_string())
            })
            .collect()
    };
    let capped_zeros = extents(&capped, "/zeros");
    let plain_zeros = extents(&plain, "/zeros");
    if capped_zeros.is_empty() || capped_zeros.iter().any(|(len, _)| *len > 16384) {
        failures.push(format!("capped extents of /zeros: {capped_zeros:?}"));
    }
    if !plain_zeros.iter().any(|(len, _)| *len > 512 << 10) {
        failures.push(format!(
            "uncapped /zeros has no long extent: {plain_zeros:?}"
        ));
    }
    let nums_ext = extents(&plain, "/nums");
    if !nums_ext.iter().any(|(_, t)| t == "pcluster") {
        failures.push(format!(
            "/nums stored flat: {:?}",
            &nums_ext[..nums_ext.len().min(3)]
        ));
    }
    if let Some(up) = tools::mkfs_upstream() {
        let theirs = work.join("up.img");
        let len = |p: &Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        match run(Command::new(&up.path)
            .args(["--quiet", "-zlz4", "-C4096"])
            .arg(&theirs)
            .arg(&src))
        {
            Ok(_) if len(&plain) * 100 <= len(&theirs) * 102 => {}
            Ok(_) => failures.push(format!(
                "{} B vs mkfs.erofs 1.8.6 {} B",
                len(&plain),
                len(&theirs)
            )),
            Err(e) => failures.push(e),
        }
    }
    if let Some(f) = tools::fsck_upstream() {
        if let Err(e) = run(Command::new(&f.path).arg(&capped)) {
            failures.push(format!("fsck.erofs: {e}"));
        }
    }
    match can_mount() {
        Ok(()) => match LoopMount::new(&capped, &[]) {
            Ok(m) => {
                for d in compare::compare_trees(&src, m.path(), &CompareOptions::strict()) {
                    failures.push(format!("source vs capped image: {d}"));
                }
            }
            Err(e) => failures.push(format!("mount: {e}")),
        },
        Err(why) => println!("kernel comparison skipped: {why}"),
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// Files compression cannot help are stored flat, without the build's
/// codec where that is clear up front: gzip streams (one small, one past
/// the 4 MiB segment, which takes the sampled path) and a file whose
/// compressed pclusters and index would take its whole size (as
/// mkfs.erofs decides). A gzip magic in front of plain text is still
/// compressed: the magic only asks fast LZ4 first.
#[test]
fn compressed_formats_and_files_without_gain_stay_flat() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("mkfs_no_gain");
    let src = work.join("tree");
    fs::create_dir_all(&src).unwrap();
    let gzip = |name: &str, data: &[u8]| {
        let raw = work.join(name);
        fs::write(&raw, data).unwrap();
        let gz = run(Command::new("gzip").args(["-n", "-c"]).arg(&raw)).unwrap();
        fs::write(src.join(format!("{name}.gz")), gz).unwrap();
    };
    gzip("man.1", &text(2_000, 4));
    gzip("big", &corpus::random_bytes(5 << 20, 6));
    let mut fake = b"\x1f\x8b".to_vec();
    fake.extend_from_slice(&text(2_000, 5));
    fs::write(src.join("fake.gz"), &fake).unwrap();
    // 3 blocks: compressing saves one, but two blocks and the index are
    // more than the file.
    let mut edge = text(60, 6)[..3000].to_vec();
    edge.extend_from_slice(&corpus::random_bytes(5200, 7));
    fs::write(src.join("edge.bin"), &edge).unwrap();
    fs::write(src.join("notes.txt"), text(5_000, 8)).unwrap();
    let img = work.join("flat.img");
    run(Command::new(FERROFS)
        .args(["mkfs", "--quiet", "-zlz4hc,12", "-C16384"])
        .arg(&img)
        .arg(&src))
    .unwrap();
    let img_s = img.to_string_lossy().into_owned();
    for (name, flat) in [
        ("man.1.gz", true),
        ("big.gz", true),
        ("edge.bin", true),
        ("fake.gz", false),
        ("notes.txt", false),
    ] {
        let v = dump_json(&[&img_s, "--path", name]).unwrap();
        let layout = v["layout"].as_str().unwrap_or("").to_string();
        assert_eq!(
            layout.starts_with("flat"),
            flat,
            "{name} stored as {layout}"
        );
    }
    kernel_and_fsck_accept(&img, &src);
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}
