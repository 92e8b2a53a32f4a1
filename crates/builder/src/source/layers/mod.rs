//! EROFS images as the source (rebuild mode, as mkfs.erofs 1.9 has it):
//! the images are layers, merged bottom (first) to top (last) with
//! overlayfs's rules into one tree. A later layer's entry replaces an
//! earlier one's of the same path; directories merge (the upper one's
//! metadata and xattrs, the entries of both) unless the upper one is
//! opaque (`trusted.overlay.opaque=y`); a whiteout (a character device
//! 0:0) hides what the layers below have at its name and stays in the
//! tree, so the result stacks like the layers did, unless `ovlfs_strip`
//! leaves whiteouts and overlayfs's xattrs out. Directories holding
//! whiteouts get an empty `trusted.overlay.origin` (overlayfs then never
//! lists them directly), as mkfs.erofs does.
//!
//! By default a regular file's data stays in its layer: the new image's
//! chunk indexes point into the layer, one extra device per layer image
//! (or, for a layer with extra devices of its own, those devices). A tail
//! the layer keeps inline (after the inode) is copied into a block of the
//! new image, its file's last chunk. What no chunk index can point at (a
//! compressed file, a file wholly inline) is copied, decoded, into the new
//! image.
//! With [`DataMode::Full`] every file is copied, and the image is
//! self-contained.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferrofs::raw::Inode as RawInode;
use ferrofs::Image;

use crate::error::{BuildError, Result};
use crate::options::BuildOptions;
pub use crate::summary::LayerStats;
use crate::tree::content::Content;
use crate::tree::ExtraDevice;
use crate::tree::{Inode, InodeId, Kind, Tree};

mod index;
use index::{index, layout_reason};

use crate::tree::overlay::{add_origin, is_whiteout, OVL_OPAQUE, OVL_ORIGIN};
/// The EROFS magic at byte 1024.
const MAGIC: [u8; 4] = 0xE0F5_E1E2u32.to_le_bytes();

/// How the layers' file data gets into the new image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataMode {
    /// Chunk indexes into the layers as extra devices (mkfs.erofs's
    /// default); what cannot be indexed is copied.
    BlobIndex,
    /// Everything copied (`--clean=data`).
    Full,
}

/// The merged tree (with the devices its files index) and what was done.
pub struct Merged {
    /// The merged tree, ready for [`crate::build_tree`].
    pub tree: Tree,
    /// What became of the layers' files.
    pub stats: LayerStats,
}

/// Whether `path` is a file holding an EROFS image (its magic at byte
/// 1024), which makes it a layer rather than a directory or an archive.
pub fn is_image(path: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|f| f.read_exact_at(&mut b, 1024))
        .is_ok_and(|()| b == MAGIC)
}

/// One opened layer and the device ids its data has in the new image.
struct Layer {
    path: PathBuf,
    image: Image,
    /// New device id of the layer's primary device (0: not indexable,
    /// the layer has devices of its own).
    primary: u16,
    /// New device ids of the layer's own extra devices.
    extra: Vec<u16>,
}

/// Merges the images at `layers` (bottom first) into one tree.
pub fn scan(
    layers: &[PathBuf],
    opts: &BuildOptions,
    mode: DataMode,
    ovlfs_strip: bool,
) -> Result<Merged> {
    let mut images = Vec::new();
    for path in layers {
        images.push((path.clone(), open_image(path)?));
    }
    scan_images(images, opts, mode, ovlfs_strip)
}

/// Merges images already opened (their names for messages), bottom
/// first, as [`scan`] merges files: layers read from anywhere a reader
/// reads (a registry's blobs, lazily).
pub fn scan_images(
    layers: Vec<(PathBuf, Image)>,
    opts: &BuildOptions,
    mode: DataMode,
    ovlfs_strip: bool,
) -> Result<Merged> {
    let mut opened = Vec::new();
    let mut devices = Vec::new();
    for (path, image) in layers {
        let l = open_layer(&path, image, opts, mode, &mut devices)?;
        opened.push(l);
    }
    let mut m = Merger {
        tree: Tree::default(),
        children: HashMap::new(),
        opts,
        mode,
    };
    m.new_inode(
        Kind::Dir {
            entries: Vec::new(),
        },
        b"",
        0,
    );
    for l in &opened {
        m.apply(l)?;
    }
    let mut tree = m.finish(ovlfs_strip);
    // What whiteouts and replaced directories cut off.
    tree = tree.prune();
    tree.devices = devices;
    let stats = count(&tree, mode);
    Ok(Merged { tree, stats })
}

