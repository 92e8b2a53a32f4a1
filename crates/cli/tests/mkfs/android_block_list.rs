//! Android's `--block-list-file` (with `--mount-point=/system`, as
//! Android's build passes them): for images built through the drop-in
//! (uncompressed, lz4hc with and without ztailpacking, chunk-based), the
//! list is parsed and checked against the image: every regular file whose
//! data takes blocks is listed once as `/system/PATH`, no block is listed
//! twice, the listed blocks of a flat or chunk-based file hold its bytes
//! block by block (holes and an inline tail left out), those of a
//! compressed file are exactly the physical clusters the reader maps it
//! to, and the option changes nothing in the image, which the kernel
//! reads back as the source. Without `--mount-point` the file is written
//! empty (mkfs.erofs 1.8 lists files only under a mount point); a list
//! that cannot be written is an error naming it, and no image is written.
//! (The reference mkfs.erofs builds here are not built for Android, and
//! 1.9 dropped the option, so there is no upstream list to compare with.)

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs::map::{ExtentKind, Pcluster, PclusterAt};
use ferrofs_testkit::corpus::{mixed_bytes, random_bytes, text_bytes};
use ferrofs_testkit::mount::can_mount;
use ferrofs_testkit::verify::{image_reads_as_source, run_ok};

use crate::{dropin_link, FERROFS};
use ferrofs_testkit::work_dir;
const BS: u64 = 4096;

/// Files around block boundaries, compressible and not, a tail too long
/// to be inline, zero blocks and a sparse file, a hard link, an empty file
/// and a symlink.
fn make_tree(src: &Path) {
    fs::create_dir_all(src.join("bin")).unwrap();
    fs::create_dir_all(src.join("etc/deep/er")).unwrap();
    fs::create_dir_all(src.join("lib")).unwrap();
    let sizes = [
        1u64,
        100,
        4095,
        4096,
        4097,
        8186,
        8192,
        12293,
        65536 * 3 + 77,
    ];
    for (k, &n) in sizes.iter().enumerate() {
        let n = n as usize;
        fs::write(src.join(format!("bin/r{n}")), random_bytes(n, 7 + k as u64)).unwrap();
        fs::write(src.join(format!("etc/t{n}")), text_bytes(n, 50 + k as u64)).unwrap();
    }
    fs::write(src.join("lib/big"), mixed_bytes((1 << 20) + 3, 99)).unwrap();
    fs::write(src.join("etc/deep/er/m"), mixed_bytes(300_000, 98)).unwrap();
    // Zero blocks between data: holes when chunk-based.
    let mut z = random_bytes(8192, 5);
    z.extend(vec![0u8; 3 * 4096]);
    z.extend(random_bytes(5000, 6));
    fs::write(src.join("lib/zeros-inside"), z).unwrap();
    let sparse = fs::File::create(src.join("lib/sparse")).unwrap();
    sparse
        .write_all_at(&random_bytes(6000, 3), 1 << 20)
        .unwrap();
    sparse.set_len(3 << 20).unwrap();
    fs::hard_link(src.join("bin/r12293"), src.join("lib/r12293-link")).unwrap();
    fs::write(src.join("etc/empty"), b"").unwrap();
    std::os::unix::fs::symlink("../bin/r100", src.join("etc/link")).unwrap();
}

/// The block list parsed: path -> its blocks in listed order.
fn parse_list(text: &str, failures: &mut Vec<String>) -> BTreeMap<String, Vec<u64>> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut items = line.split(' ');
        let path = items.next().unwrap_or_default().to_string();
        let mut blocks = Vec::new();
        for it in items {
            let (a, b) = it.split_once('-').unwrap_or((it, it));
            match (a.parse::<u64>(), b.parse::<u64>()) {
                (Ok(a), Ok(b)) if a <= b => blocks.extend(a..=b),
                _ => failures.push(format!("{line:?}: bad item {it:?}")),
            }
        }
        if blocks.is_empty() {
            failures.push(format!("{line:?}: no blocks"));
        }
        if out.insert(path, blocks).is_some() {
            failures.push(format!("{line:?}: the path is listed twice"));
        }
    }
    out
}

