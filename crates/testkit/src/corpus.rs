//! The corner-case source tree that images are built from.
//!
//! [`make_corner_tree`] is deterministic: the same bytes, names, modes, owners, times and xattrs
//! every run (data comes from a seeded xorshift generator, times are fixed). Parts that need
//! privileges (device nodes, foreign owners, `trusted.*`/`security.*` xattrs, a mode-0000
//! directory) are only created when running as root.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Sizes of the regular files under `files/text/` (`tSIZE`) and `files/random/` (`rSIZE`).
pub const FILE_SIZES: &[u64] = &[
    0,
    1,
    511,
    512,
    513,
    1023,
    1024,
    4095,
    4096,
    4097,
    8191,
    8192,
    8193,
    65535,
    65536,
    65537,
    131_072 + 17,
    1_048_576 + 3,
];

/// Sizes of the files under `files/mixed/` (`mSIZE`): text, random and zero runs interleaved.
pub const MIXED_SIZES: &[u64] = &[4097, 65537, 131_072 + 17, 1_048_576 + 3];

/// The directory (relative to the tree root) that holds [`BIG_DIR_ENTRIES`] entries.
pub const BIG_DIR: &str = "bigdir";

/// How many entries [`BIG_DIR`] has (files, plus a few subdirectories).
pub const BIG_DIR_ENTRIES: usize = 3000;

/// How deep `deep/d01/d02/…` goes.
pub const DEEP_LEVELS: usize = 40;

/// The size of the sparse file `sparse/holes_10m`.
pub const SPARSE_SIZE: u64 = 10 << 20;

/// A tiny deterministic xorshift64 generator (not for cryptography).
#[derive(Debug, Clone)]
pub struct XorShift64(u64);

impl XorShift64 {
    /// A generator for `seed` (any value; 0 is remapped).
    pub fn new(seed: u64) -> Self {
        XorShift64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// `len` incompressible bytes from seed `seed`.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    XorShift64::new(seed).fill(&mut v);
    v
}

const WORDS: &[&str] = &[
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "erofs",
    "image",
    "block",
    "cluster",
    "inode",
    "directory",
    "compress",
    "read",
    "only",
    "file",
    "system",
    "kernel",
    "data",
    "tail",
    "packing",
    "fragment",
    "dedupe",
    "xattr",
    "owner",
    "mode",
    "time",
    "link",
    "symbolic",
    "device",
    "hole",
    "sparse",
    "extent",
    "index",
    "super",
    "root",
    "path",
    "name",
    "and",
    "of",
    "to",
    "in",
    "is",
    "it",
    "that",
    "was",
    "for",
    "on",
    "are",
    "with",
    "as",
    "his",
    "they",
    "be",
    "at",
    "one",
    "have",
    "this",
    "from",
    "or",
    "had",
    "by",
];

/// `len` bytes of highly compressible text: numbered lines of English words (seeded).
pub fn text_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = XorShift64::new(seed ^ 0x5445_5854);
    let mut out = Vec::with_capacity(len + 128);
    let mut line = 0u64;
    while out.len() < len {
        line += 1;
        out.extend_from_slice(format!("{line:06}").as_bytes());
        let n = 6 + rng.next_u64() % 8;
        for _ in 0..n {
            out.push(b' ');
            out.extend_from_slice(WORDS[(rng.next_u64() % WORDS.len() as u64) as usize].as_bytes());
        }
        out.push(b'\n');
    }
    out.truncate(len);
    out
}

/// `len` bytes of text, random data and zero runs interleaved in irregular segments.
pub fn mixed_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = XorShift64::new(seed ^ 0x004d_4958_4544);
    let mut out = Vec::with_capacity(len);
    let mut k = 0u64;
    while out.len() < len {
        let seg = (700 + rng.next_u64() % 9000) as usize;
        match k % 3 {
            0 => out.extend_from_slice(&text_bytes(seg, seed + k)),
            1 => out.extend_from_slice(&random_bytes(seg, seed + k)),
            _ => out.resize(out.len() + seg, 0),
        }
        k += 1;
    }
    out.truncate(len);
    out
}

/// A path made from raw bytes (names need not be UTF-8).
fn bpath(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

fn cstr(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
}

fn check(rc: libc::c_int, what: &str, path: &Path) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        Err(io::Error::new(
            e.kind(),
            format!("{what} {}: {e}", path.display()),
        ))
    }
}

