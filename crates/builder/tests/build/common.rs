//! What the modules share: the check that an image holds a source tree
//! (through the reader's front door, entry by entry; and through the
//! kernel's mount where it is available), a small tree with one of each
//! kind of entry, a tree's tar archive, the overlay of two trees (what a
//! layered build must show), and the check that a failed build left
//! nothing behind.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs::{Image, OpenOptions};
use ferrofs_builder::{BuildOptions, CompressOptions, Compressor, Summary};
use ferrofs_testkit::compare::{compare_trees, list_tree, CompareOptions};
use ferrofs_testkit::corpus::{self, set_mtime};
use ferrofs_testkit::mount::{can_mount, LoopDev, LoopMount};
use ferrofs_testkit::xattr;

/// Builds the directory `src` at `img` with `opts` through
/// [`ferrofs_builder::build_from`] (a fresh image); panics on failure.
pub fn build_dir(src: &Path, img: &Path, opts: &BuildOptions) -> Summary {
    let input = ferrofs_builder::Input::Dir(src);
    let mode = ferrofs_builder::Mode::Fresh;
    ferrofs_builder::build_from(input, mode, img, opts, None, &|_| {})
        .unwrap_or_else(|e| panic!("building {}: {e}", img.display()))
}

/// Options compressing with `alg` (mkfs.erofs's spelling) in pclusters
/// of `pcluster` bytes, the rest default.
pub fn compressed(alg: &str, pcluster: u64) -> BuildOptions {
    let c = Compressor::parse(alg).unwrap_or_else(|e| panic!("{alg}: {e}"));
    BuildOptions {
        compress: Some(CompressOptions::new(c, pcluster)),
        ..Default::default()
    }
}

/// Opens `img` with the reader, its extra devices read from `devices`
/// (in device-table order).
pub fn open(img: &Path, devices: &[PathBuf]) -> Image {
    let mut opts = OpenOptions::default();
    for d in devices {
        let f = fs::File::open(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        opts.devices.push(Box::new(f));
    }
    let f = fs::File::open(img).unwrap_or_else(|e| panic!("{}: {e}", img.display()));
    Image::open_with(Box::new(f), opts).unwrap_or_else(|e| panic!("{}: {e}", img.display()))
}

/// The checks of an image of `src`: [`image_matches`] through the reader
/// and [`kernel_matches`]; the failures, prefixed with `name`.
pub fn reads_back(name: &str, img: &Path, devices: &[PathBuf], src: &Path) -> Vec<String> {
    let mut f = image_matches(&open(img, devices), src);
    f.extend(kernel_matches(img, devices, src));
    f.into_iter().map(|e| format!("{name}: {e}")).collect()
}

/// Where the kernel can mount images, the differences between `src` and
/// the mount of `img` (with `devices` as its extra devices), compared
/// strictly; nothing where it cannot (the reason printed).
pub fn kernel_matches(img: &Path, devices: &[PathBuf], src: &Path) -> Vec<String> {
    if let Err(why) = can_mount() {
        println!("kernel comparison skipped: {why}");
        return Vec::new();
    }
    let loops: Result<Vec<LoopDev>, String> = devices.iter().map(|d| LoopDev::new(d)).collect();
    let loops = match loops {
        Ok(l) => l,
        Err(e) => return vec![format!("losetup: {e}")],
    };
    let opts: Vec<String> = loops.iter().map(|l| format!("device={}", l.0)).collect();
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let m = match LoopMount::new(img, &opts) {
        Ok(m) => m,
        Err(e) => return vec![format!("kernel mount: {e}")],
    };
    compare_trees(src, m.path(), &CompareOptions::strict())
        .into_iter()
        .map(|d| format!("kernel vs source: {d}"))
        .collect()
}

/// Compares every entry of `src` (the root included) with the image's,
/// through the reader's front door; returns the failures. Entries the
/// image has and `src` lacks show in the directory listings.
pub fn image_matches(image: &Image, src: &Path) -> Vec<String> {
    let mut f = Vec::new();
    let mut inos = HashMap::new();
    let root = fs::symlink_metadata(src).unwrap();
    check_entry(image, src, Path::new(""), &root, &mut inos, &mut f);
    for (rel, want) in list_tree(src).unwrap() {
        check_entry(image, src, &rel, &want, &mut inos, &mut f);
    }
    f
}

/// The distinct inode numbers the image's tree reaches from the root.
pub fn image_inodes(image: &Image) -> u64 {
    let mut seen = HashSet::new();
    let mut dirs = vec![PathBuf::from("/")];
    seen.insert(image.metadata("/").unwrap().ino());
    while let Some(dir) = dirs.pop() {
        for e in image.read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let path = dir.join(e.file_name());
            if seen.insert(e.ino()) && e.file_type().unwrap().is_dir() {
                dirs.push(path);
            }
        }
    }
    seen.len() as u64
}

