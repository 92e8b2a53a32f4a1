//! No silent data loss when builds race, die or read changing sources:
//! two `--incremental` writers on one image (each either lands its layer
//! or fails naming the other; the image stays whole), the lock's holder
//! named and readers waiting for a writer, a killed `--incremental`
//! followed by a second run (the dead bytes are cut: the same image as
//! on a clean copy), a `--blobdev` build killed between its two renames
//! (the old image with the new blob is refused, by fsck and extract,
//! naming `--device`), a killed build's temporary file removed by the next
//! build of the same target, a source file rewritten in place (same size)
//! during the build, `--ungzip=FILE` with a broken stream, and a full disk
//! under a piped archive's spool. Kills at a chosen system call use
//! `strace -e inject` (skipped, with the reason, where strace is missing).

use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use ferrofs::Image;
use ferrofs_testkit::corpus;
use ferrofs_testkit::work_dir;

use crate::FERROFS;

fn ferrofs(args: &[&str], paths: &[&Path]) -> Output {
    Command::new(FERROFS)
        .args(args)
        .args(paths)
        .env_remove("SOURCE_DATE_EPOCH")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `n` files of `size` text bytes under `dir/sub`, seeded by `seed`.
fn files(dir: &Path, sub: &str, n: usize, size: usize, seed: u64) {
    let d = dir.join(sub);
    fs::create_dir_all(&d).unwrap();
    for k in 0..n {
        fs::write(
            d.join(format!("f{k}")),
            corpus::mixed_bytes(size, seed + k as u64),
        )
        .unwrap();
    }
}

/// Files of `img` under `/sub` equal those of `dir/sub`.
fn layer_in(img: &Path, dir: &Path, sub: &str) -> Result<(), String> {
    let image = Image::open_path(img).map_err(|e| e.to_string())?;
    for e in fs::read_dir(dir.join(sub)).unwrap() {
        let e = e.unwrap();
        let inside = Path::new("/").join(sub).join(e.file_name());
        let got = image
            .read(&inside)
            .map_err(|err| format!("{}: {err}", inside.display()))?;
        if got != fs::read(e.path()).unwrap() {
            return Err(format!("{}: other bytes", inside.display()));
        }
    }
    Ok(())
}

fn fsck_ok(img: &Path, devices: &[&Path]) -> Result<(), String> {
    let mut cmd = Command::new(FERROFS);
    cmd.arg("fsck");
    for d in devices {
        cmd.arg("--device").arg(d);
    }
    let o = cmd.arg(img).output().unwrap();
    match o.status.success() {
        true => Ok(()),
        false => Err(format!("fsck {}: {}", img.display(), stderr(&o))),
    }
}

/// Temporary files (`.NAME.ferrofs-PID.tmp`) in `dir`.
fn temps(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".ferrofs-") && n.ends_with(".tmp"))
        .collect()
}

