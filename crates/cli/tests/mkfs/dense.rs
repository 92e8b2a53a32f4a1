//! The densest layout (`-Efragments,dedupe,ztailpacking -m4096 --zD`):
//! fragments in the packed inode ordered by content similarity, and the
//! last pcluster of a file cut to whole blocks with the rest in its
//! fragment. Every image of the corner-case tree plus files made for these
//! choices is mounted by the kernel and compared strictly with the source,
//! extracted, checked by `ferrofs fsck`, fsck.erofs 1.9.x and dump.erofs,
//! and identical for `-j1` and `-j2`; `ferrofs extract` and `fsck` decode
//! each pcluster once and give the same trees and reports on one thread
//! and on three; `ferrofs dump` shows the property each choice promises.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ferrofs_testkit::corpus::{self, XorShift64};
use ferrofs_testkit::mount::can_mount;
use ferrofs_testkit::verify;

use crate::{dump_json, FERROFS};
use ferrofs_testkit::work_dir;

/// Families of alike text files.
const FAMILIES: usize = 3;
/// Files per family.
const MEMBERS: usize = 24;

/// Words of one family's vocabulary (lower-case letters, 3..10 long).
fn vocabulary(family: usize) -> Vec<String> {
    let mut r = XorShift64::new(1000 + family as u64);
    (0..150)
        .map(|_| {
            let len = 3 + (r.next_u64() % 8) as usize;
            (0..len)
                .map(|_| (b'a' + (r.next_u64() % 26) as u8) as char)
                .collect()
        })
        .collect()
}

/// A text of about `len` bytes drawn from `words`.
fn prose(words: &[String], len: usize, seed: u64) -> Vec<u8> {
    let mut r = XorShift64::new(seed);
    let mut s = String::new();
    while s.len() < len {
        s.push_str(&words[(r.next_u64() % words.len() as u64) as usize]);
        s.push(if r.next_u64().is_multiple_of(12) {
            '\n'
        } else {
            ' '
        });
    }
    s.into_bytes()
}

/// `alike/`: the families' files under names that interleave them in
/// name order (`n000` is family 0, `n001` family 1, ...); `big/`: files
/// of several pclusters whose last pcluster is cut short.
fn add_files(dir: &Path) {
    let alike = dir.join("alike");
    let big = dir.join("big");
    fs::create_dir_all(&alike).unwrap();
    fs::create_dir_all(&big).unwrap();
    let vocab: Vec<Vec<String>> = (0..FAMILIES).map(vocabulary).collect();
    for n in 0..FAMILIES * MEMBERS {
        let f = n % FAMILIES;
        let len = 2000 + (n * 397) % 5000;
        fs::write(
            alike.join(format!("n{n:03}.txt")),
            prose(&vocab[f], len, n as u64),
        )
        .unwrap();
    }
    for (k, size) in [200_000usize, 333_333, 700_001, 1_300_000]
        .into_iter()
        .enumerate()
    {
        let mut body = prose(&vocab[k % FAMILIES], size / 2, 50 + k as u64);
        body.extend_from_slice(&corpus::mixed_bytes(size - body.len(), 60 + k as u64));
        fs::write(big.join(format!("b{size}")), body).unwrap();
    }
}

/// The extents of a file as `ferrofs dump` lists them.
fn extents(img: &str, path: &str) -> Result<Vec<serde_json::Value>, String> {
    let v = dump_json(&[img, "--path", path])?;
    Ok(v["extents"].as_array().cloned().unwrap_or_default())
}

/// How often the family changes along the packed inode: the `alike`
/// files sorted by their fragment offsets.
fn family_changes(img: &str) -> Result<usize, String> {
    let mut at = Vec::new();
    for n in 0..FAMILIES * MEMBERS {
        let ex = extents(img, &format!("alike/n{n:03}.txt"))?;
        let off = ex
            .first()
            .and_then(|e| e["map"]["offset"].as_u64())
            .ok_or_else(|| format!("alike/n{n:03}.txt is not a fragment: {ex:?}"))?;
        at.push((off, n % FAMILIES));
    }
    at.sort_unstable();
    Ok(at.windows(2).filter(|w| w[0].1 != w[1].1).count())
}

