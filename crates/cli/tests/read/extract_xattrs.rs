//! `ferrofs extract` restores every entry even when the target refuses
//! some xattrs (Linux allows no `user.*` xattrs on a symlink; ext4 holds
//! about one block of xattrs per inode): each one not restored is reported
//! (path, name, reason), the summary counts them, and the exit status
//! is 1. The extracted tree equals the kernel's view of the image except for
//! exactly the reported xattrs. `--no-xattrs` restores none and exits 0.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::xattr;

use crate::FERROFS;
use ferrofs_testkit::work_dir;

/// A PAX archive whose entries carry `SCHILY.xattr.*` records: a symlink
/// with a user.* xattr (first in name order, so it is extracted first), a
/// file with more xattr bytes than an ext4 inode holds, plain files after.
const PY_TAR: &str = r#"
import io, sys, tarfile
def add(t, name, kind, xattrs, data=b"", link=""):
    i = tarfile.TarInfo(name)
    i.type = kind
    i.mode = {tarfile.DIRTYPE: 0o755, tarfile.SYMTYPE: 0o777}.get(kind, 0o644)
    i.mtime = 1700000000
    i.uid, i.gid = 1000, 1000
    i.linkname = link
    i.size = len(data)
    i.pax_headers = {"SCHILY.xattr." + k: v for k, v in xattrs.items()}
    t.addfile(i, io.BytesIO(data) if data else None)
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    add(t, "a-link", tarfile.SYMTYPE, {"user.note": "on a symlink", "trusted.ok": "kept"}, link="b-file")
    add(t, "b-file", tarfile.REGTYPE, {"user.b": "1"}, b"b contents\n")
    add(t, "c-many", tarfile.REGTYPE, {"user.big%d" % n: "v" * 1000 for n in range(8)}, b"c\n")
    add(t, "d", tarfile.DIRTYPE, {"user.dir": "d"})
    add(t, "d/e", tarfile.REGTYPE, {"user.e": "e"}, b"e contents\n")
"#;

fn extract(img: &Path, out: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let o = Command::new(FERROFS)
        .arg("extract")
        .args(extra)
        .arg(img)
        .arg(out)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&o.stdout).unwrap_or_default();
    (
        o.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn extract_reports_xattrs_it_cannot_set_and_goes_on() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("extract_xattrs");
    fs::write(work.join("mk.py"), PY_TAR).unwrap();
    let tar = work.join("x.tar");
    let st = Command::new("python3")
        .arg(work.join("mk.py"))
        .arg(&tar)
        .status();
    if !st.is_ok_and(|s| s.success()) {
        println!("skipped: python3 could not write the archive");
        return;
    }
    let img = work.join("x.img");
    let st = Command::new(FERROFS)
        .args(["mkfs", "--quiet", "--tar"])
        .arg(&img)
        .arg(&tar)
        .status()
        .unwrap();
    assert!(st.success());
    let m = LoopMount::new(&img, &[]).expect("mount");

    // Text output: one line per xattr not restored, a summary, status 1.
    let out = work.join("out");
    let o = Command::new(FERROFS)
        .arg("extract")
        .arg(&img)
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ferrofs: /a-link: xattr user.note not restored: Operation not permitted"),
        "{err}"
    );
    assert!(err.contains("NOT restored: "), "{err}");
    // Every entry is there, equal to the kernel's view but for the xattrs
    // the report names (checked with the JSON report below).
    let diffs = compare::compare_trees(m.path(), &out, &CompareOptions::strict());
    let xattr_diffs: BTreeSet<(String, String)> = diffs
        .iter()
        .filter_map(|d| {
            let name = d.what.strip_prefix("xattr ")?;
            (d.actual == "missing").then(|| {
                let p = format!("/{}", d.path.display());
                (p, name.to_string())
            })
        })
        .collect();
    let others: Vec<String> = diffs
        .iter()
        .filter(|d| !(d.what.starts_with("xattr ") && d.actual == "missing"))
        .map(|d| d.to_string())
        .collect();
    assert!(others.is_empty(), "{}", others.join("\n"));
    assert!(out.join("d/e").is_file() && out.join("c-many").is_file());

    // JSON: the same list, with reasons; exactly the xattrs missing.
    let out2 = work.join("out2");
    let (code, v, _) = extract(&img, &out2, &["--json"]);
    assert_eq!(code, 1);
    let reported: BTreeSet<(String, String)> = v["not_restored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            assert!(n["reason"].as_str().is_some_and(|r| !r.is_empty()), "{n}");
            let name = n["what"]["xattr"].as_str().unwrap_or("?").to_string();
            (n["path"].as_str().unwrap().to_string(), name)
        })
        .collect();
    assert_eq!(reported, xattr_diffs);
    assert!(reported.contains(&("/a-link".into(), "user.note".into())));
    // Set: trusted.ok on the symlink, user.b, user.dir, user.e and the
    // big ones ext4 had room for.
    let set = v["xattrs"].as_u64().unwrap();
    assert_eq!(set as usize + reported.len(), 2 + 1 + 8 + 1 + 1, "{v}");
    assert_eq!(
        xattr::get(out2.join("a-link"), "trusted.ok").unwrap(),
        Some(b"kept".to_vec())
    );

    // --no-xattrs: nothing restored, nothing reported, status 0.
    let out3 = work.join("out3");
    let (code, v, err) = extract(&img, &out3, &["--no-xattrs", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["xattrs"], 0);
    assert_eq!(v["not_restored"].as_array().map(Vec::len), Some(0));
    for p in ["a-link", "b-file", "c-many", "d", "d/e"] {
        let names: Vec<_> = xattr::list(out3.join(p)).unwrap().collect();
        assert!(names.is_empty(), "{p}: {names:?}");
    }
    let diffs = compare::compare_trees(
        m.path(),
        &out3,
        &CompareOptions {
            compare_xattrs: false,
            ..CompareOptions::strict()
        },
    );
    assert!(diffs.is_empty(), "{diffs:?}");
    drop(m);
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// An owner of 4294967295 (chown's "unchanged", which no file can have)
/// is reported as not restored, and the rest is extracted; before, the
/// extracting thread panicked. (Found by bench/hostile-sweep.py.)
#[test]
fn an_owner_of_minus_one_is_reported_not_a_panic() {
    let work = work_dir!("extract_uid_max");
    let dump = work.join("tree.dump");
    fs::write(
        &dump,
        "/ 4096 40755 2 0 0 0 0.0 - - -\n\
         /odd 3 100644 1 4294967295 7 0 0.0 - abc -\n\
         /plain 2 100644 1 0 0 0 0.0 - ok -\n",
    )
    .unwrap();
    let img = work.join("img");
    let o = Command::new(FERROFS)
        .args(["mkcomposefs", "--from-file"])
        .arg(&dump)
        .arg(&img)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = work.join("out");
    let (code, json, stderr) = extract(&img, &out, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("/odd") && stderr.contains("4294967295"),
        "{stderr}"
    );
    assert_eq!(fs::read(out.join("odd")).unwrap(), b"abc", "{json}");
    assert_eq!(fs::read(out.join("plain")).unwrap(), b"ok");
    let _ = fs::remove_dir_all(&work);
}
