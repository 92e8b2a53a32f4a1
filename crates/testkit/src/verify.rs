//! Checks shared by the tests of images ferrofs builds: the same build at
//! two thread counts must give the same bytes, and a built image must read
//! back as its source through the kernel, through `ferrofs extract`, and
//! pass both fscks.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::compare::{compare_trees, CompareOptions};
use crate::mount::LoopMount;
use crate::tools;

/// Runs `cmd`; its stdout on success, else the exit status and stderr.
pub fn run_ok(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Builds `img` from `src` with `ferrofs mkfs OPTS` on two worker threads
/// and again on one; the two images must be equal. The one-thread copy is
/// removed. Failures are prefixed with `name`.
pub fn build_at_two_thread_counts(
    ferrofs: &Path,
    name: &str,
    opts: &[String],
    img: &Path,
    src: &Path,
) -> Result<(), Vec<String>> {
    let one = img.with_extension("j1.img");
    for (out, j) in [(img, "2"), (one.as_path(), "1")] {
        run_ok(
            Command::new(ferrofs)
                .args(["mkfs", "--quiet"])
                .args(opts)
                .args(["-j", j])
                .arg(out)
                .arg(src),
        )
        .map_err(|e| vec![format!("{name}: mkfs: {e}")])?;
    }
    let same = fs::read(img).ok() == fs::read(&one).ok();
    let _ = fs::remove_file(&one);
    if same {
        Ok(())
    } else {
        Err(vec![format!("{name}: -j1 and -j2 images differ")])
    }
}

/// Checks image `img` of tree `src`: the kernel's mount shows `src`
/// (contents and metadata), `ferrofs extract` (into a directory under
/// `work`) gives what the kernel shows, and `ferrofs fsck`, fsck.erofs
/// 1.8.6 (for images it can read) and 1.9.x, and dump.erofs 1.9.x's
/// statistics walk (when installed) accept it. Returns the failures, prefixed with
/// `name`.
pub fn image_reads_as_source(
    ferrofs: &Path,
    name: &str,
    img: &Path,
    src: &Path,
    work: &Path,
) -> Vec<String> {
    let mut f = Vec::new();
    let mut extract_json = None;
    match LoopMount::new(img, &[]) {
        Ok(mnt) => {
            for d in compare_trees(src, mnt.path(), &CompareOptions::strict()) {
                f.push(format!("{name}: kernel vs source: {d}"));
            }
            // The comparison skips "." and ".."; readdir must list them
            // (an entry of inode 0 is one `ls` takes for deleted).
            match run_ok(Command::new("ls").arg("-a1f").arg(mnt.path())) {
                Ok(out) => {
                    let names: Vec<&[u8]> = out.split(|&c| c == b'\n').collect();
                    if !names.contains(&&b"."[..]) || !names.contains(&&b".."[..]) {
                        f.push(format!("{name}: ls -a of the root lacks . or .."));
                    }
                }
                Err(e) => f.push(format!("{name}: ls -a: {e}")),
            }
            let out = work.join(format!("{name}-out"));
            let cmd = Command::new(ferrofs)
                .arg("extract")
                .arg("--json")
                .arg(img)
                .arg(&out)
                .output();
            match cmd {
                Ok(o) if o.status.success() => {
                    for d in compare_trees(mnt.path(), &out, &CompareOptions::strict()) {
                        f.push(format!("{name}: extract vs kernel: {d}"));
                    }
                    extract_json = Some(o.stdout);
                }
                Ok(o) => f.push(format!(
                    "{name}: extract: {}: {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                )),
                Err(e) => f.push(format!("{name}: extract: {e}")),
            }
            let _ = crate::tmp::remove_tree(&out);
        }
        Err(e) => f.push(format!("{name}: kernel mount failed: {e}")),
    }
    match run_ok(Command::new(ferrofs).args(["fsck", "--json"]).arg(img)) {
        Ok(fsck) => f.extend(
            decoded_once(ferrofs, img, &fsck, extract_json.as_deref())
                .into_iter()
                .map(|e| format!("{name}: {e}")),
        ),
        Err(e) => f.push(format!("{name}: ferrofs fsck: {e}")),
    }
    // fsck.erofs 1.8.6 for images in the format it knows; 1.9.x (fsck, and
    // dump's statistics walk) for every image.
    let fscks = (!uses_2025_features(img))
        .then(tools::fsck_upstream)
        .flatten()
        .into_iter()
        .chain(tools::fsck_next());
    for fsck in fscks {
        if let Err(e) = run_ok(Command::new(&fsck.path).arg(img)) {
            f.push(format!("{name}: fsck.erofs {}: {e}", fsck.version));
        }
    }
    if let Some(dump) = tools::dump_next() {
        if let Err(e) = run_ok(Command::new(&dump.path).arg("-S").arg(img)) {
            f.push(format!("{name}: dump.erofs {} -S: {e}", dump.version));
        }
    }
    f
}

/// Checks that `ferrofs extract` and `ferrofs fsck` give the same result
/// on one thread and on three: the same `--json` summary and report, and
/// extracted trees equal in contents and metadata. Returns the failures,
/// prefixed with `name`.
pub fn same_for_any_thread_count(
    ferrofs: &Path,
    name: &str,
    img: &Path,
    work: &Path,
) -> Vec<String> {
    let mut f = Vec::new();
    let mut runs = Vec::new();
    for j in ["1", "3"] {
        let out = work.join(format!("{name}-j{j}"));
        let x = run_ok(
            Command::new(ferrofs)
                .args(["extract", "--json", "-j", j])
                .arg(img)
                .arg(&out),
        );
        let c = run_ok(
            Command::new(ferrofs)
                .args(["fsck", "--json", "-j", j])
                .arg(img),
        );
        match (x, c) {
            (Ok(x), Ok(c)) => runs.push((out, x, c)),
            (Err(e), _) => f.push(format!("{name}: extract -j{j}: {e}")),
            (_, Err(e)) => f.push(format!("{name}: fsck -j{j}: {e}")),
        }
    }
    if let [(a, xa, ca), (b, xb, cb)] = &runs[..] {
        if xa != xb {
            f.push(format!(
                "{name}: extract --json differs between -j1 and -j3"
            ));
        }
        if ca != cb {
            f.push(format!("{name}: fsck --json differs between -j1 and -j3"));
        }
        for d in compare_trees(a, b, &CompareOptions::strict()) {
            f.push(format!("{name}: extract -j1 vs -j3: {d}"));
        }
    }
    for (out, _, _) in &runs {
        let _ = crate::tmp::remove_tree(out);
    }
    f
}

/// Checks that `ferrofs fsck` (its `--json` report `fsck`) decoded every
/// compressed pcluster of the image exactly once, counting them as
/// `ferrofs dump`'s statistics walk does (the tree's pclusters and the
/// packed inode's), and that `ferrofs extract` (its `--json` summary, when
/// given) decoded each pcluster it needed once. Returns the failures.
pub fn decoded_once(
    ferrofs: &Path,
    img: &Path,
    fsck: &[u8],
    extract: Option<&[u8]>,
) -> Vec<String> {
    let mut f = Vec::new();
    let parse = |what: &str, b: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(b).map_err(|e| format!("{what} --json: {e}"))
    };
    let num = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(u64::MAX);
    let stats = run_ok(Command::new(ferrofs).args(["dump", "--json"]).arg(img))
        .and_then(|b| parse("dump", &b));
    let (fsck, stats) = match (parse("fsck", fsck), stats) {
        (Ok(a), Ok(b)) => (a, b["statistics"].clone()),
        (Err(e), _) | (_, Err(e)) => return vec![e],
    };
    // Compressed pclusters only ("plain" and "interlaced" are stored raw).
    let tree: u64 = stats["pclusters"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "plain" | "interlaced"))
                .map(|(_, v)| v["pclusters"].as_u64().unwrap_or(0))
                .sum()
        })
        .unwrap_or(0);
    let special = |k: &str| stats[k]["compressed_pclusters"].as_u64().unwrap_or(0);
    let image = tree + special("packed_inode") + special("metabox_inode");
    let (n, dec, cached) = (
        num(&fsck, "pclusters"),
        num(&fsck, "pclusters_decoded"),
        num(&fsck, "pclusters_cached"),
    );
    // The command decoded each exactly once (its count includes the
    // decodes at open: long xattr prefixes, the metabox's first inodes).
    if n != image || dec != image {
        f.push(format!(
            "fsck: {dec} pclusters decoded + {cached} cached of {n}, but the image has {image}"
        ));
    }
    if let Some(x) = extract {
        match parse("extract", x) {
            Ok(x) => {
                let (n, dec, cached) = (
                    num(&x, "pclusters"),
                    num(&x, "pclusters_decoded"),
                    num(&x, "pclusters_cached"),
                );
                // At most once each (directories of --zD images included),
                // and every pcluster the files need was read.
                if n > image || dec > image || dec.saturating_add(cached) < n {
                    f.push(format!(
                        "extract: {dec} pclusters decoded + {cached} cached of {n} needed (the image has {image})"
                    ));
                }
            }
            Err(e) => f.push(e),
        }
    }
    f
}

/// Whether the image at `img` sets an incompat feature of the 2025 format
/// (48-bit layout, metabox), which erofs-utils 1.8 does not read.
pub fn uses_2025_features(img: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; 4];
    fs::File::open(img)
        .and_then(|f| f.read_exact_at(&mut b, 1024 + 0x50))
        .is_ok_and(|()| u32::from_le_bytes(b) & 0x180 != 0)
}

/// [`build_at_two_thread_counts`], then (when the build worked)
/// [`image_reads_as_source`]: the failures of both.
pub fn build_and_read_back(
    ferrofs: &Path,
    name: &str,
    opts: &[String],
    img: &Path,
    src: &Path,
    work: &Path,
) -> Vec<String> {
    match build_at_two_thread_counts(ferrofs, name, opts, img, src) {
        Ok(()) => image_reads_as_source(ferrofs, name, img, src, work),
        Err(e) => e,
    }
}