struct Case {
    alg: &'static str,
    pcluster: u64,
    extra: &'static [&'static str],
}

fn check(work: &Path, src: &Path, c: &Case) -> Vec<String> {
    let name = format!(
        "{}-{}{}",
        c.alg.replace(',', "_"),
        c.pcluster,
        c.extra.concat().replace([',', '-'], "_")
    );
    let img = work.join(format!("{name}.img"));
    let mut opts = vec![format!("-z{}", c.alg), format!("-C{}", c.pcluster)];
    opts.extend(c.extra.iter().map(|s| s.to_string()));
    let mut f = verify::build_and_read_back(FERROFS.as_ref(), &name, &opts, &img, src, work);
    if !img.exists() {
        return f;
    }
    f.extend(verify::same_for_any_thread_count(
        FERROFS.as_ref(),
        &name,
        &img,
        work,
    ));
    let img_s = img.to_string_lossy().into_owned();
    // Name order changes family at every file; the similarity order keeps
    // each family together (a few changes where chains meet).
    match family_changes(&img_s) {
        Ok(n) if n <= 2 * FAMILIES => {}
        Ok(n) => f.push(format!(
            "{name}: the family changes {n} times in the packed inode"
        )),
        Err(e) => f.push(format!("{name}: {e}")),
    }
    // A file's last pcluster before its fragment fills its blocks: the
    // zero padding in front of its stream is short. (Without the cut it
    // is anything up to a block; DEFLATE and zstd find a fitting input
    // length only to within 1 %, and LZ4 keeps the kernel's in-place
    // margin, so it is not always nothing.)
    let mut cut = 0;
    let image = fs::File::open(&img).unwrap();
    for size in [200_000u64, 333_333, 700_001, 1_300_000] {
        let path = format!("big/b{size}");
        let ex = match extents(&img_s, &path) {
            Ok(ex) => ex,
            Err(e) => {
                f.push(format!("{name}: {path}: {e}"));
                continue;
            }
        };
        let n = ex.len();
        if n < 2 || ex[n - 1]["map"]["type"] != "fragment" {
            continue;
        }
        let last = &ex[n - 2]["map"];
        if last["type"] != "pcluster" || last["format"] == "plain" {
            continue;
        }
        cut += 1;
        let pos = last["pos"].as_u64().unwrap_or(0);
        let mut first = [0u8; 4096];
        image.read_exact_at(&mut first, pos).unwrap();
        let zeros = first.iter().take_while(|&&b| b == 0).count();
        if zeros >= 2048 {
            f.push(format!(
                "{name}: {path}: last pcluster at {pos} starts with {zeros} bytes of padding: {ex:?}"
            ));
        }
    }
    if cut == 0 {
        f.push(format!(
            "{name}: no big file ends in a compressed pcluster and a fragment"
        ));
    }
    let _ = fs::remove_file(&img);
    f
}

#[test]
fn dense_images_match_kernel() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("mkfs_dense");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    add_files(&src);
    const DENSE: &[&str] = &["-Efragments,dedupe,ztailpacking", "-m4096", "--zD"];
    let mut cases = Vec::new();
    for alg in ["lz4hc,12", "zstd,15", "lzma,6"] {
        cases.push(Case {
            alg,
            pcluster: 131_072,
            extra: DENSE,
        });
        cases.push(Case {
            alg,
            pcluster: 16384,
            extra: &["-Efragments"],
        });
    }
    cases.push(Case {
        alg: "deflate",
        pcluster: 65536,
        extra: DENSE,
    });
    ferrofs_testkit::tmp::parallel_checks(&work, cases.len(), |i| check(&work, &src, &cases[i]));
}

