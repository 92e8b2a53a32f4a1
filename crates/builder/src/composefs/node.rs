//! The input tree as composefs models it: an arena of nodes, each
//! directory's children kept sorted by name bytes, hard links as nodes
//! pointing at their target, and xattrs with mkcomposefs's size budget.

/// File type bits of a mode.
pub(crate) const S_IFMT: u32 = 0o170_000;
pub(crate) const S_IFDIR: u32 = 0o040_000;
pub(crate) const S_IFREG: u32 = 0o100_000;
pub(crate) const S_IFLNK: u32 = 0o120_000;
pub(crate) const S_IFCHR: u32 = 0o020_000;
pub(crate) const S_IFBLK: u32 = 0o060_000;
pub(crate) const S_IFIFO: u32 = 0o010_000;
pub(crate) const S_IFSOCK: u32 = 0o140_000;

/// Longest name of a directory entry.
pub(crate) const NAME_MAX: usize = 255;
/// Longest xattr name.
const XATTR_NAME_MAX: usize = 255;
/// The budget of one inode's xattrs (name, value and a worst-case
/// overhead per entry), as mkcomposefs counts it for outside input.
const XATTR_BUDGET: usize = (u16::MAX / 2) as usize;
/// Worst-case bytes an entry costs beyond its name and value.
const XATTR_ENTRY_OVERHEAD: usize = 2 * 4 - 1;
/// The inline xattr body header.
const XATTR_HEADER: usize = 12;

/// Whether `mode` names one of the seven file types.
pub(crate) fn valid_type(mode: u32) -> bool {
    matches!(
        mode & S_IFMT,
        S_IFREG | S_IFDIR | S_IFLNK | S_IFBLK | S_IFCHR | S_IFSOCK | S_IFIFO
    )
}

/// The short-prefix index of an xattr name and the rest of it (index 0
/// and the whole name when no prefix matches).
pub(crate) fn split_prefix(key: &[u8]) -> (u8, &[u8]) {
    const PREFIXES: [(&[u8], u8); 5] = [
        (b"user.", 1),
        (b"system.posix_acl_access", 2),
        (b"system.posix_acl_default", 3),
        (b"trusted.", 4),
        (b"security.", 6),
    ];
    for (p, idx) in PREFIXES {
        if let Some(rest) = key.strip_prefix(p) {
            return (idx, rest);
        }
    }
    (0, key)
}

/// One extended attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Xattr {
    pub(crate) key: Vec<u8>,
    pub(crate) value: Vec<u8>,
}

/// One file, directory or hard link of the tree.
#[derive(Clone, Debug, Default)]
pub(crate) struct Node {
    pub(crate) name: Vec<u8>,
    pub(crate) parent: usize,
    pub(crate) mode: u32,
    pub(crate) nlink: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) rdev: u32,
    pub(crate) size: u64,
    pub(crate) mtime_sec: i64,
    pub(crate) mtime_nsec: u32,
    /// The backing file's path in the object store, or a symlink's target.
    pub(crate) payload: Option<Vec<u8>>,
    /// Inline file content.
    pub(crate) content: Option<Vec<u8>>,
    /// The fs-verity (sha256) digest of the content.
    pub(crate) digest: Option<[u8; 32]>,
    pub(crate) xattrs: Vec<Xattr>,
    xattr_budget: usize,
    /// Child indexes, sorted by name bytes.
    pub(crate) children: Vec<usize>,
    /// For a hard link: the node it names.
    pub(crate) link_to: Option<usize>,
}

impl Node {
    /// A node of the given mode with nlink 1 and everything else zero.
    pub(crate) fn with_mode(mode: u32) -> Node {
        Node {
            mode,
            nlink: 1,
            ..Node::default()
        }
    }

    pub(crate) fn file_type(&self) -> u32 {
        self.mode & S_IFMT
    }

    pub(crate) fn is_dir(&self) -> bool {
        self.file_type() == S_IFDIR
    }

    /// Sets (or replaces) an xattr within mkcomposefs's per-inode budget.
    pub(crate) fn set_xattr(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        if key.is_empty() || key.len() > XATTR_NAME_MAX {
            return Err(format!("xattr name of {} bytes", key.len()));
        }
        if value.len() > usize::from(u16::MAX) {
            return Err(format!("xattr value of {} bytes", value.len()));
        }
        self.unset_xattr(key);
        let mut cost = XATTR_ENTRY_OVERHEAD
            .saturating_add(key.len())
            .saturating_add(value.len());
        if self.xattrs.is_empty() {
            cost = cost.saturating_add(XATTR_HEADER);
        }
        if self.xattr_budget.saturating_add(cost) > XATTR_BUDGET {
            return Err("too many xattrs (more than 32767 bytes)".into());
        }
        self.xattrs.push(Xattr {
            key: key.to_vec(),
            value: value.to_vec(),
        });
        self.xattr_budget = self.xattr_budget.saturating_add(cost);
        Ok(())
    }

