//! The path API (`Image::read`, `metadata`, `read_dir`, `open_file`, …)
//! answers exactly what `std::fs` answers on the kernel's mount of the same
//! image: every entry of every reference image (erofs-utils 1.8 and 1.9.4
//! fixtures, ferrofs's own), its metadata, listing, symlink target, bytes
//! (whole, through `Read + Seek` and `read_at`) and xattrs; and the errors
//! map to the `std::io::ErrorKind` a program expects.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use ferrofs::{ErrorKind, Image};
use ferrofs_testkit::compare::list_tree;
use ferrofs_testkit::mount::{can_mount, LoopMount};

fn images() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let mut v = Vec::new();
    for dir in [root.clone(), root.join("v19")] {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "erofs") {
                v.push(p);
            }
        }
    }
    v.sort();
    assert!(v.len() > 30, "testdata images missing");
    v
}

/// Files the 6.18 kernel fails to read (a deflate extent ending one byte
/// into a page; see fixtures_v19.rs): their bytes are not compared.
fn kernel_cannot_read(image: &Path, rel: &Path) -> bool {
    image.ends_with("e48-libdeflate.erofs")
        && (rel == Path::new("text.txt") || rel == Path::new("dir/sub/copy.txt"))
}

fn kernel_xattrs(path: &Path) -> BTreeMap<OsString, Vec<u8>> {
    xattr::list(path)
        .unwrap()
        .map(|n| {
            let v = xattr::get(path, &n).unwrap().unwrap_or_default();
            (n, v)
        })
        .collect()
}

/// Compares one entry; returns the number of checks made.
fn check_entry(image: &Image, img: &Path, mnt: &Path, rel: &Path, want: &fs::Metadata) -> usize {
    let what = format!("{}: {}", img.display(), rel.display());
    let got = image
        .symlink_metadata(rel)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let t = got.file_type();
    let wt = want.file_type();
    assert_eq!(
        (t.is_file(), t.is_dir(), t.is_symlink(), t.is_block_device()),
        (
            wt.is_file(),
            wt.is_dir(),
            wt.is_symlink(),
            wt.is_block_device()
        ),
        "{what}: type"
    );
    assert_eq!(
        (t.is_char_device(), t.is_fifo(), t.is_socket()),
        (wt.is_char_device(), wt.is_fifo(), wt.is_socket()),
        "{what}: type"
    );
    assert_eq!(got.mode(), want.mode(), "{what}: mode");
    assert_eq!(
        (got.uid(), got.gid()),
        (want.uid(), want.gid()),
        "{what}: owner"
    );
    assert_eq!(got.nlink(), want.nlink(), "{what}: nlink");
    assert_eq!(got.len(), want.len(), "{what}: len");
    assert_eq!(
        (got.mtime(), got.mtime_nsec()),
        (want.mtime(), want.mtime_nsec()),
        "{what}: mtime"
    );
    assert_eq!(got.ino(), want.ino(), "{what}: ino");
    assert_eq!(got.rdev(), want.rdev(), "{what}: rdev");
    let path = mnt.join(rel);
    if wt.is_dir() {
        let mut names: Vec<(OsString, bool, bool)> = Vec::new();
        for e in image
            .read_dir(rel)
            .unwrap_or_else(|e| panic!("{what}: {e}"))
        {
            let e = e.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(e.path(), rel.join(e.file_name()), "{what}: entry path");
            let ft = e.file_type().unwrap();
            assert_eq!(e.metadata().unwrap().file_type(), ft, "{what}: entry type");
            names.push((e.file_name(), ft.is_dir(), ft.is_symlink()));
        }
        let mut want_names: Vec<(OsString, bool, bool)> = fs::read_dir(&path)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let ft = e.file_type().unwrap();
                (e.file_name(), ft.is_dir(), ft.is_symlink())
            })
            .collect();
        names.sort();
        want_names.sort();
        assert_eq!(names, want_names, "{what}: listing");
    } else if wt.is_symlink() {
        assert_eq!(
            image.read_link(rel).unwrap(),
            fs::read_link(&path).unwrap(),
            "{what}: target"
        );
        // metadata() follows the link as std::fs::metadata does.
        match fs::metadata(&path) {
            Ok(m) => assert_eq!(
                image.metadata(rel).unwrap().ino(),
                m.ino(),
                "{what}: follow"
            ),
            Err(_) => assert!(!image.exists(rel).unwrap(), "{what}: dangling link exists"),
        }
    } else if wt.is_file() && !kernel_cannot_read(img, rel) {
        let bytes = fs::read(&path).unwrap();
        assert_eq!(image.read(rel).unwrap(), bytes, "{what}: read");
        let mut f = image.open_file(rel).unwrap();
        assert_eq!(f.metadata().len(), bytes.len() as u64);
        let mid = bytes.len() / 3;
        f.seek(SeekFrom::Start(mid as u64)).unwrap();
        let mut rest = Vec::new();
        f.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, bytes[mid..], "{what}: seek + read_to_end");
        let mut buf = vec![0u8; 5000];
        let n = f.read_at(&mut buf, mid as u64).unwrap();
        assert_eq!(
            buf[..n],
            bytes[mid..(mid + 5000).min(bytes.len())],
            "{what}: read_at"
        );
        assert_eq!(
            f.seek(SeekFrom::End(-1)).ok(),
            bytes.len().checked_sub(1).map(|n| n as u64)
        );
    }
    if !wt.is_symlink() {
        let got: BTreeMap<OsString, Vec<u8>> = image.xattrs(rel).unwrap().into_iter().collect();
        let want = kernel_xattrs(&path);
        assert_eq!(got, want, "{what}: xattrs");
        for (name, value) in &want {
            assert_eq!(
                image.xattr(rel, name).unwrap().as_ref(),
                Some(value),
                "{what}: xattr"
            );
        }
        assert_eq!(image.xattr(rel, "user.no-such-attribute").unwrap(), None);
    }
    1
}