/// Two files that hold the same 16 MiB run at offsets that differ by a
/// number of bytes no block size divides (a shared library and a static
/// archive of the same data look like this: `a` starts as an ELF file,
/// `b` as an archive), and a third that holds a run twice: with dedupe,
/// long files are cut where their bytes say, so the copies are cut alike,
/// compress to the same pclusters and are stored once. Every image reads
/// back through the kernel, fsck.erofs and our tools, the same for any
/// thread count; with zstd and with LZ4HC (whose extents keep no in-place
/// margin in such files, and whose encoder is the same for both heads) the
/// second copy of the run costs less than a quarter of the first.
#[test]
fn a_run_two_files_share_at_any_shift_is_stored_once() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("mkfs_dense_shared_run");
    let vocab = vocabulary(0);
    let run = prose(&vocab, 16 << 20, 77);
    let both = work.join("both");
    let alone = work.join("alone");
    fs::create_dir_all(&both).unwrap();
    fs::create_dir_all(&alone).unwrap();
    let mut a = b"\x7fELF".to_vec();
    a.extend_from_slice(&corpus::mixed_bytes(100_003, 1));
    a.extend_from_slice(&run);
    a.extend_from_slice(&prose(&vocab, 50_000, 2));
    let mut b = b"!<arch>\n".to_vec();
    b.extend_from_slice(&prose(&vocabulary(1), 777_777, 3));
    b.extend_from_slice(&run);
    let mut twice = run[..5 << 20].to_vec();
    twice.extend_from_slice(&corpus::mixed_bytes(1234, 4));
    twice.extend_from_slice(&run[..5 << 20]);
    fs::write(both.join("a"), &a).unwrap();
    fs::write(both.join("b"), &b).unwrap();
    fs::write(both.join("twice"), &twice).unwrap();
    fs::write(alone.join("a"), &a).unwrap();
    let cases: [(&str, &[&str]); 2] = [("zstd", &["-zzstd"]), ("lz4hc", &["-zlz4hc"])];
    ferrofs_testkit::tmp::parallel_checks(&work, cases.len(), |i| {
        let (name, alg) = cases[i];
        let mut opts: Vec<String> = alg.iter().map(|s| s.to_string()).collect();
        opts.extend(
            [
                "-C131072",
                "-Efragments,dedupe,ztailpacking",
                "-m4096",
                "--zD",
            ]
            .map(String::from),
        );
        let img = work.join(format!("{name}.img"));
        let mut f = verify::build_and_read_back(FERROFS.as_ref(), name, &opts, &img, &both, &work);
        if !f.is_empty() {
            return f;
        }
        let one = work.join(format!("{name}-alone.img"));
        if let Err(e) =
            verify::build_at_two_thread_counts(FERROFS.as_ref(), name, &opts, &one, &alone)
        {
            return e;
        }
        let size = |p: &Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let (all, first) = (size(&img), size(&one));
        // `twice` adds one 5 MiB copy of the run (compressed, it is less
        // than a third of `a`'s); `b`, its 777,777-byte start.
        let b_start = 777_777 / 2;
        if all > first + first / 3 + b_start + first / 4 {
            f.push(format!(
                "{name}: {all} bytes with the shared runs, {first} for `a` alone: \
                 the copies were not shared"
            ));
        }
        f
    });
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// The packed inode's segments that hold machine code are compressed as
/// machine code: small files of real machine code (pieces of this test's
/// own executable) that start like ELF files pack, with zstd level 15,
/// into a packed inode at least 1 % smaller than the same bytes in files
/// that start with one letter changed, which are compressed as data. Both
/// images read back through the kernel, the checkers and our tools, the
/// same for any thread count.
#[test]
fn small_machine_code_files_are_packed_as_machine_code() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("mkfs_dense_machine_code_fragments");
    let exe = fs::read(std::env::current_exe().unwrap()).unwrap();
    let code = &exe[..exe.len().min(6 << 20)];
    let heads: [(&str, &[u8]); 2] = [
        ("elf", b"\x7fELF\x02\x01\x01\0"),
        ("data", b"\x7fELG\x02\x01\x01\0"),
    ];
    for (name, head) in heads {
        let dir = work.join(name);
        fs::create_dir_all(&dir).unwrap();
        for (k, piece) in code.chunks(100_000).enumerate() {
            let mut bytes = head.to_vec();
            bytes.extend_from_slice(piece);
            fs::write(dir.join(format!("f{k:03}")), bytes).unwrap();
        }
    }
    let opts: Vec<String> = [
        "-zzstd,15",
        "-C131072",
        "-Efragments,dedupe,ztailpacking",
        "-m4096",
        "--zD",
    ]
    .map(String::from)
    .to_vec();
    let packed = std::sync::Mutex::new([0u64; 2]);
    ferrofs_testkit::tmp::parallel_checks(&work, heads.len(), |i| {
        let name = heads[i].0;
        let img = work.join(format!("{name}.img"));
        let src = work.join(name);
        let mut f = verify::build_and_read_back(FERROFS.as_ref(), name, &opts, &img, &src, &work);
        match dump_json(&[img.to_str().unwrap_or_default()]) {
            Ok(v) => {
                let n = v["statistics"]["packed_inode"]["physical_bytes"].as_u64();
                packed.lock().unwrap_or_else(|e| e.into_inner())[i] = n.unwrap_or(0);
            }
            Err(e) => f.push(format!("{name}: dump: {e}")),
        }
        f
    });
    let [elf, data] = packed.into_inner().unwrap_or_else(|e| e.into_inner());
    assert!(
        elf > 0 && elf < data - data / 100,
        "packed inode: {elf} bytes of machine code, {data} of the same bytes as data"
    );
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// The directories in walk order, depth first with names in byte order
/// (the root first, as the empty path).
fn dirs_in_walk_order(root: &Path, rel: &str, out: &mut Vec<String>) {
    out.push(rel.to_string());
    let mut subdirs: Vec<String> = fs::read_dir(root.join(rel))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    subdirs.sort_unstable();
    for d in subdirs {
        let p = if rel.is_empty() {
            d
        } else {
            format!("{rel}/{d}")
        };
        dirs_in_walk_order(root, &p, out);
    }
}

