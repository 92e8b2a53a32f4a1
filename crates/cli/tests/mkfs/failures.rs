//! mkfs's failure behaviour (no kernel needed): a full file system (`mkfs_out_of_space_leaves_nothing`,
//! needs root for the tmpfs), a missing or non-directory source (`mkfs_bad_source_fails`), a
//! file growing while mkfs reads it (`mkfs_changing_source_fails`) and SIGTERM/SIGINT/SIGHUP
//! during the data pass, during the copy of a single large file and after the data pass
//! (`mkfs_interrupted_leaves_nothing`, exit code 130): mkfs must exit non-zero naming the path
//! and the cause, and leave neither an image nor its temporary file (`.NAME.ferrofs-PID.tmp`);
//! a previous image must stay untouched.
//!
//!
//! `FERROFS_TEST_KEEP=1` keeps the generated trees (under the temp directory; otherwise always
//! removed).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use ferrofs_testkit::corpus;
use ferrofs_testkit::process::{run_with_timeout, Outcome};
use ferrofs_testkit::{is_root, TempDir};

use crate::FERROFS;
/// Time limit for one mkfs run.
const LIMIT: Duration = Duration::from_secs(120);

/// `ferrofs mkfs OPTS OUT SRC`.
fn mkfs(opts: &[&str], out: &Path, src: &Path) -> Result<Outcome, String> {
    let mut cmd = Command::new(FERROFS);
    cmd.arg("mkfs").args(opts).arg(out).arg(src);
    cmd.env_remove("SOURCE_DATE_EPOCH");
    run_with_timeout(&mut cmd, LIMIT).map_err(|e| format!("cannot run {FERROFS}: {e}"))
}

/// The names in `dir` (sorted).
fn dir_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Checks that a failed mkfs left `dir` as it was: empty, or holding only the previous image
/// `prev` (name, contents) unchanged.
fn check_nothing_left(dir: &Path, prev: Option<(&str, &[u8])>, f: &mut Vec<String>) {
    let want: Vec<String> = prev.iter().map(|(n, _)| n.to_string()).collect();
    let names = dir_names(dir);
    if names != want {
        f.push(format!(
            "{} holds {names:?} afterwards, expected {want:?} (no image, no temporary file)",
            dir.display()
        ));
    }
    if let Some((name, contents)) = prev {
        match fs::read(dir.join(name)) {
            Ok(b) if b == contents => {}
            Ok(b) => f.push(format!(
                "the previous image {name} was changed ({} bytes now, {} before)",
                b.len(),
                contents.len()
            )),
            Err(e) => f.push(format!("the previous image {name} is gone: {e}")),
        }
    }
}

/// Checks a failed run: non-zero exit, and stderr naming each of `needles`.
fn check_failed(what: &str, o: &Outcome, needles: &[&str], f: &mut Vec<String>) {
    let err = String::from_utf8_lossy(&o.stderr);
    if o.success() || o.status.is_none() {
        f.push(format!(
            "{what}: expected a failure, got {} (stderr: {})",
            o.describe_status(),
            err.trim()
        ));
    }
    for n in needles {
        if !err.contains(n) {
            f.push(format!(
                "{what}: the message does not contain {n:?}: {}",
                err.trim()
            ));
        }
    }
}

/// Panics with the failures, if any. The directory (generated data, up to a few hundred
/// MiB) is kept only with `FERROFS_TEST_KEEP`.
fn finish(what: &str, f: Vec<String>, dir: &mut TempDir) {
    if f.is_empty() {
        return;
    }
    let kept = if ferrofs_testkit::tmp::keep_requested() {
        dir.keep();
        format!("files kept in {}", dir.path().display())
    } else {
        "set FERROFS_TEST_KEEP=1 to keep the files".to_string()
    };
    panic!(
        "{what}: {} failures ({kept}):\n  {}",
        f.len(),
        f.join("\n  ")
    );
}

/// Writes files `dir/fI` for I in `range`, of `size` bytes each (zeros but for the number).
fn write_files(dir: &Path, range: std::ops::Range<usize>, size: usize) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut buf = vec![0u8; size];
    for i in range {
        buf[..8].copy_from_slice(&(i as u64).to_le_bytes());
        fs::write(dir.join(format!("f{i:04}")), &buf)?;
    }
    Ok(())
}