/// Sets atime and mtime of `path` (not following symlinks) to `sec.nsec`.
pub fn set_mtime(path: &Path, sec: i64, nsec: u32) -> io::Result<()> {
    let c = cstr(path)?;
    let ts = libc::timespec {
        tv_sec: sec as libc::time_t,
        tv_nsec: nsec as libc::c_long,
    };
    let times = [ts, ts];
    // SAFETY: c is a valid NUL-terminated path and times points to two timespecs.
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    check(rc, "utimensat", path)
}

fn mknod(path: &Path, mode: libc::mode_t, dev: libc::dev_t) -> io::Result<()> {
    let c = cstr(path)?;
    // SAFETY: c is a valid NUL-terminated path.
    let rc = unsafe { libc::mknod(c.as_ptr(), mode, dev) };
    check(rc, "mknod", path)
}

/// Variations of the corner tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CornerOptions {
    /// The length of the longest names (255 = `NAME_MAX`). Debian's mkfs.erofs 1.5 fails on
    /// 255-byte names ("Could not format the device: No such file or directory"), so trees
    /// for it use 254.
    pub max_name_len: usize,
}

impl Default for CornerOptions {
    fn default() -> Self {
        CornerOptions { max_name_len: 255 }
    }
}

struct Builder {
    opts: CornerOptions,
    root: PathBuf,
    privileged: bool,
    /// Every created entry (relative path) and its mtime; hardlinks are not listed again.
    times: BTreeMap<PathBuf, (i64, u32)>,
    dirs: Vec<PathBuf>,
    n: u64,
}

impl Builder {
    fn abs(&self, rel: &Path) -> PathBuf {
        self.root.join(rel)
    }

    /// A deterministic default mtime: a third of the entries have zero nanoseconds.
    fn next_time(&mut self) -> (i64, u32) {
        self.n += 1;
        let n = self.n;
        let nsec = if n % 3 == 0 {
            0
        } else {
            ((n * 987_654_321) % 1_000_000_000) as u32
        };
        (1_600_000_000 + n as i64 * 86_413, nsec)
    }

    fn register(&mut self, rel: &Path) {
        let t = self.next_time();
        self.times.insert(rel.to_path_buf(), t);
    }

