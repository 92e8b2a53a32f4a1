//! The overlay view of a composefs image over its object store (`mount
//! --basedir`): which object holds a regular file's contents (its
//! redirect xattr), opened once and, when asked, checked against the
//! fs-verity digest of its metacopy xattr before a byte of it is served;
//! the entries and xattr names overlayfs hides or renames.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use ferrofs::composefs::{backing, is_whiteout, stored_name as escaped, visible_name, Backing};
use ferrofs::format::Nid;
use ferrofs::raw::{Inode, RawDirEntry};
use ferrofs::Image;
use fuser::Errno;

use crate::convert::errno;

/// Most files whose object is remembered (their open descriptors
/// included); past it the table starts afresh.
const REMEMBERED: usize = 1024;

/// The object store of a composefs image.
pub(crate) struct Objects {
    dir: PathBuf,
    verify: bool,
    known: Mutex<HashMap<Nid, Option<Arc<Object>>>>,
}

/// One file's object.
pub(crate) struct Object {
    /// The object's path (the store joined with the redirect).
    path: PathBuf,
    backing: Backing,
    /// The object's 512-byte block count, as overlayfs reports it for a
    /// metacopy file (`None`: the object is missing).
    pub(crate) blocks: Option<u64>,
    /// Opened (and verified) on the first read; `None` if that failed.
    file: OnceLock<Option<File>>,
}

impl Objects {
    /// Contents from the store `dir`; with `verify`, every object's
    /// fs-verity digest is checked before it is read.
    pub(crate) fn new(dir: PathBuf, verify: bool) -> Self {
        Self {
            dir,
            verify,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The object behind a regular file, or `None` when its contents are
    /// in the image (no metacopy xattr).
    pub(crate) fn of(&self, image: &Image, inode: &Inode) -> Result<Option<Arc<Object>>, Errno> {
        if !inode.is_reg() {
            return Ok(None);
        }
        let nid = inode.nid();
        if let Some(known) = self.table().get(&nid) {
            return Ok(known.clone());
        }
        let found = backing(&image.raw(), inode).map_err(errno)?.map(|b| {
            let path = b
                .object
                .as_deref()
                .map_or_else(PathBuf::new, |o| self.dir.join(OsStr::from_bytes(o)));
            let blocks = std::fs::metadata(&path).ok().map(|m| m.blocks());
            Arc::new(Object {
                path,
                backing: b,
                blocks,
                file: OnceLock::new(),
            })
        });
        let mut t = self.table();
        if t.len() >= REMEMBERED {
            t.clear();
        }
        t.insert(nid, found.clone());
        Ok(found)
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<Nid, Option<Arc<Object>>>> {
        // The table is a cache: a panicking holder leaves nothing half-done.
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads object bytes at `offset` into `buf` (short only at the
    /// object's end). A missing object, one without a redirect, or one
    /// whose digest does not match is EIO, logged once on stderr with the
    /// file's nid and the object's path.
    pub(crate) fn read(
        &self,
        o: &Object,
        nid: Nid,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<usize, Errno> {
        let file = o
            .file
            .get_or_init(|| match self.open(o) {
                Ok(f) => Some(f),
                Err(why) => {
                    eprintln!("ferrofs mount: EIO: nid {}: {why}", nid.0);
                    None
                }
            })
            .as_ref()
            .ok_or(Errno::EIO)?;
        let mut done = 0;
        while done < buf.len() {
            let at = offset.saturating_add(done as u64);
            match file.read_at(&mut buf[done..], at) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Errno::EIO),
            }
        }
        Ok(done)
    }

    /// Opens an object and, with verification on, checks its digest.
    fn open(&self, o: &Object) -> Result<File, String> {
        if o.backing.object.is_none() {
            return Err("metacopy file without a redirect: no object to read".into());
        }
        let show = o.path.display();
        let file = File::open(&o.path).map_err(|e| format!("object {show}: {e}"))?;
        if self.verify {
            let want = o
                .backing
                .digest
                .ok_or_else(|| format!("object {show}: the image records no digest to check"))?;
            let got = ferrofs_verity::fsverity::digest(&file)
                .map_err(|e| format!("object {show}: {e}"))?;
            if got.0 != want {
                return Err(format!(
                    "object {show}: fs-verity digest {} differs from the image's sha256:{}",
                    got,
                    o.backing.digest_hex().unwrap_or_default()
                ));
            }
        }
        Ok(file)
    }
}

/// Removes the whiteouts (character devices 0:0) overlayfs hides.
pub(crate) fn drop_whiteouts(image: &Image, entries: &mut Vec<RawDirEntry>) -> Result<(), Errno> {
    let chr = ferrofs::format::inode::FileType::CharDevice.dirent_code();
    let mut keep = Vec::with_capacity(entries.len());
    for e in entries.drain(..) {
        if e.type_code == chr && is_whiteout(&image.raw().inode(e.nid).map_err(errno)?) {
            continue;
        }
        keep.push(e);
    }
    *entries = keep;
    Ok(())
}

/// The stored name of the xattr a `getxattr` asks for: as asked without
/// an object store, escaped one level with one.
pub(crate) fn stored_name<'a>(objects: Option<&Objects>, name: &'a [u8]) -> Cow<'a, [u8]> {
    match objects {
        None => Cow::Borrowed(name),
        Some(_) => escaped(name),
    }
}

/// The name a listing shows for a stored xattr (`None`: hidden).
pub(crate) fn shown_name<'a>(objects: Option<&Objects>, stored: &'a [u8]) -> Option<Cow<'a, [u8]>> {
    match objects {
        None => Some(Cow::Borrowed(stored)),
        Some(_) => visible_name(stored),
    }
}