/// The regular files of `src` with data, one path per inode (its names).
fn source_files(src: &Path) -> Vec<(Vec<String>, Vec<u8>)> {
    let mut by_ino: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(src.join(&rel)).unwrap() {
            let e = e.unwrap();
            let r = rel.join(e.file_name());
            let md = fs::symlink_metadata(e.path()).unwrap();
            if md.is_dir() {
                stack.push(r);
            } else if md.is_file() && md.len() > 0 {
                by_ino
                    .entry(md.ino())
                    .or_default()
                    .push(r.to_string_lossy().into_owned());
            }
        }
    }
    by_ino
        .into_values()
        .map(|names| {
            let data = fs::read(src.join(&names[0])).unwrap();
            (names, data)
        })
        .collect()
}

/// Where the reader maps file `path`: the image blocks of its raw
/// extents and non-inline pclusters, in file order; and, when it has no
/// pclusters, the file's block index each of them holds.
fn mapped_blocks(img: &ferrofs::Image, path: &str) -> Result<(Vec<u64>, Option<Vec<u64>>), String> {
    let f = img
        .raw()
        .open_path(format!("/{path}").as_bytes())
        .map_err(|e| format!("{path}: {e}"))?;
    let mut phys = Vec::new();
    let mut logical = Some(Vec::new());
    for e in f.extents() {
        let e = e.map_err(|e| format!("{path}: {e}"))?;
        let (pos, len) = match e.kind {
            ExtentKind::Raw { device: 0, pos } => {
                if let Some(l) = logical.as_mut() {
                    l.extend(e.logical / BS..e.logical / BS + e.len.div_ceil(BS));
                }
                (pos, e.len)
            }
            ExtentKind::Pcluster(Pcluster {
                at: PclusterAt::Blocks(pos),
                len,
                ..
            }) => {
                logical = None;
                (pos, len)
            }
            ExtentKind::Pcluster(_) => {
                logical = None;
                continue;
            }
            _ => continue,
        };
        for b in pos / BS..(pos + len).div_ceil(BS) {
            if phys.last() != Some(&b) {
                phys.push(b);
            }
        }
    }
    Ok((phys, logical))
}

/// Checks the list of `img` (built with `flags`) against the image and
/// the source.
fn check_list(img_path: &Path, list: &str, src: &Path, flags: &[&str], failures: &mut Vec<String>) {
    let mut f = Vec::new();
    let listed = parse_list(list, &mut f);
    let img = ferrofs::Image::open_path(img_path).unwrap();
    let image = fs::File::open(img_path).unwrap();
    let compressed = flags.iter().any(|x| x.starts_with("-z"));
    let chunked = flags.iter().any(|x| x.starts_with("--chunksize"));
    let mut seen_paths = BTreeSet::new();
    let mut seen_blocks = BTreeSet::new();
    for (names, data) in source_files(src) {
        let hits: Vec<&String> = names
            .iter()
            .filter(|n| listed.contains_key(&format!("/system/{n}")))
            .collect();
        let (mapped, logical) = match mapped_blocks(&img, &names[0]) {
            Ok(m) => m,
            Err(e) => {
                f.push(e);
                continue;
            }
        };
        let name = &names[0];
        if hits.len() > 1 {
            f.push(format!("{names:?}: one inode listed under {hits:?}"));
        }
        let Some(path) = hits.first().map(|n| format!("/system/{n}")) else {
            // Not listed: its data takes no block (inline, small).
            if !mapped.is_empty() || (!compressed && data.len() as u64 >= BS) {
                f.push(format!("{name}: not listed, data in blocks {mapped:?}"));
            }
            continue;
        };
        seen_paths.insert(path.clone());
        let blocks = &listed[&path];
        for b in blocks {
            if !seen_blocks.insert(*b) {
                f.push(format!("{path}: block {b} is listed twice"));
            }
        }
        // What the reader maps the file to, in the same order.
        if *blocks != mapped {
            f.push(format!("{path}: listed {blocks:?}, mapped {mapped:?}"));
        }
        // Flat and chunk-based: the listed blocks hold the file's bytes,
        // block by block (leaving out holes and an inline tail).
        let Some(logical) = logical else { continue };
        let want: Vec<Vec<u8>> = logical
            .iter()
            .map(|&k| {
                let from = ((k * BS) as usize).min(data.len());
                let mut b = data[from..(from + BS as usize).min(data.len())].to_vec();
                b.resize(BS as usize, 0);
                b
            })
            .collect();
        // Holes are left out: the sparse file is always chunk-based, and
        // with --chunksize=4096 every block of zeros is a hole.
        let holes = name == "lib/sparse" || (chunked && name == "lib/zeros-inside");
        if holes && logical.len() as u64 >= (data.len() as u64).div_ceil(BS) {
            f.push(format!("{path}: its holes are listed"));
        }
        let got: Vec<Vec<u8>> = blocks
            .iter()
            .map(|&b| {
                let mut buf = vec![0u8; BS as usize];
                image.read_exact_at(&mut buf, b * BS).unwrap();
                buf
            })
            .collect();
        if got != want {
            f.push(format!(
                "{path}: {} blocks listed do not hold its {} bytes",
                blocks.len(),
                data.len()
            ));
        }
    }
    for p in listed.keys() {
        if !seen_paths.contains(p) {
            f.push(format!("{p}: listed, but not a regular file with data"));
        }
    }
    if listed.is_empty() {
        f.push("nothing listed".into());
    }
    failures.extend(f.into_iter().map(|e| format!("{flags:?}: {e}")));
}

