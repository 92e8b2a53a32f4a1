//! Fragments, all-fragments and dedupe: images of the corner-case tree plus
//! text files around block and pcluster boundaries and duplicated files
//! (same bytes under other names, other mtimes and with xattrs). Every
//! image is mounted by the kernel and compared strictly with the source,
//! extracted by `ferrofs extract`, checked by `ferrofs fsck` and
//! `fsck.erofs` 1.8.6, identical for `-j1` and `-j2`, and shows the
//! property its option promises in `ferrofs dump`.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::{corpus, tools, verify};

use crate::{dump_json, FERROFS};
use ferrofs_testkit::work_dir;

use ferrofs_testkit::verify::run_ok as run;

fn text(lines: usize, seed: usize) -> Vec<u8> {
    (0..lines)
        .map(|i| format!("{} line {} of a text with seed {seed}\n", i * 31 % 977, i))
        .collect::<String>()
        .into_bytes()
}

/// Text files of many sizes, incompressible files, and duplicates.
fn add_files(dir: &Path) {
    let t = dir.join("text");
    let d = dir.join("dups");
    fs::create_dir_all(&t).unwrap();
    fs::create_dir_all(&d).unwrap();
    let body = text(120_000, 5);
    for (name, size) in [
        ("one", 1usize),
        ("b4095", 4095),
        ("b5000", 5000),
        ("p65535", 65535),
        ("p65537", 65537),
        ("p200000", 200_000),
        ("m1plus3", (1 << 20) + 3),
        ("big3m", 3 << 20),
    ] {
        fs::write(t.join(name), &body[..size]).unwrap();
    }
    for i in 0..40 {
        fs::write(t.join(format!("small{i}.txt")), text(20 + i * 7, i)).unwrap();
    }
    fs::write(t.join("random.bin"), corpus::random_bytes(150_000, 3)).unwrap();
    // Compresses about 2:1, so a pcluster never swallows the whole rest.
    let noise = corpus::random_bytes(800_000, 6);
    let mixed: Vec<u8> = body
        .chunks(32)
        .zip(noise.chunks(32))
        .take(25_000)
        .flat_map(|(a, b)| a.iter().chain(b).copied().collect::<Vec<u8>>())
        .collect();
    fs::write(t.join("mixed"), &mixed[..1_500_001]).unwrap();
    fs::write(t.join("random-small.bin"), corpus::random_bytes(3000, 4)).unwrap();
    // Duplicates: plain copies, one with another mtime (extended inode),
    // one with an xattr, one of an incompressible file.
    fs::copy(t.join("p200000"), d.join("p200000-copy")).unwrap();
    fs::copy(t.join("b5000"), d.join("b5000-copy")).unwrap();
    fs::copy(t.join("random.bin"), d.join("random-copy")).unwrap();
    let other = d.join("big3m-old");
    fs::copy(t.join("big3m"), &other).unwrap();
    let f = fs::File::options().write(true).open(&other).unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000))
        .unwrap();
    // Not a duplicate, but its first pclusters are the same as big3m's.
    let mut plus = fs::read(t.join("big3m")).unwrap();
    plus.extend_from_slice(b"and a different ending\n");
    fs::write(d.join("big3m-plus"), plus).unwrap();
    let x = d.join("small3-xattr");
    fs::copy(t.join("small3.txt"), &x).unwrap();
    run(Command::new("setfattr")
        .args(["-n", "user.note", "-v", "dup-with-an-xattr"])
        .arg(&x))
    .expect("setfattr");
}

/// Where a file's extents are: physical positions of pclusters and
/// offsets of fragments in the packed inode.
fn positions(img: &str, path: &str) -> Result<Vec<u64>, String> {
    let v = dump_json(&[img, "--path", path])?;
    let ex = v["extents"].as_array().cloned().unwrap_or_default();
    Ok(ex
        .iter()
        .filter_map(|e| e["map"]["pos"].as_u64().or(e["map"]["offset"].as_u64()))
        .collect())
}

struct Case {
    alg: &'static str,
    pcluster: u64,
    ext: &'static str,
}