/// Two `--incremental` runs started together on one image, three times:
/// a run that exits 0 has its layer in the final image, one that fails
/// says the image is being changed by the other, and the image passes
/// fsck with every landed layer whole.
#[test]
fn concurrent_incremental_writers_never_lose_a_layer() {
    let work = work_dir!("data_loss_concurrent");
    let base_src = work.join("base");
    files(&base_src, "base", 8, 300_000, 1);
    let base = work.join("base.img");
    let o = ferrofs(&["mkfs", "--quiet", "-zlz4hc"], &[&base, &base_src]);
    assert!(o.status.success(), "base: {}", stderr(&o));
    let layers: Vec<PathBuf> = (0..2)
        .map(|k| {
            let l = work.join(format!("layer{k}"));
            files(&l, &format!("l{k}"), 24, 1 << 20, 100 * (k as u64 + 1));
            l
        })
        .collect();
    let mut failures = Vec::new();
    let mut refused = 0;
    for round in 0..3 {
        let img = work.join(format!("round{round}.img"));
        fs::copy(&base, &img).unwrap();
        let runs: Vec<Output> = thread::scope(|s| {
            let jobs: Vec<_> = layers
                .iter()
                .map(|l| {
                    let img = &img;
                    s.spawn(move || {
                        ferrofs(&["mkfs", "--quiet", "-zlz4hc", "--incremental"], &[img, l])
                    })
                })
                .collect();
            jobs.into_iter().map(|j| j.join().unwrap()).collect()
        });
        for (k, o) in runs.iter().enumerate() {
            let sub = format!("l{k}");
            if o.status.success() {
                if let Err(e) = layer_in(&img, &layers[k], &sub) {
                    failures.push(format!("round {round}: layer {k} exited 0 but {e}"));
                }
            } else if stderr(o).contains("is being changed by process") {
                refused += 1;
            } else {
                failures.push(format!("round {round}: layer {k}: {}", stderr(o)));
            }
        }
        if let Err(e) = fsck_ok(&img, &[]) {
            failures.push(format!("round {round}: {e}"));
        }
    }
    println!("{refused} of 6 runs were refused while the other wrote");
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// The lock an in-place writer holds: `--incremental` on an image another
/// process holds exclusively fails naming that process and leaves the
/// image alone; one held by a reader fails saying so; a reader of an image
/// being changed waits for the writer and then reads.
#[test]
fn the_image_lock_names_its_holder_and_readers_wait() {
    let work = work_dir!("data_loss_lock");
    let src = work.join("src");
    files(&src, "a", 3, 10_000, 1);
    let layer = work.join("layer");
    files(&layer, "b", 2, 10_000, 9);
    let img = work.join("img");
    assert!(ferrofs(&["mkfs", "--quiet"], &[&img, &src])
        .status
        .success());
    let before = fs::read(&img).unwrap();
    let me = std::process::id();
    let mut failures = Vec::new();

    let held = fs::File::open(&img).unwrap();
    held.lock().unwrap();
    let o = ferrofs(&["mkfs", "--quiet", "--incremental"], &[&img, &layer]);
    let want = format!("is being changed by process {me}");
    if o.status.success() || !stderr(&o).contains(&want) {
        failures.push(format!("a held image: {:?} {:?}", o.status, stderr(&o)));
    }
    if fs::read(&img).unwrap() != before {
        failures.push("the refused run changed the image".into());
    }
    // A reader waits while the lock is held.
    let reader = Command::new(FERROFS)
        .args(["ls"])
        .arg(&img)
        .arg("/a")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(700));
    let mut reader = reader;
    if reader.try_wait().unwrap().is_some() {
        failures.push("a reader did not wait for the writer's lock".into());
    }
    drop(held);
    let out = reader.wait_with_output().unwrap();
    let err = stderr(&out);
    if !out.status.success() || !err.contains(&format!("waiting for process {me}")) {
        failures.push(format!("the waiting reader: {:?} {err:?}", out.status));
    }
    // Held by a reader.
    let reading = fs::File::open(&img).unwrap();
    reading.lock_shared().unwrap();
    let o = ferrofs(&["mkfs", "--quiet", "--incremental"], &[&img, &layer]);
    let want = format!("is open for reading in process {me}");
    if o.status.success() || !stderr(&o).contains(&want) {
        failures.push(format!("a read image: {:?} {:?}", o.status, stderr(&o)));
    }
    drop(reading);
    let o = ferrofs(&["mkfs", "--quiet", "--incremental"], &[&img, &layer]);
    if !o.status.success() {
        failures.push(format!("once free: {}", stderr(&o)));
    } else if let Err(e) = layer_in(&img, &layer, "b") {
        failures.push(e);
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// Runs `ferrofs ARGS` under strace, killed by SIGKILL at the `when`-th
/// call of `syscall`; `None` (with the reason printed) without strace.
fn killed_at(syscall: &str, when: u32, args: &[&str], paths: &[&Path]) -> Option<Output> {
    let strace = Command::new("strace").arg("-V").output();
    if !strace.is_ok_and(|o| o.status.success()) {
        println!("skipped: strace is not installed (it injects the kill)");
        return None;
    }
    let o = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e"])
        .arg(format!("trace={syscall}"))
        .arg("-e")
        .arg(format!("inject={syscall}:signal=KILL:when={when}"))
        .arg(FERROFS)
        .args(args)
        .args(paths)
        .env_remove("SOURCE_DATE_EPOCH")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Some(o)
}

/// A `--incremental` run killed after it appended data but before its
/// superblock was written leaves dead bytes past the image's end; the
/// next run cuts them off first, so its image is byte for byte the one a
/// run on a clean copy makes (not the dead bytes plus it).
#[test]
fn a_killed_incremental_leaves_nothing_the_next_run_keeps() {
    let work = work_dir!("data_loss_incremental_kill");
    let src = work.join("src");
    files(&src, "a", 4, 50_000, 1);
    let layer = work.join("layer");
    files(&layer, "b", 16, 1 << 20, 7);
    let base = work.join("base.img");
    assert!(ferrofs(&["mkfs", "--quiet", "-zlz4hc"], &[&base, &src])
        .status
        .success());
    let clean = work.join("clean.img");
    fs::copy(&base, &clean).unwrap();
    let args = ["mkfs", "--quiet", "-zlz4hc", "--incremental"];
    let o = ferrofs(&args, &[&clean, &layer]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut failures = Vec::new();
    let img = work.join("img");
    fs::copy(&base, &img).unwrap();
    let base_len = fs::metadata(&base).unwrap().len();
    // The 4th fsync of the run is its first after the data: killed there
    // (strace), or, without strace, the same state made by hand.
    let killed = killed_at("fsync,fdatasync", 1, &args, &[&img, &layer]);
    let grown = fs::metadata(&img).unwrap().len();
    if killed.is_none() || grown <= base_len {
        // What a kill leaves: bytes past the recorded end.
        let f = fs::OpenOptions::new().append(true).open(&img).unwrap();
        (&f).write_all(&corpus::random_bytes(3 << 20, 5)).unwrap();
        println!("dead bytes appended by hand (the kill left {grown} bytes)");
    } else {
        println!("the killed run left {} dead bytes", grown - base_len);
    }
    if let Err(e) = fsck_ok(&img, &[]) {
        failures.push(format!("after the kill the old image must still read: {e}"));
    }
    let o = ferrofs(&args, &[&img, &layer]);
    if !o.status.success() {
        failures.push(format!("the second run: {}", stderr(&o)));
    } else if fs::read(&img).unwrap() != fs::read(&clean).unwrap() {
        failures.push(format!(
            "after a killed run the image is {} bytes, not the clean copy's {}",
            fs::metadata(&img).unwrap().len(),
            fs::metadata(&clean).unwrap().len()
        ));
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// `--blobdev` commits the blob, then the image; killed between the two
/// renames, the old image is beside the new blob. ferrofs's fsck and
/// extract refuse that pair naming `--device` (before, fsck said 0
/// problems and extract wrote wrong bytes), the old pair and the new pair
/// read, and the next build removes the killed one's temporary image.
#[test]
fn a_blobdev_build_killed_between_its_renames_is_refused() {
    let work = work_dir!("data_loss_blobdev");
    let (a, b) = (work.join("a"), work.join("b"));
    files(&a, "d", 6, 100_000, 1);
    files(&b, "d", 6, 100_000, 50);
    let (img, blob) = (work.join("img"), work.join("blob"));
    let blobarg = format!("--blobdev={}", blob.display());
    let args = ["mkfs", "--quiet", "--chunksize=8192", blobarg.as_str()];
    assert!(ferrofs(&args, &[&img, &a]).status.success());
    let mut failures = Vec::new();
    if let Err(e) = fsck_ok(&img, &[&blob]) {
        failures.push(format!("the first pair: {e}"));
    }
    let old_img = fs::read(&img).unwrap();
    let old_blob = fs::read(&blob).unwrap();
    match killed_at("rename", 2, &args, &[&img, &b]) {
        Some(_) => {}
        None => {
            // The same state by hand: the new blob over the old one.
            let (i2, b2) = (work.join("img2"), work.join("blob2"));
            let arg2 = format!("--blobdev={}", b2.display());
            let o = ferrofs(&["mkfs", "--quiet", "--chunksize=8192", &arg2], &[&i2, &b]);
            assert!(o.status.success());
            fs::rename(&b2, &blob).unwrap();
        }
    }
    if fs::read(&img).unwrap() != old_img || fs::read(&blob).unwrap() == old_blob {
        failures.push("the kill did not leave the old image beside the new blob".into());
    }
    let o = ferrofs(&["fsck", "--device"], &[&blob, &img]);
    if o.status.success() || !stderr(&o).contains("(--device) is not the one") {
        failures.push(format!(
            "fsck of the mixed pair: {:?} {}",
            o.status,
            stderr(&o)
        ));
    }
    let out = work.join("out");
    let o = ferrofs(&["extract", "--device"], &[&blob, &img, &out]);
    if o.status.success() || !stderr(&o).contains("(--device) is not the one") {
        failures.push(format!(
            "extract of the mixed pair: {:?} {}",
            o.status,
            stderr(&o)
        ));
    }
    // The next build completes the pair and leaves no temporary file.
    assert!(ferrofs(&args, &[&img, &b]).status.success());
    if let Err(e) = fsck_ok(&img, &[&blob]) {
        failures.push(format!("the rebuilt pair: {e}"));
    }
    let left = temps(&work);
    if !left.is_empty() {
        failures.push(format!(
            "temporary files left after the next build: {left:?}"
        ));
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// Which of `trees` (by their `d/` files) `img` with `devices` reads as;
/// `Err` when it reads as none of them (wrong bytes), or cannot be read.
fn reads_as(img: &Path, devices: &[&Path], trees: &[&Path]) -> Result<usize, String> {
    let mut opts = ferrofs::OpenOptions::default();
    for d in devices {
        opts.devices.push(Box::new(fs::File::open(d).unwrap()));
    }
    let image = Image::open_with(Box::new(fs::File::open(img).unwrap()), opts)
        .map_err(|e| e.to_string())?;
    for (k, t) in trees.iter().enumerate() {
        let same = fs::read_dir(t.join("d")).unwrap().all(|e| {
            let e = e.unwrap();
            let inside = Path::new("/d").join(e.file_name());
            image.read(&inside).ok() == fs::read(e.path()).ok()
        });
        if same {
            return Ok(k);
        }
    }
    Err("it reads as neither the old tree nor the new one".into())
}

/// A `--blobdev` build and an `--incremental` one killed at each of their
/// commit steps (each fsync, each rename: `strace -e inject`): what is left
/// reads as the old tree or the new one, or (the old image beside the
/// new blob) is refused naming `--device`; never as wrong bytes.
#[test]
fn a_kill_at_any_commit_step_leaves_an_old_or_new_image_or_a_refusal() {
    let work = work_dir!("data_loss_commit_steps");
    let (a, b) = (work.join("a"), work.join("b"));
    files(&a, "d", 6, 100_000, 1);
    files(&b, "d", 6, 100_000, 50);
    let mut failures = Vec::new();
    let mut seen = Vec::new();
    let steps = [
        ("fsync", 1),
        ("fsync", 2),
        ("rename", 1),
        ("rename", 2),
        ("fsync", 3),
    ];
    for (call, when) in steps {
        let dir = work.join(format!("blob-{call}{when}"));
        fs::create_dir(&dir).unwrap();
        let (img, blob) = (dir.join("img"), dir.join("blob"));
        let blobarg = format!("--blobdev={}", blob.display());
        let args = ["mkfs", "--quiet", "--chunksize=8192", blobarg.as_str()];
        assert!(ferrofs(&args, &[&img, &a]).status.success());
        if killed_at(call, when, &args, &[&img, &b]).is_none() {
            return ferrofs_testkit::tmp::finish(&work, &failures);
        }
        match reads_as(&img, &[&blob], &[&a, &b]) {
            Ok(k) => seen.push(format!("blobdev {call}#{when}: {}", ["old", "new"][k])),
            Err(e) if e.contains("(--device) is not the one") => {
                seen.push(format!("blobdev {call}#{when}: refused"))
            }
            Err(e) => failures.push(format!("blobdev killed at {call}#{when}: {e}")),
        }
    }
    // --incremental: the layer adds files under d/.
    for when in 1..=3 {
        let dir = work.join(format!("incr-fsync{when}"));
        fs::create_dir(&dir).unwrap();
        let img = dir.join("img");
        assert!(ferrofs(&["mkfs", "--quiet"], &[&img, &a]).status.success());
        let args = ["mkfs", "--quiet", "--incremental"];
        if killed_at("fsync", when, &args, &[&img, &b]).is_none() {
            break;
        }
        match reads_as(&img, &[], &[&b, &a]) {
            // Files of both trees share names: the layer's bytes win.
            Ok(0) => seen.push(format!("incremental fsync#{when}: new")),
            Ok(_) => seen.push(format!("incremental fsync#{when}: old")),
            Err(e) => failures.push(format!("incremental killed at fsync#{when}: {e}")),
        }
        if let Err(e) = fsck_ok(&img, &[]) {
            failures.push(format!("incremental killed at fsync#{when}: {e}"));
        }
    }
    println!("{}", seen.join("\n"));
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// When a build is killed, for the test of its leftovers.
#[derive(Debug, Clone, Copy)]
enum KillAt {
    /// As soon as its temporary file exists, before a byte is in it.
    Made,
    /// 300 ms in (the walk of the tree, nothing written yet).
    Early,
    /// Once bytes are in its temporary file (the data pass).
    Written,
}

/// A build killed (SIGKILL) at several points leaves its temporary image;
/// the next build of the same target removes it, also while the killed
/// process is a zombie (killed, not yet waited for by its parent, as a
/// script's `Popen.kill()` leaves it), and leaves alone one whose process
/// still lives.
#[test]
fn the_next_build_removes_a_killed_builds_temporary_file() {
    let work = work_dir!("data_loss_leftovers");
    let src = work.join("src");
    files(&src, "d", 48, 1 << 20, 3);
    let small = work.join("small");
    files(&small, "d", 2, 4096, 5);
    let out = work.join("out");
    fs::create_dir(&out).unwrap();
    let img = out.join("img.erofs");
    let mut failures = Vec::new();
    for (at, reaped) in [
        (KillAt::Made, false),
        (KillAt::Made, true),
        (KillAt::Early, false),
        (KillAt::Written, true),
        (KillAt::Written, false),
    ] {
        let what = format!(
            "killed at {at:?}, {}",
            if reaped { "waited for" } else { "a zombie" }
        );
        let mut child = Command::new(FERROFS)
            .args(["mkfs", "--quiet", "-zlz4hc,12"])
            .arg(&img)
            .arg(&src)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let tmp = out.join(format!(".img.erofs.ferrofs-{}.tmp", child.id()));
        let start = Instant::now();
        let ready = |t: Duration| match at {
            KillAt::Made => tmp.exists(),
            KillAt::Early => t >= Duration::from_millis(300),
            KillAt::Written => fs::metadata(&tmp).is_ok_and(|m| m.len() > 0),
        };
        while !ready(start.elapsed()) && start.elapsed() < Duration::from_secs(20) {
            thread::sleep(Duration::from_micros(200));
        }
        child.kill().unwrap();
        if reaped {
            child.wait().unwrap();
        } else {
            // Dead, but not waited for: its /proc entry stays. Its leader
            // turns zombie before its other threads are gone, and its files
            // (and their locks) are closed only with the last of them.
            let pid = child.id();
            let gone = || {
                fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z"))
                    && fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|d| d.count() <= 1)
            };
            let since = Instant::now();
            while !gone() && since.elapsed() < Duration::from_secs(20) {
                thread::sleep(Duration::from_millis(1));
            }
        }
        let left = temps(&out);
        if left.len() != 1 {
            failures.push(format!(
                "{what}: the build left {left:?}, not one temporary file"
            ));
        }
        let o = ferrofs(&["mkfs", "--quiet", "-zlz4"], &[&img, &small]);
        if !o.status.success() {
            failures.push(format!("{what}: the next build: {}", stderr(&o)));
        }
        let now = temps(&out);
        if !now.is_empty() {
            failures.push(format!("{what}: after the next build: {now:?}"));
        }
        // (Again, where it was waited for: the status it keeps.)
        child.wait().unwrap();
    }
    // A live build's file (this process holds its lock) stays.
    let live = out.join(format!(".img.erofs.ferrofs-{}.tmp", std::process::id()));
    let lf = fs::File::create(&live).unwrap();
    lf.lock().unwrap();
    let o = ferrofs(&["mkfs", "--quiet"], &[&img, &src]);
    if !o.status.success() {
        failures.push(format!("the build beside a live one: {}", stderr(&o)));
    }
    let now: Vec<String> = temps(&out);
    let live_name = live.file_name().unwrap().to_string_lossy().into_owned();
    if now != vec![live_name] {
        failures.push(format!(
            "after the build beside a live one: {now:?} (only the live one should stay)"
        ));
    }
    drop(lf);
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// A source file rewritten in place while mkfs runs (same size, so only
/// its times say so) fails the build naming it, as GNU tar's "file
/// changed as we read it"; no image is left. Before, the image held the
/// file torn, a state it never had, with exit 0.
#[test]
fn a_source_rewritten_in_place_fails_the_build() {
    let work = work_dir!("data_loss_torn");
    let src = work.join("src");
    files(&src, "d", 4, 1 << 20, 3);
    let victim = src.join("d/big");
    let size = 64usize << 20;
    fs::write(&victim, corpus::mixed_bytes(size, 9)).unwrap();
    let mut failures = Vec::new();
    for opts in [&["mkfs", "--quiet"][..], &["mkfs", "--quiet", "-zlz4"][..]] {
        let img = work.join("img");
        let stop = AtomicBool::new(false);
        let o = thread::scope(|s| {
            let writer = s.spawn(|| {
                let f = fs::OpenOptions::new().write(true).open(&victim).unwrap();
                let mut k = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let at = (k * 7_777_777) % (size as u64 - 4096);
                    f.write_all_at(&corpus::random_bytes(4096, k), at).unwrap();
                    k += 1;
                    thread::sleep(Duration::from_millis(1));
                }
            });
            thread::sleep(Duration::from_millis(20));
            let o = ferrofs(opts, &[&img, &src]);
            stop.store(true, Ordering::Relaxed);
            writer.join().unwrap();
            o
        });
        let err = stderr(&o);
        if o.status.success()
            || !err.contains("changed while being read")
            || !err.contains(&victim.display().to_string())
            || img.exists()
        {
            failures.push(format!("{opts:?}: {:?} {err:?}", o.status));
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// `--ungzip=FILE` keeps the plain archive in FILE only when the stream
/// ended well: a truncated gzip leaves no FILE (before: a partial one);
/// a good one leaves exactly the decompressed archive.
#[test]
fn ungzip_copies_are_whole_or_absent() {
    let work = work_dir!("data_loss_ungzip");
    let src = work.join("src");
    files(&src, "d", 4, 200_000, 3);
    let tar = tar_of(&src, &work.join("t.tar"));
    let plain = fs::read(&tar).unwrap();
    let mut gz = flate2_gzip(&plain);
    let mut failures = Vec::new();
    let copy = work.join("copy.tar");
    let arg = format!("--ungzip={}", copy.display());
    let good = work.join("good.tgz");
    fs::write(&good, &gz).unwrap();
    let o = ferrofs(
        &["mkfs", "--quiet", "--tar=f", &arg],
        &[&work.join("g.img"), &good],
    );
    if !o.status.success() || fs::read(&copy).ok().as_deref() != Some(&plain[..]) {
        failures.push(format!("a good stream: {:?} {}", o.status, stderr(&o)));
    }
    fs::remove_file(&copy).ok();
    gz.truncate(gz.len() / 2);
    let bad = work.join("bad.tgz");
    fs::write(&bad, &gz).unwrap();
    let o = ferrofs(
        &["mkfs", "--quiet", "--tar=f", &arg],
        &[&work.join("b.img"), &bad],
    );
    if o.status.success() || copy.exists() || !temps(&work).is_empty() {
        failures.push(format!(
            "a truncated stream: {:?}, copy left: {}, temporary files: {:?}",
            o.status,
            copy.exists(),
            temps(&work)
        ));
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// `tar cf TAR -C SRC .`; `TAR`.
fn tar_of(src: &Path, tar: &Path) -> PathBuf {
    let st = Command::new("tar")
        .arg("cf")
        .arg(tar)
        .arg("-C")
        .arg(src)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success(), "tar cf {}", tar.display());
    tar.to_path_buf()
}

/// `gzip -c` of `data`.
fn flate2_gzip(data: &[u8]) -> Vec<u8> {
    let mut child = Command::new("gzip")
        .arg("-c")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let feeder = thread::spawn(move || stdin.write_all(&data).unwrap());
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out.stdout
}

/// A piped archive's data is spooled beside the image: a full disk there
/// is reported as the spool file's, not as a failure to read standard
/// input. Needs root (a small tmpfs).
#[test]
fn a_full_disk_under_the_spool_is_named() {
    if !ferrofs_testkit::is_root() {
        return println!("skipped: not running as root (mounting a small tmpfs needs it)");
    }
    let work = work_dir!("data_loss_spool");
    let src = work.join("src");
    files(&src, "d", 3, 1 << 20, 3);
    let tar = tar_of(&src, &work.join("t.tar"));
    let full = work.join("full");
    fs::create_dir(&full).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&full)
        .status()
        .unwrap();
    assert!(st.success());
    let img = full.join("img");
    // A pipe (a file as standard input is read in place, not spooled).
    let mut child = Command::new(FERROFS)
        .args(["mkfs", "--quiet", "--tar=f"])
        .arg(&img)
        .arg("-")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let bytes = fs::read(&tar).unwrap();
    // mkfs may stop reading when the spool is full.
    let feeder = thread::spawn(move || {
        let _ = stdin.write_all(&bytes);
    });
    let o = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    let _ = Command::new("umount").arg(&full).status();
    let err = stderr(&o);
    let mut failures = Vec::new();
    if o.status.success()
        || !err.contains("scratch file")
        || !err.contains("No space left")
        || err.starts_with("ferrofs: standard input")
    {
        failures.push(format!("{:?} {err:?}", o.status));
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}
