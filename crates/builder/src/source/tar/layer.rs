//! A tar archive applied as a layer onto the tree of the layers below it
//! (an OCI image layer): its entries replace what had their names, and
//! its whiteouts delete from the layers below: `.wh.NAME` removes NAME,
//! `.wh..wh..opq` hides everything lower layers have in its directory.

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use super::{members, Builder, Src, TarOptions};
use crate::error::Result;
use crate::options::BuildOptions;
use crate::tree::{InodeId, Tree};

const OPAQUE: &[u8] = b".wh..wh..opq";
const PREFIX: &[u8] = b".wh.";

/// What a layer being applied has named itself: whiteouts and opaque
/// markers apply to the layers below only.
#[derive(Default)]
pub(super) struct Layer {
    pub(super) fresh: HashSet<(InodeId, Vec<u8>)>,
}

/// Applies the uncompressed tar stream `r` (named `name` in messages) onto
/// `lower`, or onto an empty root for the first layer. `file`, when
/// given, is the stream itself readable at offsets (file data is then
/// referenced there); otherwise data is spooled to `spool_dir`. The
/// stream is read to its end.
pub fn scan_layer(
    r: Box<dyn Read>,
    file: Option<Arc<File>>,
    name: String,
    lower: Option<Tree>,
    opts: &BuildOptions,
    tar_opts: &TarOptions,
    spool_dir: &Path,
) -> Result<Tree> {
    let src = Src::new(r, file, name.clone(), spool_dir, (false, None))?;
    let mut b = Builder::new(opts, name, lower, tar_opts.root_mtime);
    b.layer = Some(Layer::default());
    members(src, b, tar_opts, false).map(|(t, _)| t)
}

/// Reads the uncompressed tar stream `r` alone, as [`super::scan`] reads
/// an archive (its whiteouts are entries; `tar_opts.aufs` makes them
/// overlayfs ones), with `file` and `spool_dir` as for [`scan_layer`].
/// Also returns the directories the archive has no entry for (the root
/// included), made with mkfs.erofs's made-up metadata.
pub fn scan_stream(
    r: Box<dyn Read>,
    file: Option<Arc<File>>,
    name: String,
    opts: &BuildOptions,
    tar_opts: &TarOptions,
    spool_dir: &Path,
) -> Result<(Tree, Vec<InodeId>)> {
    let src = Src::new(r, file, name.clone(), spool_dir, (false, None))?;
    let b = Builder::new(opts, name, None, tar_opts.root_mtime);
    // The caller checks the blob it read (its digest, its end).
    members(src, b, tar_opts, true)
}

impl Builder<'_> {
    /// The directory at `comps` if it exists.
    fn lookup(&self, comps: &[Vec<u8>]) -> Option<InodeId> {
        let mut cur = self.tree.root;
        for c in comps {
            cur = *self.children.get(&cur)?.get(c)?;
        }
        Some(cur)
    }

    /// Whether a leading part of `comps` is a non-directory of the tree
    /// (a whiteout there hides nothing: the non-directory replaced all
    /// below it).
    pub(super) fn under_non_dir(&self, comps: &[Vec<u8>]) -> bool {
        let mut cur = self.tree.root;
        for c in comps {
            match self.children.get(&cur).and_then(|k| k.get(c)) {
                Some(&id) if self.tree.inode(id).is_dir() => cur = id,
                Some(_) => return true,
                None => return false,
            }
        }
        false
    }

    /// Applies the entry at `comps` if it is a whiteout; `true` if it was.
    pub(super) fn whiteout(&mut self, comps: &[Vec<u8>]) -> std::result::Result<bool, String> {
        let Some((last, parents)) = comps.split_last() else {
            return Ok(false);
        };
        let Some(hidden) = last.strip_prefix(PREFIX) else {
            return Ok(false);
        };
        if last == OPAQUE {
            let dir = self.dir(parents)?;
            let fresh = &self.layer.as_ref().map(|l| &l.fresh);
            if let Some(kids) = self.children.get_mut(&dir) {
                kids.retain(|n, _| fresh.is_some_and(|f| f.contains(&(dir, n.clone()))));
            }
            return Ok(true);
        }
        if hidden.starts_with(PREFIX) {
            // Other `.wh..wh.` names are aufs's own metadata.
            return Ok(true);
        }
        if hidden.is_empty() {
            return Err("whiteout without a name".into());
        }
        if let Some(dir) = self.lookup(parents) {
            let key = (dir, hidden.to_vec());
            let mine = self.layer.as_ref().is_some_and(|l| l.fresh.contains(&key));
            if !mine {
                if let Some(kids) = self.children.get_mut(&dir) {
                    kids.remove(hidden);
                }
            }
        }
        Ok(true)
    }
}
