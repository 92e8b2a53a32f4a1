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

mod entries;

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

/// Overwrites the byte in the middle of the file `path` with `#`, keeping
/// its size and mtime: a change only its contents show (what a rebuild
/// must not take for an unchanged file).
pub fn change_middle_byte(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(path)?;
    let f = OpenOptions::new().write(true).open(path)?;
    f.write_all_at(b"#", meta.len() / 2)?;
    drop(f);
    set_mtime(path, meta.mtime(), meta.mtime_nsec() as u32)
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
    /// Whether `sparse/holes_10m` is made. mkfs.erofs 1.9.4 with `-Efragments,dedupe` spends
    /// about five minutes of CPU on the corner tree when it holds that file (and under two
    /// seconds without it), so the trees for those options leave it out.
    pub holes_10m: bool,
}

impl Default for CornerOptions {
    fn default() -> Self {
        CornerOptions {
            max_name_len: 255,
            holes_10m: true,
        }
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
        let nsec = if n.is_multiple_of(3) {
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

    entries::regular_files(&mut b)?;
    entries::sparse_files(&mut b)?;
    entries::duplicates(&mut b)?;
    entries::hardlinks(&mut b)?;
    entries::symlinks(&mut b)?;
    entries::specials(&mut b)?;
    entries::names(&mut b)?;
    entries::big_dir(&mut b)?;
    entries::deep(&mut b)?;
    entries::modes(&mut b)?;
    entries::owners(&mut b)?;
    entries::times(&mut b)?;
    entries::xattrs(&mut b)?;
    entries::acls(&mut b)?;
    b.dir("empty")?;
    b.dir("single")?;
    b.file("single/only", b"the only entry\n")?;
    b.finish()
}