fn check(work: &Path, src: &Path, c: &Case) -> Vec<String> {
    let mut f = Vec::new();
    let name = format!(
        "{}-{}-{}",
        c.alg.replace(',', "_"),
        c.pcluster,
        c.ext.replace(',', "_")
    );
    let img = work.join(format!("{name}.img"));
    let opts = [
        format!("-z{}", c.alg),
        format!("-C{}", c.pcluster),
        format!("-E{}", c.ext),
    ];
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
    let img_s = img.to_string_lossy().into_owned();
    let fragments = c.ext.contains("fragments");
    match dump_json(&[&img_s]) {
        Ok(v) => {
            let packed = v["superblock"]["packed_nid"].as_u64().unwrap_or(0);
            if fragments != (packed != 0) {
                f.push(format!("{name}: packed_nid {packed}"));
            }
        }
        Err(e) => f.push(format!("{name}: dump: {e}")),
    }
    if fragments {
        // Files no larger than a pcluster live whole in the packed inode
        // (with -Eall-fragments every file does), and so do those fast LZ4
        // fits into two pclusters (except with LZ4 and LZ4HC, which do not
        // ask it); bigger ones keep their pclusters, and (unless the last
        // pcluster took the rest) end in a fragment.
        let all = c.ext.contains("all-fragments");
        let mut tails = 0;
        for (path, size) in [
            ("text/b4095", 4095u64),
            ("text/p65537", 65537),
            ("text/p200000", 200_000),
            ("text/m1plus3", (1 << 20) + 3),
            ("text/big3m", 3 << 20),
            ("text/mixed", 1_500_001),
        ] {
            match dump_json(&[&img_s, "--path", path]) {
                Ok(v) => {
                    let whole = v["compression"]["whole_file_fragment"].as_bool();
                    let ex = v["extents"].as_array().cloned().unwrap_or_default();
                    let last = ex.last().map(|e| e["map"]["type"].clone());
                    let frag_tail = last == Some("fragment".into()) && ex.len() > 1;
                    tails += usize::from(frag_tail);
                    let probed =
                        !c.alg.starts_with("lz4") && fast_lz4_fits(&src.join(path), 2 * c.pcluster);
                    if whole != Some(all || size <= c.pcluster || probed) {
                        f.push(format!("{name}: {path}: whole {whole:?}, extents {ex:?}"));
                    }
                }
                Err(e) => f.push(format!("{name}: dump --path {path}: {e}")),
            }
        }
        if !all && c.pcluster < 200_000 && tails == 0 {
            f.push(format!("{name}: no file has a fragment tail"));
        }
    }
    if c.ext.contains("dedupe") {
        for (a, b) in [
            ("text/p200000", "dups/p200000-copy"),
            ("text/big3m", "dups/big3m-old"),
        ] {
            match (positions(&img_s, a), positions(&img_s, b)) {
                (Ok(x), Ok(y)) if !x.is_empty() && x == y => {}
                (x, y) => f.push(format!("{name}: {a} {x:?} and {b} {y:?} not shared")),
            }
        }
        // Identical pclusters of different files are stored once.
        match (
            positions(&img_s, "text/big3m"),
            positions(&img_s, "dups/big3m-plus"),
        ) {
            (Ok(x), Ok(y)) if x.len() > 2 && y.len() > 2 && x[..2] == y[..2] => {}
            // One pcluster takes the whole file: nothing to share.
            (Ok(x), Ok(_)) if x.len() <= 2 && c.pcluster >= 1 << 20 => {}
            (x, y) => f.push(format!(
                "{name}: big3m {x:?} and big3m-plus {y:?} share no pcluster"
            )),
        }
    }
    let _ = fs::remove_file(&img);
    f
}

/// Whether fast LZ4 fits the whole file into `room` bytes.
fn fast_lz4_fits(file: &Path, room: u64) -> bool {
    use ferrofs_codec::{Algorithm, Encoder, EncoderConfig};
    let data = fs::read(file).unwrap();
    let mut enc = Encoder::new(EncoderConfig::new(Algorithm::Lz4)).unwrap();
    let mut out = vec![0u8; room as usize];
    let (consumed, _) = enc.compress_fixed_output(&data, &mut out).unwrap();
    consumed == data.len()
}