    fn dir(&mut self, rel: impl AsRef<Path>) -> io::Result<PathBuf> {
        let rel = rel.as_ref().to_path_buf();
        let p = self.abs(&rel);
        fs::create_dir(&p).map_err(|e| annotate(e, "mkdir", &p))?;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755))?;
        self.register(&rel);
        self.dirs.push(rel.clone());
        Ok(rel)
    }

    fn file(&mut self, rel: impl AsRef<Path>, data: &[u8]) -> io::Result<PathBuf> {
        let rel = rel.as_ref().to_path_buf();
        let p = self.abs(&rel);
        let mut f = File::create(&p).map_err(|e| annotate(e, "create", &p))?;
        f.write_all(data)?;
        drop(f);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644))?;
        self.register(&rel);
        Ok(rel)
    }

    fn symlink(&mut self, target: &[u8], rel: impl AsRef<Path>) -> io::Result<PathBuf> {
        let rel = rel.as_ref().to_path_buf();
        let p = self.abs(&rel);
        std::os::unix::fs::symlink(OsStr::from_bytes(target), &p)
            .map_err(|e| annotate(e, "symlink", &p))?;
        self.register(&rel);
        Ok(rel)
    }

    fn node(
        &mut self,
        rel: impl AsRef<Path>,
        mode: libc::mode_t,
        dev: libc::dev_t,
    ) -> io::Result<PathBuf> {
        let rel = rel.as_ref().to_path_buf();
        mknod(&self.abs(&rel), mode, dev)?;
        // mknod applies the umask; set the permission bits exactly.
        fs::set_permissions(self.abs(&rel), fs::Permissions::from_mode(mode & 0o7777))?;
        self.register(&rel);
        Ok(rel)
    }

    fn hardlink(&mut self, existing: impl AsRef<Path>, new: impl AsRef<Path>) -> io::Result<()> {
        let (a, b) = (self.abs(existing.as_ref()), self.abs(new.as_ref()));
        fs::hard_link(&a, &b).map_err(|e| annotate(e, "link", &b))
    }

    fn time(&mut self, rel: impl AsRef<Path>, sec: i64, nsec: u32) {
        self.times.insert(rel.as_ref().to_path_buf(), (sec, nsec));
    }

    /// lchown; only when privileged (otherwise the entry keeps the caller's ids).
    fn owner(&self, rel: impl AsRef<Path>, uid: u32, gid: u32) -> io::Result<()> {
        if !self.privileged {
            return Ok(());
        }
        let p = self.abs(rel.as_ref());
        std::os::unix::fs::lchown(&p, Some(uid), Some(gid)).map_err(|e| annotate(e, "lchown", &p))
    }

    fn mode(&self, rel: impl AsRef<Path>, mode: u32) -> io::Result<()> {
        let p = self.abs(rel.as_ref());
        fs::set_permissions(&p, fs::Permissions::from_mode(mode))
            .map_err(|e| annotate(e, "chmod", &p))
    }

    /// Sets an xattr (not following symlinks); `trusted.*`/`security.*` only when privileged.
    fn xattr(&self, rel: impl AsRef<Path>, name: &str, value: &[u8]) -> io::Result<()> {
        if !self.privileged && !name.starts_with("user.") {
            return Ok(());
        }
        let p = self.abs(rel.as_ref());
        xattr::set(&p, name, value).map_err(|e| annotate(e, &format!("setxattr {name}"), &p))
    }

    /// Runs `setfacl ARGS PATH`.
    fn setfacl(&self, args: &[&str], rel: impl AsRef<Path>) -> io::Result<()> {
        let p = self.abs(rel.as_ref());
        let out = Command::new("setfacl").args(args).arg(&p).output()?;
        if out.status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "setfacl {args:?} {}: {}",
                p.display(),
                String::from_utf8_lossy(&out.stderr)
            )))
        }
    }

    /// Applies every recorded mtime: non-directories first, then directories deepest first,
    /// the root last.
    fn finish(self) -> io::Result<()> {
        let dirs: std::collections::BTreeSet<&PathBuf> = self.dirs.iter().collect();
        for (rel, &(s, ns)) in &self.times {
            if !dirs.contains(rel) {
                set_mtime(&self.abs(rel), s, ns)?;
            }
        }
        let mut order: Vec<&PathBuf> = dirs.into_iter().collect();
        order.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for rel in order {
            let (s, ns) = self.times[rel];
            set_mtime(&self.abs(rel), s, ns)?;
        }
        let (s, ns) = self
            .times
            .get(Path::new(""))
            .copied()
            .unwrap_or((1_700_000_000, 424_242_424));
        set_mtime(&self.root, s, ns)
    }
}