/// Opens the layer image at `path`.
fn open_image(path: &Path) -> Result<Image> {
    if !is_image(path) {
        return Err(BuildError::input(
            path,
            "not an EROFS image (no EROFS magic at byte 1024); layers of a rebuild are images",
        ));
    }
    Image::open_path(path)
        .map_err(|e| BuildError::input(path, format!("not a readable EROFS image: {e}")))
}

/// Checks a layer can serve this build, and gives its devices their ids
/// in the new image's table.
fn open_layer(
    path: &Path,
    image: Image,
    opts: &BuildOptions,
    mode: DataMode,
    devices: &mut Vec<ExtraDevice>,
) -> Result<Layer> {
    let bs = image.block_size().bytes();
    if bs != opts.block_size() {
        return Err(BuildError::input(
            path,
            format!(
                "its block size is {bs}, the new image's {} (give -b {bs})",
                opts.block_size()
            ),
        ));
    }
    let own = image.devices();
    if mode == DataMode::Full && !own.is_empty() {
        return Err(BuildError::input(
            path,
            "it has extra devices of its own, whose data --clean=data cannot read",
        ));
    }
    let mut next = |tag: [u8; 64], blocks: u64| -> Result<u16> {
        devices.push(ExtraDevice { tag, blocks });
        u16::try_from(devices.len())
            .ok()
            .filter(|&n| n < 4096)
            .ok_or_else(|| BuildError::input(path, "more than 4095 devices in all"))
    };
    let (mut primary, mut extra) = (0, Vec::new());
    if mode == DataMode::BlobIndex {
        if own.is_empty() {
            let tag = uuid_tag(&image.superblock().uuid);
            primary = next(tag, u64::from(image.superblock().blocks))?;
        } else {
            for d in own {
                let tag = match d.slot.tag[0] {
                    0 => uuid_tag(&image.superblock().uuid),
                    _ => d.slot.tag,
                };
                extra.push(next(tag, d.slot.blocks)?);
            }
        }
    }
    Ok(Layer {
        path: path.to_path_buf(),
        image,
        primary,
        extra,
    })
}

/// A UUID as 32 lowercase hex digits, the tag mkfs.erofs gives a layer.
fn uuid_tag(uuid: &[u8; 16]) -> [u8; 64] {
    let mut tag = [0u8; 64];
    for (i, b) in uuid.iter().enumerate() {
        let hex = format!("{b:02x}");
        tag[2 * i..2 * i + 2].copy_from_slice(hex.as_bytes());
    }
    tag
}

/// The tree being merged: children by name until [`Merger::finish`].
struct Merger<'a> {
    tree: Tree,
    children: HashMap<InodeId, HashMap<Vec<u8>, InodeId>>,
    opts: &'a BuildOptions,
    mode: DataMode,
}