/// Writes `count` files of `size` bytes of the testkit's seeded text: data
/// that compresses, slowly with lzma (96 MiB take about 30 s at level 6 on
/// two cores).
fn write_text_files(dir: &Path, count: usize, size: usize) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    for i in 0..count {
        fs::write(
            dir.join(format!("t{i:03}")),
            corpus::text_bytes(size, i as u64),
        )?;
    }
    Ok(())
}

/// Unmounts on drop.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg(&self.0)
            .stdin(Stdio::null())
            .status();
    }
}

#[test]
fn mkfs_out_of_space_leaves_nothing() {
    if !is_root() {
        return println!("skipped: not running as root (mounting a small tmpfs needs it)");
    }
    let mut tmp = TempDir::new("ferrofs-mkfs-enospc").unwrap();
    let src = tmp.path().join("src");
    // 3 MiB of data (and some metadata) for a 2 MiB file system.
    write_files(&src.join("data"), 0..3, 1 << 20).unwrap();
    fs::write(src.join("small"), corpus::random_bytes(5000, 1)).unwrap();
    let full = tmp.path().join("full");
    fs::create_dir(&full).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(&full)
        .status()
        .unwrap();
    assert!(
        st.success(),
        "mount -t tmpfs -o size=2m tmpfs {}",
        full.display()
    );
    let mounted = Mounted(full.clone());
    let image = full.join("img.erofs");
    let image_s = image.display().to_string();
    let mut f = Vec::new();
    // A fresh target, then a previous image that must survive.
    for prev in [None, Some(&b"the previous image"[..])] {
        if let Some(p) = prev {
            fs::write(&image, p).unwrap();
        }
        let what = if prev.is_some() {
            "over a previous image"
        } else {
            "fresh"
        };
        match mkfs(&[], &image, &src) {
            Err(e) => f.push(e),
            Ok(o) => check_failed(
                &format!("mkfs into a full file system ({what})"),
                &o,
                &[&image_s, "No space left on device"],
                &mut f,
            ),
        }
        check_nothing_left(&full, prev.map(|p| ("img.erofs", p)), &mut f);
        let _ = fs::remove_file(&image);
    }
    drop(mounted);
    finish("out of space", f, &mut tmp);
}

#[test]
fn mkfs_bad_source_fails() {
    let mut tmp = TempDir::new("ferrofs-mkfs-badsrc").unwrap();
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    let image = out.join("img.erofs");
    let mut f = Vec::new();
    let missing = tmp.path().join("does-not-exist");
    let file = tmp.path().join("a-file");
    fs::write(&file, b"not a directory").unwrap();
    for (what, src, cause) in [
        ("missing source", &missing, "No such file or directory"),
        ("source is a file", &file, "not a directory"),
    ] {
        match mkfs(&[], &image, src) {
            Err(e) => f.push(e),
            Ok(o) => check_failed(what, &o, &[&src.display().to_string(), cause], &mut f),
        }
        check_nothing_left(&out, None, &mut f);
    }
    finish("bad source", f, &mut tmp);
}

