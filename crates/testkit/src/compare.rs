//! Entry-by-entry comparison of two directory trees.
//!
//! [`compare_trees`] walks both trees with an explicit stack (no recursion, so depth is not a
//! problem) and never follows symlinks. Directory sizes and `st_blocks` are never compared:
//! they depend on the filesystem, not on the tree.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// What [`compare_trees`] checks. [`Default`] is fully strict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompareOptions {
    /// Regular file contents, byte for byte.
    pub compare_content: bool,
    /// Permission bits including setuid, setgid and sticky (`st_mode & 0o7777`).
    pub compare_mode: bool,
    /// uid and gid.
    pub compare_owner: bool,
    /// mtime seconds.
    pub compare_mtime: bool,
    /// mtime nanoseconds (only when `compare_mtime`).
    pub compare_nsec: bool,
    /// Leave out the top directory's own mtime.
    pub skip_root_mtime: bool,
    /// Leave out the top directory's mode and owner.
    pub skip_root_mode_owner: bool,
    /// Extended attributes: names and values, every namespace the OS lists.
    pub compare_xattrs: bool,
    /// xattr names that are ignored on both sides (e.g. `security.selinux`).
    pub ignore_xattrs: Vec<String>,
    /// Hardlink groups (names sharing an inode) and `st_nlink` of non-directories.
    pub compare_hardlinks: bool,
    /// `st_nlink` of directories.
    pub compare_dir_nlink: bool,
    /// Device numbers of character and block devices.
    pub compare_rdev: bool,
    /// Relative paths (entries and whole subtrees) left out on both sides.
    pub ignore_paths: Vec<PathBuf>,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            compare_content: true,
            compare_mode: true,
            compare_owner: true,
            compare_mtime: true,
            compare_nsec: true,
            skip_root_mtime: false,
            skip_root_mode_owner: false,
            compare_xattrs: true,
            ignore_xattrs: Vec::new(),
            compare_hardlinks: true,
            compare_dir_nlink: true,
            compare_rdev: true,
            ignore_paths: Vec::new(),
        }
    }
}

impl CompareOptions {
    /// Fully strict (the same as [`Default`]).
    pub fn strict() -> Self {
        Self::default()
    }
}

/// One way in which the trees differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Path relative to the tree roots (empty for the roots themselves).
    pub path: PathBuf,
    /// What differs: `presence`, `type`, `mode`, `uid`, `gid`, `size`, `mtime`, `content`,
    /// `symlink target`, `rdev`, `xattr NAME`, `nlink`, `hardlink group`, `error`.
    pub what: String,
    /// The expected tree's side.
    pub expected: String,
    /// The actual tree's side.
    pub actual: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: expected {}, actual {}",
            show_path(&self.path),
            self.what,
            self.expected,
            self.actual
        )
    }
}

/// `/rel/path` with non-UTF-8 bytes and control characters escaped.
pub fn show_path(rel: &Path) -> String {
    let mut s = String::from("/");
    s.push_str(&show_bytes(rel.as_os_str().as_bytes()));
    s
}

fn show_bytes(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) if !s.chars().any(|c| c.is_control()) => s.to_string(),
        Ok(s) => s.escape_debug().to_string(),
        Err(_) => b.escape_ascii().to_string(),
    }
}

fn show_value(v: &[u8]) -> String {
    let printable = std::str::from_utf8(v)
        .map(|s| !s.chars().any(|c| c.is_control()))
        .unwrap_or(false);
    if printable && v.len() <= 80 {
        format!("{:?}", std::str::from_utf8(v).unwrap())
    } else {
        let hex: String = v.iter().take(24).map(|b| format!("{b:02x}")).collect();
        format!(
            "{} bytes [{}{}] hash {:032x}",
            v.len(),
            hex,
            if v.len() > 24 { "…" } else { "" },
            hash_bytes(v)
        )
    }
}

fn hash_bytes(v: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(v)
}

/// A 128-bit non-cryptographic hash (XXH3-128) of a file's contents, streamed.
pub fn hash_file(path: &Path) -> io::Result<u128> {
    let mut f = File::open(path)?;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(h.digest128());
        }
        h.update(&buf[..n]);
    }
}

