//! `-E ztailpacking` on a real tree, against mkfs.erofs 1.9.4: small files
//! and last pclusters are compressed into inline tail pclusters as
//! upstream does it, so the drop-in's image is no larger than upstream's,
//! and the kernel shows the source tree.

use std::path::PathBuf;

use super::*;

/// Debian's Python standard library, `/usr/lib/python3.N` (the newest N):
/// on every Debian with python3, tens of MB of mostly small text files,
/// where storing small files flat instead of compressing them inline
/// shows.
fn python_stdlib() -> Option<PathBuf> {
    let mut dirs: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let minor = name.strip_prefix("python3.")?.parse().ok()?;
            e.path().is_dir().then(|| (minor, e.path()))
        })
        .collect();
    dirs.sort();
    dirs.pop().map(|(_, p)| p)
}

#[test]
fn dropin_ztailpacking_no_larger_than_mkfs_1_9_on_a_real_tree() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let Some(up) = tools::mkfs_next() else {
        println!("skipped: mkfs.erofs 1.9.x not found");
        return;
    };
    let Some(src) = python_stdlib() else {
        println!("skipped: no /usr/lib/python3.N");
        return;
    };
    let work = work_dir!("dropin_ztail");
    let link = dropin_link(&work);
    let flags = ["-zlz4hc", "-C65536", "-Eztailpacking", "--quiet"];
    let ours = work.join("ours.img");
    let theirs = work.join("up.img");
    run(Command::new(&link).args(flags).arg(&ours).arg(&src)).expect("drop-in");
    run(Command::new(&up.path).args(flags).arg(&theirs).arg(&src)).expect("mkfs.erofs");
    let size = |p: &Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let (a, b) = (size(&ours), size(&theirs));
    println!(
        "{}: drop-in {a} bytes, mkfs.erofs {} {b}",
        src.display(),
        up.version
    );
    let mut failures = Vec::new();
    if a > b {
        failures.push(format!(
            "{flags:?} on {}: the drop-in's image is {a} bytes, mkfs.erofs {}'s {b}",
            src.display(),
            up.version
        ));
    }
    match LoopMount::new(&ours, &[]) {
        Ok(m) => {
            for d in compare::compare_trees(&src, m.path(), &CompareOptions::strict()) {
                failures.push(format!("kernel view vs {}: {d}", src.display()));
            }
        }
        Err(e) => failures.push(format!("mount: {e}")),
    }
    if let Some(fsck) = tools::fsck_next() {
        if let Err(e) = run(Command::new(&fsck.path).arg(&ours)) {
            failures.push(format!("fsck.erofs {}: {e}", fsck.version));
        }
    }
    failures.truncate(20);
    ferrofs_testkit::tmp::finish(&work, &failures);
}
