//! `ferrofs mount` (FUSE) against the source tree: images of the corner
//! tree built by ferrofs mkfs and by mkfs.erofs 1.8.6 are mounted with
//! `ferrofs mount -f`, compared entry by entry and field by field with the
//! source, read by 16 threads at random offsets, and the daemon's peak RSS
//! is checked against the cache budget. Needs root and /dev/fuse.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::fuse::{mounted, FuseMount as Mount};
use ferrofs_testkit::{corpus, tools};

const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

fn skip_reason() -> Option<String> {
    if !ferrofs_testkit::is_root() {
        return Some("not root".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is absent".into());
    }
    None
}

/// A foreground `ferrofs mount -f EXTRA IMAGE DIR`.
fn mount(image: &Path, dir: &Path, extra: &[&str]) -> Mount {
    Mount::new(Path::new(FERROFS), image.as_os_str(), dir, extra)
}

fn work(test: &str) -> PathBuf {
    ferrofs_testkit::work_dir!(test)
}

fn build(src: &Path, out: &Path, upstream: bool, opts: &[&str]) {
    let ok = if upstream {
        let mkfs =
            tools::mkfs_upstream().expect("mkfs.erofs 1.8.6 (run ../shared/tools/upstream-tools)");
        tools::build_image(&mkfs, opts, src, out).is_ok()
    } else {
        Command::new(FERROFS)
            .arg("mkfs")
            .arg("--quiet")
            .args(opts)
            .arg(out)
            .arg(src)
            .status()
            .unwrap()
            .success()
    };
    assert!(ok, "building {} with {opts:?}", out.display());
}

#[test]
fn fuse_mount_matches_source() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let w = work("fuse_mount_tree");
    let src = w.join("tree");
    corpus::make_corner_tree(&src).unwrap();
    let mut failures = Vec::new();
    for (name, upstream, opts) in [
        ("ferrofs-plain", false, vec![]),
        ("upstream-plain", true, vec![]),
        (
            "ferrofs-lz4hc",
            false,
            vec!["-zlz4hc", "-C65536", "-Eztailpacking"],
        ),
        (
            "upstream-lz4hc",
            true,
            vec!["-zlz4hc", "-C65536", "-Eztailpacking"],
        ),
        (
            "upstream-lzma-fragments",
            true,
            vec!["-zlzma", "-Efragments"],
        ),
    ] {
        let img = w.join(format!("images/{name}.img"));
        build(&src, &img, upstream, &opts);
        let m = mount(&img, &w.join(format!("mnt-{name}")), &["--threads", "4"]);
        for d in compare::compare_trees(&src, &m.dir, &CompareOptions::strict()) {
            failures.push(format!("{name}: {d}"));
        }
        // `mount` shows the image as the source, as for a loop mount.
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
        let shown = mounts
            .lines()
            .find(|l| l.split(' ').nth(1) == m.dir.to_str())
            .and_then(|l| l.split(' ').next().map(str::to_string));
        if shown.as_deref() != img.canonicalize().unwrap().to_str() {
            failures.push(format!(
                "{name}: /proc/mounts shows the source as {shown:?}"
            ));
        }
        m.unmount();
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every regular file under `dir`, relative to it.
fn regular_files(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir.join(rel)).unwrap() {
        let e = e.unwrap();
        let r = rel.join(e.file_name());
        let t = e.file_type().unwrap();
        if t.is_dir() {
            regular_files(dir, &r, out);
        } else if t.is_file() {
            out.push(r);
        }
    }
}

#[test]
fn concurrent_readers_and_bounded_memory() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let w = work("fuse_mount_conc");
    let src = w.join("tree");
    // The corner tree plus 40 MiB of compressible files, so that the cache
    // budget matters.
    corpus::make_corner_tree(&src.join("corner")).unwrap();
    for k in 0..20 {
        let text: String = (0..40_000)
            .map(|i| format!("{k} {i} fixed-size output compression\n"))
            .collect();
        let mut bytes = text.into_bytes();
        bytes.truncate(2 << 20);
        fs::write(src.join(format!("f{k:02}.txt")), bytes).unwrap();
    }
    let img = w.join("images/conc.img");
    build(&src, &img, false, &["-zlz4hc", "-C65536", "-Eztailpacking"]);
    let budget_mib = 8u64;
    let m = mount(
        &img,
        &w.join("mnt"),
        &["--cache-size", "8M", "--threads", "4"],
    );
    let mut files = Vec::new();
    regular_files(&src, Path::new(""), &mut files);
    assert!(files.len() > 40, "only {} files", files.len());
    let wants: Vec<Vec<u8>> = files
        .iter()
        .map(|f| fs::read(src.join(f)).unwrap())
        .collect();
    std::thread::scope(|s| {
        for t in 0..16u64 {
            let (mnt, files, wants) = (&m.dir, &files, &wants);
            s.spawn(move || {
                let mut x = t * 0x9E37_79B9 + 1;
                for _ in 0..300 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let k = (x % files.len() as u64) as usize;
                    let (f, want) = (&files[k], &wants[k]);
                    let off = (x >> 8) % (want.len() as u64 + 1);
                    let len = ((x >> 40) % 70_000) as usize;
                    let mut got = vec![0u8; len];
                    let fh = fs::File::open(mnt.join(f)).unwrap();
                    let mut n = 0;
                    while n < len {
                        match fh.read_at(&mut got[n..], off + n as u64).unwrap() {
                            0 => break,
                            r => n += r,
                        }
                    }
                    let end = (off as usize + len).min(want.len());
                    assert!(
                        got[..n] == want[off as usize..end],
                        "{} at {off}+{len}",
                        f.display()
                    );
                }
            });
        }
    });
    // Read the whole tree once more through the mount.
    for (f, want) in files.iter().zip(&wants) {
        assert!(fs::read(m.dir.join(f)).unwrap() == *want, "{}", f.display());
    }
    let rss_mib = m.peak_rss_kib() / 1024;
    // The bound: 16 MiB beyond the cache budget.
    let allowance = 16 + budget_mib;
    assert!(
        rss_mib <= allowance,
        "daemon peak RSS {rss_mib} MiB > {allowance} MiB (16 + cache {budget_mib})"
    );
    println!("fuse daemon peak RSS: {rss_mib} MiB with an {budget_mib} MiB cache");
    m.unmount();
}