/// Every entry below `root` (not `root` itself), as relative paths with their `lstat`
/// metadata, in sorted walk order; symlinks are not followed.
pub fn list_tree(root: &Path) -> io::Result<Vec<(PathBuf, fs::Metadata)>> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut names: Vec<_> = fs::read_dir(root.join(&rel))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<io::Result<_>>()?;
        names.sort();
        for name in names.into_iter().rev() {
            let child = rel.join(&name);
            let m = fs::symlink_metadata(root.join(&child))?;
            if m.is_dir() {
                stack.push(child.clone());
            }
            out.push((child, m));
        }
    }
    Ok(out)
}

fn file_type_name(m: &fs::Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_dir() {
        "directory"
    } else if t.is_file() {
        "regular file"
    } else if t.is_symlink() {
        "symlink"
    } else if t.is_fifo() {
        "fifo"
    } else if t.is_char_device() {
        "char device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "unknown"
    }
}

/// A relative path with its (device, inode) on the expected and the actual side.
type InodePair = (PathBuf, (u64, u64), (u64, u64));

struct Cmp<'a> {
    exp_root: &'a Path,
    act_root: &'a Path,
    opts: &'a CompareOptions,
    diffs: Vec<Difference>,
    /// Non-directories present on both sides: path -> (expected inode key, actual inode key).
    inodes: Vec<InodePair>,
}

