//! `mkcomposefs` (the drop-in) and `ferrofs mkcomposefs`: images compared
//! byte for byte with mkcomposefs 1.0.8's, object stores compared with
//! its, images read by composefs-info and fsck.erofs, and mounted by the
//! kernel (EROFS under overlayfs) to compare with their source. Tests
//! print `skipped: REASON` when the reference tools (`UPSTREAM_NEXT_BIN`)
//! or root are missing.

/// The binary under test.
const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

mod cli;
mod dumps;
mod identity;
mod mount;
mod random;
mod store;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ferrofs_testkit::tools::next_tool;
use ferrofs_testkit::TempDir;

/// The reference tools this area needs.
pub struct Refs {
    pub mkcomposefs: PathBuf,
    pub info: PathBuf,
}

/// mkcomposefs 1.0.8 and composefs-info, or `None` (and a printed skip).
pub fn refs() -> Option<Refs> {
    match (next_tool("mkcomposefs"), next_tool("composefs-info")) {
        (Some(mkcomposefs), Some(info)) => Some(Refs { mkcomposefs, info }),
        _ => {
            println!("skipped: mkcomposefs/composefs-info 1.0.8 not found (UPSTREAM_NEXT_BIN)");
            None
        }
    }
}

/// A symlink named mkcomposefs to the binary under test, in `dir`.
pub fn dropin(dir: &Path) -> PathBuf {
    let link = dir.join("mkcomposefs");
    if !link.exists() {
        std::os::unix::fs::symlink(FERROFS, &link).unwrap();
    }
    link
}

/// Runs `prog ARGS`; stdout on success, the message on failure.
pub fn run(prog: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<Vec<u8>, String> {
    use std::io::Write;
    let mut child = Command::new(prog)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", prog.display()))?;
    if let Some(data) = stdin {
        let mut si = child.stdin.take().unwrap();
        si.write_all(data).map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "{} {args:?}: {}{}",
            prog.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Builds `src` with both tools and the same options; `None` when the
/// images are identical, else what differs.
pub fn compare_build(refs: &Refs, work: &Path, src: &str, opts: &[&str]) -> Option<String> {
    let ours_bin = dropin(work);
    let (r, o) = (work.join("ref.cfs"), work.join("ours.cfs"));
    let _ = std::fs::remove_file(&r);
    let _ = std::fs::remove_file(&o);
    let args = |img: &Path| {
        let mut a: Vec<String> = opts.iter().map(|s| s.to_string()).collect();
        a.push(src.to_string());
        a.push(img.display().to_string());
        a
    };
    let ra = args(&r);
    let oa = args(&o);
    let ra: Vec<&str> = ra.iter().map(String::as_str).collect();
    let oa: Vec<&str> = oa.iter().map(String::as_str).collect();
    let theirs = run(&refs.mkcomposefs, &ra, None);
    let ours = run(&ours_bin, &oa, None);
    match (theirs, ours) {
        (Err(_), Err(_)) => None,
        (Ok(_), Err(e)) => Some(format!("{opts:?}: mkcomposefs succeeded, ours failed: {e}")),
        (Err(e), Ok(_)) => Some(format!("{opts:?}: ours succeeded, mkcomposefs failed: {e}")),
        (Ok(_), Ok(_)) => differ(&r, &o).map(|d| format!("{opts:?}: {d}")),
    }
}

/// `None` when the files are byte-identical, else where they first differ.
pub fn differ(a: &Path, b: &Path) -> Option<String> {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    if x == y {
        return None;
    }
    let at = x
        .iter()
        .zip(&y)
        .position(|(p, q)| p != q)
        .unwrap_or(x.len().min(y.len()));
    Some(format!(
        "images differ at byte {at} (sizes {} and {}; kept in {})",
        x.len(),
        y.len(),
        a.parent().unwrap().display()
    ))
}

/// A fresh work directory under the test temp dir.
pub fn work(name: &str) -> TempDir {
    TempDir::new(&format!("ferrofs-cfs-{name}")).unwrap()
}

/// The corner-case tree in `w/tree` built by our drop-in into `w/ours.cfs`
/// with the store `w/store`: (source, image, store).
pub fn corner_with_store(w: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let src = w.join("tree");
    ferrofs_testkit::make_corner_tree(&src).unwrap();
    let (img, store) = (w.join("ours.cfs"), w.join("store"));
    let sa = format!("--digest-store={}", store.display());
    let args = [sa, src.display().to_string(), img.display().to_string()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&dropin(w), &args, None).unwrap();
    (src, img, store)
}