fn annotate(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// Creates the corner-case tree in `dir` (created if absent; it must be empty).
///
/// Layout (all relative to `dir`):
/// - `files/text/tSIZE`, `files/random/rSIZE` for every size in [`FILE_SIZES`],
///   `files/mixed/mSIZE` for [`MIXED_SIZES`], `files/repeat_a` (1 MiB + 5 of `a`);
/// - `sparse/`: `holes_10m` (data islands at 0, 3 MiB and the last bytes), `tail_only`,
///   `head_only`, `all_hole`;
/// - `dup/`: identical files in several directories, two 64 KiB zero files, files that are
///   prefixes of other files;
/// - `links/`: a hardlink group of three names across directories, pairs, a hardlinked
///   symlink and a hardlinked empty file;
/// - `symlinks/`: short, 333-byte, 4095-byte (the maximum), dangling, absolute, `.`/`..`,
///   self-loop, non-UTF-8 and non-ASCII targets;
/// - `special/`: fifos, char device 1:3, block device 8:17, char device 4095:1048575, a socket;
/// - `names/`: 255-byte ASCII and UTF-8 names, non-ASCII and invalid-UTF-8 names, names that
///   sort before `.`, names with spaces, tab, newline, backslash, quotes;
/// - [`BIG_DIR`]: [`BIG_DIR_ENTRIES`] entries with names of varied length (a few are dirs);
/// - `deep/d01/…/d40/leaf`;
/// - `modes/`: setuid, setgid, sticky, 0000, 0777, 07777, odd modes, read-only dirs;
/// - `owners/`: ids 0, 1000, 65534, 65535, 65536, 100000:200000, 4294967294;
/// - `times/`: before 1970, -1 s, epoch, 2038 edges, 2100, 2^32 s, extreme nanoseconds;
/// - `xattrs/`: `user.*`/`trusted.*` (some shared by six files), an empty value, a 1 KiB
///   value, a binary value, a 255-byte name, many xattrs, xattrs on a dir, symlink and fifo,
///   `security.capability`;
/// - `acl/`: an access ACL on a file, an access and default ACL on a dir, inheriting children;
/// - `empty/`, `single/`.
///
/// Total apparent size is about 19 MiB (12 MiB of it in sparse files).
pub fn make_corner_tree(dir: &Path) -> io::Result<()> {
    make_corner_tree_with(dir, &CornerOptions::default())
}

/// [`make_corner_tree`] with variations (see [`CornerOptions`]).
pub fn make_corner_tree_with(dir: &Path, opts: &CornerOptions) -> io::Result<()> {
    match fs::read_dir(dir) {
        Ok(mut rd) => {
            if rd.next().is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} is not empty", dir.display()),
                ));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir_all(dir)?,
        Err(e) => return Err(e),
    }
    let mut b = Builder {
        opts: opts.clone(),
        root: dir.to_path_buf(),
        privileged: crate::is_root(),
        times: BTreeMap::new(),
        dirs: Vec::new(),
        n: 0,
    };
    b.mode("", 0o755)?;
    b.time("", 1_700_000_000, 424_242_424);
    b.xattr("", "user.root", b"root directory xattr")?;

    regular_files(&mut b)?;
    sparse_files(&mut b)?;
    duplicates(&mut b)?;
    hardlinks(&mut b)?;
    symlinks(&mut b)?;
    specials(&mut b)?;
    names(&mut b)?;
    big_dir(&mut b)?;
    deep(&mut b)?;
    modes(&mut b)?;
    owners(&mut b)?;
    times(&mut b)?;
    xattrs(&mut b)?;
    acls(&mut b)?;
    b.dir("empty")?;
    b.dir("single")?;
    b.file("single/only", b"the only entry\n")?;
    b.finish()
}

fn regular_files(b: &mut Builder) -> io::Result<()> {
    b.dir("files")?;
    b.dir("files/text")?;
    b.dir("files/random")?;
    b.dir("files/mixed")?;
    for &size in FILE_SIZES {
        b.file(
            format!("files/text/t{size}"),
            &text_bytes(size as usize, size),
        )?;
        b.file(
            format!("files/random/r{size}"),
            &random_bytes(size as usize, size * 2 + 1),
        )?;
    }
    for &size in MIXED_SIZES {
        b.file(
            format!("files/mixed/m{size}"),
            &mixed_bytes(size as usize, size * 3 + 7),
        )?;
    }
    b.file("files/repeat_a", &vec![b'a'; (1 << 20) + 5])?;
    b.owner("files/text/t4097", 1000, 1000)?;
    b.owner("files/random/r65537", 100_000, 200_000)?;
    b.mode("files/random/r8193", 0o600)?;
    Ok(())
}

fn sparse_files(b: &mut Builder) -> io::Result<()> {
    b.dir("sparse")?;
    let write =
        |b: &mut Builder, rel: &str, len: u64, islands: &[(u64, Vec<u8>)]| -> io::Result<()> {
            b.file(rel, b"")?;
            let f = OpenOptions::new().write(true).open(b.abs(Path::new(rel)))?;
            f.set_len(len)?;
            for (off, data) in islands {
                f.write_all_at(data, *off)?;
            }
            Ok(())
        };
    let end = b"the last bytes of the sparse file\n".to_vec();
    write(
        b,
        "sparse/holes_10m",
        SPARSE_SIZE,
        &[
            (0, text_bytes(5000, 11)),
            (3 << 20, random_bytes(70_000, 12)),
            (SPARSE_SIZE - end.len() as u64, end),
        ],
    )?;
    write(
        b,
        "sparse/tail_only",
        (2 << 20) + 100,
        &[(
            (2 << 20) + 50,
            b"fifty bytes at the very end of a holey file.....\n".to_vec(),
        )],
    )?;
    write(
        b,
        "sparse/head_only",
        3 << 20,
        &[(0, random_bytes(65_536, 13))],
    )?;
    write(b, "sparse/all_hole", 256 << 10, &[])?;
    Ok(())
}