impl Cmp<'_> {
    fn diff(
        &mut self,
        path: &Path,
        what: impl Into<String>,
        expected: impl fmt::Display,
        actual: impl fmt::Display,
    ) {
        self.diffs.push(Difference {
            path: path.to_path_buf(),
            what: what.into(),
            expected: expected.to_string(),
            actual: actual.to_string(),
        });
    }

    fn ignored(&self, rel: &Path) -> bool {
        self.opts.ignore_paths.iter().any(|p| rel.starts_with(p))
    }

    fn entry(&mut self, rel: &Path, stack: &mut Vec<PathBuf>) {
        let (ep, ap) = (self.exp_root.join(rel), self.act_root.join(rel));
        let em = match fs::symlink_metadata(&ep) {
            Ok(m) => m,
            Err(e) => return self.diff(rel, "error", format!("lstat ok ({e})"), "-"),
        };
        let am = match fs::symlink_metadata(&ap) {
            Ok(m) => m,
            Err(e) => return self.diff(rel, "presence", "present", format!("missing ({e})")),
        };
        let (et, at) = (file_type_name(&em), file_type_name(&am));
        if et != at {
            return self.diff(rel, "type", et, at);
        }
        let is_root = rel.as_os_str().is_empty();
        let o = self.opts;
        if o.compare_mode
            && !(is_root && o.skip_root_mode_owner)
            && em.mode() & 0o7777 != am.mode() & 0o7777
        {
            self.diff(
                rel,
                "mode",
                format!("{:04o}", em.mode() & 0o7777),
                format!("{:04o}", am.mode() & 0o7777),
            );
        }
        if o.compare_owner && !(is_root && o.skip_root_mode_owner) {
            if em.uid() != am.uid() {
                self.diff(rel, "uid", em.uid(), am.uid());
            }
            if em.gid() != am.gid() {
                self.diff(rel, "gid", em.gid(), am.gid());
            }
        }
        if o.compare_mtime && !(is_root && o.skip_root_mtime) {
            let (es, ens, as_, ans) = (em.mtime(), em.mtime_nsec(), am.mtime(), am.mtime_nsec());
            if es != as_ || (o.compare_nsec && ens != ans) {
                self.diff(
                    rel,
                    "mtime",
                    format!("{es}.{ens:09}"),
                    format!("{as_}.{ans:09}"),
                );
            }
        }
        let is_dir = em.is_dir();
        if !is_dir && em.len() != am.len() {
            self.diff(rel, "size", em.len(), am.len());
        }
        if (is_dir && o.compare_dir_nlink || !is_dir && o.compare_hardlinks)
            && em.nlink() != am.nlink()
        {
            self.diff(rel, "nlink", em.nlink(), am.nlink());
        }
        let ft = em.file_type();
        if (ft.is_char_device() || ft.is_block_device()) && o.compare_rdev && em.rdev() != am.rdev()
        {
            let show = |d: u64| format!("{}:{}", libc::major(d), libc::minor(d));
            self.diff(rel, "rdev", show(em.rdev()), show(am.rdev()));
        }
        if ft.is_symlink() {
            match (fs::read_link(&ep), fs::read_link(&ap)) {
                (Ok(e), Ok(a)) if e != a => self.diff(
                    rel,
                    "symlink target",
                    show_bytes(e.as_os_str().as_bytes()),
                    show_bytes(a.as_os_str().as_bytes()),
                ),
                (Ok(_), Err(e)) => self.diff(
                    rel,
                    "symlink target",
                    "readable",
                    format!("readlink failed: {e}"),
                ),
                _ => {}
            }
        }
        if ft.is_file() && o.compare_content && em.len() == am.len() {
            match first_difference(&ep, &ap) {
                Ok(None) => {}
                Ok(Some(off)) => self.diff(
                    rel,
                    "content",
                    format!("hash {:032x}", hash_file(&ep).unwrap_or(0)),
                    format!(
                        "different bytes from offset {off} (hash {:032x})",
                        hash_file(&ap).unwrap_or(0)
                    ),
                ),
                Err(e) => self.diff(rel, "content", "readable", format!("read failed: {e}")),
            }
        }
        if o.compare_xattrs {
            self.xattrs(rel, &ep, &ap);
        }
        if !is_dir {
            self.inodes.push((
                rel.to_path_buf(),
                (em.dev(), em.ino()),
                (am.dev(), am.ino()),
            ));
            return;
        }
        // Directory entries.
        let names = |p: &Path| -> io::Result<BTreeSet<std::ffi::OsString>> {
            fs::read_dir(p)?.map(|e| e.map(|e| e.file_name())).collect()
        };
        let (en, an) = match (names(&ep), names(&ap)) {
            (Ok(e), Ok(a)) => (e, a),
            (Err(e), _) => return self.diff(rel, "error", format!("readdir ok ({e})"), "-"),
            (_, Err(e)) => return self.diff(rel, "readdir", "readable", format!("failed: {e}")),
        };
        for name in en.difference(&an) {
            let child = rel.join(name);
            if !self.ignored(&child) {
                self.diff(&child, "presence", "present", "missing");
            }
        }
        for name in an.difference(&en) {
            let child = rel.join(name);
            if !self.ignored(&child) {
                self.diff(&child, "presence", "absent", "present (unexpected)");
            }
        }
        for name in en.intersection(&an).collect::<Vec<_>>().into_iter().rev() {
            let child = rel.join(name);
            if !self.ignored(&child) {
                stack.push(child);
            }
        }
    }

    fn xattrs(&mut self, rel: &Path, ep: &Path, ap: &Path) {
        let read = |p: &Path| -> io::Result<BTreeMap<String, Vec<u8>>> {
            let mut m = BTreeMap::new();
            for name in xattr::list(p)? {
                let key = show_bytes(name.as_bytes());
                if self.opts.ignore_xattrs.contains(&key) {
                    continue;
                }
                let v = xattr::get(p, &name)?.unwrap_or_default();
                m.insert(key, v);
            }
            Ok(m)
        };
        let (ex, ax) = match (read(ep), read(ap)) {
            (Ok(e), Ok(a)) => (e, a),
            (Err(e), _) => return self.diff(rel, "error", format!("xattrs readable ({e})"), "-"),
            (_, Err(e)) => return self.diff(rel, "xattrs", "readable", format!("failed: {e}")),
        };
        for (k, v) in &ex {
            match ax.get(k) {
                None => self.diff(rel, format!("xattr {k}"), show_value(v), "missing"),
                Some(a) if a != v => {
                    self.diff(rel, format!("xattr {k}"), show_value(v), show_value(a))
                }
                _ => {}
            }
        }
        for (k, v) in &ax {
            if !ex.contains_key(k) {
                self.diff(rel, format!("xattr {k}"), "absent", show_value(v));
            }
        }
    }

    /// Hardlink partition: for every non-directory present on both sides, the set of other
    /// such names sharing its inode must be the same on both sides.
    fn hardlink_groups(&mut self) {
        let mut eg: HashMap<(u64, u64), Vec<usize>> = HashMap::new();
        let mut ag: HashMap<(u64, u64), Vec<usize>> = HashMap::new();
        for (i, (_, e, a)) in self.inodes.iter().enumerate() {
            eg.entry(*e).or_default().push(i);
            ag.entry(*a).or_default().push(i);
        }
        let mut reported = BTreeSet::new();
        let names = |g: &[usize], inodes: &[InodePair]| -> String {
            let v: Vec<String> = g.iter().map(|&i| show_path(&inodes[i].0)).collect();
            format!("[{}]", v.join(", "))
        };
        let mut found = Vec::new();
        for (path, e, a) in &self.inodes {
            let (ge, ga) = (&eg[e], &ag[a]);
            if ge != ga && reported.insert(ge.clone()) {
                found.push((
                    path.clone(),
                    names(ge, &self.inodes),
                    names(ga, &self.inodes),
                ));
            }
        }
        for (p, e, a) in found {
            self.diff(&p, "hardlink group", e, a);
        }
    }
}

