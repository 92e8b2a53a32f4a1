//! The in-memory tree: an arena of inodes with directory entries pointing
//! at inode ids (so hard links are one inode with several names). File
//! contents stay where they are (a file, an archive) and are read when the
//! image is written (`content`). The relabel stage acts here too: Android's
//! canned fs-config (`fsconfig`) and SELinux file contexts (`selabel`).

pub(crate) mod content;
pub(crate) mod fsconfig;
pub(crate) mod overlay;
pub(crate) mod relabel;
pub(crate) mod selabel;

use std::path::PathBuf;

/// Index of an inode in [`Tree::inodes`].
pub type InodeId = usize;

/// What an inode is, with what its encoding needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Entries sorted by name bytes, without `.` and `..`.
    Dir {
        entries: Vec<(Vec<u8>, InodeId)>,
    },
    /// A regular file; `data` lists its data ranges when it has holes.
    File {
        size: u64,
        data: Option<Vec<(u64, u64)>>,
    },
    Symlink {
        target: Vec<u8>,
    },
    CharDevice {
        major: u32,
        minor: u32,
    },
    BlockDevice {
        major: u32,
        minor: u32,
    },
    Fifo,
    Socket,
}

/// One inode of the tree.
#[derive(Clone, Debug)]
pub struct Inode {
    pub kind: Kind,
    /// Permission bits (with setuid, setgid, sticky); the type comes from `kind`.
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
    pub mtime: i64,
    pub mtime_nsec: u32,
    /// Extended attributes, sorted by name.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Where the inode came from (for reading data and for messages).
    pub source: PathBuf,
    /// Where a regular file's bytes are read from.
    pub content: crate::tree::content::Content,
    /// Its first path relative to the source root (for hints and messages).
    pub rel: Vec<u8>,
    /// Parent directory (directories only; the root is its own parent).
    pub parent: InodeId,
    /// A local regular file's size and times when it was scanned: its
    /// data is read only while they still hold (see
    /// [`crate::tree::content::ContentReader`]).
    pub stamp: Option<crate::tree::content::Stamp>,
}

impl Tree {
    /// The inode `id` of this tree. Ids come from the tree's own arena
    /// (never from input), so one out of range is a builder bug.
    pub(crate) fn inode(&self, id: InodeId) -> &Inode {
        &self.inodes[id]
    }

    /// [`Tree::inode`], to change.
    pub(crate) fn inode_mut(&mut self, id: InodeId) -> &mut Inode {
        &mut self.inodes[id]
    }
}

impl Inode {
    /// An inode of `kind` named `rel` under `parent`, from `source`: no
    /// permission bits, owned by root, mtime 0, no xattrs, its data (if
    /// any) read from the local file `source` until said otherwise.
    pub fn new(kind: Kind, rel: &[u8], parent: InodeId, source: PathBuf) -> Inode {
        Inode {
            kind,
            perm: 0,
            uid: 0,
            gid: 0,
            mtime: 0,
            mtime_nsec: 0,
            xattrs: Vec::new(),
            source,
            content: crate::tree::content::Content::Local,
            rel: rel.to_vec(),
            parent,
            stamp: None,
        }
    }

    /// The full `st_mode`.
    pub fn mode(&self) -> u16 {
        let t: u16 = match self.kind {
            Kind::Dir { .. } => 0o040000,
            Kind::File { .. } => 0o100000,
            Kind::Symlink { .. } => 0o120000,
            Kind::CharDevice { .. } => 0o020000,
            Kind::BlockDevice { .. } => 0o060000,
            Kind::Fifo => 0o010000,
            Kind::Socket => 0o140000,
        };
        t | (self.perm & 0o7777)
    }
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, Kind::Dir { .. })
    }
    /// Bytes of file data (regular files and symlink targets).
    pub fn data_size(&self) -> u64 {
        match &self.kind {
            Kind::File { size, .. } => *size,
            Kind::Symlink { target } => target.len() as u64,
            _ => 0,
        }
    }
}