/// SIGTERM and SIGINT unmount cleanly; without `-f` the command returns
/// once the mount is there and the detached daemon serves it.
#[test]
fn signals_and_detach() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let w = work("fuse_mount_signals");
    let src = w.join("tree");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/hello"), b"hello, fuse\n").unwrap();
    let img = w.join("images/small.img");
    build(&src, &img, false, &[]);
    for sig in ["TERM", "INT"] {
        let mut m = mount(&img, &w.join(format!("mnt-{sig}")), &[]);
        assert_eq!(fs::read(m.dir.join("d/hello")).unwrap(), b"hello, fuse\n");
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(m.child.id().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let start = Instant::now();
        let st = loop {
            if let Some(st) = m.child.try_wait().unwrap() {
                break st;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "SIG{sig} ignored"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(st.success(), "daemon exited with {st} on SIG{sig}");
        assert!(!mounted(&m.dir), "still mounted after SIG{sig}");
    }
    // Detached: the command exits 0 with the mount in place.
    let dir = w.join("mnt-detached");
    fs::create_dir_all(&dir).unwrap();
    let out = Command::new(FERROFS)
        .arg("mount")
        .arg(&img)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(mounted(&dir));
    assert_eq!(fs::read(dir.join("d/hello")).unwrap(), b"hello, fuse\n");
    // A second mount on the same place is refused, naming it.
    let out = Command::new(FERROFS)
        .arg("mount")
        .arg("-f")
        .arg(&img)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains("already mounted"), "{msg}");
    assert!(Command::new("umount").arg(&dir).status().unwrap().success());
    assert!(!mounted(&dir));
}

/// A detached mount whose daemon fails after detaching (here: the
/// `--trace` file, which only the daemon opens, cannot be created) says
/// why, with the daemon's own message and exit status, not only "exit
/// status: 2". Needs /dev/fuse to exist (the daemon fails before using it).
#[test]
fn a_failing_daemon_reports_its_reason() {
    if !Path::new("/dev/fuse").exists() {
        println!("skipped: /dev/fuse is absent");
        return;
    }
    let w = work("fuse_mount_daemon_error");
    let src = w.join("tree");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("hello"), b"hello\n").unwrap();
    let img = w.join("small.img");
    build(&src, &img, false, &[]);
    let dir = w.join("mnt");
    fs::create_dir_all(&dir).unwrap();
    let trace = w.join("no-such-dir/trace");
    let start = Instant::now();
    let out = Command::new(FERROFS)
        .arg("mount")
        .arg(&img)
        .arg(&dir)
        .arg("--trace")
        .arg(&trace)
        .output()
        .unwrap();
    let msg = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{msg}");
    assert!(
        msg.contains(&format!(
            "trace file {}: No such file or directory",
            trace.display()
        )),
        "{msg}"
    );
    assert!(msg.starts_with("ferrofs: mounting "), "{msg}");
    assert!(!msg.contains("mount daemon exited"), "{msg}");
    assert!(!mounted(&dir));
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn mount_errors_are_clear() {
    let out = Command::new(FERROFS)
        .args(["mount", "-f", "/nonexistent.img", "/nonexistent-dir"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("/nonexistent-dir") && msg.contains("does not exist"),
        "{msg}"
    );
}

/// Resident bytes of `path` in the page cache (util-linux `fincore`).
fn resident(path: &Path) -> u64 {
    let out = Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "fincore {}", path.display());
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Tree-walk prefetch: once a program lists a directory and starts reading
/// its first file, the small files after it are decoded into the kernel's
/// page cache in the background (none with `--no-prefetch`), and reading
/// them returns the source bytes.
#[test]
fn tree_walk_prefetch_fills_the_page_cache() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let w = work("fuse_prefetch");
    let src = w.join("tree");
    fs::create_dir_all(src.join("d")).unwrap();
    for k in 0..12 {
        let text: String = (0..3000)
            .map(|i| format!("file {k} line {i} of a tree walk\n"))
            .collect();
        fs::write(src.join(format!("d/f{k:02}.txt")), text).unwrap();
    }
    let img = w.join("images/p.img");
    build(&src, &img, false, &["-zlz4hc", "-C16384"]);
    for (opts, expect) in [(&[][..], true), (&["--no-prefetch"][..], false)] {
        let m = mount(&img, &w.join("mnt"), opts);
        let dir = m.dir.join("d");
        let mut names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(
            fs::read(dir.join(&names[0])).unwrap(),
            fs::read(src.join("d").join(&names[0])).unwrap()
        );
        let last = dir.join(names.last().unwrap());
        let want = fs::metadata(&last).unwrap().len();
        let start = Instant::now();
        let mut got = resident(&last);
        while expect && got < want && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
            got = resident(&last);
        }
        if expect {
            assert_eq!(
                got,
                want.div_ceil(4096) * 4096,
                "{opts:?}: last file not prefetched"
            );
        } else {
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(resident(&last), 0, "{opts:?}: prefetched without prefetch");
        }
        for n in &names {
            assert_eq!(
                fs::read(dir.join(n)).unwrap(),
                fs::read(src.join("d").join(n)).unwrap(),
                "{opts:?}: {n:?}"
            );
        }
        m.unmount();
    }
}

