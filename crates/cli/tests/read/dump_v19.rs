//! `ferrofs dump` on the erofs-utils 1.9.4 reference images (testdata/v19):
//! the superblock's 48-bit fields (signed epoch, build time, 48-bit block
//! count, metabox nid, fingerprint prefix), per-inode flags (metabox,
//! NLINK_1, dot-omitted, 48-bit start block, all-hole), the extent table of
//! extent-mapped inodes, and the statistics that count them. Where
//! `dump.erofs` 1.9.4 prints the same fact (superblock fields, extents,
//! file counts) the two must agree; without it those cross-checks print
//! `skipped: <reason>` and the fixed expectations still run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::tools;
use serde_json::Value;

use crate::FERROFS;

fn v19(name: &str) -> PathBuf {
    tools::workspace_root().join("testdata/v19").join(name)
}

fn all_images() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(tools::workspace_root().join("testdata/v19"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "erofs"))
        .collect();
    out.sort();
    assert!(out.len() >= 29, "testdata/v19 has {} images", out.len());
    out
}

/// `ferrofs dump --json ARGS IMAGE`.
fn dump(img: &Path, args: &[&str]) -> Value {
    let out = Command::new(FERROFS)
        .arg("dump")
        .arg("--json")
        .args(args)
        .arg(img)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dump {args:?} {}: {}",
        img.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `ferrofs dump ARGS IMAGE` as text.
fn dump_text(img: &Path, args: &[&str]) -> String {
    let out = Command::new(FERROFS)
        .arg("dump")
        .args(args)
        .arg(img)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// `dump.erofs ARGS IMAGE` 1.9.x in UTC, or `None` (with a skip line).
fn dump_erofs(img: &Path, args: &[&str]) -> Option<String> {
    let Some(tool) = tools::dump_next() else {
        println!("skipped: dump.erofs 1.9.x not found (run ../shared/tools/upstream-tools --next)");
        return None;
    };
    let out = Command::new(&tool.path)
        .args(args)
        .arg(img)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} {args:?} {}: {}",
        tool.describe(),
        img.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

/// `Filesystem FIELD:   value` lines of `dump.erofs -s`/`-S`.
fn fields(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("Filesystem "))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// `Tue Nov 14 22:13:20 2023` -> `2023-11-14 22:13:20`.
fn ctime_to_iso(s: &str) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let p: Vec<&str> = s.split_whitespace().collect();
    assert_eq!(p.len(), 5, "{s}");
    let m = MONTHS.iter().position(|&x| x == p[1]).unwrap() + 1;
    let d: u32 = p[2].parse().unwrap();
    format!("{}-{m:02}-{d:02} {}", p[4], p[3])
}

/// One row of `dump.erofs -e`: logical start, logical length, physical
/// start, physical length.
type Row = (u64, u64, u64, u64);

fn extent_rows(text: &str) -> Vec<Row> {
    let num = |s: &str| -> u64 { s.trim().parse().unwrap() };
    text.lines()
        .filter_map(|l| {
            let (idx, rest) = l.split_once(':')?;
            idx.trim().parse::<u64>().ok()?;
            let (logical, physical) = rest.split_once(':')?;
            let (lr, llen) = logical.split_once('|')?;
            let (pr, plen) = physical.split_once('|')?;
            let (ls, _) = lr.split_once("..")?;
            let (ps, _) = pr.split_once("..")?;
            Some((num(ls), num(llen), num(ps), num(plen)))
        })
        .collect()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

#[test]
fn superblock_fields_of_v19_images() {
    // Fixed facts from the fixtures' README.
    let sb = |name: &str| dump(&v19(name), &[])["superblock"].clone();
    let t = sb("e48-times-T5e9.erofs");
    assert_eq!(t["epoch"], 705_032_705);
    assert_eq!(t["build_time"], 0xffff_ffffu32);
    assert_eq!(t["created"], 5_000_000_000u64);
    assert_eq!(t["created_utc"], "2128-06-11 08:53:20");
    let t = sb("e48-times.erofs");
    assert_eq!(
        (t["epoch"].clone(), t["build_time"].clone()),
        (0.into(), 0x6553_f100u32.into())
    );
    let t = sb("times-ext.erofs");
    assert_eq!(
        (t["epoch"].clone(), t["build_time"].clone()),
        (1_700_000_000.into(), 0.into())
    );
    assert_eq!(t["created_utc"], "2023-11-14 22:13:20");
    let k = sb("kitchen-sink.erofs");
    assert_eq!(k["root_nid"], 1u64 << 63);
    assert_eq!(k["root_in_metabox"], true);
    assert_eq!(k["metabox"]["nid"], 38);
    assert_eq!(k["metabox"]["map"], "extents, 4-byte records");
    assert_eq!(k["sb_size"], 144);
    assert_eq!(k["packed_nid"], 41);
    let m = sb("m4k.erofs");
    assert_eq!(m["metabox"]["layout"], "flat_plain");
    assert_eq!(m["metabox"]["size"], 36864);
    assert_eq!(sb("e48.erofs")["metabox"], Value::Null);
    assert_eq!(sb("e48.erofs")["root_in_metabox"], false);
    assert_eq!(
        sb("digest.erofs")["ishare_xattr_prefix"],
        serde_json::json!({"id": 0, "name": "erofs.fingerprint.v1"})
    );
    assert_eq!(
        sb("digest-user-fp.erofs")["ishare_xattr_prefix"]["name"],
        "user.fp."
    );
    assert_eq!(sb("e48.erofs")["ishare_xattr_prefix"], Value::Null);
    // The text form carries the same fields.
    let text = dump_text(&v19("e48-times-T5e9.erofs"), &[]);
    for want in [
        "epoch: 705032705",
        "build_time: 4294967295",
        "created_utc: 2128-06-11 08:53:20",
    ] {
        assert!(text.contains(want), "text dump lacks {want:?}:\n{text}");
    }

    // Every image against dump.erofs -s.
    let mut checked = 0;
    for img in all_images() {
        let Some(text) = dump_erofs(&img, &["-s"]) else {
            return;
        };
        let f = fields(&text);
        let ours = dump(&img, &[])["superblock"].clone();
        let name = img.file_name().unwrap().to_string_lossy().into_owned();
        let num = |k: &str| -> u64 { f[k].parse().unwrap_or_else(|_| panic!("{name}: {k}")) };
        assert_eq!(u(&ours["blocks"]), num("blocks"), "{name}: blocks");
        assert_eq!(u(&ours["root_nid"]), num("root nid"), "{name}: root nid");
        assert_eq!(u(&ours["inodes"]), num("inode count"), "{name}: inodes");
        assert_eq!(u(&ours["sb_size"]), num("sb_size"), "{name}: sb_size");
        assert_eq!(
            ours["created_utc"].as_str().unwrap(),
            ctime_to_iso(&f["created"]),
            "{name}: created"
        );
        match f.get("metabox nid") {
            Some(n) => assert_eq!(
                u(&ours["metabox"]["nid"]),
                n.parse::<u64>().unwrap(),
                "{name}"
            ),
            None => assert_eq!(ours["metabox"], Value::Null, "{name}: metabox"),
        }
        if let Some(n) = f.get("packed nid") {
            assert_eq!(u(&ours["packed_nid"]), n.parse::<u64>().unwrap(), "{name}");
        }
        checked += 1;
    }
    assert_eq!(checked, all_images().len());
}

/// The extent table of an extent-mapped file: its form, and per record the
/// logical start, physical start and length, which dump.erofs lists as
/// one extent per record.
#[test]
fn extent_tables_match_dump_erofs() {
    // (image, path, record size, records, lclusterbits or 0, fragment tail)
    let cases: [(&str, &str, u64, u64, u64, bool); 7] = [
        ("e48-zstd-C128k.erofs", "/new/big.txt", 4, 8, 17, false),
        ("e48-lz4hc-C64k.erofs", "/new/big.txt", 16, 2, 0, false),
        (
            "e48-lz4hc-maxext64k.erofs",
            "/new/big.txt",
            16,
            21,
            0,
            false,
        ),
        ("e48-zstd-dedupe.erofs", "/dir/sub/copy.txt", 8, 0, 0, false),
        ("e48-libdeflate.erofs", "/new/big.txt", 4, 245, 12, false),
        ("kitchen-sink.erofs", "/new/big.txt", 4, 16, 16, true),
        ("e48-lz4hc-C64k-frag.erofs", "/new/big.txt", 16, 2, 0, true),
    ];
    for (name, path, recsz, count, lbits, frag) in cases {
        let img = v19(name);
        let v = dump(&img, &["--path", path]);
        let what = format!("{name} {path}");
        let t = &v["extent_table"];
        assert_eq!(u(&t["record_size"]), recsz, "{what}: {t}");
        assert!(v["map"].as_str().unwrap().starts_with("extents"), "{what}");
        let size = u(&v["size"]);
        let records = t["entries"].as_array().unwrap();
        assert_eq!(records.len() as u64, u(&t["records"]), "{what}");
        if count > 0 {
            assert_eq!(u(&t["records"]), count, "{what}");
        }
        if lbits > 0 {
            assert_eq!(u(&t["lclusterbits"]), lbits, "{what}");
            assert_eq!(u(&t["records"]), size.div_ceil(1 << lbits), "{what}");
        } else if recsz >= 16 {
            assert_eq!(t["lclusterbits"], Value::Null, "{what}");
        }
        assert_eq!(t["fragment_tail"], frag, "{what}");
        assert_eq!(
            records.last().unwrap().get("fragment_offset").is_some(),
            frag,
            "{what}"
        );
        // Records start in order, the first at 0, and the extents the
        // reader resolves start at the same offsets and add up to the size.
        let starts: Vec<u64> = records.iter().map(|r| u(&r["lstart"])).collect();
        assert_eq!(starts[0], 0, "{what}");
        assert!(starts.windows(2).all(|w| w[0] < w[1]), "{what}: {starts:?}");
        let exts = v["extents"].as_array().unwrap();
        let ext_starts: Vec<u64> = exts.iter().map(|e| u(&e["logical"])).collect();
        assert_eq!(ext_starts, starts, "{what}");
        assert_eq!(
            exts.iter().map(|e| u(&e["len"])).sum::<u64>(),
            size,
            "{what}"
        );
        if recsz == 4 {
            // Form 4: pclusters back to back from the base address.
            let mut pa = u(&t["base"]);
            for r in records.iter().filter(|r| r.get("plen").is_some()) {
                assert_eq!(u(&r["pstart"]), pa, "{what}: record {}", r["index"]);
                pa += u(&r["plen"]);
            }
        }
        // Against dump.erofs -e: one row per record.
        let Some(text) = dump_erofs(&img, &["-e", &format!("--path={path}")]) else {
            continue;
        };
        let rows = extent_rows(&text);
        assert_eq!(rows.len(), records.len(), "{what}: dump.erofs rows\n{text}");
        for (r, row) in records.iter().zip(&rows) {
            assert_eq!(u(&r["lstart"]), row.0, "{what}: {r} vs {row:?}");
            if r.get("fragment_offset").is_some() {
                continue;
            }
            assert_eq!(
                (u(&r["pstart"]), u(&r["plen"])),
                (row.2, row.3),
                "{what}: {r}"
            );
            let fmt = r["format"].as_str().unwrap();
            assert!(
                ["lz4", "lzma", "deflate", "zstd", "stored"].contains(&fmt),
                "{what}: {fmt}"
            );
        }
        let plen_sum: u64 = records.iter().filter_map(|r| r.get("plen")).map(u).sum();
        let row_sum: u64 = rows.iter().filter(|r| r.3 > 0).map(|r| r.3).sum();
        assert_eq!(plen_sum, row_sum, "{what}: physical bytes");
    }
    // The worked example: zstd records, 73823 bytes from byte 28672.
    let v = dump(&v19("e48-zstd-C128k.erofs"), &["--path", "/new/big.txt"]);
    let t = &v["extent_table"];
    assert_eq!(t["base"], 28672);
    let recs = t["entries"].as_array().unwrap();
    assert!(recs
        .iter()
        .all(|r| r["format"] == "zstd" && r["partial"] == false));
    assert_eq!(
        recs.iter().map(|r| u(&r["plen"])).sum::<u64>(),
        102_495 - 28_672
    );
    assert_eq!(recs[7]["lstart"], 917_504);
}

#[test]
fn inode_flags_of_v19_images() {
    // All-hole FLAT_PLAIN: no start block.
    let v = dump(&v19("e48.erofs"), &["--path", "/new/hole1m"]);
    assert_eq!(v["layout"], "flat_plain");
    assert_eq!(
        (v["all_hole"].clone(), v["startblk"].clone()),
        (true.into(), Value::Null)
    );
    assert_eq!(v["extents"][0]["map"]["type"], "hole");
    // A flat file's 48-bit start block is where its data is.
    for (name, path) in [("e48.erofs", "/text.txt"), ("MZ.erofs", "/dir/aaaa")] {
        let v = dump(&v19(name), &["--path", path]);
        assert_eq!(v["all_hole"], false, "{name}");
        let start = u(&v["startblk"]);
        let pos = u(&v["extents"][0]["map"]["pos"]);
        assert_eq!(start * 4096, pos, "{name} {path}");
        if let Some(text) = dump_erofs(&v19(name), &["-e", &format!("--path={path}")]) {
            assert_eq!(extent_rows(&text)[0].2, pos, "{name} {path}");
        }
    }
    // Dot-omitted directories; files are not NLINK_1 in these small images.
    let v = dump(&v19("dot-omitted.erofs"), &["--path", "/"]);
    assert_eq!(
        (v["dot_omitted"].clone(), v["nlink"].clone()),
        (true.into(), 5.into())
    );
    assert_eq!(v["in_metabox"], false);
    let v = dump(&v19("e48.erofs"), &["--path", "/"]);
    assert_eq!(v["dot_omitted"], false);
    let v = dump(&v19("dot-omitted.erofs"), &["--path", "/small.txt"]);
    assert_eq!(
        (v["dot_omitted"].clone(), v["nlink_1"].clone()),
        (false.into(), false.into())
    );
    // Metabox inodes: nid bit 63, position inside the metabox data.
    let v = dump(&v19("m4k.erofs"), &["--path", "/dir/random.bin"]);
    assert_eq!(v["in_metabox"], true);
    let nid = u(&v["nid"]);
    assert_ne!(nid & 1 << 63, 0);
    assert_eq!(u(&v["position"]), (nid & !(1 << 63)) * 32);
    let by_nid = dump(&v19("m4k.erofs"), &["--nid", &nid.to_string()]);
    assert_eq!(by_nid["size"], 6000);
    assert_eq!(by_nid["in_metabox"], true);
    let v = dump(&v19("m4k.erofs"), &["--path", "/"]);
    assert_eq!(
        (v["nid"].clone(), v["in_metabox"].clone()),
        ((1u64 << 63).into(), true.into())
    );
    // Fingerprints: sha256 of the contents, shown as hex.
    let v = dump(&v19("digest.erofs"), &["--path", "/small.txt"]);
    let fp = v["fingerprint"].as_str().unwrap();
    assert!(fp.starts_with("sha256:a5946158"), "{fp}");
    assert_eq!(fp.len(), "sha256:".len() + 64);
    let v = dump(&v19("digest.erofs"), &["--path", "/dir"]);
    assert!(v.get("fingerprint").is_none(), "{v}");
    // NLINK_1 appears only past 2^32 blocks: patch one compact inode's
    // i_format (bit 4) with i_nb = 0 and check the flag and nlink 1.
    let w = ferrofs_testkit::work_dir!("dump_v19_nlink1");
    let src = v19("e48.erofs");
    let text = dump(&src, &["--path", "/text.txt"]);
    assert_eq!(text["extended"], false);
    let pos = u(&text["position"]) as usize;
    let mut bytes = std::fs::read(&src).unwrap();
    bytes[pos] |= 0x10;
    bytes[pos + 6] = 0;
    bytes[pos + 7] = 0;
    let patched = w.join("nlink1.erofs");
    std::fs::write(&patched, &bytes).unwrap();
    let v = dump(&patched, &["--path", "/text.txt"]);
    assert_eq!(
        (v["nlink_1"].clone(), v["nlink"].clone()),
        (true.into(), 1.into())
    );
    assert_eq!(v["startblk"], text["startblk"]);
    let stats = &dump(&patched, &[])["statistics"];
    assert_eq!(stats["nlink_1_inodes"], 1);
}

#[test]
fn statistics_count_the_new_structures() {
    let stats = |name: &str| dump(&v19(name), &[])["statistics"].clone();
    let total = |s: &Value| -> u64 {
        s["inodes_by_type"]
            .as_object()
            .unwrap()
            .values()
            .map(u)
            .sum()
    };

    let s = stats("e48.erofs");
    assert_eq!(s["all_hole_files"], 1);
    assert_eq!(
        (s["metabox_inodes"].clone(), s["dot_omitted_dirs"].clone()),
        (0.into(), 0.into())
    );
    assert_eq!(s["extent_records_by_size"], serde_json::json!({}));

    // Every directory of dot-omitted is dot-omitted; kitchen-sink's too.
    for name in ["dot-omitted.erofs", "kitchen-sink.erofs"] {
        let s = stats(name);
        assert_eq!(s["dot_omitted_dirs"], s["inodes_by_type"]["dir"], "{name}");
        assert!(u(&s["dot_omitted_dirs"]) >= 5, "{name}");
    }
    // Metabox images: every inode of the tree lives in the metabox.
    for name in [
        "m4k.erofs",
        "m16k-zstd-C16k.erofs",
        "kitchen-sink.erofs",
        "zD-m4k-zstd.erofs",
    ] {
        let s = stats(name);
        assert_eq!(u(&s["metabox_inodes"]), total(&s), "{name}");
        assert_eq!(s["errors"], 0, "{name}");
    }
    // Extent-mapped files by record size.
    let s = stats("e48-zstd-C128k.erofs");
    let by_map = s["inodes_by_map"].as_object().unwrap();
    assert!(u(&by_map["extents, 4-byte records"]) >= 2, "{s}");
    assert!(!by_map.keys().any(|k| k.contains("16-byte")), "{s}");
    // big.txt alone has 8 records.
    assert!(u(&s["extent_records_by_size"]["4"]) >= 8, "{s}");
    let s = stats("e48-zstd-dedupe.erofs");
    assert!(
        u(&s["inodes_by_map"]["extents, 8-byte records"]) >= 1,
        "{s}"
    );
    let s = stats("e48-lz4hc-maxext64k.erofs");
    assert!(u(&s["extent_records_by_size"]["16"]) >= 21 + 2, "{s}");
    let s = stats("e48-lz4-ztail.erofs");
    assert!(
        !s["inodes_by_map"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("extents")),
        "{s}"
    );
    let s = stats("zD.erofs");
    assert_eq!(
        s["inodes_by_map"]["whole-file fragment"],
        s["inodes_by_type"]["dir"]
    );

    // File counts against dump.erofs -S (which counts directory entries).
    for name in [
        "kitchen-sink.erofs",
        "e48-zstd-C128k.erofs",
        "m4k.erofs",
        "dot-omitted.erofs",
    ] {
        let Some(text) = dump_erofs(&v19(name), &["-S"]) else {
            return;
        };
        let f = fields(&text);
        let s = stats(name);
        let n = |k: &str| -> u64 { f[k].parse().unwrap() };
        let ours = |t: &str| s["inodes_by_type"].get(t).map_or(0, u);
        // dump.erofs counts names: small.txt and dir/hardlink are one inode.
        assert_eq!(ours("file") + 1, n("regular file count"), "{name}");
        assert_eq!(ours("dir"), n("directory count"), "{name}");
        assert_eq!(ours("symlink"), n("symlink file count"), "{name}");
        assert_eq!(ours("fifo"), n("FIFO file count"), "{name}");
    }
}
