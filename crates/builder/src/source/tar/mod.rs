//! Reading a tar archive (ustar, GNU and PAX, including long names, PAX
//! xattrs and the GNU sparse formats) into a tree, without root: owners,
//! modes, times and device numbers come from the headers. File data is not
//! held in memory: a seekable archive is referenced in place, and data
//! read from a pipe is copied to an unlinked spool file beside the image.
//! A gzip, xz, lzma or lzip archive is decompressed on the way in (its data
//! then spooled, or written with the whole archive to a file the caller
//! names).
//! Every header field is checked; a bad archive is an error naming the
//! member and the reason.
//!
//! `input` is the byte stream (opening, decompression, where data goes),
//! `fields` the header fields and PAX records, `header` one member's
//! header with its PAX and GNU extensions applied, `entry` one entry into
//! the tree; this module holds the tree being built and the member loop.

#![warn(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::options::BuildOptions;
use crate::tree::{Inode, InodeId, Kind, Tree};

mod entry;
mod fields;
mod header;
mod index;
mod input;
mod layer;
mod sparse;
#[cfg(test)]
mod tests;

use fields::normalize;
pub use input::InPlace;
use input::{filtered, open_input, Src};
pub use layer::{scan_layer, scan_stream};

const BLOCK: usize = 512;
/// Largest PAX header or GNU long name accepted (they are held in memory).
const MAX_META: u64 = 1 << 20;
/// Most entries in one sparse map.
const MAX_SPARSE: usize = 1 << 20;

/// How the archive is read: its compression (mkfs.erofs's `--ungzip`,
/// `--unxz`) and how overlayfs metadata in it is treated (`--aufs`,
/// `--ovlfs-strip`).
#[derive(Clone, Debug, Default)]
pub struct TarOptions {
    /// The compression the archive may have; an archive that turns out
    /// not to be compressed is read as it is.
    pub compressed: Compressed,
    /// Where to write the decompressed archive too (`--ungzip=FILE`); file
    /// data is then read from there instead of a spool file.
    pub raw_copy: Option<PathBuf>,
    /// The root's mtime when the archive has no entry for it (the build
    /// time, as mkfs.erofs gives it).
    pub root_mtime: i64,
    /// aufs whiteouts become overlayfs ones: `.wh.NAME` a character device
    /// 0:0 named NAME, `.wh..wh..opq` the `trusted.overlay.opaque=y` xattr
    /// of its directory; other `.wh..wh.*` entries are aufs's own and left out.
    pub aufs: bool,
    /// Leave overlayfs metadata out: the whiteouts `--aufs` makes and the
    /// `trusted.overlay.opaque`/`trusted.overlay.origin` xattrs (character
    /// devices 0:0 stored in the archive stay, as with mkfs.erofs).
    pub ovlfs_strip: bool,
    /// Tar index mode (mkfs.erofs's `--tar=i`): the image holds only the
    /// metadata; regular files' chunk indexes point at their data in the
    /// archive, which is the image's extra device 1, mapped right after the
    /// image's own blocks: append the archive to the image (`cat`) and it
    /// mounts. Needs 512-byte blocks (tar's); the archive must be plain.
    pub index: bool,
}

/// Compression of the archive stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compressed {
    /// Plain tar.
    #[default]
    No,
    /// gzip (one or more members).
    Gzip,
    /// xz, lzma ("alone") or lzip.
    Xz,
}

use crate::tree::overlay::{OVL_OPAQUE, OVL_ORIGIN};

/// Where the archive comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TarInput {
    /// A file (referenced in place when it is a regular file).
    Path(PathBuf),
    /// Standard input.
    Stdin,
}

/// Builds the tree while entries arrive.
struct Builder<'a> {
    tree: Tree,
    /// Children of each directory by name.
    children: HashMap<InodeId, HashMap<Vec<u8>, InodeId>>,
    opts: &'a BuildOptions,
    archive: String,
    /// Set when the archive is an OCI layer applied onto the tree below.
    layer: Option<layer::Layer>,
    /// Directories the archive has no entry for (made for their
    /// children), the root included.
    implicit: std::collections::BTreeSet<InodeId>,
}