fn duplicates(b: &mut Builder) -> io::Result<()> {
    for d in ["dup", "dup/a", "dup/b", "dup/c", "dup/c/deeper"] {
        b.dir(d)?;
    }
    let same = text_bytes(100_000, 77);
    b.file("dup/a/same.txt", &same)?;
    b.file("dup/b/same.txt", &same)?;
    b.file("dup/c/deeper/same.txt", &same)?;
    b.file("dup/text_prefix", &same[..5000])?;
    b.file("dup/zeros_64k", &vec![0u8; 65536])?;
    b.file("dup/c/zeros_64k_again", &vec![0u8; 65536])?;
    let rnd = random_bytes(200_000, 99);
    b.file("dup/random_200k", &rnd)?;
    b.file("dup/random_200k_prefix_70000", &rnd[..70_000])?;
    b.file("dup/random_200k_prefix_8192", &rnd[..8192])?;
    b.file("dup/b/random_200k_copy", &rnd)?;
    Ok(())
}

fn hardlinks(b: &mut Builder) -> io::Result<()> {
    for d in ["links", "links/a", "links/b", "links/c", "links/c/sub"] {
        b.dir(d)?;
    }
    b.file("links/a/h1", &text_bytes(50_000, 5))?;
    b.owner("links/a/h1", 1000, 1000)?;
    b.mode("links/a/h1", 0o640)?;
    b.xattr("links/a/h1", "user.linked", b"one inode, three names")?;
    b.hardlink("links/a/h1", "links/b/h2")?;
    b.hardlink("links/a/h1", "links/c/sub/h3")?;
    b.file("links/a/pair1", &random_bytes(3000, 6))?;
    b.hardlink("links/a/pair1", "links/a/pair2")?;
    b.file("links/empty1", b"")?;
    b.hardlink("links/empty1", "links/b/empty2")?;
    b.symlink(b"../files/text/t1", "links/sym1")?;
    b.hardlink("links/sym1", "links/sym2")?;
    Ok(())
}

fn symlinks(b: &mut Builder) -> io::Result<()> {
    b.dir("symlinks")?;
    b.symlink(b"a", "symlinks/short")?;
    b.symlink(b"../files/text/t4097", "symlinks/relative")?;
    let mut long = b"../".to_vec();
    while long.len() < 333 {
        long.extend_from_slice(b"long-component/");
    }
    long.truncate(333);
    b.symlink(&long, "symlinks/long_333")?;
    let mut max = Vec::new();
    let mut i = 0;
    while max.len() < 4095 {
        max.extend_from_slice(format!("segment{i:03}/").as_bytes());
        i += 1;
    }
    max.truncate(4095);
    b.symlink(&max, "symlinks/max_4095")?;
    b.symlink(b"does/not/exist", "symlinks/dangling")?;
    b.symlink(b"/etc/passwd", "symlinks/absolute")?;
    b.symlink(b"/", "symlinks/slash")?;
    b.symlink(b".", "symlinks/dot")?;
    b.symlink(b"..", "symlinks/dotdot")?;
    b.symlink(b"loop", "symlinks/loop")?;
    b.symlink(b"../files", "symlinks/to_dir")?;
    b.symlink(b"target-\xff\xfe-not-utf8", "symlinks/non_utf8_target")?;
    b.symlink("Ziel-ünïcödé-名前".as_bytes(), "symlinks/unicode_target")?;
    b.owner("symlinks/short", 100_000, 200_000)?;
    b.owner("symlinks/absolute", 1000, 1000)?;
    b.xattr("symlinks/short", "trusted.symlink", b"xattr on a symlink")?;
    b.time("symlinks/short", 4_102_444_800, 500);
    Ok(())
}

fn specials(b: &mut Builder) -> io::Result<()> {
    b.dir("special")?;
    b.node("special/fifo", libc::S_IFIFO | 0o644, 0)?;
    b.node("special/fifo_private", libc::S_IFIFO | 0o600, 0)?;
    b.owner("special/fifo_private", 1234, 5678)?;
    b.hardlink("special/fifo", "special/fifo_link")?;
    b.xattr("special/fifo", "trusted.fifo", b"xattr on a fifo")?;
    b.node("special/socket", libc::S_IFSOCK | 0o755, 0)?;
    if b.privileged {
        b.node(
            "special/chr_null",
            libc::S_IFCHR | 0o666,
            libc::makedev(1, 3),
        )?;
        b.node(
            "special/blk_sdb1",
            libc::S_IFBLK | 0o660,
            libc::makedev(8, 17),
        )?;
        b.owner("special/blk_sdb1", 0, 6)?;
        b.node(
            "special/chr_max",
            libc::S_IFCHR | 0o600,
            libc::makedev(4095, 1_048_575),
        )?;
        b.node(
            "special/blk_zero",
            libc::S_IFBLK | 0o600,
            libc::makedev(0, 0),
        )?;
    }
    Ok(())
}

