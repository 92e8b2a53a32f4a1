//! Access-pattern-guided layout (FPC): a trace recorded by `ferrofs mount
//! --trace` drives `mkfs --profile`; the image must still equal its source
//! through the kernel, and a cold replay of the trace on the kernel's loop
//! mount must read far fewer device bytes than from the default layout,
//! as `ferrofs dump --profile` predicts.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::{corpus, tools};

use crate::FERROFS;
use ferrofs_testkit::work_dir;

fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn mkfs(img: &Path, src: &Path, extra: &[&str]) {
    run(Command::new(FERROFS)
        .args(["mkfs", "--quiet", "-zlz4hc", "-C65536"])
        .args(extra)
        .arg(img)
        .arg(src));
}

/// Writes `trace` into `work` and builds `src` twice there, plainly and
/// with `--profile` of it: (trace, default image, profiled image).
fn default_and_profiled(work: &Path, src: &Path, trace: &str) -> (PathBuf, PathBuf, PathBuf) {
    let trace_path = work.join("trace.txt");
    fs::write(&trace_path, trace).unwrap();
    let default = work.join("default.img");
    let profiled = work.join("profiled.img");
    mkfs(&default, src, &[]);
    mkfs(&profiled, src, &["--profile", trace_path.to_str().unwrap()]);
    (trace_path, default, profiled)
}