impl Builder<'_> {
    fn new_inode(&mut self, kind: Kind, rel: &[u8], parent: InodeId) -> InodeId {
        let id = self.tree.inodes.len();
        let source = PathBuf::from(format!(
            "{}: {}",
            self.archive,
            String::from_utf8_lossy(rel)
        ));
        self.tree.inodes.push(Inode {
            perm: 0o755,
            ..Inode::new(kind, rel, parent, source)
        });
        id
    }

    /// The directory at `comps`, created where missing as mkfs.erofs
    /// creates it: mode 0755 plus its parent's group and other write bits,
    /// the parent's owner and mtime.
    fn dir(&mut self, comps: &[Vec<u8>]) -> std::result::Result<InodeId, String> {
        let mut cur = self.tree.root;
        let mut rel = Vec::new();
        for c in comps {
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(c);
            let next = self.children.get(&cur).and_then(|m| m.get(c)).copied();
            cur = match next {
                Some(id) if self.tree.inode(id).is_dir() => id,
                Some(_) => {
                    return Err(format!(
                        "{} is not a directory",
                        String::from_utf8_lossy(&rel)
                    ))
                }
                None => {
                    let id = self.new_inode(
                        Kind::Dir {
                            entries: Vec::new(),
                        },
                        &rel,
                        cur,
                    );
                    let p = self.tree.inode(cur);
                    let (perm, uid, gid) = (0o755 | (p.perm & 0o022), p.uid, p.gid);
                    let (mtime, nsec) = (p.mtime, p.mtime_nsec);
                    let d = self.tree.inode_mut(id);
                    (d.perm, d.uid, d.gid, d.mtime, d.mtime_nsec) = (perm, uid, gid, mtime, nsec);
                    self.implicit.insert(id);
                    self.link(cur, c, id);
                    id
                }
            };
        }
        Ok(cur)
    }

    /// The inode a hard link's target path names, which an earlier entry
    /// must have made.
    fn link_target(&self, link: &[u8]) -> std::result::Result<InodeId, String> {
        let missing = || {
            format!(
                "hard link target {} not in the archive before it",
                String::from_utf8_lossy(link)
            )
        };
        let t = normalize(link).ok_or("link target leaves the root (`..`)")?;
        let (last, parents) = t.split_last().ok_or("hard link to the root")?;
        let mut cur = self.tree.root;
        for c in parents.iter().chain([last]) {
            cur = self
                .children
                .get(&cur)
                .and_then(|m| m.get(c))
                .copied()
                .ok_or_else(missing)?;
        }
        Ok(cur)
    }

    fn excluded(&self, rel: &[u8]) -> bool {
        let o = self.opts;
        let mut prefixes = Vec::new();
        for (i, &c) in rel.iter().enumerate() {
            if c == b'/' {
                prefixes.push(rel.get(..i).unwrap_or_default());
            }
        }
        prefixes.push(rel);
        prefixes.iter().any(|p| {
            o.exclude_paths
                .iter()
                .any(|x| x.strip_prefix(b"/").unwrap_or(x) == *p)
                || o.exclude_regex.iter().any(|r| r.is_match(p))
        })
    }

    fn finish(mut self) -> Tree {
        for (dir, kids) in std::mem::take(&mut self.children) {
            let mut entries: Vec<(Vec<u8>, InodeId)> = kids.into_iter().collect();
            entries.sort();
            self.tree.inode_mut(dir).kind = Kind::Dir { entries };
        }
        self.tree
    }
}

/// Reads the archive into a tree. Data from a pipe goes `in_place` when
/// given (see [`InPlace`]), else to an unlinked file in `spool_dir`.
pub fn scan(
    input: &TarInput,
    opts: &BuildOptions,
    tar_opts: TarOptions,
    (spool_dir, in_place): (&Path, Option<InPlace>),
) -> Result<Tree> {
    let (r, file, name) = filtered(open_input(input)?, &tar_opts, input)?;
    let src = Src::new(r, file, name.clone(), spool_dir, (tar_opts.index, in_place))?;
    let b = Builder::new(opts, name, None, tar_opts.root_mtime);
    members(src, b, &tar_opts, false).map(|(t, _)| t)
}