/// The xattrs of a source entry, by name.
fn source_xattrs(path: &Path) -> BTreeMap<OsString, Vec<u8>> {
    let mut out = BTreeMap::new();
    for name in xattr::list(path).into_iter().flatten() {
        let value = xattr::get(path, &name).ok().flatten().unwrap_or_default();
        out.insert(name, value);
    }
    out
}

/// Compares a regular file's bytes read three ways with the source's.
fn check_bytes(image: &Image, rel: &Path, want: &[u8], f: &mut Vec<String>) {
    let what = Path::new("/").join(rel);
    let what = what.display();
    match image.read(rel) {
        Ok(got) if got == want => {}
        Ok(got) => f.push(format!(
            "{what}: read gives {} bytes, not the source's {}",
            got.len(),
            want.len()
        )),
        Err(e) => return f.push(format!("{what}: read: {e}")),
    }
    let mut file = match image.open_file(rel) {
        Ok(file) => file,
        Err(e) => return f.push(format!("{what}: open_file: {e}")),
    };
    // From an odd offset a third in, through `Seek` + `Read`.
    let mid = (want.len() / 3) | 1;
    let mut rest = Vec::new();
    let seek = file.seek(SeekFrom::Start(mid as u64));
    if seek.is_err()
        || file.read_to_end(&mut rest).is_err()
        || rest != want.get(mid..).unwrap_or_default()
    {
        f.push(format!(
            "{what}: seek to {mid} and read_to_end differ from the source"
        ));
    }
    // A piece crossing block boundaries, with `read_at`.
    let mut buf = vec![0u8; 9000];
    let end = (mid + buf.len()).min(want.len());
    match file.read_at(&mut buf, mid as u64) {
        Ok(n) if buf[..n] == *want.get(mid..end).unwrap_or_default() => {}
        Ok(n) => f.push(format!(
            "{what}: read_at({mid}) gives {n} bytes unlike the source's"
        )),
        Err(e) => f.push(format!("{what}: read_at({mid}): {e}")),
    }
}

/// Compares one entry of the image with the source; `inos` pairs image
/// inode numbers (`true`) with source ones (`false`) both ways, so hardlink
/// groups must match.
fn check_entry(
    image: &Image,
    src: &Path,
    rel: &Path,
    want: &fs::Metadata,
    inos: &mut HashMap<(bool, u64), u64>,
    f: &mut Vec<String>,
) {
    let what = Path::new("/").join(rel);
    let what = what.display();
    let got = match image.symlink_metadata(rel) {
        Ok(m) => m,
        Err(e) => return f.push(format!("{what}: symlink_metadata: {e}")),
    };
    let (t, wt) = (got.file_type(), want.file_type());
    let kind =
        |a: bool, b: bool, c: bool, d: bool, e: bool, g: bool, h: bool| [a, b, c, d, e, g, h];
    let got_kind = kind(
        t.is_file(),
        t.is_dir(),
        t.is_symlink(),
        t.is_fifo(),
        t.is_socket(),
        t.is_char_device(),
        t.is_block_device(),
    );
    let want_kind = kind(
        wt.is_file(),
        wt.is_dir(),
        wt.is_symlink(),
        wt.is_fifo(),
        wt.is_socket(),
        wt.is_char_device(),
        wt.is_block_device(),
    );
    if got_kind != want_kind {
        return f.push(format!("{what}: type {got_kind:?}, source {want_kind:?}"));
    }
    if got.mode() != want.mode() {
        f.push(format!(
            "{what}: mode {:#o}, source {:#o}",
            got.mode(),
            want.mode()
        ));
    }
    let pairs = [
        ("uid", i64::from(got.uid()), i64::from(want.uid())),
        ("gid", i64::from(got.gid()), i64::from(want.gid())),
        ("nlink", got.nlink() as i64, want.nlink() as i64),
        ("mtime", got.mtime(), want.mtime()),
        ("mtime_nsec", got.mtime_nsec(), want.mtime_nsec()),
    ];
    for (field, g, w) in pairs {
        if g != w {
            f.push(format!("{what}: {field} {g}, source {w}"));
        }
    }
    if !wt.is_dir() && got.len() != want.len() {
        f.push(format!("{what}: len {}, source {}", got.len(), want.len()));
    }
    if (wt.is_char_device() || wt.is_block_device()) && got.rdev() != want.rdev() {
        f.push(format!(
            "{what}: rdev {:#x}, source {:#x}",
            got.rdev(),
            want.rdev()
        ));
    }
    // Image inode numbers and source ones pair one to one.
    let image_side = *inos.entry((true, got.ino())).or_insert(want.ino());
    let source_side = *inos.entry((false, want.ino())).or_insert(got.ino());
    if (image_side, source_side) != (want.ino(), got.ino()) {
        f.push(format!(
            "{what}: hardlink groups differ (image inode {}, source inode {})",
            got.ino(),
            want.ino()
        ));
    }
    let path = src.join(rel);
    if wt.is_dir() {
        check_listing(image, rel, &path, f);
    } else if wt.is_symlink() {
        let target = image.read_link(rel).map_err(|e| e.to_string());
        if target != Ok(fs::read_link(&path).unwrap()) {
            f.push(format!("{what}: read_link {target:?}"));
        }
    } else if wt.is_file() {
        check_bytes(image, rel, &fs::read(&path).unwrap(), f);
    }
    if !wt.is_symlink() {
        match image.xattrs(rel) {
            Ok(got) => {
                let got: BTreeMap<OsString, Vec<u8>> = got.into_iter().collect();
                let want = source_xattrs(&path);
                if got != want {
                    f.push(format!(
                        "{what}: xattrs {:?}, source {:?}",
                        got.keys(),
                        want.keys()
                    ));
                }
            }
            Err(e) => f.push(format!("{what}: xattrs: {e}")),
        }
    }
}

