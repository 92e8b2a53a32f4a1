//! `ferrofs ls --json`: every entry the kernel's mount of the image shows,
//! in `ls -R`'s order, with what `lstat`, `readlink` and the xattr calls
//! give there; names that are not UTF-8 given exactly in hex.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::mount::LoopMount;
use serde_json::Value;

use super::{corner_image, FERROFS};

/// The bytes of `key` in `v`: exactly, from `KEY_hex` when it is there.
fn bytes(v: &Value, key: &str) -> Vec<u8> {
    match v.get(format!("{key}_hex")).and_then(Value::as_str) {
        Some(h) => (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect(),
        None => v[key].as_str().unwrap().as_bytes().to_vec(),
    }
}

/// Paths below `root` (bytes, from `/`) in `LC_ALL=C ls -RA`'s order:
/// a directory's entries in byte order, then each subdirectory's, depth
/// first.
fn ls_r_order(root: &Path, rel: &[u8], out: &mut Vec<Vec<u8>>) {
    let dir = root.join(OsStr::from_bytes(rel.strip_prefix(b"/").unwrap_or(rel)));
    let mut names: Vec<Vec<u8>> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().as_bytes().to_vec())
        .collect();
    names.sort();
    let path = |n: &[u8]| [rel, b"/", n].concat();
    out.extend(names.iter().map(|n| path(n)));
    for n in &names {
        let p = path(n);
        if fs::symlink_metadata(root.join(OsStr::from_bytes(&p[1..])))
            .unwrap()
            .is_dir()
        {
            ls_r_order(root, &p, out);
        }
    }
}

/// The xattrs of `p` (not followed) as the kernel lists them.
fn kernel_xattrs(p: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut names = vec![0u8; 1 << 16];
    let n = rustix::fs::llistxattr(p, &mut names).unwrap();
    names[..n]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|name| {
            let mut value = vec![0u8; 1 << 16];
            let c = std::ffi::CString::new(name).unwrap();
            let len = rustix::fs::lgetxattr(p, c.as_c_str(), &mut value).unwrap();
            value.truncate(len);
            (name.to_vec(), value)
        })
        .collect()
}

/// What `e` says differs from the kernel's view of `full`, one line each.
fn differences(e: &Value, full: &Path, failures: &mut Vec<String>) {
    let m = fs::symlink_metadata(full).unwrap();
    let t = m.file_type();
    let kind = if t.is_dir() {
        "dir"
    } else if t.is_symlink() {
        "symlink"
    } else if t.is_char_device() {
        "char"
    } else if t.is_block_device() {
        "block"
    } else if t.is_fifo() {
        "fifo"
    } else if t.is_socket() {
        "socket"
    } else {
        "file"
    };
    let mut want = serde_json::json!({
        "type": kind,
        "mode": format!("{:04o}", m.mode() & 0o7777),
        "ino": m.ino(),
        "nlink": m.nlink(),
        "uid": m.uid(),
        "gid": m.gid(),
        "size": m.size(),
        "blocks": m.blocks(),
        "mtime": m.mtime(),
        "mtime_nsec": m.mtime_nsec(),
    });
    if t.is_char_device() || t.is_block_device() {
        let d = m.rdev();
        want["rdev"] = serde_json::json!({
            "major": rustix::fs::major(d),
            "minor": rustix::fs::minor(d),
        });
    }
    for (k, w) in want.as_object().unwrap() {
        if e.get(k) != Some(w) {
            failures.push(format!(
                "{}: {k} {:?}, kernel {w}",
                full.display(),
                e.get(k)
            ));
        }
    }
    if t.is_symlink() {
        let target = fs::read_link(full).unwrap();
        if bytes(e, "target") != target.as_os_str().as_bytes() {
            failures.push(format!("{}: target {:?}", full.display(), e.get("target")));
        }
    }
    let ours: BTreeMap<Vec<u8>, Vec<u8>> = e
        .get("xattrs")
        .map(|l| {
            l.as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    let v = match x.get("value_hex") {
                        Some(_) => bytes(x, "value"),
                        None => x["value"].as_str().unwrap().as_bytes().to_vec(),
                    };
                    (bytes(x, "name"), v)
                })
                .collect()
        })
        .unwrap_or_default();
    if ours != kernel_xattrs(full) {
        failures.push(format!("{}: xattrs {:?}", full.display(), e.get("xattrs")));
    }
}

/// `ferrofs ls --json ARGS IMAGE [PATH]`: its exit status and entries.
fn ls_json(img: &Path, args: &[&str], path: Option<&str>) -> (Option<i32>, Vec<Value>) {
    let o = Command::new(FERROFS)
        .args(["ls", "--json"])
        .args(args)
        .arg(img)
        .args(path)
        .output()
        .unwrap();
    let list = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "ls --json {args:?}: {e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), list)
}

#[test]
fn ls_json_describes_every_entry_as_the_kernel_mount_shows_it() {
    let Some((img, _work)) = corner_image(
        "ls_json",
        &["-zlz4hc", "-C65536"],
        ("dangling", "/no/such/target"),
    ) else {
        return;
    };
    let m = LoopMount::new(&img, &[]).expect("mount");
    let root: PathBuf = m.path().to_path_buf();
    let at = |p: &[u8]| root.join(OsStr::from_bytes(&p[1..]));
    let mut failures = Vec::new();

    // The whole tree: ls -RA's entries in its order, each as the kernel
    // shows it (names that are not UTF-8 included).
    let (code, list) = ls_json(&img, &["-RA"], None);
    assert_eq!(code, Some(0));
    let mut want = Vec::new();
    ls_r_order(&root, b"", &mut want);
    let got: Vec<Vec<u8>> = list.iter().map(|e| bytes(e, "path")).collect();
    assert_eq!(got.len(), want.len(), "entries");
    assert!(
        got == want,
        "the entries or their order differ from ls -RA's"
    );
    assert!(
        list.iter().any(|e| e.get("path_hex").is_some()),
        "the tree has names that are not UTF-8"
    );
    for (e, p) in list.iter().zip(&want) {
        let name = p.rsplit(|&b| b == b'/').next().unwrap();
        if bytes(e, "name") != name {
            failures.push(format!("{}: name {:?}", at(p).display(), e["name"]));
        }
        differences(e, &at(p), &mut failures);
    }
    assert!(list.iter().any(|e| e["type"] == "char"), "a device listed");
    assert!(
        list.iter().any(|e| e.get("xattrs").is_some()),
        "xattrs listed"
    );

    // One entry: the root itself (-d), a symlink named (described, not
    // followed), and with -L what it points to.
    let (_, one) = ls_json(&img, &["-d"], None);
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["path"], "/");
    differences(&one[0], &root, &mut failures);
    let link = list
        .iter()
        .find(|e| e["type"] == "symlink" && fs::metadata(at(&bytes(e, "path"))).is_ok())
        .expect("a symlink that resolves");
    let lp = bytes(link, "path");
    let named = String::from_utf8(lp[1..].to_vec()).expect("a UTF-8 link name");
    let (_, one) = ls_json(&img, &[], Some(&named));
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["type"], "symlink");
    let (_, one) = ls_json(&img, &["-Ld"], Some(&named));
    let target = fs::metadata(at(&lp)).unwrap();
    assert_eq!(one[0]["ino"], target.ino(), "-L describes the target");

    // -L over a dangling link: listed as such, exit status 1 (as ls).
    let (code, list) = ls_json(&img, &["-L"], None);
    assert_eq!(code, Some(1));
    let d = list.iter().find(|e| e["name"] == "dangling").unwrap();
    assert_eq!(d["dangling"], true);

    m.unmount().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
