//! Reads a source directory as mkcomposefs 1.0.8 does: every entry
//! `lstat`ed (hard links become separate inodes with nlink 1), xattrs read
//! without following symlinks (all, `user.*` only, or none), mtimes kept
//! or zeroed, and every non-empty regular file's fs-verity digest computed
//! — on all threads of the pool — with files of at most 64 bytes inlined.

use std::fs::{self, File};
use std::io::{BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::node::{Node, Tree, S_IFLNK, S_IFREG};
use crate::error::{BuildError, Result};

/// Files up to this size are stored inline in the image.
pub(crate) const INLINE_MAX: u64 = 64;
/// Longest symlink target (PATH_MAX less its NUL).
pub(crate) const PAYLOAD_MAX: usize = 4095;

/// How the source directory is read (mkcomposefs's options).
#[derive(Clone, Copy, Debug, Default)]
pub struct WalkOptions {
    /// `--use-epoch`: every mtime is 0.
    pub use_epoch: bool,
    /// `--skip-xattrs`: no xattrs at all.
    pub skip_xattrs: bool,
    /// `--user-xattrs`: only `user.*` xattrs.
    pub user_xattrs: bool,
    /// `--skip-devices`: leave out block and character devices.
    pub skip_devices: bool,
}

/// A scanned entry and, for a directory, its sorted children.
struct Scanned {
    node: Node,
    kids: Vec<Scanned>,
}

/// Reads `root` into a tree; `sources[i]` is node i's file on disk.
pub(crate) fn scan(root: &Path, opts: &WalkOptions) -> Result<(Tree, Vec<PathBuf>)> {
    let top = scan_entry(root, Vec::new(), opts)?;
    if !top.node.is_dir() {
        return Err(BuildError::Io {
            path: root.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
        });
    }
    let Scanned { node, kids } = top;
    let mut tree = Tree::new(node);
    let mut sources = vec![root.to_path_buf()];
    flatten(&mut tree, &mut sources, 0, kids);
    Ok((tree, sources))
}

/// Moves scanned children (sorted) into the arena under `at`.
fn flatten(tree: &mut Tree, sources: &mut Vec<PathBuf>, at: usize, kids: Vec<Scanned>) {
    let base = sources[at].clone();
    for Scanned { node, kids: sub } in kids {
        sources.push(base.join(std::ffi::OsStr::from_bytes(&node.name)));
        let idx = tree.nodes.len();
        tree.push_sorted_children(at, vec![node]);
        flatten(tree, sources, idx, sub);
    }
}

/// Scans one entry (recursing into directories, children in parallel).
fn scan_entry(path: &Path, name: Vec<u8>, opts: &WalkOptions) -> Result<Scanned> {
    let meta = fs::symlink_metadata(path).map_err(BuildError::io(path))?;
    let mut node = load_node(path, &meta, opts)?;
    node.name = name;
    let mut kids = Vec::new();
    if node.is_dir() {
        let mut names = Vec::new();
        for e in fs::read_dir(path).map_err(BuildError::io(path))? {
            let e = e.map_err(BuildError::io(path))?;
            // As mkcomposefs, by the entry's type from readdir.
            if opts.skip_devices {
                let t = e.file_type().map_err(BuildError::io(e.path()))?;
                if t.is_block_device() || t.is_char_device() {
                    continue;
                }
            }
            names.push(e.file_name().as_bytes().to_vec());
        }
        names.sort_unstable();
        let scanned: Vec<Scanned> = names
            .into_par_iter()
            .map(|n| scan_entry(&path.join(std::ffi::OsStr::from_bytes(&n)), n, opts))
            .collect::<Result<_>>()?;
        kids = scanned;
        for k in &kids {
            if k.node.name.len() > super::node::NAME_MAX {
                return Err(BuildError::input(
                    path.display().to_string(),
                    "a name longer than 255 bytes",
                ));
            }
        }
    }
    Ok(Scanned { node, kids })
}

/// One inode's fields, xattrs, symlink target and content digest.
fn load_node(path: &Path, meta: &fs::Metadata, opts: &WalkOptions) -> Result<Node> {
    let mut node = Node::with_mode(meta.mode());
    node.uid = meta.uid();
    node.gid = meta.gid();
    // why: composefs keeps a 32-bit device number, as the inode stores it.
    #[allow(clippy::cast_possible_truncation)]
    {
        node.rdev = meta.rdev() as u32;
    }
    node.size = meta.size();
    match node.file_type() {
        S_IFREG => load_content(path, &mut node)?,
        S_IFLNK => {
            let target = fs::read_link(path).map_err(BuildError::io(path))?;
            let target = target.as_os_str().as_bytes().to_vec();
            if target.is_empty() || target.len() > PAYLOAD_MAX {
                return Err(BuildError::input(
                    path.display().to_string(),
                    "symlink target too long",
                ));
            }
            node.size = target.len() as u64;
            node.payload = Some(target);
        }
        _ => {}
    }
    if !opts.use_epoch {
        node.mtime_sec = meta.mtime();
        // why: the kernel keeps nanoseconds below 10^9.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        {
            node.mtime_nsec = meta.mtime_nsec() as u32;
        }
    }
    if !opts.skip_xattrs {
        read_xattrs(path, &mut node, opts.user_xattrs)?;
    }
    Ok(node)
}

/// The digest (and, for small files, the content) of a regular file.
fn load_content(path: &Path, node: &mut Node) -> Result<()> {
    if node.size == 0 {
        return Ok(());
    }
    let file = File::open(path).map_err(BuildError::io(path))?;
    let digest = if node.size <= INLINE_MAX {
        let mut data = Vec::new();
        file.take(1 << 26)
            .read_to_end(&mut data)
            .map_err(BuildError::io(path))?;
        let want = usize::try_from(node.size).unwrap_or(usize::MAX);
        let Some(head) = data.get(..want) else {
            return Err(BuildError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "file shrank"),
            });
        };
        node.content = Some(head.to_vec());
        ferrofs_verity::fsverity::digest(data.as_slice())
    } else {
        ferrofs_verity::fsverity::digest(BufReader::with_capacity(1 << 18, file))
    };
    let digest = digest.map_err(|e| BuildError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    node.digest = Some(digest.0);
    node.payload = Some(digest_path(&digest.0).into_bytes());
    Ok(())
}

/// `xx/yyyy…`: where an object lives in the store, by its digest.
pub(crate) fn digest_path(d: &[u8; 32]) -> String {
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}/{}", &hex[..2], &hex[2..])
}

fn read_xattrs(path: &Path, node: &mut Node, user_only: bool) -> Result<()> {
    let names = xattr::list(path).map_err(BuildError::io(path))?;
    for name in names {
        let key = name.as_bytes();
        if user_only && !key.starts_with(b"user.") {
            continue;
        }
        let value = xattr::get(path, &name)
            .map_err(BuildError::io(path))?
            .unwrap_or_default();
        node.set_xattr(key, &value)
            .map_err(|r| BuildError::input(path.display().to_string(), r))?;
    }
    Ok(())
}
