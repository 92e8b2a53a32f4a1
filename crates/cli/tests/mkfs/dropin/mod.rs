//! `mkfs.erofs` drop-in: the binary invoked through a symlink named
//! mkfs.erofs takes upstream's command lines. Each command line is run by
//! the drop-in and by mkfs.erofs 1.8.6; both images are mounted by the
//! kernel and must show the same tree (contents and metadata), and the
//! drop-in's image must equal `ferrofs mkfs` with the same flags byte for
//! byte. Unsupported options are refused by name and write nothing.

use std::fs;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::{corpus, tools};

use crate::{dropin_link, FERROFS};
use ferrofs_testkit::work_dir;

use ferrofs_testkit::verify::run_ok as run;

mod layers;
mod mkfs19;
mod ztail;

#[test]
fn dropin_takes_upstream_command_lines() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("dropin");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    fs::write(
        src.join("hints"),
        "65536 0 .*\\.txt$\n4096 1 ^dir\n".as_bytes(),
    )
    .unwrap();
    let link = dropin_link(&work);
    let hints = src.join("hints").to_string_lossy().into_owned();
    // Regexes, file types, an exact path written before a regex that
    // also matches it, and an unlabeled subtree.
    let contexts = work.join("file_contexts");
    fs::write(
        &contexts,
        "/.* u:object_r:default_t:s0\n\
         /links/b/h2 u:object_r:exact_t:s0\n\
         /.*\\.txt -- u:object_r:text_t:s0\n\
         /.* -d u:object_r:dir_t:s0\n\
         /.* -l u:object_r:link_t:s0\n\
         /links(/.*)? u:object_r:links_t:s0\n\
         /special(/.*)? <<none>>\n",
    )
    .unwrap();
    let contexts = format!("--file-contexts={}", contexts.display());
    // Android's block list (mkfs.erofs 1.8 built for Android; the
    // reference build is not, so upstream builds the line without it: the
    // list changes nothing in the image). Its contents are checked in
    // android_block_list.rs.
    let block_list = work.join("system.map");
    let block_list_arg = format!("--block-list-file={}", block_list.display());
    let lines: Vec<Vec<String>> = vec![
        vec!["-zlz4hc,12", "-C65536", "-Eztailpacking", "-T0", "-d0"],
        vec!["-zlzma,level=6", "-C16384", "-Efragments", "--quiet"],
        // No -Ededupe in these lines: mkfs.erofs 1.8.6 takes 90 s (zstd)
        // to 13 minutes (lz4hc,12) to deduplicate this tree, whose sparse
        // files read as 15 MiB of zeros. Dedupe is checked against the kernel
        // in density.rs and with an upstream base in base.rs.
        vec!["-zzstd", "-b", "4096", "-Lmylabel", "-d2"],
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
        vec!["--root-xattr-isize=256", "-zlz4", "--quiet"],
        vec![contexts.as_str(), "-zlz4hc", "--quiet"],
        vec![
            "--mount-point=/system",
            block_list_arg.as_str(),
            "-zlz4hc",
            "-Eztailpacking",
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
        let flags_up = flags.iter().filter(|f| !f.starts_with("--block-list-file"));
        if let Err(e) = run(Command::new(&up.path).args(flags_up).arg(&theirs).arg(&src)) {
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
        let root_icount = |img: &Path| -> Option<serde_json::Value> {
            let out = Command::new(FERROFS)
                .args(["dump", "--json", "--path", "/"])
                .arg(img)
                .output()
                .ok()?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            Some(v["xattr_icount"].clone())
        };
        if flags.iter().any(|f| f.starts_with("--root-xattr-isize")) {
            let (a, b) = (root_icount(&ours), root_icount(&theirs));
            if a.is_none() || a != b {
                failures.push(format!(
                    "{flags:?}: root xattr_icount ours {a:?} upstream {b:?}"
                ));
            }
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
    match fs::read_to_string(&block_list) {
        Ok(t) if t.starts_with("/system/") => {}
        other => failures.push(format!("--block-list-file: the list is {other:?}")),
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
    for bad in [
        "--fsalignblks=4",
        "--root-xattr-isize=12",
        "-Mjunk",
        "-Ebogus",
    ] {
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
    ferrofs_testkit::tmp::finish(&work, &failures);
}
