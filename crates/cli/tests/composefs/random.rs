//! Random small trees (a deterministic generator, 300 seeds): every file
//! type, whiteouts, hard links, names with odd bytes, xattrs drawn from a
//! small pool (so some are shared), a few mtimes and owners (compact and
//! extended inodes), sizes around the inline and block edges; each built
//! by both tools, with an option set chosen by the seed, and compared byte
//! for byte.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{chown, symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use ferrofs_testkit::corpus::{set_mtime, XorShift64};
use ferrofs_testkit::{is_root, xattr};

use super::{compare_build, refs, work};

const SEEDS: usize = 300;

struct Gen(XorShift64);

impl Gen {
    fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n.max(1)
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
    fn name(&mut self) -> Vec<u8> {
        const CHARS: &[u8] = b"abcdefxyz0129-_.+ ~\x01\xc3\xa9";
        let len = match self.below(10) {
            0 => 200 + self.below(56),
            _ => 1 + self.below(12),
        };
        let mut n: Vec<u8> = (0..len).map(|_| *self.pick(CHARS)).collect();
        if n == b"." || n == b".." {
            n.push(b'x');
        }
        n
    }
}

fn mknod(p: &Path, kind: &str, major: u64, minor: u64) {
    let mut c = Command::new("mknod");
    c.arg(p).arg(kind);
    if kind != "p" {
        c.args([major.to_string(), minor.to_string()]);
    }
    let st = c.status().unwrap();
    assert!(st.success());
}

/// One entry of a random kind at `p`; `files` collects regular files.
fn make_entry(g: &mut Gen, p: &Path, dirs: &mut Vec<PathBuf>, files: &mut Vec<PathBuf>) {
    match g.below(20) {
        0..=3 => {
            fs::create_dir(p).unwrap();
            dirs.push(p.to_path_buf());
        }
        4..=10 => {
            let size = match g.below(5) {
                0 => 0,
                1 => 1 + g.below(64),
                2 => 60 + g.below(10),
                3 => 65 + g.below(5000),
                _ => 4090 + g.below(9000),
            };
            let byte = g.below(3) as u8;
            fs::write(p, vec![b'a' + byte; size as usize]).unwrap();
            files.push(p.to_path_buf());
        }
        11..=13 => {
            let len = match g.below(6) {
                0 => 1000 + g.below(3096),
                _ => 1 + g.below(300),
            };
            symlink("s".repeat(len as usize), p).unwrap();
        }
        14 => mknod(p, "p", 0, 0),
        15 => mknod(p, "c", g.below(300), g.below(70000)),
        16 => mknod(p, "b", 8, g.below(40)),
        17 | 18 => mknod(p, "c", 0, 0),
        _ => match files.first() {
            Some(f) => fs::hard_link(f, p).unwrap(),
            None => fs::write(p, b"").unwrap(),
        },
    }
}

/// Owners, modes, xattrs and mtimes, drawn at random, on `p`.
fn decorate(g: &mut Gen, p: &Path) {
    const IDS: [u32; 4] = [0, 1000, 65535, 70000];
    let _ = chown(p, Some(*g.pick(&IDS)), Some(*g.pick(&IDS)));
    let meta = fs::symlink_metadata(p).unwrap();
    if !meta.file_type().is_symlink() {
        let mode = [0o644, 0o755, 0o600, 0o4711, 0o1777][g.below(5) as usize];
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
        for _ in 0..g.below(4) {
            let key = *g.pick(&[
                "user.a",
                "user.b",
                "trusted.overlay.opaque",
                "trusted.t",
                "security.s",
            ]);
            let val = *g.pick(&["1", "2", "", "a longer value that takes room"]);
            let _ = xattr::set(p, key, val.as_bytes());
        }
    }
    let (s, ns) = *g.pick(&[(1000i64, 0u32), (1000, 5), (2000, 0), (-10, 0)]);
    let _ = set_mtime(p, s, ns);
}

/// A random tree for `seed` under `root`.
fn make_tree(seed: u64, root: &Path) {
    let mut g = Gen(XorShift64::new(seed));
    fs::create_dir_all(root).unwrap();
    let mut dirs = vec![root.to_path_buf()];
    let mut files = Vec::new();
    let mut all = Vec::new();
    for _ in 0..(3 + g.below(40)) {
        let parent = g.pick(&dirs).clone();
        let p = parent.join(std::ffi::OsStr::from_bytes(&g.name()));
        if fs::symlink_metadata(&p).is_ok() {
            continue;
        }
        make_entry(&mut g, &p, &mut dirs, &mut files);
        all.push(p);
    }
    for p in all.iter().rev().chain(std::iter::once(&root.to_path_buf())) {
        decorate(&mut g, p);
    }
}

#[test]
fn random_trees_are_byte_identical() {
    if !is_root() {
        println!("skipped: needs root (mknod, chown, trusted.* xattrs)");
        return;
    }
    let Some(refs) = refs() else { return };
    let w = work("random");
    let failures = Mutex::new(Vec::new());
    ferrofs_testkit::tmp::parallel(SEEDS, 2, |seed| {
        let dir = w.path().join(format!("s{seed}"));
        let src = dir.join("tree");
        make_tree(seed as u64, &src);
        let opts: &[&str] = match seed % 5 {
            0 => &[],
            1 => &["--use-epoch"],
            2 => &["--max-version=0"],
            3 => &["--user-xattrs"],
            _ => &["--min-version=1", "--threads=3"],
        };
        match compare_build(&refs, &dir, &src.display().to_string(), opts) {
            Some(d) => failures.lock().unwrap().push(format!("seed {seed}: {d}")),
            None => {
                let _ = fs::remove_dir_all(&dir);
            }
        }
    });
    let f = failures.into_inner().unwrap();
    assert!(
        f.is_empty(),
        "{} of {SEEDS} seeds differ:\n{}",
        f.len(),
        f.join("\n")
    );
}
