//! Scanning a directory tree: metadata with lstat, xattrs without following
//! symlinks, hard links by (device, inode), data ranges of sparse files,
//! exclusions; children sorted by name so the result does not depend on
//! the order the file system lists them in. No recursion: an explicit stack;
//! each directory's entries are read in parallel.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use rayon::prelude::*;

use crate::error::{BuildError, Result};
use crate::options::BuildOptions;
use crate::tree::{Inode, InodeId, Kind, Tree};

pub(crate) fn excluded(opts: &BuildOptions, rel: &[u8]) -> bool {
    opts.exclude_paths.iter().any(|p| {
        let p = p.strip_prefix(b"/").unwrap_or(p);
        p == rel
    }) || opts.exclude_regex.iter().any(|r| r.is_match(rel))
}

fn read_xattrs(path: &Path, opts: &BuildOptions) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if opts.xattr_tolerance < 0 {
        return Ok(Vec::new());
    }
    let names = match xattr::list(path) {
        Ok(n) => n,
        Err(e) if e.raw_os_error() == Some(libc_enotsup()) => return Ok(Vec::new()),
        Err(e) => return Err(BuildError::io(path)(e)),
    };
    let mut out = Vec::new();
    for name in names {
        let value = xattr::get(path, &name)
            .map_err(BuildError::io(path))?
            .unwrap_or_default();
        out.push((name.as_bytes().to_vec(), value));
    }
    out.sort();
    Ok(out)
}

fn libc_enotsup() -> i32 {
    rustix::io::Errno::OPNOTSUPP.raw_os_error()
}

/// Data ranges of a file that has holes, `None` when it is dense.
pub(crate) fn data_ranges(
    path: &Path,
    size: u64,
    blocks_512: u64,
) -> Result<Option<Vec<(u64, u64)>>> {
    if size == 0 || blocks_512.saturating_mul(512) >= size {
        return Ok(None);
    }
    let f = fs::File::open(path).map_err(BuildError::io(path))?;
    let mut ranges = Vec::new();
    let mut pos = 0u64;
    while pos < size {
        let start = match rustix::fs::seek(&f, rustix::fs::SeekFrom::Data(pos)) {
            Ok(s) => s,
            Err(rustix::io::Errno::NXIO) => break,
            Err(e) => return Err(BuildError::io(path)(e.into())),
        };
        if start >= size {
            break;
        }
        let end = match rustix::fs::seek(&f, rustix::fs::SeekFrom::Hole(start)) {
            Ok(e) => e.min(size),
            Err(e) => return Err(BuildError::io(path)(e.into())),
        };
        if end <= start {
            break;
        }
        ranges.push((start, end));
        pos = end;
    }
    if ranges.len() == 1 && ranges[0] == (0, size) {
        return Ok(None);
    }
    Ok(Some(ranges))
}

fn make_inode(
    path: &Path,
    rel: &[u8],
    meta: &fs::Metadata,
    opts: &BuildOptions,
    parent: InodeId,
) -> Result<Inode> {
    let ft = meta.file_type();
    let kind = if ft.is_dir() {
        Kind::Dir {
            entries: Vec::new(),
        }
    } else if ft.is_file() {
        Kind::File {
            size: meta.len(),
            data: data_ranges(path, meta.len(), meta.blocks())?,
        }
    } else if ft.is_symlink() {
        let t = fs::read_link(path).map_err(BuildError::io(path))?;
        Kind::Symlink {
            target: t.as_os_str().as_bytes().to_vec(),
        }
    } else if ft.is_char_device() || ft.is_block_device() {
        let rdev = meta.rdev();
        let (major, minor) = (rustix::fs::major(rdev), rustix::fs::minor(rdev));
        if major >= 1 << 12 || minor >= 1 << 20 {
            return Err(BuildError::input(
                path,
                format!("device number {major}:{minor} does not fit"),
            ));
        }
        if ft.is_char_device() {
            Kind::CharDevice { major, minor }
        } else {
            Kind::BlockDevice { major, minor }
        }
    } else if ft.is_fifo() {
        Kind::Fifo
    } else if ft.is_socket() {
        Kind::Socket
    } else {
        return Err(BuildError::input(path, "unknown file type"));
    };
    Ok(Inode {
        kind,
        perm: (meta.mode() & 0o7777) as u16,
        uid: meta.uid(),
        gid: meta.gid(),
        mtime: meta.mtime(),
        mtime_nsec: meta.mtime_nsec().clamp(0, 999_999_999) as u32,
        xattrs: read_xattrs(path, opts)?,
        source: path.to_path_buf(),
        content: Default::default(),
        rel: rel.to_vec(),
        parent,
        stamp: ft.is_file().then(|| crate::tree::content::Stamp::of(meta)),
    })
}