/// A small read in the middle of a file decodes its whole pcluster once
/// and the mount stores all of it in the page cache, so neighbouring reads
/// are cache hits (with `--no-prefetch` only the page read is cached).
#[test]
fn small_reads_store_their_decoded_pcluster() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let w = work("fuse_store");
    let src = w.join("tree");
    fs::create_dir_all(&src).unwrap();
    let text: String = (0..120_000)
        .map(|i| format!("line {i} of a file read at random\n"))
        .collect();
    fs::write(src.join("f.txt"), &text).unwrap();
    let img = w.join("images/s.img");
    build(&src, &img, false, &["-zlz4hc", "-C16384"]);
    let want = text.as_bytes();
    for (opts, expect) in [(&[][..], true), (&["--no-prefetch"][..], false)] {
        let m = mount(&img, &w.join("mnt"), opts);
        let path = m.dir.join("f.txt");
        let f = fs::File::open(&path).unwrap();
        let off = 2 << 20;
        let mut got = vec![0u8; 4096];
        f.read_exact_at(&mut got, off).unwrap();
        assert!(got == want[off as usize..off as usize + 4096], "{opts:?}");
        drop(f);
        let start = Instant::now();
        let mut res = resident(&path);
        while expect && res <= 16384 && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
            res = resident(&path);
        }
        if expect {
            assert!(res > 16384, "{opts:?}: only {res} bytes resident");
        } else {
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(resident(&path), 4096, "{opts:?}");
        }
        // Whatever was stored reads back as the source.
        assert!(fs::read(&path).unwrap() == want, "{opts:?}: contents");
        m.unmount();
    }
}

