//! Images in the 2025 format (erofs-utils 1.9, Linux 6.15+) built by
//! `ferrofs mkfs`: the 48-bit layout (compact inodes with their own mtime
//! from a signed epoch, all-hole files without blocks), dot-omitted
//! directories, plain long-prefix tables and `--MZ`, alone and combined
//! with compression, fragments, dedupe, tail packing and chunks. Each image
//! of the corner-case tree (pre-1970 and far-future mtimes, nanoseconds,
//! sparse files, hard links, xattrs, devices) is built at `-j1` and `-j2`
//! (identical), mounted by the kernel and compared strictly with the source
//! (every mtime with its nanoseconds), extracted by `ferrofs extract`, and
//! accepted by `ferrofs fsck`, fsck.erofs 1.9.4 and dump.erofs 1.9.4; the
//! library then checks that the feature is really there.

use std::path::Path;

use ferrofs::format::inode::DataLayout;
use ferrofs::format::superblock::{compat, incompat};
use ferrofs::Image;
use ferrofs_testkit::mount::can_mount;
use ferrofs_testkit::{corpus, tools, verify};

use crate::FERROFS;
use ferrofs_testkit::work_dir;

/// What the image must show beyond reading back as its source.
fn features(img: &Path, opts: &[&str]) -> Vec<String> {
    let mut f = Vec::new();
    let image = match Image::open_path(img) {
        Ok(i) => i,
        Err(e) => return vec![format!("open: {e}")],
    };
    let sb = image.superblock();
    let has = |o: &str| opts.iter().any(|x| x.contains(o));
    if has("--zD") {
        // Directories are whole-file fragments of the packed inode.
        match image.raw().root() {
            Ok(r)
                if matches!(
                    image
                        .raw()
                        .open(r.clone())
                        .and_then(|f| f.map(0))
                        .map(|e| e.kind),
                    Ok(ferrofs::map::ExtentKind::Fragment { .. })
                ) => {}
            other => f.push(format!("root directory not in the packed inode: {other:?}")),
        }
    }
    if has("digest") {
        f.extend(digests(img, &image));
        return f;
    }
    let bit48 = has("48bit") || has("dot-omitted") || opts.iter().any(|o| o.starts_with("-m"));
    if bit48 {
        if !sb.has_incompat(incompat::BIT48) {
            f.push("no 48-bit feature bit".into());
        }
        if has("plain-xattr-prefixes") != sb.has_compat(compat::PLAIN_XATTR_PFX) {
            f.push("plain-prefix compat bit not as asked".into());
        }
        if opts.iter().any(|o| o.starts_with("-m")) {
            // Every inode of the tree lives in the metabox, the root included.
            if !sb.has_incompat(incompat::METABOX) || image.root_nid().0 >> 63 == 0 {
                f.push(format!(
                    "no metabox, or the root is outside it ({})",
                    image.root_nid()
                ));
            }
            let compressed = image.raw().metabox_file().is_some_and(|m| {
                m.extents()
                    .any(|e| matches!(e.map(|e| e.kind), Ok(ferrofs::map::ExtentKind::Pcluster(_))))
            });
            if compressed != opts.iter().any(|o| o.starts_with("-m") && o.contains(':')) {
                f.push(format!("metabox compressed: {compressed}"));
            }
        }
        // The epoch is the earliest mtime, before 1970 in this tree.
        if sb.epoch() >= 0 {
            f.push(format!("epoch {} is not the pre-1970 mtime", sb.epoch()));
        }
        let look = |p: &str| image.raw().lookup_path(p.as_bytes(), false);
        // An all-hole file needs neither blocks nor a chunk table (even with
        // --chunksize): FLAT_PLAIN with the null address.
        match look("sparse/all_hole") {
            Ok(i) if i.startblk().is_some() || i.layout() != DataLayout::FlatPlain => {
                f.push(format!(
                    "all-hole file stored as {:?} {:?}",
                    i.layout(),
                    i.startblk()
                ))
            }
            Ok(_) => {}
            Err(e) => f.push(format!("sparse/all_hole: {e}")),
        }
    }
    match image.raw().root() {
        Ok(root) => {
            let names: Vec<Vec<u8>> = image
                .raw()
                .read_dir(&root)
                .map(|v| v.into_iter().map(|e| e.name).collect())
                .unwrap_or_default();
            let dot = names.iter().any(|n| n == b".");
            if root.dot_omitted() != has("dot-omitted") || dot == has("dot-omitted") {
                f.push(format!(
                    "root: dot_omitted {} with a '.' entry {dot}",
                    root.dot_omitted()
                ));
            }
            if !root.is_extended() && root.mtime() < 0 {
                f.push("a compact root with a negative mtime".into());
            }
        }
        Err(e) => f.push(format!("root: {e}")),
    }
    // Compact inodes hold mtimes of this century exactly (nanoseconds as
    // the image's fixed value); only the outliers need extended inodes.
    let mut compact = 0;
    let mut total = 0;
    let mut extent_mapped = 0;
    let mut stack = vec![image.raw().root().map(|r| r.nid())];
    while let Some(Ok(nid)) = stack.pop() {
        let Ok(ino) = image.raw().inode(nid) else {
            continue;
        };
        total += 1;
        compact += usize::from(!ino.is_extended());
        if let Ok(f) = image.raw().open(ino.clone()) {
            extent_mapped += usize::from(matches!(f.data_map(), ferrofs::map::DataMap::Extents(_)));
        }
        if ino.is_dir() {
            for e in image.raw().read_dir(&ino).unwrap_or_default() {
                if !e.is_dot() {
                    stack.push(Ok(e.nid));
                }
            }
        }
    }
    if compact * 2 < total {
        f.push(format!("only {compact} of {total} inodes are compact"));
    }
    // Files keep lcluster indexes (the kernel reads more around a file
    // mapped by extent records); in 48-bit images the packed inode, read a
    // page at a time, is mapped by extent records from 16 KiB pclusters up
    // (smaller than its lcluster indexes).
    if extent_mapped != 0 {
        f.push(format!(
            "{extent_mapped} files are mapped by encoded extents"
        ));
    }
    let big_pclusters = opts.iter().any(|o| {
        o.strip_prefix("-C")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|c| c >= 16384)
    });
    if let Some(packed) = image.raw().packed_file() {
        let by_extents = matches!(packed.data_map(), ferrofs::map::DataMap::Extents(_));
        if bit48 && big_pclusters && !by_extents {
            f.push("the packed inode is not mapped by encoded extents".into());
        }
    }
    f
}