/// Compares the names (and which are directories) `read_dir` lists for
/// the directory `rel` with the source directory `path`'s.
fn check_listing(image: &Image, rel: &Path, path: &Path, f: &mut Vec<String>) {
    let what = Path::new("/").join(rel);
    let mut names = Vec::new();
    for e in image.read_dir(rel).into_iter().flatten() {
        match e.and_then(|e| Ok((e.file_name(), e.file_type()?.is_dir()))) {
            Ok(n) => names.push(n),
            Err(e) => f.push(format!("{}: read_dir: {e}", what.display())),
        }
    }
    let mut want_names: Vec<(OsString, bool)> = fs::read_dir(path)
        .unwrap()
        .map(|e| {
            e.map(|e| (e.file_name(), e.file_type().unwrap().is_dir()))
                .unwrap()
        })
        .collect();
    names.sort();
    want_names.sort();
    if names != want_names {
        let show = |v: &[(OsString, bool)]| -> Vec<String> {
            v.iter()
                .take(8)
                .map(|(n, _)| n.to_string_lossy().into())
                .collect()
        };
        f.push(format!(
            "{}: read_dir lists {} entries {:?}, the source {} {:?}",
            what.display(),
            names.len(),
            show(&names),
            want_names.len(),
            show(&want_names)
        ));
    }
}

/// A small tree with one of each kind of entry: text and random files
/// around block sizes, a hard link pair, symlinks, a fifo, an empty and a
/// nested directory, `user.*` xattrs, odd modes and nanosecond mtimes;
/// as root also a character and a block device and foreign owners.
/// `seed` varies the file contents.
pub fn small_tree(dir: &Path, seed: u64) {
    for d in ["etc", "usr/bin", "usr/share/doc", "var/empty"] {
        fs::create_dir_all(dir.join(d)).unwrap();
    }
    let files: [(&str, Vec<u8>); 6] = [
        ("etc/hosts", b"127.0.0.1 localhost\n".to_vec()),
        ("etc/empty", Vec::new()),
        ("usr/bin/tool", corpus::text_bytes(70_000, seed)),
        ("usr/bin/blob", corpus::random_bytes(12_289, seed + 1)),
        ("usr/share/doc/block", corpus::text_bytes(4096, seed + 2)),
        ("usr/share/doc/mixed", corpus::mixed_bytes(65_537, seed + 3)),
    ];
    for (p, data) in &files {
        fs::write(dir.join(p), data).unwrap();
    }
    fs::hard_link(dir.join("usr/bin/tool"), dir.join("usr/bin/tool-link")).unwrap();
    std::os::unix::fs::symlink("../usr/bin/tool", dir.join("etc/tool")).unwrap();
    std::os::unix::fs::symlink("nowhere", dir.join("etc/dangling")).unwrap();
    let fifo = Command::new("mkfifo").arg(dir.join("var/fifo")).status();
    assert!(fifo.is_ok_and(|s| s.success()), "mkfifo");
    xattr::set(dir.join("etc/hosts"), "user.note", b"hosts").unwrap();
    xattr::set(dir.join("usr"), "user.dir", b"").unwrap();
    let mode = |p: &str, m: u32| {
        fs::set_permissions(dir.join(p), fs::Permissions::from_mode(m)).unwrap();
    };
    mode("usr/bin/tool", 0o4755);
    mode("etc/empty", 0o600);
    mode("var/empty", 0o1777);
    if ferrofs_testkit::is_root() {
        for (name, kind, dev) in [("var/null", "c", ("1", "3")), ("var/sda1", "b", ("8", "1"))] {
            let st = Command::new("mknod")
                .arg(dir.join(name))
                .args([kind, dev.0, dev.1])
                .status();
            assert!(st.is_ok_and(|s| s.success()), "mknod {name}");
        }
        std::os::unix::fs::lchown(dir.join("etc/hosts"), Some(1000), Some(1001)).unwrap();
        std::os::unix::fs::lchown(dir.join("var"), Some(65534), Some(65534)).unwrap();
    }
    set_times(dir);
}

