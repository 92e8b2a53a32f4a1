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

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ferrofs::format::inode::DataLayout;
use ferrofs::format::superblock::{compat, incompat};
use ferrofs::Image;
use ferrofs_testkit::mount::can_mount;
use ferrofs_testkit::{corpus, tools, verify};

const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

fn work_dir(name: &str) -> PathBuf {
    ferrofs_testkit::tmp::fresh_run_dir(&Path::new(env!("CARGO_TARGET_TMPDIR")).join(name))
}

/// What the image must show beyond reading back as its source.
fn features(img: &Path, opts: &[&str]) -> Vec<String> {
    let mut f = Vec::new();
    let image = match Image::open_path(img) {
        Ok(i) => i,
        Err(e) => return vec![format!("open: {e}")],
    };
    let sb = image.superblock();
    let has = |o: &str| opts.iter().any(|x| x.contains(o));
    if has("digest") {
        f.extend(digests(img, &image));
        return f;
    }
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
        let compressed = image.metabox_file().is_some_and(|m| {
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
    let look = |p: &str| image.lookup_path(p.as_bytes(), false);
    // An all-hole file needs neither blocks nor a chunk table (even with
    // --chunksize): FLAT_PLAIN with the null address.
    match look("sparse/all_hole") {
        Ok(i) if i.startblk.is_some() || i.layout != DataLayout::FlatPlain => f.push(format!(
            "all-hole file stored as {:?} {:?}",
            i.layout, i.startblk
        )),
        Ok(_) => {}
        Err(e) => f.push(format!("sparse/all_hole: {e}")),
    }
    match image.root() {
        Ok(root) => {
            let names: Vec<Vec<u8>> = image
                .read_dir(&root)
                .map(|v| v.into_iter().map(|e| e.name).collect())
                .unwrap_or_default();
            let dot = names.iter().any(|n| n == b".");
            if root.dot_omitted != has("dot-omitted") || dot == has("dot-omitted") {
                f.push(format!(
                    "root: dot_omitted {} with a '.' entry {dot}",
                    root.dot_omitted
                ));
            }
            if !root.extended && root.mtime < 0 {
                f.push("a compact root with a negative mtime".into());
            }
        }
        Err(e) => f.push(format!("root: {e}")),
    }
    // Compact inodes hold mtimes of this century exactly (nanoseconds as
    // the image's fixed value); only the outliers need extended inodes.
    let mut compact = 0;
    let mut total = 0;
    let mut stack = vec![image.root().map(|r| r.nid)];
    while let Some(Ok(nid)) = stack.pop() {
        let Ok(ino) = image.inode(nid) else { continue };
        total += 1;
        compact += usize::from(!ino.extended);
        if ino.is_dir() {
            for e in image.read_dir(&ino).unwrap_or_default() {
                if !e.is_dot() {
                    stack.push(Ok(e.nid));
                }
            }
        }
    }
    if compact * 2 < total {
        f.push(format!("only {compact} of {total} inodes are compact"));
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
        let ino = match image.lookup_path(p.as_bytes(), false) {
            Ok(i) => i,
            Err(e) => {
                f.push(format!("{p}: {e}"));
                continue;
            }
        };
        let mut want = b"sha256:".to_vec();
        want.extend(sha256(&src.join(p)));
        match ferrofs::xattr::fingerprint(image, &ino) {
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
    let work = work_dir("mkfs_format19_digest");
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

#[test]
fn images_in_the_2025_format_read_back_through_the_kernel() {
    if let Err(why) = can_mount() {
        return println!("skipped: {why}");
    }
    assert!(
        tools::fsck_next().is_some(),
        "fsck.erofs 1.9.x is missing: run ../shared/tools/upstream-tools --next or set UPSTREAM_NEXT_BIN"
    );
    let work = work_dir("mkfs_format19");
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
    let failures = Mutex::new(Vec::new());
    ferrofs_testkit::tmp::parallel(cases.len(), 2, |i| {
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
        failures.lock().unwrap().extend(f);
    });
    let failures = failures.into_inner().unwrap();
    if failures.is_empty() {
        let _ = ferrofs_testkit::tmp::remove_tree(&work);
    }
    assert!(
        failures.is_empty(),
        "{} failures (work in {}):\n{}",
        failures.len(),
        work.display(),
        failures.join("\n")
    );
}