#[test]
fn path_api_answers_as_std_fs_on_the_kernel_mount() {
    if let Err(why) = can_mount() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut checked = 0;
    for img in images() {
        let image = Image::open_path(&img).unwrap();
        let mnt = LoopMount::new(&img, &[]).unwrap();
        let root = image.metadata("/").unwrap();
        let want_root = fs::metadata(mnt.path()).unwrap();
        assert_eq!(
            (root.ino(), root.mode()),
            (want_root.ino(), want_root.mode())
        );
        for (rel, want) in list_tree(mnt.path()).unwrap() {
            checked += check_entry(&image, &img, mnt.path(), &rel, &want);
        }
    }
    assert!(checked > 500, "only {checked} entries compared");
}

#[test]
fn path_errors_have_the_kinds_programs_expect() {
    let img = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/plain.erofs");
    let image = Image::open_path(&img).unwrap();
    // Find a regular file and a directory through the API itself.
    let mut file = None;
    let mut dir = None;
    for e in image.read_dir("").unwrap() {
        let e = e.unwrap();
        let t = e.file_type().unwrap();
        if t.is_file() && file.is_none() {
            file = Some(e.path());
        }
        if t.is_dir() && dir.is_none() {
            dir = Some(e.path());
        }
    }
    let (file, dir) = (file.unwrap(), dir.unwrap());
    let kind = |e: ferrofs::Error| (e.kind(), std::io::Error::from(e).kind());
    use std::io::ErrorKind as Io;
    let missing = image.metadata("no/such/file").unwrap_err();
    assert_eq!(kind(missing), (ErrorKind::NotFound, Io::NotFound));
    assert!(!image.exists("no-such-file").unwrap());
    assert!(image.exists(&file).unwrap());
    let through_file = image.metadata(file.join("below")).unwrap_err();
    assert_eq!(
        kind(through_file),
        (ErrorKind::NotADirectory, Io::NotADirectory)
    );
    let list_file = image.read_dir(&file).unwrap_err();
    assert_eq!(
        kind(list_file),
        (ErrorKind::NotADirectory, Io::NotADirectory)
    );
    let open_dir = image.open_file(&dir).unwrap_err();
    assert_eq!(kind(open_dir), (ErrorKind::IsADirectory, Io::IsADirectory));
    let read_dir_bytes = image.read(&dir).unwrap_err();
    assert_eq!(
        kind(read_dir_bytes),
        (ErrorKind::IsADirectory, Io::IsADirectory)
    );
    let not_link = image.read_link(&file).unwrap_err();
    assert_eq!(kind(not_link), (ErrorKind::InvalidInput, Io::InvalidInput));
    // A leading "/" and "." components name the same file.
    let abs = Path::new("/").join(&file);
    assert_eq!(image.read(&abs).unwrap(), image.read(&file).unwrap());
    let dotted = Path::new(".").join(&file);
    assert_eq!(
        image.metadata(dotted).unwrap(),
        image.metadata(&file).unwrap()
    );
}

/// Every error of `Image::open_path` names the file and says what is
/// wrong in plain words, with the kind a program branches on.
#[test]
fn open_errors_name_the_path_and_the_reason() {
    let dir = std::env::temp_dir().join(format!("ferrofs-open-errors-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.erofs");
    let noise = dir.join("noise.bin");
    fs::write(&noise, vec![0x5au8; 8192]).unwrap();
    let short = dir.join("short.bin");
    fs::write(&short, b"EROFS?").unwrap();
    let good = images()
        .into_iter()
        .find(|p| fs::metadata(p).unwrap().len() > 8192)
        .unwrap();
    let cut = dir.join("cut.erofs");
    let mut bytes = fs::read(&good).unwrap();
    let full = bytes.len();
    bytes.truncate(4096);
    fs::write(&cut, &bytes).unwrap();
    let err = |p: &Path| match Image::open_path(p) {
        Ok(_) => panic!("{} opened", p.display()),
        Err(e) => e.to_string(),
    };
    let e = err(&missing);
    assert!(
        e.contains(missing.to_str().unwrap()) && e.contains("No such file"),
        "{e}"
    );
    assert_eq!(
        Image::open_path(&missing).err().unwrap().kind(),
        ErrorKind::NotFound
    );
    let e = err(&dir);
    assert!(
        e.contains(dir.to_str().unwrap()) && e.contains("directory"),
        "{e}"
    );
    let e = err(&noise);
    assert_eq!(
        e,
        format!(
            "{}: not an EROFS image (no superblock magic at byte 1024)",
            noise.display()
        )
    );
    let e = err(&short);
    assert!(
        e.contains(short.to_str().unwrap()) && e.contains("6 bytes, too few"),
        "{e}"
    );
    if full > 8192 {
        let e = err(&cut);
        assert_eq!(
            e,
            format!(
                "{}: image truncated: 4096 bytes, the superblock says {full}",
                cut.display()
            )
        );
        assert_eq!(
            Image::open_path(&cut).err().unwrap().kind(),
            ErrorKind::Corrupt
        );
    }
    fs::remove_dir_all(&dir).unwrap();
}