/// Gives every entry under `dir` (and `dir`) a fixed mtime with
/// nanoseconds, deepest first so directories keep theirs.
pub fn set_times(dir: &Path) {
    let mut entries = list_tree(dir).unwrap();
    entries.reverse();
    for (i, (rel, _)) in entries.iter().enumerate() {
        let nsec = ((i as u64 * 123_456_789) % 1_000_000_000) as u32;
        set_mtime(&dir.join(rel), 1_650_000_000 + i as i64 * 3_601, nsec).unwrap();
    }
    set_mtime(dir, 1_700_000_000, 5).unwrap();
}

/// `cp -a FROM TO`: a copy of a tree with its metadata (onto an existing
/// directory, `FROM/.` merges into it, its metadata winning).
pub fn cp_a(from: &Path, to: &Path) {
    let st = Command::new("cp").arg("-a").arg(from).arg(to).status();
    assert!(st.is_ok_and(|s| s.success()), "cp -a {from:?} {to:?}");
}

/// A POSIX (PAX) tar archive of the tree `src` at `out`, as GNU tar writes
/// it with xattrs and numeric owners (mtimes keep their nanoseconds).
pub fn tar_of(src: &Path, out: &Path) {
    let st = Command::new("tar")
        .args(["--format=posix", "--xattrs", "--xattrs-include=*"])
        .args(["--numeric-owner", "-C"])
        .arg(src)
        .arg("-cf")
        .arg(out)
        .arg(".")
        .status();
    assert!(st.is_ok_and(|s| s.success()), "tar of {}", src.display());
}

/// The names in `dir`, sorted (what a failed build must not add to).
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs `build` (a build expected to fail, writing in `dir`), checks that
/// it left `dir` as it was (no image, no temporary file) and returns its
/// error.
pub fn fails_leaving_nothing(
    dir: &Path,
    build: impl FnOnce() -> ferrofs_builder::Result<Summary>,
) -> ferrofs_builder::BuildError {
    let before = names_in(dir);
    let e = match build() {
        Ok(s) => panic!("the build succeeded: {s:?}"),
        Err(e) => e,
    };
    assert_eq!(names_in(dir), before, "the failed build ({e}) left files");
    e
}

/// Makes `out` the overlay of `upper` over `lower` as overlayfs shows it
/// (what the builder's layer merges must give): a copy of `lower` with the
/// paths in `whiteouts` removed and the directories in `opaque` emptied,
/// then `upper` copied over it, each of its entries replacing what `lower`
/// has at its path (a directory in both keeps both's entries, with
/// `upper`'s metadata and xattrs).
pub fn overlay(lower: &Path, upper: &Path, whiteouts: &[&str], opaque: &[&str], out: &Path) {
    cp_a(lower, out);
    for w in whiteouts {
        ferrofs_testkit::tmp::remove_tree(&out.join(w)).unwrap();
    }
    for o in opaque {
        for e in fs::read_dir(out.join(o)).unwrap() {
            ferrofs_testkit::tmp::remove_tree(&e.unwrap().path()).unwrap();
        }
    }
    let mut shared_dirs = vec![out.to_path_buf()];
    for (rel, m) in list_tree(upper).unwrap() {
        let there = out.join(&rel);
        match fs::symlink_metadata(&there) {
            Ok(t) if t.is_dir() && m.is_dir() => shared_dirs.push(there),
            Ok(_) => ferrofs_testkit::tmp::remove_tree(&there).unwrap(),
            Err(_) => {}
        }
    }
    for d in shared_dirs {
        for name in xattr::list(&d).unwrap() {
            xattr::remove(&d, name).unwrap();
        }
    }
    let mut from = upper.as_os_str().to_owned();
    from.push("/.");
    cp_a(Path::new(&from), out);
}

/// The distinct regular files under `dir` (hard links counted once) with
/// their sizes.
pub fn regular_files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut seen = HashSet::new();
    list_tree(dir)
        .unwrap()
        .into_iter()
        .filter(|(_, m)| m.is_file() && seen.insert(m.ino()))
        .map(|(rel, m)| (rel, m.len()))
        .collect()
}
