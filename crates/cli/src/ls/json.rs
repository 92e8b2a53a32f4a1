//! `ferrofs ls --json`: one entry of the listing as a JSON object, with
//! the metadata `lstat`, `readlink` and the xattr calls give on a kernel
//! mount; bytes that are not UTF-8 text are also given exactly, in hex.

use anyhow::Result;
use ferrofs::format::inode::FileType;
use ferrofs::Image;

use super::Row;

/// The `--json` object of one entry of the listing.
pub(super) fn entry(image: &Image, r: &Row) -> Result<serde_json::Value> {
    let i = &r.inode;
    let mut path = b"/".to_vec();
    path.extend_from_slice(&r.path);
    let mut v = serde_json::Map::new();
    put_text(&mut v, "path", &path);
    put_text(&mut v, "name", &r.name);
    let kind = match i.file_type() {
        FileType::Regular => "file",
        FileType::Directory => "dir",
        FileType::Symlink => "symlink",
        FileType::CharDevice => "char",
        FileType::BlockDevice => "block",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
    };
    v.insert("type".into(), kind.into());
    v.insert("mode".into(), format!("{:04o}", i.permissions()).into());
    v.insert("ino".into(), r.ino.into());
    v.insert("nid".into(), i.nid().0.into());
    v.insert("nlink".into(), i.nlink().into());
    v.insert("uid".into(), i.uid().into());
    v.insert("gid".into(), i.gid().into());
    v.insert("size".into(), i.size().into());
    v.insert(
        "blocks".into(),
        i.st_blocks(image.superblock().blkszbits).into(),
    );
    v.insert("mtime".into(), i.mtime().into());
    v.insert("mtime_nsec".into(), i.mtime_nsec().into());
    if matches!(i.file_type(), FileType::CharDevice | FileType::BlockDevice) {
        let (major, minor) = i.rdev();
        v.insert(
            "rdev".into(),
            serde_json::json!({"major": major, "minor": minor}),
        );
    }
    if i.is_symlink() {
        put_text(&mut v, "target", &image.raw().read_link(i)?);
    }
    let xattrs = image.raw().xattrs(i)?;
    if !xattrs.is_empty() {
        let list: Vec<serde_json::Value> = xattrs
            .iter()
            .map(|x| {
                let mut o = serde_json::Map::new();
                put_text(&mut o, "name", &x.name);
                // Values are bytes: text when they are UTF-8 with no NUL.
                match std::str::from_utf8(&x.value) {
                    Ok(t) if !t.contains('\0') => {
                        o.insert("value".into(), t.into());
                    }
                    _ => {
                        o.insert("value_hex".into(), hex(&x.value).into());
                    }
                }
                serde_json::Value::Object(o)
            })
            .collect();
        v.insert("xattrs".into(), list.into());
    }
    if r.unknown {
        v.insert("dangling".into(), true.into());
    }
    Ok(serde_json::Value::Object(v))
}

/// Puts `bytes` at `key` as text; when they are not UTF-8, the text with
/// replacement characters and, at `KEY_hex`, the exact bytes.
fn put_text(v: &mut serde_json::Map<String, serde_json::Value>, key: &str, bytes: &[u8]) {
    v.insert(
        key.into(),
        String::from_utf8_lossy(bytes).into_owned().into(),
    );
    if std::str::from_utf8(bytes).is_err() {
        v.insert(format!("{key}_hex"), hex(bytes).into());
    }
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