/// Offset of the first differing byte of two files, or `None` when their contents are equal.
pub fn first_difference(a: &Path, b: &Path) -> io::Result<Option<u64>> {
    let (mut fa, mut fb) = (File::open(a)?, File::open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    let mut off = 0u64;
    loop {
        let na = read_full(&mut fa, &mut ba)?;
        let nb = read_full(&mut fb, &mut bb)?;
        let n = na.min(nb);
        if let Some(i) = ba[..n].iter().zip(&bb[..n]).position(|(x, y)| x != y) {
            return Ok(Some(off + i as u64));
        }
        if na != nb {
            return Ok(Some(off + n as u64));
        }
        if na == 0 {
            return Ok(None);
        }
        off += na as u64;
    }
}

fn read_full(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Compares the tree at `actual` against the tree at `expected` and returns every difference
/// (empty when they match under `opts`): presence, type, mode, owner, size, mtime, contents,
/// symlink targets, device numbers, xattrs, nlink, hardlink groups and directory entry names.
pub fn compare_trees(expected: &Path, actual: &Path, opts: &CompareOptions) -> Vec<Difference> {
    let mut c = Cmp {
        exp_root: expected,
        act_root: actual,
        opts,
        diffs: Vec::new(),
        inodes: Vec::new(),
    };
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        c.entry(&rel, &mut stack);
    }
    if opts.compare_hardlinks {
        c.hardlink_groups();
    }
    c.diffs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn detects_differences() {
        let t = crate::TempDir::new("ferrofs-compare-test").unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        for d in [&a, &b] {
            fs::create_dir_all(d.join("sub")).unwrap();
            fs::write(d.join("sub/f"), b"hello").unwrap();
            fs::write(d.join("g"), b"same").unwrap();
            std::os::unix::fs::symlink("sub/f", d.join("l")).unwrap();
        }
        fs::hard_link(a.join("g"), a.join("g2")).unwrap();
        fs::copy(b.join("g"), b.join("g2")).unwrap();
        fs::write(b.join("sub/f"), b"hellO").unwrap();
        fs::write(a.join("only_a"), b"").unwrap();
        fs::set_permissions(b.join("g"), fs::Permissions::from_mode(0o600)).unwrap();
        let opts = CompareOptions {
            compare_mtime: false,
            ..Default::default()
        };
        let d = compare_trees(&a, &b, &opts);
        let whats: BTreeSet<_> = d
            .iter()
            .map(|d| (show_path(&d.path), d.what.clone()))
            .collect();
        assert!(
            whats.contains(&("/sub/f".into(), "content".into())),
            "{d:#?}"
        );
        assert!(
            whats.contains(&("/only_a".into(), "presence".into())),
            "{d:#?}"
        );
        assert!(whats.contains(&("/g".into(), "mode".into())), "{d:#?}");
        assert!(whats.iter().any(|(_, w)| w == "hardlink group"), "{d:#?}");
        assert!(whats.iter().any(|(_, w)| w == "nlink"), "{d:#?}");
        assert!(compare_trees(&a, &a, &CompareOptions::strict()).is_empty());
        assert_eq!(
            first_difference(&a.join("sub/f"), &b.join("sub/f")).unwrap(),
            Some(4)
        );
        assert_eq!(
            hash_file(&a.join("g")).unwrap(),
            hash_file(&b.join("g")).unwrap()
        );
    }
}
