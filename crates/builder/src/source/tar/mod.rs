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
//! `fields` the header fields and PAX records; this module turns members
//! into inodes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::content::Content;
use crate::error::Result;
use crate::options::BuildOptions;
use crate::tree::{Inode, InodeId, Kind, Tree};

mod fields;
mod input;
mod layer;
mod sparse;
#[cfg(test)]
mod tests;

use fields::{checksum_ok, cstr, normalize, number, pax_records, Pax};
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

const OVL_OPAQUE: &[u8] = b"trusted.overlay.opaque";
const OVL_ORIGIN: &[u8] = b"trusted.overlay.origin";

/// Where the archive comes from.
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
                Some(id) if self.tree.inodes[id].is_dir() => id,
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
                    let p = &self.tree.inodes[cur];
                    let (perm, uid, gid) = (0o755 | (p.perm & 0o022), p.uid, p.gid);
                    let (mtime, nsec) = (p.mtime, p.mtime_nsec);
                    let d = &mut self.tree.inodes[id];
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
                prefixes.push(&rel[..i]);
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
            self.tree.inodes[dir].kind = Kind::Dir { entries };
        }
        self.tree
    }
}

/// Reads the archive into a tree. Data from a pipe is spooled to an
/// unlinked file in `spool_dir`.
pub fn scan(
    input: &TarInput,
    opts: &BuildOptions,
    tar_opts: TarOptions,
    spool_dir: &Path,
) -> Result<Tree> {
    let (r, file, name) = filtered(open_input(input)?, &tar_opts, input)?;
    let src = Src::new(r, file, name.clone(), spool_dir)?;
    let b = Builder::new(opts, name, None, tar_opts.root_mtime);
    members(src, b, &tar_opts).map(|(t, _)| t)
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
                b.tree.inodes[root].perm = 0o777;
                b.tree.inodes[root].mtime = root_mtime;
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

/// Reads the members of `src` into `b`'s tree.
/// Reads the archive's members into the builder's tree; also returns the
/// directories it has no entry for.
fn members(mut src: Src, mut b: Builder, tar_opts: &TarOptions) -> Result<(Tree, Vec<InodeId>)> {
    let mut global = Pax::default();
    let mut local = Pax::default();
    let mut long_name: Option<Vec<u8>> = None;
    let mut long_link: Option<Vec<u8>> = None;
    let mut h = [0u8; BLOCK];
    let mut zero_blocks = 0;
    // Directories holding whiteouts made from aufs ones get an (empty)
    // origin xattr, as mkfs.erofs gives them.
    let mut whiteout_dirs: Vec<InodeId> = Vec::new();
    loop {
        if !src.block(&mut h)? {
            break;
        }
        if h.iter().all(|&c| c == 0) {
            zero_blocks += 1;
            if zero_blocks == 2 {
                break;
            }
            continue;
        }
        zero_blocks = 0;
        let at = src.pos - BLOCK as u64;
        let raw_name = cstr(&h[0..100]).to_vec();
        let shown = String::from_utf8_lossy(&raw_name).into_owned();
        let member = if shown.is_empty() {
            format!("header at byte {at}")
        } else {
            shown
        };
        if !checksum_ok(&h) {
            return Err(src.err(&member, format!("header checksum mismatch at byte {at}")));
        }
        let field = |r: std::ops::Range<usize>, what: &str| {
            number(&h[r]).ok_or_else(|| format!("bad {what} field"))
        };
        let hdr_size = field(124..136, "size").map_err(|e| src.err(&member, e))?;
        let hdr_size = u64::try_from(hdr_size).map_err(|_| src.err(&member, "negative size"))?;
        let typeflag = h[156];
        let ustar = &h[257..263] == b"ustar\0";
        let gnu = &h[257..265] == b"ustar  \0";
        match typeflag {
            b'x' | b'g' => {
                let data = src.small(hdr_size, &member)?;
                let recs = pax_records(&data).map_err(|e| src.err(&member, e))?;
                let target = if typeflag == b'g' {
                    &mut global
                } else {
                    &mut local
                };
                target.apply(recs).map_err(|e| src.err(&member, e))?;
                continue;
            }
            b'L' | b'K' => {
                let data = src.small(hdr_size, &member)?;
                let v = cstr(&data).to_vec();
                if typeflag == b'L' {
                    long_name = Some(v);
                } else {
                    long_link = Some(v);
                }
                continue;
            }
            b'V' => {
                src.skip(hdr_size + Src::padding(hdr_size), &member)?;
                continue;
            }
            _ => {}
        }
        // The entry proper: extended values override the header's.
        let mut pax = Pax::for_entry(&global, std::mem::take(&mut local));
        let mut path = raw_name.clone();
        if ustar {
            let prefix = cstr(&h[345..500]);
            if !prefix.is_empty() {
                path = [prefix, b"/", &raw_name].concat();
            }
        }
        if let Some(p) = long_name.take() {
            path = p;
        }
        if let Some(p) = pax.path.take() {
            path = p;
        }
        if let Some(p) = pax.sparse_name.take() {
            path = p;
        }
        let mut link = cstr(&h[157..257]).to_vec();
        if let Some(l) = long_link.take() {
            link = l;
        }
        if let Some(l) = pax.linkpath.take() {
            link = l;
        }
        let member = String::from_utf8_lossy(&path).into_owned();
        let size = pax.size.unwrap_or(hdr_size);
        let num = |r: std::ops::Range<usize>, what: &str| -> std::result::Result<i64, String> {
            number(&h[r]).ok_or_else(|| format!("bad {what} field"))
        };
        let mut mode = num(100..108, "mode").map_err(|e| src.err(&member, e))?;
        if let Some(m) = pax.acl_mask {
            mode = (mode & !0o070) | (i64::from(m) << 3);
        }
        let uid = match pax.uid {
            Some(u) => u,
            None => u32::try_from(num(108..116, "uid").map_err(|e| src.err(&member, e))?)
                .map_err(|_| src.err(&member, "uid out of range"))?,
        };
        let gid = match pax.gid {
            Some(g) => g,
            None => u32::try_from(num(116..124, "gid").map_err(|e| src.err(&member, e))?)
                .map_err(|_| src.err(&member, "gid out of range"))?,
        };
        let mtime = match pax.mtime {
            Some(t) => t,
            None => (num(136..148, "mtime").map_err(|e| src.err(&member, e))?, 0),
        };
        let Some(comps) = normalize(&path) else {
            return Err(src.err(&member, "path leaves the archive's root (`..`)"));
        };
        if comps.iter().any(|c| c.len() > ferrofs_format::NAME_MAX) {
            return Err(src.err(&member, "name longer than 255 bytes"));
        }
        let rel = comps.join(&b'/');
        let skip_data = |src: &mut Src, n: u64| src.skip(n + Src::padding(n), &member);
        if b.excluded(&rel) {
            skip_data(&mut src, size)?;
            continue;
        }
        let mut comps = comps;
        if tar_opts.ovlfs_strip {
            pax.xattrs
                .retain(|(n, _)| n != OVL_OPAQUE && n != OVL_ORIGIN);
        }
        if b.layer.is_some() {
            if b.whiteout(&comps).map_err(|e| src.err(&member, e))? {
                skip_data(&mut src, size)?;
                continue;
            }
        } else if tar_opts.aufs {
            if comps.iter().any(|c| c.starts_with(b".wh..wh.")) {
                if comps.last().is_some_and(|c| c == b".wh..wh..opq") {
                    // The directory hides what lower layers hold.
                    let parents = &comps[..comps.len() - 1];
                    let dir = b.dir(parents).map_err(|e| src.err(&member, e))?;
                    if !tar_opts.ovlfs_strip {
                        let x = &mut b.tree.inodes[dir].xattrs;
                        x.retain(|(n, _)| n != OVL_OPAQUE);
                        x.push((OVL_OPAQUE.to_vec(), b"y".to_vec()));
                        x.sort();
                    }
                }
                skip_data(&mut src, size)?;
                continue;
            }
            if let Some(last) = comps.last_mut() {
                if let Some(hidden) = last.strip_prefix(b".wh.") {
                    if hidden.is_empty() {
                        return Err(src.err(&member, "whiteout without a name"));
                    }
                    *last = hidden.to_vec();
                    skip_data(&mut src, size)?;
                    if tar_opts.ovlfs_strip {
                        continue;
                    }
                    let Some((name, parents)) = comps.split_last() else {
                        continue;
                    };
                    // Below a file this archive put in a directory's place
                    // (umoci writes such whiteouts), it hides nothing.
                    if b.under_non_dir(parents) {
                        continue;
                    }
                    let dir = b.dir(parents).map_err(|e| src.err(&member, e))?;
                    let rel = comps.join(&b'/');
                    let id = b.new_inode(Kind::CharDevice { major: 0, minor: 0 }, &rel, dir);
                    // Mode 0, as overlayfs and mkfs.erofs make whiteouts.
                    set_meta(&mut b.tree.inodes[id], 0, uid, gid, mtime, pax.xattrs);
                    b.link(dir, name, id);
                    whiteout_dirs.push(dir);
                    continue;
                }
            }
        }
        let kind = match typeflag {
            b'0' | 0 | b'7' | b'S' => None,
            b'1' => {
                // A hard link: another name for an earlier entry.
                skip_data(&mut src, size)?;
                let target = b.link_target(&link).map_err(|e| src.err(&member, e))?;
                if b.tree.inodes[target].is_dir() {
                    return Err(src.err(&member, "hard link to a directory"));
                }
                let Some((name, parents)) = comps.split_last() else {
                    return Err(src.err(&member, "hard link named like the root"));
                };
                let dir = b.dir(parents).map_err(|e| src.err(&member, e))?;
                b.link(dir, name, target);
                continue;
            }
            b'2' => Some(Kind::Symlink {
                target: link.clone(),
            }),
            b'3' | b'4' => {
                let major = match pax.devmajor {
                    Some(m) => m,
                    None => {
                        u32::try_from(num(329..337, "devmajor").map_err(|e| src.err(&member, e))?)
                            .unwrap_or(u32::MAX)
                    }
                };
                let minor = match pax.devminor {
                    Some(m) => m,
                    None => {
                        u32::try_from(num(337..345, "devminor").map_err(|e| src.err(&member, e))?)
                            .unwrap_or(u32::MAX)
                    }
                };
                if major >= 1 << 12 || minor >= 1 << 20 {
                    return Err(src.err(
                        &member,
                        format!("device number {major}:{minor} does not fit"),
                    ));
                }
                Some(if typeflag == b'3' {
                    Kind::CharDevice { major, minor }
                } else {
                    Kind::BlockDevice { major, minor }
                })
            }
            b'5' | b'D' => Some(Kind::Dir {
                entries: Vec::new(),
            }),
            b'6' => Some(Kind::Fifo),
            other => {
                return Err(src.err(
                    &member,
                    format!("unsupported entry type {:?}", other as char),
                ))
            }
        };
        let is_dir = matches!(kind, Some(Kind::Dir { .. }));
        if kind.is_some() {
            // Only regular files carry data; skip anything else's.
            skip_data(&mut src, size)?;
        }
        let kind = match kind {
            Some(k) => k,
            None => {
                // A regular file, maybe sparse.
                let sparse = typeflag == b'S' || pax.sparse_major.is_some();
                let (map, real, stored) = if sparse {
                    sparse::map(&mut src, &h, gnu, &pax, size, &member)?
                } else {
                    (Vec::new(), size, size)
                };
                let (file, base) = src.data(stored, &member)?;
                let (segments, data) = sparse::segments(&map, sparse, real, stored, size, base)
                    .map_err(|e| src.err(&member, e))?;
                let kind = Kind::File { size: real, data };
                let Some((name, parents)) = comps.split_last() else {
                    return Err(src.err(&member, "a file named like the root"));
                };
                let dir = b.dir(parents).map_err(|e| src.err(&member, e))?;
                let id = b.new_inode(kind, &rel, dir);
                b.tree.inodes[id].content = Content::Archive {
                    archive: file,
                    segments: segments.into(),
                };
                set_meta(&mut b.tree.inodes[id], mode, uid, gid, mtime, pax.xattrs);
                b.link(dir, name, id);
                continue;
            }
        };
        // Directories keep their children when they appear again.
        let Some((name, parents)) = comps.split_last() else {
            if is_dir {
                let r = b.tree.root;
                set_meta(&mut b.tree.inodes[r], mode, uid, gid, mtime, pax.xattrs);
                b.implicit.remove(&r);
                continue;
            }
            return Err(src.err(&member, "only a directory can be the root"));
        };
        let dir = b.dir(parents).map_err(|e| src.err(&member, e))?;
        let existing = b.children.get(&dir).and_then(|m| m.get(name)).copied();
        let id = match existing {
            Some(id) if is_dir && b.tree.inodes[id].is_dir() => id,
            _ => {
                let id = b.new_inode(kind, &rel, dir);
                b.link(dir, name, id);
                id
            }
        };
        set_meta(&mut b.tree.inodes[id], mode, uid, gid, mtime, pax.xattrs);
        b.implicit.remove(&id);
    }
    if !tar_opts.ovlfs_strip {
        for dir in whiteout_dirs {
            let x = &mut b.tree.inodes[dir].xattrs;
            if !x.iter().any(|(n, _)| n == OVL_ORIGIN) {
                x.push((OVL_ORIGIN.to_vec(), Vec::new()));
                x.sort();
            }
        }
    }
    if src.file.is_none() || tar_opts.compressed != Compressed::No || b.layer.is_some() {
        // Read a stream to its end: a compressed one checks its CRC or
        // check field there (so a corrupt stream is an error, not a
        // tree with wrong bytes), a `=FILE` copy gets all of it, and the
        // writer of a pipe is not cut off.
        std::io::copy(&mut src.r, &mut std::io::sink()).map_err(src.io())?;
    }
    let implicit = b.implicit.iter().copied().collect();
    Ok((b.finish(), implicit))
}

fn set_meta(
    ino: &mut Inode,
    mode: i64,
    uid: u32,
    gid: u32,
    mtime: (i64, u32),
    mut xattrs: Vec<(Vec<u8>, Vec<u8>)>,
) {
    ino.perm = (mode & 0o7777) as u16;
    ino.uid = uid;
    ino.gid = gid;
    ino.mtime = mtime.0;
    ino.mtime_nsec = mtime.1.min(999_999_999);
    xattrs.sort();
    ino.xattrs = xattrs;
}