/// A scanned source tree: what the scanners of [`crate::source`] make and
/// [`crate::build_tree`] writes. Its inodes are the builder's own.
#[derive(Clone, Debug, Default)]
pub struct Tree {
    pub(crate) inodes: Vec<Inode>,
    pub(crate) root: InodeId,
    /// The extra devices chunk indexes of its files name, in device-table
    /// order (a merge of EROFS layers whose data stays on them).
    pub(crate) devices: Vec<ExtraDevice>,
}

/// One slot of the device table (rebuild mode).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExtraDevice {
    /// The tag (a layer's UUID in hex, as mkfs.erofs writes it).
    pub(crate) tag: [u8; 64],
    pub(crate) blocks: u64,
}

impl Tree {
    /// Link counts as the image stores them: the number of names of a
    /// non-directory, and 2 + subdirectories for a directory.
    pub(crate) fn link_counts(&self) -> Vec<u32> {
        let mut n = vec![0u32; self.inodes.len()];
        for ino in &self.inodes {
            if let Kind::Dir { entries } = &ino.kind {
                for (_, child) in entries {
                    if !self.inodes[*child].is_dir() {
                        n[*child] = n[*child].saturating_add(1);
                    }
                }
            }
        }
        for (i, ino) in self.inodes.iter().enumerate() {
            if let Kind::Dir { entries } = &ino.kind {
                let subdirs = entries
                    .iter()
                    .filter(|(_, c)| self.inodes[*c].is_dir())
                    .count();
                n[i] = 2u32.saturating_add(subdirs as u32);
            }
        }
        n
    }

    /// Inodes in breadth-first order from the root, each once (the order
    /// nids are assigned in, so siblings' inodes sit together).
    pub(crate) fn bfs_order(&self) -> Vec<InodeId> {
        let mut seen = vec![false; self.inodes.len()];
        let mut order = Vec::with_capacity(self.inodes.len());
        seen[self.root] = true;
        order.push(self.root);
        let mut i = 0;
        while i < order.len() {
            if let Kind::Dir { entries } = &self.inodes[order[i]].kind {
                for (_, c) in entries {
                    if !seen[*c] {
                        seen[*c] = true;
                        order.push(*c);
                    }
                }
            }
            i += 1;
        }
        order
    }

    /// The tree without inodes no name reaches (what whiteouts of later
    /// layers removed), renumbered in breadth-first order.
    pub(crate) fn prune(self) -> Tree {
        let order = self.bfs_order();
        self.renumbered(&order)
    }

    /// The tree with the inodes `order` lists (root first), renumbered
    /// in that order; the others left out.
    pub(crate) fn renumbered(self, order: &[InodeId]) -> Tree {
        let mut new_id = vec![usize::MAX; self.inodes.len()];
        for (n, &old) in order.iter().enumerate() {
            new_id[old] = n;
        }
        let mut slots: Vec<Option<Inode>> = self.inodes.into_iter().map(Some).collect();
        let mut inodes = Vec::with_capacity(order.len());
        for &old in order {
            let Some(mut ino) = slots[old].take() else {
                continue;
            };
            if let Kind::Dir { entries } = &mut ino.kind {
                for (_, c) in entries.iter_mut() {
                    *c = new_id[*c];
                }
            }
            // A non-directory's first directory may be gone: any reached
            // one stands in (only directories' parents are used).
            ino.parent = new_id
                .get(ino.parent)
                .copied()
                .filter(|&p| p != usize::MAX)
                .unwrap_or(0);
            inodes.push(ino);
        }
        Tree {
            inodes,
            root: 0,
            devices: self.devices,
        }
    }
}

/// Refuses symlink targets Linux cannot give back: empty ones (no system
/// call makes one), ones with a NUL byte (read back cut there) and ones
/// longer than 4095 bytes (the kernel cuts a symlink's target at one page
/// less its terminator).
pub(crate) fn check_symlink_target(t: &[u8]) -> std::result::Result<(), String> {
    match t.len() {
        0 => Err("symlink with an empty target".into()),
        _ if t.contains(&0) => Err("symlink target with a NUL byte".into()),
        n if n > SYMLINK_MAX => Err(format!(
            "symlink target of {n} bytes; Linux reads at most {SYMLINK_MAX}"
        )),
        _ => Ok(()),
    }
}

/// The longest symlink target Linux reads whole.
pub(crate) const SYMLINK_MAX: usize = 4095;