/// With `--zD` the directories lead the packed inode, in the order a walk
/// of the tree reads them (names chosen so that byte order of whole paths
/// would differ: `a-b` sorts before `a/`), ahead of every file's fragment:
/// listing the tree decodes the packed inode's first pclusters only. The
/// image reads back through the kernel, the checkers and our tools.
#[test]
fn zd_directories_lead_the_packed_inode_in_walk_order() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("mkfs_dense_zd_order");
    let src = work.join("tree");
    add_files(&src);
    let vocab = vocabulary(2);
    for (i, d) in ["a", "a/x", "a/x/deep", "a-b", "a.c", "b", "b/a"]
        .iter()
        .enumerate()
    {
        let dir = src.join(d);
        fs::create_dir_all(&dir).unwrap();
        for k in 0..40 {
            let text = prose(&vocab, 300 + 37 * k, (i * 100 + k) as u64);
            fs::write(dir.join(format!("file-with-a-long-name-{k:02}.txt")), text).unwrap();
        }
    }
    let opts: Vec<String> = ["-zlzma", "-C4096", "-Efragments", "--zD"]
        .map(String::from)
        .to_vec();
    let img = work.join("zd.img");
    let f = verify::build_and_read_back(FERROFS.as_ref(), "zd-order", &opts, &img, &src, &work);
    assert!(f.is_empty(), "{f:#?}");
    let img = img.to_str().unwrap();
    let offset = |path: &str| -> u64 {
        let ex = extents(img, if path.is_empty() { "/" } else { path }).unwrap();
        assert_eq!(ex.len(), 1, "{path}: {ex:?}");
        assert_eq!(ex[0]["map"]["type"], "fragment", "{path}: {ex:?}");
        ex[0]["map"]["offset"].as_u64().unwrap()
    };
    let mut dirs = Vec::new();
    dirs_in_walk_order(&src, "", &mut dirs);
    let at: Vec<u64> = dirs.iter().map(|d| offset(d)).collect();
    for (w, d) in at.windows(2).zip(dirs.windows(2)) {
        assert!(w[0] < w[1], "{d:?} at {w:?}: not in walk order");
    }
    let last_dir = *at.last().unwrap();
    for d in ["a", "a-b", "b/a"] {
        let first_file = offset(&format!("{d}/file-with-a-long-name-00.txt"));
        assert!(
            first_file > last_dir,
            "{d}: a file at {first_file} before a directory at {last_dir}"
        );
    }
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// With `--zD` the directories take 16 KiB pclusters of the packed inode
/// (a path walk reads them a block at a time, and the kernel decodes a
/// whole pcluster for any block), while the files' fragments after them
/// fill the packed inode's own 128 KiB ones. The image reads back through
/// the kernel, the checkers and our tools.
#[test]
fn zd_directories_take_small_pclusters_of_their_own() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("mkfs_dense_zd_small");
    let src = work.join("tree");
    let vocab = vocabulary(1);
    // Names that do not repeat, so that the directories fill several
    // pclusters however well they compress.
    let mut rng = XorShift64::new(7);
    for d in 0..300 {
        let dir = src.join(format!("package-{d:03}/share"));
        fs::create_dir_all(&dir).unwrap();
        for k in 0..10 {
            let text = prose(&vocab, 900 + 53 * k, (d * 10 + k) as u64);
            let name = format!(
                "a-module-{k:02}-{:016x}{:016x}.py",
                rng.next_u64(),
                rng.next_u64()
            );
            fs::write(dir.join(name), text).unwrap();
        }
    }
    let opts: Vec<String> = ["-zlzma", "-C131072", "-Efragments", "-m4096", "--zD"]
        .map(String::from)
        .to_vec();
    let img = work.join("zd.img");
    let f = verify::build_and_read_back(FERROFS.as_ref(), "zd-small", &opts, &img, &src, &work);
    assert!(f.is_empty(), "{f:#?}");
    let img = img.to_str().unwrap();
    let offset = |path: &str| -> u64 {
        let ex = extents(img, path).unwrap();
        assert_eq!(ex[0]["map"]["type"], "fragment", "{path}: {ex:?}");
        ex[0]["map"]["offset"].as_u64().unwrap()
    };
    let last_dir = offset("package-299/share");
    // Any file's fragment comes after every directory.
    let first = fs::read_dir(src.join("package-000/share"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let first_file = offset(&format!(
        "package-000/share/{}",
        first.file_name().to_str().unwrap()
    ));
    assert!(last_dir < first_file, "{last_dir} {first_file}");
    let sb = dump_json(&[img]).unwrap();
    let nid = sb["superblock"]["packed_nid"].as_u64().unwrap().to_string();
    let packed = dump_json(&[img, "--nid", &nid]).unwrap();
    let ex = packed["extents"].as_array().unwrap();
    let (mut dirs, mut full) = (0, 0);
    for e in ex {
        let (at, plen) = (
            e["logical"].as_u64().unwrap(),
            e["map"]["plen"].as_u64().unwrap(),
        );
        if at <= last_dir {
            assert!(plen <= 16384, "a directory extent of {plen} bytes: {e}");
            dirs += 1;
        } else if at >= first_file && plen == 131072 {
            full += 1;
        }
    }
    assert!(
        dirs >= 3 && full >= 3,
        "{dirs} directory, {full} full extents: {ex:?}"
    );
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}
