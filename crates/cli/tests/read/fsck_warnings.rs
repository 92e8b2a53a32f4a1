//! fsck tells damage from oddities: an inode whose link count is larger
//! than the entries naming it (a writer that copied the source's count)
//! reads correctly through the kernel and passes fsck.erofs 1.9.4, so
//! `ferrofs fsck` warns about it and exits 0.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::tools;

use crate::FERROFS;
use ferrofs_testkit::work_dir;

fn dump(img: &Path, path: &str) -> serde_json::Value {
    let out = Command::new(FERROFS)
        .args(["dump", "--json", "--path", path])
        .arg(img)
        .output()
        .unwrap();
    assert!(out.status.success(), "dump {path}: {}", out.status);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Sets the link count of the (compact) inode at `path` in `img`.
fn set_nlink(img: &Path, path: &str, nlink: u16) {
    let v = dump(img, path);
    assert_eq!(v["extended"], false, "{path}: expected a compact inode");
    let pos = v["position"].as_u64().unwrap() as usize;
    let mut bytes = fs::read(img).unwrap();
    // Compact inode: i_format, i_xattr_icount, i_mode, then i_nlink (le16).
    bytes[pos + 6..pos + 8].copy_from_slice(&nlink.to_le_bytes());
    fs::write(img, bytes).unwrap();
    assert_eq!(dump(img, path)["nlink"], nlink);
}

#[test]
fn fsck_warns_of_link_counts_the_kernel_reads_through() {
    let work = work_dir!("fsck_warnings");
    let src = work.join("tree");
    fs::create_dir_all(src.join("objects/pack")).unwrap();
    let content = b"PACK\0\0\0\x02 a git pack file whose links were left behind\n".repeat(300);
    fs::write(src.join("objects/pack/p.pack"), &content).unwrap();
    fs::write(src.join("README"), b"hello\n").unwrap();
    let img = work.join("a.img");
    let st = Command::new(FERROFS)
        .args(["mkfs", "--quiet", "-T0", "-Uclear"])
        .arg(&img)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    set_nlink(&img, "/objects/pack/p.pack", 3);
    set_nlink(&img, "/objects", 7);

    let out = Command::new(FERROFS)
        .arg("fsck")
        .arg(&img)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "fsck: {} {text}", out.status);
    assert!(
        text.contains("warning: /objects/pack/p.pack")
            && text.contains("nlink 3 but 1 directory entries")
            && text.contains("warning: /objects")
            && text.contains("0 problems, 2 warnings"),
        "{text}"
    );
    let out = Command::new(FERROFS)
        .args(["fsck", "--json"])
        .arg(&img)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["problems"].as_array().map(Vec::len), Some(0), "{v}");
    assert_eq!(v["warnings"].as_array().map(Vec::len), Some(2), "{v}");

    match tools::fsck_next() {
        Some(f) => {
            if let Err(e) = f.run(&[img.as_os_str()]) {
                panic!("fsck.erofs 1.9 refuses the image: {e}");
            }
        }
        None => println!("fsck.erofs 1.9.x not found: upstream check skipped"),
    }
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let m = LoopMount::new(&img, &[]).expect("mount");
    let pack = m.path().join("objects/pack/p.pack");
    assert_eq!(fs::read(&pack).unwrap(), content);
    assert_eq!(fs::metadata(&pack).unwrap().nlink(), 3);
    assert_eq!(fs::metadata(m.path().join("objects")).unwrap().nlink(), 7);
    let names: Vec<_> = fs::read_dir(m.path().join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["p.pack"]);
    drop(m);
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}