#[test]
fn block_list_names_the_blocks_of_every_file() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("android_block_list");
    let src = work.join("tree");
    make_tree(&src);
    let link = dropin_link(&work);
    let variants: &[&[&str]] = &[
        &[],
        &["-zlz4hc", "-C16384"],
        &["-zlz4hc,9", "-C65536", "-Eztailpacking"],
        &["--chunksize=4096"],
    ];
    let mut failures = Vec::new();
    for (i, flags) in variants.iter().enumerate() {
        let img = work.join(format!("s{i}.img"));
        let list = work.join(format!("s{i}.map"));
        let built = run_ok(
            Command::new(&link)
                .args(["-Uclear", "--quiet", "--mount-point=/system"])
                .arg(format!("--block-list-file={}", list.display()))
                .args(*flags)
                .arg(&img)
                .arg(&src),
        );
        if let Err(e) = built {
            failures.push(format!("{flags:?}: {e}"));
            continue;
        }
        let text = fs::read_to_string(&list).unwrap_or_default();
        check_list(&img, &text, &src, flags, &mut failures);
        // The list changes nothing in the image.
        let plain = work.join(format!("p{i}.img"));
        match run_ok(
            Command::new(&link)
                .args(["-Uclear", "--quiet"])
                .args(*flags)
                .arg(&plain)
                .arg(&src),
        ) {
            Ok(_) if fs::read(&plain).ok() == fs::read(&img).ok() => {}
            other => failures.push(format!("{flags:?}: without the list: {other:?}")),
        }
        let name = format!("v{i}");
        failures.extend(image_reads_as_source(
            Path::new(FERROFS),
            &name,
            &img,
            &src,
            &work,
        ));
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// Without `--mount-point`, mkfs.erofs 1.8 opens (truncates) the list and
/// writes nothing to it; a list that cannot be written is refused before
/// an image is written, naming the path.
#[test]
fn block_list_without_mount_point_and_unwritable() {
    let work = work_dir!("android_block_list_errors");
    let src = work.join("tree");
    make_tree(&src);
    let link = dropin_link(&work);
    let list = work.join("old.map");
    fs::write(&list, "/system/stale 1-2\n").unwrap();
    let img = work.join("a.img");
    let out = Command::new(&link)
        .arg(format!("--block-list-file={}", list.display()))
        .args(["-zlz4hc", "-T0"])
        .arg(&img)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(&list).unwrap(), b"", "the list is not empty");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--mount-point"));
    assert!(ferrofs::Image::open_path(&img).is_ok());

    let missing = work.join("no/such/dir/list");
    let dir = work.join("tree");
    for bad in [&missing, &dir] {
        let img = work.join("bad.img");
        let out = Command::new(&link)
            .arg("--mount-point=/system")
            .arg(format!("--block-list-file={}", bad.display()))
            .arg(&img)
            .arg(&src)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(&*bad.to_string_lossy()),
            "{}: {} {err}",
            bad.display(),
            out.status
        );
        assert!(!img.exists(), "{}: an image was written", bad.display());
    }
    assert!(!missing.exists());
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}