fn dump_profile(img: &Path, trace: &Path) -> serde_json::Value {
    let out = run(Command::new(FERROFS)
        .arg("dump")
        .arg("--json")
        .arg("--profile")
        .arg(trace)
        .arg(img));
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn traced_profile_builds_match_the_source() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    if !Path::new("/dev/fuse").exists() {
        println!("skipped: /dev/fuse is missing");
        return;
    }
    let work = work_dir!("profile_build");
    let src = work.join("tree");
    corpus::make_corner_tree(&src).expect("corner tree");
    let plain = work.join("plain.img");
    mkfs(&plain, &src, &[]);
    // Record a start: read pieces of a few files through the FUSE mount.
    let mnt = work.join("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let trace = work.join("trace.txt");
    run(Command::new(FERROFS)
        .arg("mount")
        .arg("--trace")
        .arg(&trace)
        .arg(&plain)
        .arg(&mnt));
    let mut read = Vec::new();
    for e in walk(&mnt) {
        let meta = fs::symlink_metadata(&e).unwrap();
        if meta.is_file() && meta.len() > 0 && read.len() < 25 {
            let f = fs::File::open(&e).unwrap();
            let mut buf = vec![0u8; 3000];
            let _ = f.read_at(&mut buf, meta.len() / 3);
            read.push(e.strip_prefix(&mnt).unwrap().to_path_buf());
        }
    }
    run(Command::new("umount").arg(&mnt));
    // The daemon writes the rest of the trace when it exits (up to 30 s:
    // CI runs this beside the other tests and the fuzz smoke).
    let mut text = String::new();
    for _ in 0..300 {
        text = fs::read_to_string(&trace).unwrap_or_default();
        if read.iter().all(|p| text.contains(&*p.to_string_lossy())) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for p in &read {
        assert!(
            text.contains(&*p.to_string_lossy()),
            "{} not in the trace ({} bytes):\n{text}",
            p.display(),
            text.len()
        );
    }
    let fsck = tools::fsck_upstream();
    let mut failures = Vec::new();
    for extra in [
        &["--profile"][..],
        &["-Efragments,dedupe", "--profile"][..],
        &["--profile-readahead", "128K", "--profile"][..],
    ] {
        let img = work.join("profiled.img");
        let img1 = work.join("profiled-j1.img");
        let mut args: Vec<&str> = extra.to_vec();
        let t = trace.to_string_lossy().into_owned();
        args.push(&t);
        mkfs(&img, &src, &args);
        args.extend(["-j", "1"]);
        mkfs(&img1, &src, &args);
        if fs::read(&img).ok() != fs::read(&img1).ok() {
            failures.push(format!("{extra:?}: -j1 and -j2 differ"));
        }
        match LoopMount::new(&img, &[]) {
            Ok(m) => {
                for d in compare::compare_trees(&src, m.path(), &CompareOptions::strict()) {
                    failures.push(format!("{extra:?}: kernel vs source: {d}"));
                }
            }
            Err(e) => failures.push(format!("{extra:?}: mount: {e}")),
        }
        if let Some(f) = &fsck {
            let out = Command::new(&f.path).arg(&img).output().unwrap();
            if !out.status.success() {
                failures.push(format!("{extra:?}: fsck.erofs failed"));
            }
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        let mut v: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        v.sort();
        for p in v {
            match fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => stack.push(p),
                Ok(_) => out.push(p),
                Err(_) => {}
            }
        }
    }
    out
}

/// Sectors read so far by the block device behind a mountpoint.
fn sectors_read(mnt: &Path) -> u64 {
    let out = run(Command::new("findmnt")
        .args(["-n", "-o", "SOURCE"])
        .arg(mnt));
    let dev = String::from_utf8_lossy(&out).trim().to_string();
    let name = dev.rsplit('/').next().unwrap().to_string();
    let stat = fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    stat.split_whitespace().nth(2).unwrap().parse().unwrap()
}

fn drop_caches() {
    let _ = Command::new("sync").status();
    fs::write("/proc/sys/vm/drop_caches", "3").expect("drop caches");
}

/// Files read in small scattered pieces: the profile cuts device bytes of
/// a cold replay to well under 0.7x of the default layout's.
#[test]
fn profile_cuts_device_bytes_of_a_cold_replay() {
    if let Err(why) = can_mount() {
        println!("skipped: {why}");
        return;
    }
    let work = work_dir!("profile_effect");
    let src = work.join("tree");
    fs::create_dir_all(src.join("lib")).unwrap();
    fs::create_dir_all(src.join("share")).unwrap();
    let mut trace = String::new();
    let mut seed = 12345u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    let mut reads = Vec::new();
    for i in 0..16 {
        let data = corpus::mixed_bytes(1 << 20, i);
        let name = format!("lib/mod{i:02}.so");
        fs::write(src.join(&name), &data).unwrap();
        for _ in 0..3 {
            let off = next() % ((1 << 20) - 4096) / 4096 * 4096;
            trace.push_str(&format!("{name}\t{off}\t4096\n"));
            reads.push((name.clone(), off, 4096u64));
        }
    }
    for i in 0..100 {
        let name = format!("share/s{i:03}.txt");
        fs::write(src.join(&name), corpus::text_bytes(3000 + i * 50, i as u64)).unwrap();
        if i % 4 == 0 {
            trace.push_str(&format!("{name}\n"));
            reads.push((name, 0, 1 << 20));
        }
    }
    let (trace_path, default, profiled) = default_and_profiled(&work, &src, &trace);
    let d = dump_profile(&default, &trace_path);
    let p = dump_profile(&profiled, &trace_path);
    // Under a kernel's read-around every read covers its window: more
    // device bytes than the exact reads, and the window is reported.
    let wide: serde_json::Value = serde_json::from_slice(&run(Command::new(FERROFS)
        .args(["dump", "--json", "--readahead", "128K", "--profile"])
        .arg(&trace_path)
        .arg(&default)))
    .unwrap();
    assert_eq!(wide["readahead_window"].as_u64(), Some(131072));
    assert!(
        wide["device_bytes"].as_u64().unwrap() > d["device_bytes"].as_u64().unwrap(),
        "read-around adds nothing: {wide} vs {d}"
    );
    let (db, pb) = (
        d["device_bytes"].as_u64().unwrap(),
        p["device_bytes"].as_u64().unwrap(),
    );
    let mut device = Vec::new();
    for img in [&default, &profiled] {
        let m = LoopMount::new(img, &[]).expect("mount");
        drop_caches();
        let before = sectors_read(m.path());
        for (name, off, len) in &reads {
            let f = fs::File::open(m.path().join(name)).unwrap();
            let mut buf = vec![0u8; *len as usize];
            let _ = f.read_at(&mut buf, *off).unwrap();
        }
        device.push((sectors_read(m.path()) - before) * 512);
    }
    let (sd, sp) = (
        fs::metadata(&default).unwrap().len(),
        fs::metadata(&profiled).unwrap().len(),
    );
    println!(
        "dump --profile device bytes: default {db}, profiled {pb}; kernel replay: default {}, \
         profiled {}; image sizes {sd} vs {sp}",
        device[0], device[1]
    );
    assert!(pb * 10 <= db * 7, "dump: profiled {pb} vs default {db}");
    assert!(
        device[1] * 10 <= device[0] * 7,
        "kernel replay: profiled {} vs default {}",
        device[1],
        device[0]
    );
    assert!(sp * 100 <= sd * 110, "image grew from {sd} to {sp}");
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}

/// A file read mostly (more than half), in small reads, with cold gaps
/// of 48 KiB between its hot stretches: the stretches are cut into
/// pclusters of their own, so a replay of the trace reads less of the
/// file than from the default layout, where the gaps share the hot
/// stretches' pclusters. (Before, a file read more than half was never
/// cut.)
#[test]
fn a_file_read_mostly_is_cut_at_its_cold_gaps() {
    let work = work_dir!("profile_mostly");
    let src = work.join("tree");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("big.so"), corpus::mixed_bytes(1 << 20, 7)).unwrap();
    // Eight stretches of 17 reads of 4 KiB, 512 bytes apart (about 80
    // KiB), one every 128 KiB: 544 KiB read of 1 MiB.
    let trace: String = (0..8u64)
        .flat_map(|k| (0..17u64).map(move |j| (k << 17) + j * 4608))
        .map(|off| format!("big.so\t{off}\t4096\n"))
        .collect();
    let (trace_path, default, profiled) = default_and_profiled(&work, &src, &trace);
    let d = dump_profile(&default, &trace_path)["device_bytes"]
        .as_u64()
        .unwrap();
    let p = dump_profile(&profiled, &trace_path)["device_bytes"]
        .as_u64()
        .unwrap();
    println!("dump --profile device bytes: default {d}, profiled {p}");
    assert!(p * 10 <= d * 8, "profiled {p} vs default {d}");
    run(Command::new(FERROFS).arg("fsck").arg(&profiled));
    let _ = ferrofs_testkit::tmp::remove_tree(&work);
}