#[test]
fn mkfs_changing_source_fails() {
    let mut tmp = TempDir::new("ferrofs-mkfs-changing").unwrap();
    let src = tmp.path().join("src");
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    let image = out.join("img.erofs");
    // Breadth-first nid order puts zz/zz/growing after every file of data/, so mkfs reads it
    // only after copying all of them, long after it recorded its size.
    let growing = src.join("zz/zz/growing");
    fs::create_dir_all(growing.parent().unwrap()).unwrap();
    fs::write(&growing, corpus::text_bytes(10_000, 3)).unwrap();
    let mut f = Vec::new();
    let start = Instant::now();
    let mut files = 0;
    let mut noticed = false;
    for want_files in [16, 64, 192] {
        // 4 MiB files: 64, 256, 768 MiB of data before the growing file.
        write_files(&src.join("data"), files..want_files, 4 << 20).unwrap();
        files = want_files;
        let stop = AtomicBool::new(false);
        let outcome = thread::scope(|s| {
            let appender = s.spawn(|| {
                let mut file = fs::OpenOptions::new().append(true).open(&growing).unwrap();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    file.write_all(b"appended while mkfs runs\n").unwrap();
                    n += 1;
                    thread::sleep(Duration::from_millis(1));
                }
                n
            });
            thread::sleep(Duration::from_millis(5));
            let o = mkfs(&[], &image, &src);
            stop.store(true, Ordering::Relaxed);
            let appends = appender.join().unwrap();
            (o, appends)
        });
        let o = match outcome.0 {
            Ok(o) => o,
            Err(e) => {
                f.push(e);
                break;
            }
        };
        if o.success() {
            eprintln!(
                "changing source: mkfs finished in {:.1?} with {} MiB before the growing file \
                 without noticing ({} appends); retrying with more data",
                o.elapsed,
                files * 4,
                outcome.1
            );
            let _ = fs::remove_file(&image);
            if start.elapsed() > Duration::from_secs(60) {
                break;
            }
            continue;
        }
        noticed = true;
        check_failed(
            "mkfs on a growing file",
            &o,
            &[&growing.display().to_string(), "changed while being read"],
            &mut f,
        );
        check_nothing_left(&out, None, &mut f);
        break;
    }
    if !noticed && f.is_empty() {
        f.push(format!(
            "mkfs never noticed that {} grew while it ran (up to {} MiB of other data first)",
            growing.display(),
            files * 4
        ));
    }
    finish("changing source", f, &mut tmp);
}

/// When [`interrupt`] sends its signal.
#[derive(Clone, Copy)]
enum When {
    /// Once the data pass is under way: the temporary file has grown past 8 MiB, at least
    /// 100 ms after the start (at most 10 s).
    DataPass,
    /// Once every data block is written (the temporary file has reached the image's final
    /// size): mkfs is then writing the metadata, fsyncing or renaming.
    DataWritten(u64),
}

struct Interrupted {
    status: Option<std::process::ExitStatus>,
    stderr: String,
    /// The temporary file was seen.
    tmp_seen: bool,
    /// The temporary file still existed right after the signal was sent (so mkfs had not
    /// committed the image when the signal became pending).
    tmp_after_signal: bool,
    /// From the signal to the exit.
    exit_after: Duration,
}

/// Runs `ferrofs mkfs ARGS IMAGE SRC` and sends it `SIGsig` at `when`.
fn interrupt(src: &Path, image: &Path, args: &[&str], sig: &str, when: When) -> Interrupted {
    let mut child = Command::new(FERROFS)
        .arg("mkfs")
        .args(args)
        .arg(image)
        .arg(src)
        .env_remove("SOURCE_DATE_EPOCH")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let name = image.file_name().unwrap().to_string_lossy();
    let tmpfile = image.with_file_name(format!(".{name}.ferrofs-{pid}.tmp"));
    let stderr_reader = {
        let mut e = child.stderr.take().unwrap();
        thread::spawn(move || {
            let mut s = String::new();
            let _ = io::Read::read_to_string(&mut e, &mut s);
            s
        })
    };
    let t0 = Instant::now();
    let mut tmp_seen = false;
    loop {
        let len = fs::metadata(&tmpfile).map(|m| m.len());
        tmp_seen |= len.is_ok();
        let len = len.unwrap_or(0);
        let ready = match when {
            When::DataPass => len > 8 << 20 && t0.elapsed() >= Duration::from_millis(100),
            When::DataWritten(size) => len >= size,
        };
        if ready || t0.elapsed() > Duration::from_secs(10) || child.try_wait().unwrap().is_some() {
            break;
        }
        thread::sleep(Duration::from_millis(1));
    }
    let _ = ferrofs_testkit::process::send_signal(pid, sig);
    let signalled = Instant::now();
    let tmp_after_signal = tmpfile.exists();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(10));
    };
    Interrupted {
        status,
        stderr: stderr_reader.join().unwrap_or_default(),
        tmp_seen,
        tmp_after_signal,
        exit_after: signalled.elapsed(),
    }
}

/// Checks an interrupted run: exit code 130, a message saying so and naming the image.
fn check_interrupted(what: &str, r: &Interrupted, image: &Path, f: &mut Vec<String>) {
    let stderr = r.stderr.trim();
    if r.status.and_then(|s| s.code()) != Some(130) {
        f.push(format!(
            "{what}: exit status {:?}, expected exit code 130 (stderr: {stderr})",
            r.status
        ));
    }
    for needle in ["interrupted", &image.display().to_string()] {
        if !stderr.contains(needle) {
            f.push(format!(
                "{what}: the message does not contain {needle:?}: {stderr}"
            ));
        }
    }
}