/// Reads the archive as a layer over `lower` (an incremental build: its
/// whiteouts delete from `lower`, whose inodes keep their ids).
pub fn scan_onto(
    input: &TarInput,
    opts: &BuildOptions,
    tar_opts: TarOptions,
    spool_dir: &Path,
    lower: Tree,
) -> Result<Tree> {
    let (r, file, name) = filtered(open_input(input)?, &tar_opts, input)?;
    scan_layer(r, file, name, Some(lower), opts, &tar_opts, spool_dir)
}

impl<'a> Builder<'a> {
    /// A builder over `lower` (the tree of the layers below) or, without
    /// one, over a root as mkfs.erofs makes it when the archive has no
    /// entry for it: mode 0777, the build time.
    fn new(opts: &'a BuildOptions, archive: String, lower: Option<Tree>, root_mtime: i64) -> Self {
        let mut b = Builder {
            tree: Tree::default(),
            children: HashMap::new(),
            opts,
            archive,
            layer: None,
            implicit: Default::default(),
        };
        match lower {
            Some(tree) => {
                for (id, ino) in tree.inodes.iter().enumerate() {
                    if let Kind::Dir { entries } = &ino.kind {
                        b.children.insert(id, entries.iter().cloned().collect());
                    }
                }
                b.tree = tree;
            }
            None => {
                let root = b.new_inode(
                    Kind::Dir {
                        entries: Vec::new(),
                    },
                    b"",
                    0,
                );
                b.tree.root = root;
                b.tree.inode_mut(root).perm = 0o777;
                b.tree.inode_mut(root).mtime = root_mtime;
                b.implicit.insert(root);
            }
        }
        b
    }

    /// Names `id` `name` in directory `dir`, replacing what had the name.
    fn link(&mut self, dir: InodeId, name: &[u8], id: InodeId) {
        if let Some(l) = self.layer.as_mut() {
            l.fresh.insert((dir, name.to_vec()));
        }
        self.children
            .entry(dir)
            .or_default()
            .insert(name.to_vec(), id);
    }
}

/// Reads the archive's members into the builder's tree; also returns the
/// directories it has no entry for.
/// Reads every member of `src` into `b`'s tree. With `to_end`, the stream
/// is read to its end even where nothing needs that (the caller checks
/// what it read, as an OCI blob's digest is checked).
fn members(
    mut src: Src,
    mut b: Builder,
    tar_opts: &TarOptions,
    to_end: bool,
) -> Result<(Tree, Vec<InodeId>)> {
    let mut pending = header::Pending::default();
    // Directories holding whiteouts made from aufs ones get an (empty)
    // origin xattr, as mkfs.erofs gives them.
    let mut whiteout_dirs: Vec<InodeId> = Vec::new();
    while let Some(hd) = header::next(&mut src, &mut pending)? {
        b.add(&mut src, hd, tar_opts, &mut whiteout_dirs)?;
    }
    if src.index {
        // The archive as the image's device: up to its end-of-archive
        // blocks, as mkfs.erofs counts it.
        b.tree.devices = vec![index::device(src.pos)];
    }
    if !tar_opts.ovlfs_strip {
        for dir in whiteout_dirs {
            crate::tree::overlay::add_origin(b.tree.inode_mut(dir));
        }
    }
    if to_end || src.file.is_none() || tar_opts.compressed != Compressed::No || b.layer.is_some() {
        // Read a stream to its end: a compressed one checks its CRC or
        // check field there (so a corrupt stream is an error, not a
        // tree with wrong bytes), a `=FILE` copy gets all of it, and the
        // writer of a pipe is not cut off.
        std::io::copy(&mut src.r, &mut std::io::sink()).map_err(src.io())?;
    }
    let implicit = b.implicit.iter().copied().collect();
    Ok((b.finish(), implicit))
}