/// Directory listings in getdents order, `.` and `..` included (`ls -fa`),
/// of every directory under `root`, keyed by path.
fn raw_listings(root: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let ls = Command::new("ls").arg("-fa").arg(&dir).output().unwrap();
        assert!(ls.status.success(), "ls -fa {}", dir.display());
        let names: Vec<String> = String::from_utf8_lossy(&ls.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        for n in &names {
            if n != "." && n != ".." && dir.join(n).symlink_metadata().unwrap().is_dir() {
                stack.push(rel.join(n));
            }
        }
        out.push((rel, names));
    }
    out.sort();
    out
}

/// Inode numbers under `root`, keyed by path: every path's `st_ino`, and
/// every directory entry's `d_ino` as readdir gives it.
fn inode_numbers(root: &Path) -> Vec<(PathBuf, u64)> {
    use std::os::unix::fs::{DirEntryExt, MetadataExt};
    let mut out = vec![(PathBuf::from("/"), root.metadata().unwrap().ino())];
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(root.join(&rel)).unwrap() {
            let e = e.unwrap();
            let path = rel.join(e.file_name());
            let meta = e.path().symlink_metadata().unwrap();
            out.push((Path::new("d_ino").join(&path), e.ino()));
            out.push((path.clone(), meta.ino()));
            if meta.is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The erofs-utils 1.9.4 reference images (48-bit zstd extents, metabox,
/// dot-omitted directories, the kitchen sink): `ferrofs mount` shows the
/// tree the kernel's loop mount shows (contents, modes, owners, ns mtimes,
/// xattrs, links, nlink, inode numbers in `stat` and in readdir's `d_ino`),
/// and every directory lists the same names in the
/// same order, `.` and `..` included (the kernel lists a dot-omitted
/// directory's `.` last).
#[test]
fn fuse_mount_of_v19_images_matches_the_kernel() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    if let Err(why) = ferrofs_testkit::mount::can_mount() {
        println!("skipped: {why}");
        return;
    }
    let w = work("fuse_mount_v19");
    let mut failures = Vec::new();
    for name in [
        "e48.erofs",
        "e48-zstd-C128k.erofs",
        "e48-times-T5e9.erofs",
        "m16k-zstd-C16k.erofs",
        "m4k-lz4hc-ztail-frag-xp.erofs",
        "dot-omitted.erofs",
        "dot-omitted-lz4hc.erofs",
        "kitchen-sink.erofs",
    ] {
        let img = tools::workspace_root().join("testdata/v19").join(name);
        let kernel = ferrofs_testkit::mount::LoopMount::new(&img, &[]).unwrap();
        let m = mount(&img, &w.join(format!("mnt-{name}")), &["--threads", "2"]);
        for d in compare::compare_trees(kernel.path(), &m.dir, &CompareOptions::strict()) {
            failures.push(format!("{name}: {d}"));
        }
        let (want, got) = (raw_listings(kernel.path()), raw_listings(&m.dir));
        assert!(
            want.first().is_some_and(|(_, names)| names.len() > 3),
            "{name}: {want:?}"
        );
        if name.starts_with("dot-omitted") || name == "kitchen-sink.erofs" {
            // The kernel's order for dot-omitted directories: "." last.
            let root = &want
                .iter()
                .find(|(p, _)| p.as_os_str().is_empty())
                .unwrap()
                .1;
            assert_eq!(
                root.last().map(String::as_str),
                Some("."),
                "{name}: {root:?}"
            );
        }
        for ((wp, wn), (gp, gn)) in want.iter().zip(&got) {
            if wp != gp || wn != gn {
                // The first position where the listings part, and both tails.
                let k = wn.iter().zip(gn).take_while(|(a, b)| a == b).count();
                let tail = |v: &[String]| v[k..].iter().take(4).cloned().collect::<Vec<_>>();
                failures.push(format!(
                    "{name}: /{} vs /{}: listings part at entry {k}: kernel {:?}..., ferrofs {:?}...",
                    wp.display(),
                    gp.display(),
                    tail(wn),
                    tail(gn)
                ));
            }
        }
        let (want_ino, got_ino) = (inode_numbers(kernel.path()), inode_numbers(&m.dir));
        assert!(want_ino.len() > 6, "{name}: {want_ino:?}");
        if want_ino != got_ino {
            let diff: Vec<_> = want_ino
                .iter()
                .zip(&got_ino)
                .filter(|(w, g)| w != g)
                .take(4)
                .collect();
            failures.push(format!(
                "{name}: inode numbers differ (kernel, ferrofs): {diff:?}; {} vs {} paths",
                want_ino.len(),
                got_ino.len()
            ));
        }
        if want.len() != got.len() {
            failures.push(format!(
                "{name}: {} directories under the kernel, {} under ferrofs",
                want.len(),
                got.len()
            ));
        }
        m.unmount();
        kernel.unmount().unwrap();
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `mount --verity` of an image with one flipped byte in a file's data:
/// that file gives EIO where the byte is, the other files read whole and
/// right; a wrong root hash refuses the mount (#34).
#[test]
fn verity_mount_gives_eio_for_a_tampered_file_only() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let w = work("fuse_mount_verity");
    let src = w.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let big: Vec<u8> = (0..1_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect();
    std::fs::write(src.join("big"), &big).unwrap();
    std::fs::write(src.join("good"), b"good bytes\n").unwrap();
    let img = w.join("v.img");
    build(&src, &img, false, &["--verity"]);
    let out = Command::new(FERROFS)
        .args(["verity", "--json"])
        .arg(&img)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let root = v["root_hash"].as_str().unwrap().to_string();
    // Flip a byte in the middle of big's data (found by its contents).
    let mut bytes = std::fs::read(&img).unwrap();
    let needle = &big[500_000..500_064];
    let at = bytes
        .windows(needle.len())
        .position(|x| x == needle)
        .unwrap();
    bytes[at + 10] ^= 0xff;
    std::fs::write(&img, &bytes).unwrap();
    let m = mount(&img, &w.join("mnt"), &["--verity", &root]);
    assert_eq!(std::fs::read(m.dir.join("good")).unwrap(), b"good bytes\n");
    let e = std::fs::read(m.dir.join("big")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc_eio()), "{e}");
    // Blocks far from the damaged one still read, and right.
    let f = std::fs::File::open(m.dir.join("big")).unwrap();
    let mut head = vec![0u8; 65536];
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut head, 0).unwrap();
    assert!(head == big[..65536]);
    drop(f);
    m.unmount();
    let mut wrong = root.clone();
    wrong.replace_range(0..2, if root.starts_with("00") { "11" } else { "00" });
    let o = Command::new(FERROFS)
        .args(["mount", "-f", "--verity", &wrong])
        .arg(&img)
        .arg(w.join("mnt"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("root hash does not match"));
}

/// EIO's number on Linux.
fn libc_eio() -> i32 {
    5
}