    /// Removes an xattr, giving its cost back to the budget.
    fn unset_xattr(&mut self, key: &[u8]) {
        let Some(i) = self.xattrs.iter().position(|x| x.key == key) else {
            return;
        };
        let old = self.xattrs.swap_remove(i);
        if self.xattrs.is_empty() {
            self.xattr_budget = 0;
        } else {
            let cost = XATTR_ENTRY_OVERHEAD
                .saturating_add(old.key.len())
                .saturating_add(old.value.len());
            self.xattr_budget = self.xattr_budget.saturating_sub(cost);
        }
    }

    /// The value of an xattr.
    pub(crate) fn xattr(&self, key: &[u8]) -> Option<&[u8]> {
        self.xattrs
            .iter()
            .find(|x| x.key == key)
            .map(|x| x.value.as_slice())
    }
}

/// Why a child could not be added.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AddError {
    NotADirectory,
    BadName,
    NameTooLong,
    Exists,
}

impl std::fmt::Display for AddError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AddError::NotADirectory => "parent is not a directory",
            AddError::BadName => "empty name",
            AddError::NameTooLong => "name longer than 255 bytes",
            AddError::Exists => "already exists",
        })
    }
}

/// The tree: node 0 is the root.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tree {
    pub(crate) nodes: Vec<Node>,
}

impl Tree {
    /// A tree holding only `root`.
    pub(crate) fn new(root: Node) -> Tree {
        Tree { nodes: vec![root] }
    }

    pub(crate) fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    pub(crate) fn node_mut(&mut self, i: usize) -> &mut Node {
        &mut self.nodes[i]
    }

    /// The child of `dir` named `name`, and where it is (or would be).
    fn search(&self, dir: usize, name: &[u8]) -> Result<usize, usize> {
        let nodes = &self.nodes;
        nodes[dir]
            .children
            .binary_search_by(|&c| nodes[c].name.as_slice().cmp(name))
    }

    pub(crate) fn lookup(&self, dir: usize, name: &[u8]) -> Option<usize> {
        self.search(dir, name)
            .ok()
            .map(|pos| self.nodes[dir].children[pos])
    }

    /// Adds `node` under `dir` as `name`; its index.
    pub(crate) fn add_child(
        &mut self,
        dir: usize,
        name: &[u8],
        mut node: Node,
    ) -> Result<usize, AddError> {
        if !self.nodes[dir].is_dir() {
            return Err(AddError::NotADirectory);
        }
        if name.is_empty() {
            return Err(AddError::BadName);
        }
        if name.len() > NAME_MAX {
            return Err(AddError::NameTooLong);
        }
        let pos = match self.search(dir, name) {
            Ok(_) => return Err(AddError::Exists),
            Err(pos) => pos,
        };
        let idx = self.nodes.len();
        node.name = name.to_vec();
        node.parent = dir;
        self.nodes.push(node);
        self.nodes[dir].children.insert(pos, idx);
        Ok(idx)
    }

    /// Appends children already sorted by name (a directory scan's).
    pub(crate) fn push_sorted_children(&mut self, dir: usize, kids: Vec<Node>) {
        for mut node in kids {
            let idx = self.nodes.len();
            node.parent = dir;
            self.nodes.push(node);
            self.nodes[dir].children.push(idx);
        }
    }

    /// The node a hard link finally names (`i` itself if not a link);
    /// `None` on a cycle.
    pub(crate) fn follow(&self, i: usize) -> Option<usize> {
        let mut cur = i;
        for _ in 0..=self.nodes.len() {
            match self.nodes[cur].link_to {
                None => return Some(cur),
                Some(next) if next == i => return None,
                Some(next) => cur = next,
            }
        }
        None
    }

    /// The path of a node in the image, for messages.
    pub(crate) fn path_of(&self, i: usize) -> String {
        let mut parts = Vec::new();
        let mut cur = i;
        while cur != 0 && parts.len() < self.nodes.len() {
            parts.push(String::from_utf8_lossy(&self.nodes[cur].name).into_owned());
            cur = self.nodes[cur].parent;
        }
        parts.reverse();
        format!("/{}", parts.join("/"))
    }
}
