//! One archive entry into the tree: exclusion, whiteouts (of an OCI layer
//! or aufs ones), hard links, regular files (maybe sparse) with their data
//! referenced in the archive or spool file, and every other kind.

use super::header::Header;
use super::input::Src;
use std::sync::Arc;

use super::{index, sparse, Builder, TarOptions, OVL_OPAQUE, OVL_ORIGIN};
use crate::error::Result;
use crate::tree::content::Content;
use crate::tree::{Inode, InodeId, Kind};

impl Builder<'_> {
    /// Adds the entry `hd` (its data next in `src`). Directories made from
    /// aufs whiteouts are added to `whiteout_dirs`.
    pub(super) fn add(
        &mut self,
        src: &mut Src,
        mut hd: Header,
        tar_opts: &TarOptions,
        whiteout_dirs: &mut Vec<InodeId>,
    ) -> Result<()> {
        let rel = hd.comps.join(&b'/');
        if self.excluded(&rel) {
            return src.skip_data(hd.size, &hd.member);
        }
        if tar_opts.ovlfs_strip {
            hd.pax
                .xattrs
                .retain(|(n, _)| n != OVL_OPAQUE && n != OVL_ORIGIN);
        }
        if self.layer.is_some() {
            if self
                .whiteout(&hd.comps)
                .map_err(|e| src.err(&hd.member, e))?
            {
                return src.skip_data(hd.size, &hd.member);
            }
        } else if tar_opts.aufs && self.aufs_whiteout(src, &mut hd, tar_opts, whiteout_dirs)? {
            return Ok(());
        }
        match hd.typeflag {
            b'0' | 0 | b'7' | b'S' => self.file(src, hd, &rel),
            b'1' => self.hard_link(src, &hd),
            _ => self.node(src, hd, &rel),
        }
    }

    /// Applies `hd` if it is an aufs whiteout (`.wh.NAME`: a character
    /// device 0:0 named NAME; `.wh..wh..opq`: its directory's opaque
    /// xattr; other `.wh..wh.*`: left out); `true` if it was one.
    fn aufs_whiteout(
        &mut self,
        src: &mut Src,
        hd: &mut Header,
        tar_opts: &TarOptions,
        whiteout_dirs: &mut Vec<InodeId>,
    ) -> Result<bool> {
        let member = &hd.member;
        let comps = &mut hd.comps;
        if comps.iter().any(|c| c.starts_with(b".wh..wh.")) {
            if comps.last().is_some_and(|c| c == b".wh..wh..opq") {
                // The directory hides what lower layers hold.
                let parents = comps.split_last().map_or(&[][..], |(_, p)| p);
                let dir = self.dir(parents).map_err(|e| src.err(member, e))?;
                if !tar_opts.ovlfs_strip {
                    let x = &mut self.tree.inode_mut(dir).xattrs;
                    x.retain(|(n, _)| n != OVL_OPAQUE);
                    x.push((OVL_OPAQUE.to_vec(), b"y".to_vec()));
                    x.sort();
                }
            }
            src.skip_data(hd.size, member)?;
            return Ok(true);
        }
        let Some(last) = comps.last_mut() else {
            return Ok(false);
        };
        let Some(hidden) = last.strip_prefix(b".wh.") else {
            return Ok(false);
        };
        if hidden.is_empty() {
            return Err(src.err(member, "whiteout without a name"));
        }
        *last = hidden.to_vec();
        src.skip_data(hd.size, member)?;
        if tar_opts.ovlfs_strip {
            return Ok(true);
        }
        let Some((name, parents)) = comps.split_last() else {
            return Ok(true);
        };
        // Below a file this archive put in a directory's place (umoci
        // writes such whiteouts), it hides nothing.
        if self.under_non_dir(parents) {
            return Ok(true);
        }
        let dir = self.dir(parents).map_err(|e| src.err(member, e))?;
        let rel = comps.join(&b'/');
        let id = self.new_inode(Kind::CharDevice { major: 0, minor: 0 }, &rel, dir);
        self.link(dir, name, id);
        // Mode 0, as overlayfs and mkfs.erofs make whiteouts.
        set_meta(self.tree.inode_mut(id), 0, hd);
        whiteout_dirs.push(dir);
        Ok(true)
    }

    /// A hard link: another name for an earlier entry.
    fn hard_link(&mut self, src: &mut Src, hd: &Header) -> Result<()> {
        let member = &hd.member;
        src.skip_data(hd.size, member)?;
        let target = self.link_target(&hd.link).map_err(|e| src.err(member, e))?;
        if self.tree.inode(target).is_dir() {
            return Err(src.err(member, "hard link to a directory"));
        }
        let Some((name, parents)) = hd.comps.split_last() else {
            return Err(src.err(member, "hard link named like the root"));
        };
        let dir = self.dir(parents).map_err(|e| src.err(member, e))?;
        self.link(dir, name, target);
        Ok(())
    }

    /// A regular file, maybe sparse, its data left in the archive (or
    /// spooled).
    fn file(&mut self, src: &mut Src, hd: Header, rel: &[u8]) -> Result<()> {
        let member = &hd.member;
        let sparse = hd.typeflag == b'S' || hd.pax.sparse_major.is_some();
        let (map, real, stored) = if sparse {
            sparse::map(src, &hd.block, hd.gnu, &hd.pax, hd.size, member)?
        } else {
            (Vec::new(), hd.size, hd.size)
        };
        if src.index {
            let base = src.data_in_place(stored, member)?;
            let (segments, data) = sparse::segments(&map, sparse, real, stored, hd.size, base)
                .map_err(|e| src.err(member, e))?;
            let chunks = index::chunks(&segments, real).map_err(|e| src.err(member, e))?;
            let content = Content::Placed(Arc::new(chunks));
            return self.add_file(src, hd, rel, (real, data, content));
        }
        let (file, base) = src.data(stored, member)?;
        let (segments, data) = sparse::segments(&map, sparse, real, stored, hd.size, base)
            .map_err(|e| src.err(member, e))?;
        let content = Content::Archive {
            archive: file,
            segments: segments.into(),
        };
        self.add_file(src, hd, rel, (real, data, content))
    }

    /// Links a regular file of `size` bytes, its holes `data` and its
    /// `content`, into the tree.
    fn add_file(
        &mut self,
        src: &Src,
        mut hd: Header,
        rel: &[u8],
        (real, data, content): (u64, Option<Vec<(u64, u64)>>, Content),
    ) -> Result<()> {
        let member = &hd.member;
        let Some((name, parents)) = hd.comps.split_last() else {
            return Err(src.err(member, "a file named like the root"));
        };
        let dir = self.dir(parents).map_err(|e| src.err(member, e))?;
        let id = self.new_inode(Kind::File { size: real, data }, rel, dir);
        self.tree.inode_mut(id).content = content;
        self.link(dir, name, id);
        set_meta(self.tree.inode_mut(id), hd.mode, &mut hd);
        Ok(())
    }

    /// Any other kind: a symlink, device, directory or fifo. A directory
    /// that appears again keeps its children.
    fn node(&mut self, src: &mut Src, mut hd: Header, rel: &[u8]) -> Result<()> {
        let member = &hd.member;
        let kind = match hd.typeflag {
            // Its target's limits are checked with every source's (plan).
            b'2' => Kind::Symlink {
                target: hd.link.clone(),
            },
            b'3' | b'4' => {
                let (major, minor) = hd.device().map_err(|e| src.err(member, e))?;
                if hd.typeflag == b'3' {
                    Kind::CharDevice { major, minor }
                } else {
                    Kind::BlockDevice { major, minor }
                }
            }
            b'5' | b'D' => Kind::Dir {
                entries: Vec::new(),
            },
            b'6' => Kind::Fifo,
            other => {
                return Err(src.err(
                    member,
                    format!("unsupported entry type {:?}", other as char),
                ))
            }
        };
        let is_dir = matches!(kind, Kind::Dir { .. });
        // Only regular files carry data; skip anything else's.
        src.skip_data(hd.size, member)?;
        let Some((name, parents)) = hd.comps.split_last() else {
            if is_dir {
                let r = self.tree.root;
                set_meta(self.tree.inode_mut(r), hd.mode, &mut hd);
                self.implicit.remove(&r);
                return Ok(());
            }
            return Err(src.err(member, "only a directory can be the root"));
        };
        let dir = self.dir(parents).map_err(|e| src.err(member, e))?;
        let existing = self.children.get(&dir).and_then(|m| m.get(name)).copied();
        let id = match existing {
            Some(id) if is_dir && self.tree.inode(id).is_dir() => id,
            _ => {
                let id = self.new_inode(kind, rel, dir);
                self.link(dir, name, id);
                id
            }
        };
        set_meta(self.tree.inode_mut(id), hd.mode, &mut hd);
        self.implicit.remove(&id);
        Ok(())
    }
}

/// Gives `ino` the metadata of `hd` (its xattrs taken), with the
/// permission bits of `mode`.
fn set_meta(ino: &mut Inode, mode: i64, hd: &mut Header) {
    ino.perm = (mode & 0o7777) as u16;
    ino.uid = hd.uid;
    ino.gid = hd.gid;
    ino.mtime = hd.mtime.0;
    ino.mtime_nsec = hd.mtime.1.min(999_999_999);
    let mut xattrs = std::mem::take(&mut hd.pax.xattrs);
    xattrs.sort();
    ino.xattrs = xattrs;
}