fn names(b: &mut Builder) -> io::Result<()> {
    b.dir("names")?;
    let max = b.opts.max_name_len.clamp(10, 255);
    let mut ascii_max = b"n255-".to_vec();
    while ascii_max.len() < max {
        ascii_max.push(b'a' + (ascii_max.len() % 26) as u8);
    }
    // Two-byte characters up to the limit (plus one ASCII byte when the limit is odd).
    let mut utf8_max = "é".repeat(max / 2).into_bytes();
    if max % 2 == 1 {
        utf8_max.push(b'x');
    }
    let mut dir_name = ascii_max.clone();
    dir_name[0] = b'd';
    let names: Vec<Vec<u8>> = vec![
        ascii_max,
        utf8_max,
        "ünïcödé 名前 🦀".as_bytes().to_vec(),
        b"bad-\xff\xfe-\xc3(-bytes".to_vec(),
        b"\x80".to_vec(),
        b"!bang".to_vec(),
        b"-dash".to_vec(),
        b"#hash".to_vec(),
        b" leading space".to_vec(),
        b"trailing space ".to_vec(),
        b"tab\there".to_vec(),
        b"new\nline".to_vec(),
        b"back\\slash".to_vec(),
        b"quote\"s'".to_vec(),
        b"*star?".to_vec(),
        b".hidden".to_vec(),
        b"..dots".to_vec(),
        b"...".to_vec(),
        b"UPPER".to_vec(),
        b"upper".to_vec(),
        b"a".to_vec(),
    ];
    for name in &names {
        let mut rel = b"names/".to_vec();
        rel.extend_from_slice(name);
        b.file(bpath(&rel), name)?;
    }
    // A directory with a longest name, with a file inside.
    let mut dir = b"names/".to_vec();
    dir.extend_from_slice(&dir_name);
    b.dir(bpath(&dir))?;
    dir.extend_from_slice(b"/inside");
    b.file(bpath(&dir), b"in a directory with a 255-byte name\n")?;
    Ok(())
}

fn big_dir(b: &mut Builder) -> io::Result<()> {
    b.dir(BIG_DIR)?;
    b.time(BIG_DIR, 1_650_000_000, 0);
    for i in 0..BIG_DIR_ENTRIES {
        let fill = (b'a' + (i % 26) as u8) as char;
        let name = format!("e{i:04}-{}", fill.to_string().repeat((i * 37) % 200));
        let rel = format!("{BIG_DIR}/{name}");
        if i % 600 == 599 {
            b.dir(&rel)?;
            b.file(format!("{rel}/inner"), format!("inner {i}\n").as_bytes())?;
            b.time(format!("{rel}/inner"), 1_650_000_000, 0);
        } else {
            let content = if i % 7 == 0 {
                String::new()
            } else {
                format!("entry {i}\n").repeat(i % 5 + 1)
            };
            b.file(&rel, content.as_bytes())?;
        }
        b.time(&rel, 1_650_000_000, 0);
    }
    Ok(())
}

fn deep(b: &mut Builder) -> io::Result<()> {
    let mut rel = PathBuf::from("deep");
    b.dir(&rel)?;
    for level in 1..=DEEP_LEVELS {
        rel.push(format!("d{level:02}"));
        b.dir(&rel)?;
    }
    rel.push("leaf");
    b.file(&rel, b"forty levels down\n")?;
    Ok(())
}