#[test]
fn mkfs_interrupted_leaves_nothing() {
    let mut tmp = TempDir::new("ferrofs-mkfs-signal").unwrap();
    let src = tmp.path().join("src");
    // 320 MiB in 80 files: copying them takes long enough to be interrupted.
    write_files(&src.join("data"), 0..80, 4 << 20).unwrap();
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    let image = out.join("img.erofs");
    let mut f = Vec::new();
    for (sig, prev) in [
        ("TERM", None),
        ("INT", Some(&b"the previous image"[..])),
        ("HUP", None),
    ] {
        if let Some(p) = prev {
            fs::write(&image, p).unwrap();
        }
        let what = format!("SIG{sig} during the data pass");
        let r = interrupt(&src, &image, &[], sig, When::DataPass);
        if !r.tmp_seen {
            f.push(format!(
                "{what}: the temporary file .img.erofs.ferrofs-PID.tmp never appeared"
            ));
        }
        check_interrupted(&what, &r, &image, &mut f);
        check_nothing_left(&out, prev.map(|p| ("img.erofs", p)), &mut f);
        let _ = fs::remove_file(&image);
    }
    // One big file: the signal arrives while mkfs copies it, the only file (a build must not
    // need a next file to notice it was interrupted).
    let one = tmp.path().join("one");
    write_files(&one, 0..1, 256 << 20).unwrap();
    let what = "SIGTERM while mkfs copies a single 256 MiB file";
    let r = interrupt(&one, &image, &[], "TERM", When::DataPass);
    if r.tmp_after_signal {
        check_interrupted(what, &r, &image, &mut f);
        check_nothing_left(&out, None, &mut f);
    } else {
        eprintln!("interrupted: {what}: not judged (mkfs committed before the signal)");
    }
    let _ = fs::remove_file(&image);
    // A compressed build: the signal finds compression units queued on the pool (lzma is
    // slow on text-like data). They must not be compressed first, nor waited for.
    let text = tmp.path().join("text");
    write_text_files(&text, 48, 2 << 20).unwrap();
    let what = "SIGTERM during an lzma build's data pass";
    let r = interrupt(
        &text,
        &image,
        &["-zlzma,6", "-C131072"],
        "TERM",
        When::DataPass,
    );
    if r.tmp_after_signal {
        check_interrupted(what, &r, &image, &mut f);
        check_nothing_left(&out, None, &mut f);
        if r.exit_after > Duration::from_secs(4) {
            f.push(format!(
                "{what}: exited {:?} after the signal",
                r.exit_after
            ));
        }
    } else {
        eprintln!("interrupted: {what}: not judged (mkfs committed before the signal)");
    }
    let _ = fs::remove_file(&image);
    // A signal after the data pass, while mkfs writes the metadata and fsyncs (which takes a
    // while for 320 MiB), must still abort the build: the user asked it to stop, and the
    // image is not committed yet.
    let size = match mkfs(&["--quiet"], &image, &src) {
        Ok(o) if o.success() => fs::metadata(&image).map(|m| m.len()).unwrap_or(0),
        Ok(o) => {
            f.push(format!(
                "reference build: {}: {}",
                o.describe_status(),
                o.stderr_tail(500)
            ));
            0
        }
        Err(e) => {
            f.push(e);
            0
        }
    };
    let _ = fs::remove_file(&image);
    if size > 0 {
        let what = "SIGTERM after the data pass (while mkfs writes metadata, fsyncs, renames)";
        let mut decided = false;
        for _ in 0..3 {
            let r = interrupt(&src, &image, &[], "TERM", When::DataWritten(size));
            if !r.tmp_after_signal {
                // mkfs had committed the image before the signal: nothing to judge.
                eprintln!("interrupted: {what}: mkfs committed before the signal; retrying");
                let _ = fs::remove_file(&image);
                continue;
            }
            decided = true;
            check_interrupted(what, &r, &image, &mut f);
            check_nothing_left(&out, None, &mut f);
            break;
        }
        if !decided {
            eprintln!("interrupted: {what}: not judged (mkfs always committed first)");
        }
    }
    finish("interrupted", f, &mut tmp);
}