/// One directory entry as read from the file system: `None` when it is
/// excluded.
struct Child {
    name: Vec<u8>,
    read: Result<Option<(fs::Metadata, Inode)>>,
}

impl Child {
    fn read(dir: &Path, rel: &[u8], name: Vec<u8>, opts: &BuildOptions, parent: InodeId) -> Self {
        let mut child_rel = rel.to_vec();
        if !child_rel.is_empty() {
            child_rel.push(b'/');
        }
        child_rel.extend_from_slice(&name);
        let read = if excluded(opts, &child_rel) {
            Ok(None)
        } else if name.len() > ferrofs_format::NAME_MAX {
            Err(BuildError::input(
                dir.join(OsStr::from_bytes(&name)),
                "name longer than 255 bytes",
            ))
        } else {
            let path = dir.join(OsStr::from_bytes(&name));
            fs::symlink_metadata(&path)
                .map_err(BuildError::io(&path))
                .and_then(|meta| {
                    let ino = make_inode(&path, &child_rel, &meta, opts, parent)?;
                    Ok(Some((meta, ino)))
                })
        };
        Self { name, read }
    }
}

/// Scans `root` into a tree, on the current rayon pool.
pub fn scan(root: &Path, opts: &BuildOptions) -> Result<Tree> {
    let meta = fs::symlink_metadata(root).map_err(BuildError::io(root))?;
    if !meta.is_dir() {
        return Err(BuildError::input(root, "not a directory"));
    }
    let mut tree = Tree::default();
    tree.inodes.push(make_inode(root, b"", &meta, opts, 0)?);
    tree.root = 0;
    let mut links: HashMap<(u64, u64), InodeId> = HashMap::new();
    // (inode id of the directory, its path relative to the root)
    let mut stack: Vec<(InodeId, Vec<u8>)> = vec![(0, Vec::new())];
    while let Some((dir_id, rel)) = stack.pop() {
        let dir_path = tree.inodes[dir_id].source.clone();
        let mut names: Vec<Vec<u8>> = fs::read_dir(&dir_path)
            .map_err(BuildError::io(&dir_path))?
            .map(|e| e.map(|e| e.file_name().as_bytes().to_vec()))
            .collect::<Result<_, _>>()
            .map_err(BuildError::io(&dir_path))?;
        names.sort();
        // The entries' lstat, xattrs, link targets and holes are read in
        // parallel; hard links and exclusions are settled in name order.
        let children: Vec<Child> = names
            .into_par_iter()
            .map(|name| Child::read(&dir_path, &rel, name, opts, dir_id))
            .collect();
        let mut entries = Vec::with_capacity(children.len());
        for c in children {
            let Some((meta, inode)) = c.read? else {
                continue;
            };
            let key = (meta.dev(), meta.ino());
            let linked = !meta.is_dir() && meta.nlink() > 1 && !opts.hard_dereference;
            if linked {
                if let Some(&id) = links.get(&key) {
                    entries.push((c.name, id));
                    continue;
                }
            }
            let id = tree.inodes.len();
            let child_rel = inode.rel.clone();
            tree.inodes.push(inode);
            if meta.is_dir() {
                stack.push((id, child_rel));
            } else if linked {
                links.insert(key, id);
            }
            entries.push((c.name, id));
        }
        tree.inodes[dir_id].kind = Kind::Dir { entries };
    }
    // An overlay upper directory's whiteouts stay hidden when the image
    // is a layer (mkfs.erofs marks their directories the same way).
    crate::tree::overlay::mark_upper_dirs(&mut tree);
    Ok(tree)
}