fn modes(b: &mut Builder) -> io::Result<()> {
    b.dir("modes")?;
    let files: &[(&str, u32, u32, u32)] = &[
        ("setuid", 0o4755, 0, 0),
        ("setuid_other", 0o4750, 100_000, 200_000),
        ("setgid", 0o2755, 0, 50),
        ("all_special", 0o7777, 1000, 1000),
        ("zero", 0o000, 0, 0),
        ("all", 0o777, 0, 0),
        ("odd", 0o421, 0, 0),
        ("sticky_file", 0o1644, 0, 0),
    ];
    for &(name, mode, uid, gid) in files {
        let rel = format!("modes/{name}");
        b.file(&rel, format!("mode {mode:o}\n").as_bytes())?;
        b.owner(&rel, uid, gid)?; // chown clears setuid/setgid, so chmod after
        b.mode(&rel, mode)?;
    }
    let mut dirs: Vec<(&str, u32)> = vec![
        ("setgid_dir", 0o2775),
        ("sticky_dir", 0o1777),
        ("dir_0555", 0o555),
        ("dir_0700", 0o700),
    ];
    if b.privileged {
        dirs.push(("dir_0000", 0o000));
    }
    for (name, mode) in dirs {
        let rel = format!("modes/{name}");
        b.dir(&rel)?;
        b.file(format!("{rel}/inside"), b"inside\n")?;
        b.mode(&rel, mode)?;
    }
    Ok(())
}

fn owners(b: &mut Builder) -> io::Result<()> {
    b.dir("owners")?;
    let ids: &[(&str, u32, u32)] = &[
        ("u0", 0, 0),
        ("u1000", 1000, 1000),
        ("u65534", 65534, 65534),
        ("u65535", 65535, 65535),
        ("u65536", 65536, 65536),
        ("big", 100_000, 200_000),
        ("big_uid_only", 100_000, 0),
        ("big_gid_only", 0, 200_000),
        ("max", 4_294_967_294, 4_294_967_294),
    ];
    for &(name, uid, gid) in ids {
        let rel = format!("owners/{name}");
        b.file(&rel, name.as_bytes())?;
        b.owner(&rel, uid, gid)?;
    }
    b.dir("owners/dir_big")?;
    b.file("owners/dir_big/f", b"f")?;
    b.owner("owners/dir_big", 100_000, 200_000)?;
    b.owner("owners/dir_big/f", 1000, 1000)?;
    Ok(())
}

fn times(b: &mut Builder) -> io::Result<()> {
    b.dir("times")?;
    let t: &[(&str, i64, u32)] = &[
        ("before_1970", -315_619_200, 123_456_789),
        ("minus_one", -1, 999_999_999),
        ("epoch", 0, 0),
        ("y2038_max", 2_147_483_647, 0),
        ("y2038_plus", 2_147_483_648, 1),
        ("y2100", 4_102_444_800, 0),
        ("two_pow_32", 4_294_967_296, 5),
        ("nsec_max", 1_700_000_000, 999_999_999),
        ("nsec_one", 1_700_000_000, 1),
        ("whole_second", 1_700_000_000, 0),
    ];
    for &(name, s, ns) in t {
        let rel = format!("times/{name}");
        b.file(&rel, name.as_bytes())?;
        b.time(&rel, s, ns);
    }
    b.dir("times/dir_before_1970")?;
    b.file("times/dir_before_1970/f", b"f")?;
    b.time("times/dir_before_1970", -86_400 * 365 * 20, 7);
    b.dir("times/dir_2100")?;
    b.time("times/dir_2100", 4_102_444_800, 999_999_999);
    b.node("times/fifo_1969", libc::S_IFIFO | 0o644, 0)?;
    b.time("times/fifo_1969", -100, 100);
    b.symlink(b"epoch", "times/symlink_2106")?;
    b.time("times/symlink_2106", 4_294_967_296, 4);
    Ok(())
}