/// SHA-256 of a file, by `sha256sum`.
fn sha256(path: &Path) -> Vec<u8> {
    let out = verify::run_ok(std::process::Command::new("sha256sum").arg(path)).unwrap();
    let hex = String::from_utf8_lossy(&out[..64]).into_owned();
    (0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// The fingerprints of an `--xattr-inode-digest` image: fsck.erofs 1.9.x
/// verifies every one, and a file's is `sha256:` and its SHA-256.
fn digests(img: &Path, image: &Image) -> Vec<String> {
    let mut f = Vec::new();
    if !image.superblock().has_compat(compat::ISHARE_XATTRS) {
        f.push("no ishare_xattrs compat bit".into());
    }
    if let Some(fsck) = tools::fsck_next() {
        if let Err(e) = verify::run_ok(
            std::process::Command::new(&fsck.path)
                .arg("--xattr-inode-digest")
                .arg(img),
        ) {
            f.push(format!("fsck.erofs --xattr-inode-digest: {e}"));
        }
    }
    let src = img.parent().unwrap().join("tree");
    for p in ["files/text/t4097", "files/repeat_a"] {
        let ino = match image.raw().lookup_path(p.as_bytes(), false) {
            Ok(i) => i,
            Err(e) => {
                f.push(format!("{p}: {e}"));
                continue;
            }
        };
        let mut want = b"sha256:".to_vec();
        want.extend(sha256(&src.join(p)));
        match image.raw().fingerprint(&ino) {
            Ok(Some(v)) if v == want => {}
            other => f.push(format!("{p}: fingerprint {other:?}")),
        }
    }
    f
}

/// `ferrofs fsck` recomputes fingerprints: a flipped data byte the kernel
/// would serve silently is reported.
#[test]
fn fsck_notices_a_fingerprint_that_does_not_match() {
    let work = work_dir!("mkfs_format19_digest");
    let src = work.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let marker = b"a marker line that lies in the image once\n".repeat(200);
    std::fs::write(src.join("f"), &marker).unwrap();
    let img = work.join("d.img");
    verify::run_ok(
        std::process::Command::new(FERROFS)
            .args(["mkfs", "--quiet", "--xattr-inode-digest"])
            .arg(&img)
            .arg(&src),
    )
    .unwrap();
    verify::run_ok(std::process::Command::new(FERROFS).arg("fsck").arg(&img)).unwrap();
    let mut bytes = std::fs::read(&img).unwrap();
    let at = bytes
        .windows(64)
        .position(|w| w == &marker[..64])
        .expect("the file's bytes are stored as they are");
    bytes[at + 7] ^= 0x20;
    std::fs::write(&img, &bytes).unwrap();
    let out = std::process::Command::new(FERROFS)
        .arg("fsck")
        .arg(&img)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "fsck accepted a file whose fingerprint does not match"
    );
    assert!(
        text.contains("/f") && text.contains("fingerprint does not match"),
        "{text}"
    );
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// Whether the kernel can mount images here (else why not); fsck.erofs
/// 1.9.x must be installed.
fn kernel_and_fsck_next() -> Result<(), String> {
    can_mount()?;
    assert!(
        tools::fsck_next().is_some(),
        "fsck.erofs 1.9.x is missing: run ../shared/tools/upstream-tools --next or set UPSTREAM_NEXT_BIN"
    );
    Ok(())
}

#[test]
fn images_in_the_2025_format_read_back_through_the_kernel() {
    if let Err(why) = kernel_and_fsck_next() {
        return println!("skipped: {why}");
    }
    let work = work_dir!("mkfs_format19");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("e48", vec!["-E48bit"]),
        (
            "e48_lz4hc_frag_dedupe",
            vec!["-E48bit", "-zlz4hc", "-C65536", "-Efragments,dedupe"],
        ),
        (
            "e48_zstd_ztail",
            vec!["-E48bit", "-zzstd", "-Eztailpacking"],
        ),
        (
            "dot_omitted_lzma",
            vec!["-Edot-omitted", "-zlzma", "-C16384"],
        ),
        ("e48_chunks", vec!["-E48bit", "--chunksize=8192"]),
        (
            "e48_plain_prefix_frag",
            vec![
                "-E48bit,plain-xattr-prefixes",
                "--xattr-prefix=trusted.overlay.",
                "-zlz4",
                "-Efragments",
            ],
        ),
        ("MZ_noinline", vec!["--MZ", "-E48bit", "-Enoinline_data"]),
        (
            "digest_lz4hc_frag",
            vec!["--xattr-inode-digest", "-zlz4hc", "-Efragments"],
        ),
        ("metabox", vec!["-m4096"]),
        ("zD", vec!["--zD"]),
        (
            "zD_lz4hc_frag_prefix",
            vec![
                "--zD",
                "-zlz4hc",
                "-Efragments",
                "--xattr-prefix=security.cap",
            ],
        ),
        (
            "zD_metabox_zstd_kitchen_sink",
            vec![
                "--zD",
                "-m4096:zstd",
                "-zzstd",
                "-C65536",
                "-Edot-omitted,fragments,dedupe,ztailpacking",
                "-x1",
            ],
        ),
        (
            "metabox_lz4hc_tail_frag_prefix",
            vec![
                "-m4096:lz4hc",
                "-zlz4hc",
                "-C16384",
                "-Eztailpacking,fragments,dedupe",
                "--xattr-prefix=security.cap",
                "-x1",
            ],
        ),
        (
            "metabox_zstd_plain_prefix_dot",
            vec![
                "-m16384:zstd",
                "-zlzma",
                "-C65536",
                "-Edot-omitted,plain-xattr-prefixes",
                "--xattr-prefix=security.cap",
            ],
        ),
    ];
    ferrofs_testkit::tmp::parallel_checks(&work, cases.len(), |i| {
        let (name, opts) = &cases[i];
        let img = work.join(format!("{name}.img"));
        let owned: Vec<String> = opts.iter().map(|s| s.to_string()).collect();
        let mut f = verify::build_and_read_back(FERROFS.as_ref(), name, &owned, &img, &src, &work);
        if img.exists() {
            f.extend(
                features(&img, opts)
                    .into_iter()
                    .map(|e| format!("{name}: {e}")),
            );
        }
        f
    });
}

/// A metabox over 512 KiB is compressed in several segments at once (an
/// inode compressed alone is cut finer than a file): built at `-j1` and
/// `-j2` (identical), it reads back through the kernel, `ferrofs
/// extract`, `ferrofs fsck` and fsck.erofs 1.9.4, for zstd (the prefix
/// search below 16 KiB) and LZ4HC (native fixed output).
#[test]
fn a_metabox_of_several_segments_reads_back_through_the_kernel() {
    if let Err(why) = kernel_and_fsck_next() {
        return println!("skipped: {why}");
    }
    let work = work_dir!("mkfs_metabox_segments");
    let src = work.join("tree");
    // 12,000 small files with inline tails: about 1.2 MB of inode records.
    for d in 0..120 {
        let dir = src.join(format!("directory-{d:03}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..100 {
            let body = format!("file {f} of directory {d}: {}\n", "x".repeat(f % 37));
            std::fs::write(
                dir.join(format!("a-file-with-a-longer-name-{f:03}.txt")),
                body,
            )
            .expect("write");
        }
    }
    let cases: [(&str, &[&str]); 2] = [
        ("zstd", &["-m4096:zstd", "-zzstd", "-Eztailpacking"]),
        ("lz4hc", &["-m4096:lz4hc", "-zlz4hc", "-Efragments"]),
    ];
    ferrofs_testkit::tmp::parallel_checks(&work, cases.len(), |i| {
        let (name, opts) = cases[i];
        let img = work.join(format!("{name}.img"));
        let owned: Vec<String> = opts.iter().map(|s| s.to_string()).collect();
        let mut f = verify::build_and_read_back(FERROFS.as_ref(), name, &owned, &img, &src, &work);
        if let Ok(image) = Image::open_path(&img) {
            match image.raw().metabox_file() {
                Some(m) if m.size() > 512 << 10 => {}
                Some(m) => f.push(format!(
                    "{name}: metabox of {} bytes, one segment",
                    m.size()
                )),
                None => f.push(format!("{name}: no metabox")),
            }
        }
        f
    });
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// Fields of the 48-bit layout mkfs never writes for this tree, patched in
/// by hand (the superblock checksum redone): a negative epoch moves every
/// compact inode's mtime, and NLINK_1 on a compact file with a 32-bit
/// address reads as nlink 1 with the same bytes. The library and `ferrofs
/// extract` must read them as the kernel does.
#[test]
fn hand_patched_48bit_fields_read_as_the_kernel_reads_them() {
    use ferrofs::format::superblock::{checksum_len, compute_checksum};
    if let Err(why) = can_mount() {
        return println!("skipped: {why}");
    }
    let work = work_dir!("mkfs_format19_patch");
    let src = work.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("one"), b"a file with one name\n").unwrap();
    std::fs::write(src.join("two"), b"a file with two names\n").unwrap();
    std::fs::hard_link(src.join("two"), src.join("two-again")).unwrap();
    for n in ["one", "two", "."] {
        corpus::set_mtime(&src.join(n), 1_700_000_000, 0).unwrap();
    }
    let img = work.join("p.img");
    verify::run_ok(
        std::process::Command::new(FERROFS)
            .args(["mkfs", "--quiet", "-E48bit"])
            .arg(&img)
            .arg(&src),
    )
    .unwrap();
    let (one_pos, bs) = {
        let image = Image::open_path(&img).unwrap();
        let one = image.raw().lookup_path(b"one", false).unwrap();
        assert!(!one.is_extended() && one.nlink() == 1);
        (one.pos().offset(), image.block_size())
    };
    let mut bytes = std::fs::read(&img).unwrap();
    // Epoch -86400 * 365 (a year before 1970) instead of 1700000000.
    let epoch: i64 = -31_536_000;
    bytes[1024 + 0x18..1024 + 0x20].copy_from_slice(&epoch.to_le_bytes());
    // NLINK_1 on "one": i_format bit 4, i_nb (its nlink field) 0.
    let at = one_pos as usize;
    bytes[at] |= 0x10;
    bytes[at + 6..at + 8].copy_from_slice(&0u16.to_le_bytes());
    let len = checksum_len(bs);
    let crc = compute_checksum(&bytes[1024..1024 + len]);
    bytes[1028..1032].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&img, &bytes).unwrap();

    let image = Image::open_path(&img).unwrap();
    let one = image.raw().lookup_path(b"one", false).unwrap();
    let two = image.raw().lookup_path(b"two", false).unwrap();
    assert_eq!(one.nlink(), 1);
    assert_eq!(two.nlink(), 2);
    let mnt = ferrofs_testkit::LoopMount::new(&img, &[]).expect("kernel mount");
    use std::os::unix::fs::MetadataExt;
    for (name, ino) in [("one", &one), ("two", &two)] {
        let m = std::fs::metadata(mnt.path().join(name)).unwrap();
        assert_eq!(
            (m.mtime(), m.nlink()),
            (ino.mtime(), u64::from(ino.nlink())),
            "{name}"
        );
    }
    // Every mtime was the old epoch (offset 0): now it is the new epoch.
    assert_eq!(one.mtime(), epoch);
    assert_eq!(
        std::fs::read(mnt.path().join("one")).unwrap(),
        b"a file with one name\n"
    );
    let out = work.join("out");
    verify::run_ok(
        std::process::Command::new(FERROFS)
            .arg("extract")
            .arg(&img)
            .arg(&out),
    )
    .unwrap();
    let diffs = ferrofs_testkit::compare::compare_trees(
        mnt.path(),
        &out,
        &ferrofs_testkit::compare::CompareOptions::strict(),
    );
    assert!(diffs.is_empty(), "extract vs kernel: {diffs:#?}");
    drop(mnt);
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}