impl Merger<'_> {
    /// Lays layer `l` over the tree.
    fn apply(&mut self, l: &Layer) -> Result<()> {
        let raw = l.image.raw();
        let err =
            |what: &str, e: ferrofs::Error| BuildError::input(&l.path, format!("{what}: {e}"));
        let root = raw.root().map_err(|e| err("root directory", e))?;
        let root_nid = root.nid().0;
        let root_id = self.tree.root;
        // The root always merges (an opaque mark on it hides nothing).
        let xattrs = self.xattrs(l, &root, b"")?;
        self.set_meta(root_id, l, &root, xattrs);
        // (layer directory, merged directory) pairs still to walk.
        let mut stack = vec![(root, root_id)];
        let mut links: HashMap<u64, InodeId> = HashMap::new();
        // Directories walked: a damaged layer may name one twice (a loop).
        let mut seen = std::collections::HashSet::from([root_nid]);
        while let Some((dir, mdir)) = stack.pop() {
            let rel_dir = self.tree.inodes[mdir].rel.clone();
            let entries = raw
                .read_dir(&dir)
                .map_err(|e| err(&format!("directory /{}", show(&rel_dir)), e))?;
            for e in entries.into_iter().filter(|e| !e.is_dot()) {
                let rel = match rel_dir.is_empty() {
                    true => e.name.clone(),
                    false => [&rel_dir[..], b"/", &e.name].concat(),
                };
                if crate::source::dir::excluded(self.opts, &rel) {
                    continue;
                }
                let ino = raw
                    .inode(e.nid)
                    .map_err(|x| err(&format!("/{}", show(&rel)), x))?;
                let existing = self
                    .children
                    .get(&mdir)
                    .and_then(|c| c.get(&e.name))
                    .copied();
                if ino.is_dir() {
                    if !seen.insert(e.nid.0) {
                        return Err(BuildError::input(
                            &l.path,
                            format!("/{}: a directory named twice (nid {})", show(&rel), e.nid.0),
                        ));
                    }
                    let xattrs = self.xattrs(l, &ino, &rel)?;
                    let opaque = xattrs.iter().any(|(n, v)| n == OVL_OPAQUE && v == b"y");
                    let id = match existing {
                        Some(x) if self.tree.inodes[x].is_dir() && !opaque => x,
                        _ => {
                            let id = self.new_inode(
                                Kind::Dir {
                                    entries: Vec::new(),
                                },
                                &rel,
                                mdir,
                            );
                            self.children
                                .entry(mdir)
                                .or_default()
                                .insert(e.name.clone(), id);
                            self.children.insert(id, HashMap::new());
                            id
                        }
                    };
                    self.set_meta(id, l, &ino, xattrs);
                    stack.push((ino, id));
                    continue;
                }
                let nid = e.nid.0;
                let id = match links.get(&nid) {
                    Some(&id) if ino.nlink() > 1 => id,
                    _ => {
                        let kind = self.kind(l, &ino, &rel)?;
                        let id = self.new_inode(kind, &rel, mdir);
                        let xattrs = self.xattrs(l, &ino, &rel)?;
                        self.set_meta(id, l, &ino, xattrs);
                        if ino.is_reg() && ino.size() > 0 {
                            let content = self.content(l, ino, &rel)?;
                            self.tree.inodes[id].content = content;
                        }
                        links.insert(nid, id);
                        id
                    }
                };
                self.children.entry(mdir).or_default().insert(e.name, id);
            }
        }
        Ok(())
    }

    fn new_inode(&mut self, kind: Kind, rel: &[u8], parent: InodeId) -> InodeId {
        let id = self.tree.inodes.len();
        // Its metadata and source come from its layer (`set_meta`).
        self.tree
            .inodes
            .push(Inode::new(kind, rel, parent, PathBuf::new()));
        id
    }

    /// Takes mode, owner, mtime and xattrs of `ino` (of layer `l`).
    fn set_meta(
        &mut self,
        id: InodeId,
        l: &Layer,
        ino: &RawInode,
        xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    ) {
        let t = &mut self.tree.inodes[id];
        t.perm = ino.permissions();
        t.uid = ino.uid();
        t.gid = ino.gid();
        t.mtime = ino.mtime();
        t.mtime_nsec = ino.mtime_nsec();
        t.xattrs = xattrs;
        t.source = PathBuf::from(format!("{}:/{}", l.path.display(), show(&t.rel)));
    }

    fn xattrs(&self, l: &Layer, ino: &RawInode, rel: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if self.opts.xattr_tolerance < 0 {
            return Ok(Vec::new());
        }
        let mut x: Vec<(Vec<u8>, Vec<u8>)> = l
            .image
            .raw()
            .xattrs(ino)
            .map_err(|e| BuildError::input(&l.path, format!("xattrs of /{}: {e}", show(rel))))?
            .into_iter()
            .map(|x| (x.name, x.value))
            .collect();
        x.sort();
        x.dedup_by(|a, b| a.0 == b.0);
        Ok(x)
    }

    /// What a non-directory inode is.
    fn kind(&self, l: &Layer, ino: &RawInode, rel: &[u8]) -> Result<Kind> {
        use ferrofs::format::inode::FileType as F;
        let (major, minor) = ino.rdev();
        Ok(match ino.file_type() {
            F::Regular => Kind::File {
                size: ino.size(),
                data: None,
            },
            F::Symlink => Kind::Symlink {
                target: l.image.raw().read_link(ino).map_err(|e| {
                    BuildError::input(&l.path, format!("symlink /{}: {e}", show(rel)))
                })?,
            },
            F::CharDevice => Kind::CharDevice { major, minor },
            F::BlockDevice => Kind::BlockDevice { major, minor },
            F::Fifo => Kind::Fifo,
            F::Socket => Kind::Socket,
            F::Directory => Kind::Dir {
                entries: Vec::new(),
            },
        })
    }

    /// Where a regular file's bytes come from: indexed on its layer's
    /// device when the layout allows it, else copied.
    fn content(&mut self, l: &Layer, ino: RawInode, rel: &[u8]) -> Result<Content> {
        let file = l
            .image
            .raw()
            .open(ino)
            .map_err(|e| BuildError::input(&l.path, format!("/{}: {e}", show(rel))))?;
        if self.mode == DataMode::Full {
            return Ok(Content::Image {
                file,
                external: None,
            });
        }
        let bad = |why: String| BuildError::input(&l.path, format!("/{}: {why}", show(rel)));
        match index(l, &file, self.opts).map_err(bad)? {
            Some(x) => Ok(Content::Image {
                file,
                external: Some(Arc::new(x)),
            }),
            // Copying reads the data through the layer's own devices,
            // which are not open here.
            None if l.primary == 0 => Err(bad(format!(
                "its data ({}) cannot be indexed, so it must be copied, but the layer's \
                 data is on its own extra devices",
                layout_reason(&file)
            ))),
            None => Ok(Content::Image {
                file,
                external: None,
            }),
        }
    }

    /// Sorts the entries into the tree; strips or marks whiteouts.
    fn finish(mut self, ovlfs_strip: bool) -> Tree {
        for (dir, kids) in std::mem::take(&mut self.children) {
            let mut entries: Vec<(Vec<u8>, InodeId)> = kids.into_iter().collect();
            if ovlfs_strip {
                entries.retain(|(_, c)| !is_whiteout(&self.tree.inodes[*c]));
            } else if entries
                .iter()
                .any(|(_, c)| is_whiteout(&self.tree.inodes[*c]))
            {
                add_origin(&mut self.tree.inodes[dir]);
            }
            entries.sort();
            self.tree.inodes[dir].kind = Kind::Dir { entries };
        }
        if ovlfs_strip {
            for ino in &mut self.tree.inodes {
                ino.xattrs
                    .retain(|(n, _)| n != OVL_OPAQUE && n != OVL_ORIGIN);
            }
        }
        self.tree
    }
}

/// Counts what the files of the final tree got.
fn count(tree: &Tree, mode: DataMode) -> LayerStats {
    let mut s = LayerStats::default();
    let mut why: HashMap<String, u64> = HashMap::new();
    for ino in &tree.inodes {
        let Content::Image { file, external } = &ino.content else {
            continue;
        };
        match external {
            Some(x) => {
                s.indexed_files += 1;
                s.indexed_bytes += ino.data_size();
                s.tails += u64::from(x.tail);
            }
            None => {
                s.copied_files += 1;
                s.copied_bytes += ino.data_size();
                if mode == DataMode::BlobIndex {
                    *why.entry(layout_reason(file)).or_default() += 1;
                }
            }
        }
    }
    s.copied_why = why.into_iter().collect();
    s.copied_why.sort();
    s
}

pub(super) fn show(rel: &[u8]) -> String {
    String::from_utf8_lossy(rel).into_owned()
}