fn xattrs(b: &mut Builder) -> io::Result<()> {
    b.dir("xattrs")?;
    b.file("xattrs/plain", b"plain\n")?;
    b.xattr("xattrs/plain", "user.a", b"1")?;
    b.xattr("xattrs/plain", "user.b", b"two")?;
    b.xattr("xattrs/plain", "user.c", b"three three")?;
    b.xattr("xattrs/plain", "trusted.t", b"secret")?;
    for i in 1..=6 {
        let rel = format!("xattrs/shared{i}");
        b.file(&rel, format!("shared {i}\n").as_bytes())?;
        b.xattr(&rel, "user.shared", b"common value shared by many files")?;
        b.xattr(&rel, "trusted.shared", b"also shared")?;
        b.xattr(&rel, "user.own", format!("own value {i}").as_bytes())?;
    }
    b.file("xattrs/empty_value", b"")?;
    b.xattr("xattrs/empty_value", "user.empty", b"")?;
    b.file("xattrs/long_value", b"long\n")?;
    b.xattr("xattrs/long_value", "user.long", &text_bytes(1031, 3))?;
    b.file("xattrs/binary_value", b"bin\n")?;
    let all: Vec<u8> = (0..=255u8).collect();
    b.xattr("xattrs/binary_value", "user.binary", &all)?;
    b.file("xattrs/long_name", b"name\n")?;
    let long_name = format!("user.{}", "n".repeat(250));
    b.xattr("xattrs/long_name", &long_name, b"long name")?;
    b.file("xattrs/many", b"many\n")?;
    for i in 0..24 {
        b.xattr(
            "xattrs/many",
            &format!("user.k{i:02}"),
            "v".repeat(i * 5).as_bytes(),
        )?;
    }
    b.dir("xattrs/dir")?;
    b.xattr("xattrs/dir", "user.dirattr", b"on a directory")?;
    b.xattr("xattrs/dir", "trusted.dir", b"trusted on a directory")?;
    b.xattr(
        "xattrs/dir",
        "user.shared",
        b"common value shared by many files",
    )?;
    b.file("xattrs/dir/child", b"child\n")?;
    b.file("xattrs/capability", b"#!/bin/true\n")?;
    b.mode("xattrs/capability", 0o755)?;
    // struct vfs_cap_data, revision 2: magic_etc, then {permitted, inheritable} x 2.
    // Permitted CAP_NET_BIND_SERVICE (bit 10), effective flag set.
    let mut cap = Vec::new();
    cap.extend_from_slice(&(0x0200_0000u32 | 1).to_le_bytes());
    cap.extend_from_slice(&(1u32 << 10).to_le_bytes());
    cap.extend_from_slice(&0u32.to_le_bytes());
    cap.extend_from_slice(&0u32.to_le_bytes());
    cap.extend_from_slice(&0u32.to_le_bytes());
    b.xattr("xattrs/capability", "security.capability", &cap)?;
    Ok(())
}

fn acls(b: &mut Builder) -> io::Result<()> {
    b.dir("acl")?;
    b.file("acl/file", b"file with an access ACL\n")?;
    b.setfacl(&["-m", "u:1234:rwx,g:99:r-x"], "acl/file")?;
    b.dir("acl/dir")?;
    b.setfacl(&["-m", "u:1234:r-x"], "acl/dir")?;
    b.setfacl(&["-d", "-m", "u:1234:rwx,g:99:r-x"], "acl/dir")?;
    b.file("acl/dir/inherited_file", b"inherits the default ACL\n")?;
    b.dir("acl/dir/inherited_dir")?;
    // b.dir/b.file chmod'ed the children, which rewrote their ACL masks; that is fine (the
    // ACL stays, the kernel keeps mode and mask consistent).
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_are_deterministic() {
        assert_eq!(random_bytes(100, 1), random_bytes(100, 1));
        assert_ne!(random_bytes(100, 1), random_bytes(100, 2));
        assert_eq!(text_bytes(4097, 9).len(), 4097);
        assert_eq!(mixed_bytes(65537, 9).len(), 65537);
        assert!(text_bytes(200, 1).starts_with(b"000001 "));
    }

    #[test]
    fn tree_builds() {
        let t = crate::TempDir::new("ferrofs-corpus-test").unwrap();
        let root = t.path().join("tree");
        make_corner_tree(&root).unwrap();
        let m = fs::symlink_metadata(root.join("sparse/holes_10m")).unwrap();
        assert_eq!(m.len(), SPARSE_SIZE);
        assert_eq!(
            fs::read_dir(root.join(BIG_DIR)).unwrap().count(),
            BIG_DIR_ENTRIES
        );
        let target = fs::read_link(root.join("symlinks/max_4095")).unwrap();
        assert_eq!(target.as_os_str().len(), 4095);
        use std::os::unix::fs::MetadataExt;
        let t = fs::symlink_metadata(root.join("times/before_1970")).unwrap();
        assert_eq!((t.mtime(), t.mtime_nsec()), (-315_619_200, 123_456_789));
        let h = fs::symlink_metadata(root.join("links/c/sub/h3")).unwrap();
        assert_eq!(h.nlink(), 3);
    }
}