#[test]
fn fragment_and_dedupe_images_match_kernel() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("mkfs_density");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    add_files(&src);
    let mut cases = Vec::new();
    for alg in ["lz4hc", "lzma", "zstd", "deflate"] {
        for (pcluster, ext) in [
            (4096u64, "fragments"),
            (65536, "fragments,dedupe"),
            (16384, "all-fragments"),
        ] {
            cases.push(Case { alg, pcluster, ext });
        }
    }
    cases.push(Case {
        alg: "lz4",
        pcluster: 65536,
        ext: "dedupe",
    });
    cases.push(Case {
        alg: "lz4hc",
        pcluster: 1 << 20,
        ext: "fragments=16384,dedupe",
    });
    ferrofs_testkit::tmp::parallel_checks(&work, cases.len(), |i| check(&work, &src, &cases[i]));
}

/// Fragments make a tree of many small alike files smaller than plain
/// compression does, and dedupe stores a duplicated file once.
#[test]
fn fragments_and_dedupe_save_space() {
    let work = work_dir!("mkfs_density_size");
    let src = work.join("tree");
    fs::create_dir_all(src.join("a")).unwrap();
    fs::create_dir_all(src.join("b")).unwrap();
    for i in 0..300 {
        fs::write(
            src.join("a").join(format!("f{i}.txt")),
            text(30 + i % 50, i),
        )
        .unwrap();
    }
    let big = corpus::random_bytes(1 << 20, 11);
    fs::write(src.join("a/big.bin"), &big).unwrap();
    fs::write(src.join("b/big-copy.bin"), &big).unwrap();
    let size = |ext: &[&str]| -> u64 {
        let img = work.join("s.img");
        run(Command::new(FERROFS)
            .args(["mkfs", "--quiet", "-zlz4hc", "-C65536"])
            .args(ext)
            .arg(&img)
            .arg(&src))
        .expect("mkfs");
        fs::metadata(&img).unwrap().len()
    };
    let plain = size(&[]);
    let frag = size(&["-Efragments"]);
    let dedupe = size(&["-Ededupe"]);
    println!("plain {plain}, fragments {frag}, dedupe {dedupe}");
    assert!(
        frag < plain - (1 << 20) - (300 << 10),
        "fragments {frag} vs plain {plain}"
    );
    assert!(
        dedupe <= plain - (1 << 20),
        "dedupe {dedupe} vs plain {plain}"
    );
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// A real tree (this machine's /usr/share/doc: many small text files, many
/// duplicates): `-Efragments,dedupe` from the directory and from a tar
/// stream of it, each compared through the kernel with the source.
#[test]
fn real_tree_with_fragments_and_dedupe() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let src = Path::new("/usr/share/doc");
    if !src.is_dir() {
        println!("skipped: /usr/share/doc is missing");
        return;
    }
    let work = work_dir!("mkfs_density_real");
    let img = work.join("doc.img");
    let tar_img = work.join("doc-tar.img");
    run(Command::new(FERROFS)
        .args([
            "mkfs",
            "--quiet",
            "-zlz4hc",
            "-C65536",
            "-Efragments,dedupe",
        ])
        .arg(&img)
        .arg(src))
    .expect("mkfs");
    let script = format!(
        "tar --numeric-owner --xattrs --xattrs-include='*' -C {} -cf - . | {FERROFS} mkfs --quiet -zlz4hc -C65536 -Efragments,dedupe --tar {} -",
        src.display(),
        tar_img.display()
    );
    run(Command::new("bash").args(["-o", "pipefail", "-c", &script])).expect("mkfs --tar");
    let mut failures = Vec::new();
    for i in [&img, &tar_img] {
        match LoopMount::new(i, &[]) {
            Ok(m) => {
                let mut o = CompareOptions::strict();
                // The directory itself comes from the tar's "." entry.
                o.skip_root_mtime = true;
                for d in compare::compare_trees(src, m.path(), &o) {
                    failures.push(format!("{}: {d}", i.display()));
                }
            }
            Err(e) => failures.push(format!("{}: mount: {e}", i.display())),
        }
        if let Some(fsck) = tools::fsck_upstream() {
            if let Err(e) = run(Command::new(&fsck.path).arg(i)) {
                failures.push(format!("{}: fsck.erofs: {e}", i.display()));
            }
        }
    }
    failures.truncate(20);
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// `-E dedupe` without compression, as mkfs.erofs does it: files become
/// chunk-based with one-block chunks and equal blocks are stored once
/// (whole copies, shared prefixes, and a last partial block equal to a
/// full one with zeros). The image is about the unique blocks, reads back
/// equal through the kernel, passes both fscks, and is no larger than
/// mkfs.erofs 1.8.6's.
#[test]
fn uncompressed_dedupe_shares_blocks() {
    let work = work_dir!("mkfs_density_chunks");
    let src = work.join("tree");
    fs::create_dir_all(src.join("d")).unwrap();
    let a = corpus::random_bytes(40 * 4096, 21);
    let fresh = corpus::random_bytes(10 * 4096 + 100, 22);
    let mut c = a[..20 * 4096].to_vec();
    c.extend_from_slice(&fresh);
    let mut tail_block = fresh[10 * 4096..].to_vec();
    tail_block.resize(4096, 0);
    fs::write(src.join("a.bin"), &a).unwrap();
    fs::write(src.join("d/b.bin"), &a).unwrap();
    fs::write(src.join("d/c.bin"), &c).unwrap();
    // A full block of c's last 100 bytes and zeros.
    fs::write(src.join("d/z.bin"), &tail_block).unwrap();
    let img = work.join("dd.img");
    let plain = work.join("plain.img");
    let mut failures = Vec::new();
    for (out, extra) in [(&img, &["-Ededupe"][..]), (&plain, &[][..])] {
        if let Err(e) = run(Command::new(FERROFS)
            .args(["mkfs", "--quiet", "-T0"])
            .args(extra)
            .arg(out)
            .arg(&src))
        {
            failures.push(format!("mkfs {extra:?}: {e}"));
        }
    }
    let len = |p: &Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    println!("dedupe {} B, plain {} B", len(&img), len(&plain));
    // 40 + 10 + 1 unique data blocks, a few of metadata.
    let unique = 51 * 4096;
    if len(&img) > unique + 4 * 4096 || len(&img) + 40 * 4096 > len(&plain) {
        failures.push(format!(
            "dedupe image {} B, plain {} B, unique data {unique} B",
            len(&img),
            len(&plain)
        ));
    }
    if let Err(e) = run(Command::new(FERROFS).arg("fsck").arg(&img)) {
        failures.push(format!("ferrofs fsck: {e}"));
    }
    if let Some(f) = tools::fsck_upstream() {
        if let Err(e) = run(Command::new(&f.path).arg(&img)) {
            failures.push(format!("fsck.erofs: {e}"));
        }
    }
    if let Some(up) = tools::mkfs_upstream() {
        let theirs = work.join("up.img");
        match run(Command::new(&up.path)
            .args(["--quiet", "-T0", "-Ededupe"])
            .arg(&theirs)
            .arg(&src))
        {
            Ok(_) if len(&img) <= len(&theirs) => {}
            Ok(_) => failures.push(format!(
                "dedupe image {} B, mkfs.erofs 1.8.6 {} B",
                len(&img),
                len(&theirs)
            )),
            Err(e) => failures.push(format!("mkfs.erofs: {e}")),
        }
    }
    match can_mount() {
        Ok(()) => match LoopMount::new(&img, &[]) {
            Ok(m) => {
                let mut opts = CompareOptions::strict();
                opts.compare_mtime = false;
                for d in compare::compare_trees(&src, m.path(), &opts) {
                    failures.push(format!("source vs image: {d}"));
                }
            }
            Err(e) => failures.push(format!("mount: {e}")),
        },
        Err(why) => println!("kernel comparison skipped: {why}"),
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}
