//! Fragments (`-E fragments`, `-E all-fragments`): file tails and small
//! files spooled on their way to the packed inode, identical ones kept
//! once, ordered so that what one program reads together shares a
//! pcluster (and, within that, alike content), and the packed inode that
//! holds them.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use ferrofs_format::inode::DataLayout;
use rayon::prelude::*;
use xxhash_rust::xxh3::Xxh3;

use crate::data::compress::{is_machine_code, MAGIC_LEN};
use crate::data::similarity::{self, Class, Sketch};
use crate::error::{BuildError, Result};
use crate::options::view::DataOptions;
use crate::plan::{InodePlan, Plan};
use crate::tree::content::{Content, ContentReader, Segment};
use crate::tree::{InodeId, Kind, Tree};
use crate::util::staged::dir_of;

/// File tails and small files on their way to the packed inode: their bytes
/// in an unlinked spool file beside the output, identical ones kept once.
pub(crate) struct Fragments {
    pub(crate) spool: File,
    pub(crate) output: PathBuf,
    pub(crate) len: u64,
    pub(crate) entries: Vec<FragEntry>,
    pub(crate) by_hash: HashMap<(u128, u64), usize>,
}

/// One distinct fragment: the inode it came from first, its bytes' place
/// in the spool, and its sketch when it was made on the way in.
pub(crate) struct FragEntry {
    pub(crate) owner: InodeId,
    pub(crate) at: u64,
    pub(crate) len: u64,
    pub(crate) sketch: Option<Sketch>,
    /// The file it came from holds machine code ([`is_machine_code`]).
    pub(crate) machine_code: bool,
}

/// Largest file [`ReadAhead`] reads.
pub(crate) const READ_AHEAD_MAX: u64 = 1 << 20;

/// A file that goes whole to the packed inode, read on the worker pool
/// ahead of the writer: its bytes, their hash and their sketch. The writer
/// then only appends the bytes to the spool, instead of reading, hashing
/// and (after the data pass) sketching every small file on one thread.
pub(crate) struct ReadAhead {
    bytes: Vec<u8>,
    hash: u128,
    sketch: Sketch,
    machine_code: bool,
}

impl ReadAhead {
    /// Reads the file `r` opens whole (`len` bytes), checking that it did
    /// not change meanwhile.
    pub(crate) fn read(r: &ContentReader, len: u64) -> Result<Self> {
        let mut bytes = vec![0u8; len as usize];
        r.read_exact_at(&mut bytes, 0)?;
        r.unchanged()?;
        Ok(Self {
            hash: xxhash_rust::xxh3::xxh3_128(&bytes),
            sketch: Sketch::of(&bytes),
            machine_code: is_machine_code(&bytes[..bytes.len().min(MAGIC_LEN)]),
            bytes,
        })
    }
}

impl Fragments {
    pub(crate) fn new(output: &Path) -> Result<Self> {
        let spool = crate::util::spool::unlinked_file(dir_of(output), "fragments")?;
        Ok(Self {
            spool,
            output: output.to_path_buf(),
            len: 0,
            entries: Vec::new(),
            by_hash: HashMap::new(),
        })
    }

    pub(crate) fn io(&self) -> impl FnOnce(std::io::Error) -> BuildError + '_ {
        BuildError::output(&self.output)
    }

    /// Adds bytes `[from, to)` of a file; returns the fragment's index
    /// (an existing one when the same bytes were added before).
    pub(crate) fn add(
        &mut self,
        owner: InodeId,
        r: &ContentReader,
        from: u64,
        to: u64,
    ) -> Result<usize> {
        let len = to - from;
        let mut buf = vec![0u8; len.min(1 << 20) as usize];
        let mut h = Xxh3::new();
        let mut off = from;
        while off < to {
            let n = (to - off).min(buf.len() as u64) as usize;
            r.read_exact_at(&mut buf[..n], off)?;
            h.update(&buf[..n]);
            self.spool
                .write_all_at(&buf[..n], self.len + (off - from))
                .map_err(self.io())?;
            off += n as u64;
        }
        let mut head = [0u8; MAGIC_LEN];
        let head = &mut head[..to.min(MAGIC_LEN as u64) as usize];
        r.read_exact_at(head, 0)?;
        let machine_code = is_machine_code(head);
        self.keep(owner, (h.digest128(), len), None, machine_code)
    }

    /// Adds bytes made by the build (a directory's blocks); returns the
    /// fragment's index.
    pub(crate) fn add_bytes(&mut self, owner: InodeId, bytes: &[u8]) -> Result<usize> {
        self.spool
            .write_all_at(bytes, self.len)
            .map_err(self.io())?;
        let key = (xxhash_rust::xxh3::xxh3_128(bytes), bytes.len() as u64);
        self.keep(owner, key, None, false)
    }

    /// Adds a whole file [`ReadAhead`] read; returns the fragment's index.
    pub(crate) fn add_read(&mut self, owner: InodeId, r: ReadAhead) -> Result<usize> {
        self.spool
            .write_all_at(&r.bytes, self.len)
            .map_err(self.io())?;
        let key = (r.hash, r.bytes.len() as u64);
        self.keep(owner, key, Some(r.sketch), r.machine_code)
    }

    /// The bytes just written at the spool's end, of hash and length
    /// `key`: an earlier fragment's index when it holds the same bytes
    /// (they are then overwritten by what comes next), else a new entry's.
    fn keep(
        &mut self,
        owner: InodeId,
        key: (u128, u64),
        sketch: Option<Sketch>,
        machine_code: bool,
    ) -> Result<usize> {
        let len = key.1;
        if let Some(&i) = self.by_hash.get(&key) {
            if self.same(i, self.len, len)? {
                return Ok(i);
            }
        }
        let i = self.entries.len();
        self.entries.push(FragEntry {
            owner,
            at: self.len,
            len,
            sketch,
            machine_code,
        });
        self.by_hash.entry(key).or_insert(i);
        self.len += len;
        Ok(i)
    }

    /// Whether entry `i` holds the same bytes as the spool at `at`.
    pub(crate) fn same(&self, i: usize, at: u64, len: u64) -> Result<bool> {
        let e = &self.entries[i];
        let mut a = vec![0u8; len.min(1 << 20) as usize];
        let mut b = a.clone();
        let mut done = 0;
        while done < len {
            let n = (len - done).min(a.len() as u64) as usize;
            self.spool
                .read_exact_at(&mut a[..n], e.at + done)
                .map_err(self.io())?;
            self.spool
                .read_exact_at(&mut b[..n], at + done)
                .map_err(self.io())?;
            if a[..n] != b[..n] {
                return Ok(false);
            }
            done += n as u64;
        }
        Ok(true)
    }
}

/// The order fragments take in the packed inode. What a profiled start
/// reads comes first, in access order; then directories (`--zD`) in the
/// order a walk of the tree reads them; then the files' fragments, grouped
/// by locality (see [`locality_order`]). Returns the order and each
/// fragment's offset.
pub(crate) fn fragment_offsets(
    tree: &Tree,
    entries: &[FragEntry],
    profile: Option<&crate::options::profile::Profile>,
    sketches: &[Sketch],
) -> (Vec<usize>, Vec<u64>) {
    let rank = |id: InodeId| {
        profile
            .and_then(|p| p.get(&tree.inodes[id].rel))
            .map_or(usize::MAX, |f| f.rank)
    };
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by(|&a, &b| {
        let (ia, ib) = (entries[a].owner, entries[b].owner);
        rank(ia)
            .cmp(&rank(ib))
            .then_with(|| tree.inodes[ia].rel.cmp(&tree.inodes[ib].rel))
            .then(a.cmp(&b))
    });
    // The profiled fragments keep their access order.
    let hot = order
        .iter()
        .take_while(|&&i| rank(entries[i].owner) != usize::MAX)
        .count();
    // `--zD`'s directories next, in the order a walk of the tree reads
    // them (depth first, names in order): listing the tree then decodes
    // the packed inode's first pclusters only, not every one a directory
    // happens to sit in (about 0.02-0.06 % more bytes).
    let (mut dirs, files): (Vec<usize>, Vec<usize>) = order[hot..]
        .iter()
        .partition(|&&i| tree.inodes[entries[i].owner].is_dir());
    let components = |i: usize| tree.inodes[entries[i].owner].rel.split(|&c| c == b'/');
    dirs.sort_by(|&a, &b| components(a).cmp(components(b)));
    let rest = locality_order(tree, entries, &files, sketches);
    order.truncate(hot);
    order.extend(dirs);
    order.extend(rest);
    let mut offsets = vec![0u64; entries.len()];
    let mut pos = 0;
    for &i in &order {
        offsets[i] = pos;
        pos += entries[i].len;
    }
    (order, offsets)
}

/// A file name borne by at least this many fragments' files may mark a
/// family of variants (see [`locality_order`]).
const FAMILY_MIN: usize = 8;

/// Orders the fragments of files so that what one program reads together
/// shares pclusters.
///
/// A start reads the files of a few packages or programs (a package's
/// modules and their compiled forms, a program's libraries, its
/// configuration directory), and the kernel reads and decodes a whole
/// pcluster of the packed inode to serve any byte of it. So each
/// directory's fragments stay side by side, directories in depth-first
/// order (names in order): a package's subdirectories follow it, as a
/// depth-first walk and mksquashfs lay files out. Inside a directory, the
/// fragments of whole files come first and the tails of larger files (read
/// with the rest of their file, not with their neighbours) after them,
/// each run ordered by class (text, ELF, other binary), file name extension
/// (not for ELF objects: `libfoo.so.1.2` says nothing) and name, in which
/// [`similarity::chain`] lets a fragment follow the one its content is
/// most like: content similarity where it costs no locality.
///
/// Parallel directories are the exception: a directory at least half of
/// whose files bear names that many directories bear ([`FAMILY_MIN`]) is
/// one of a set of variants (the message catalogues of one language, one
/// package's documentation), of which a program reads one file (its own
/// catalogue in its own language). Such files go together by name, after
/// the directories, where the alike members of a family compress well
/// (translations of one catalogue share their source strings) and no
/// start loses. A recurring name in a directory of its own files
/// (`doc.go`, `__init__.py` beside a package's modules) stays with them:
/// a program that reads the directory reads it too.
fn locality_order(
    tree: &Tree,
    entries: &[FragEntry],
    files: &[usize],
    sketches: &[Sketch],
) -> Vec<usize> {
    // Each inode's directory: the depth-first position of the first
    // directory that names it (hard links go with their first name).
    let mut group = vec![usize::MAX; tree.inodes.len()];
    let mut stack = vec![tree.root];
    let mut pos = 0usize;
    while let Some(d) = stack.pop() {
        if let Kind::Dir { entries } = &tree.inodes[d].kind {
            for (_, c) in entries {
                if group[*c] == usize::MAX {
                    group[*c] = pos;
                    // (A directory is named once, and only by its parent.)
                    if tree.inodes[*c].is_dir() && *c != d {
                        stack.push(*c);
                    }
                }
            }
            // Popped last first: subdirectories in name order.
            let first_child = stack.len()
                - entries
                    .iter()
                    .filter(|(_, c)| tree.inodes[*c].is_dir() && group[*c] == pos && *c != d)
                    .count();
            stack[first_child..].reverse();
        }
        pos += 1;
    }
    let class = |i: usize| sketches.get(i).map_or(Class::Binary, |s| s.class);
    let name = |i: usize| -> &[u8] {
        let rel = &tree.inodes[entries[i].owner].rel;
        rel.rsplit(|&c| c == b'/').next().unwrap_or(rel)
    };
    let ext = |i: usize| -> &[u8] {
        let n = name(i);
        match n.iter().rposition(|&c| c == b'.') {
            Some(p) if p > 0 && class(i) != Class::Elf => &n[p + 1..],
            _ => b"",
        }
    };
    let tail = |i: usize| tree.inodes[entries[i].owner].data_size() > entries[i].len;
    let mut names: HashMap<&[u8], usize> = HashMap::new();
    for &i in files {
        *names.entry(name(i)).or_default() += 1;
    }
    let recurs = |i: usize| names.get(name(i)).is_some_and(|&n| n >= FAMILY_MIN);
    // Per directory: its fragments, and those whose names recur.
    let mut per_dir: HashMap<usize, (usize, usize)> = HashMap::new();
    for &i in files {
        let e = per_dir.entry(group[entries[i].owner]).or_default();
        e.0 += 1;
        e.1 += usize::from(recurs(i));
    }
    let parallel = |i: usize| {
        per_dir
            .get(&group[entries[i].owner])
            .is_some_and(|&(n, r)| r * 2 >= n)
    };
    let (mut family, mut near): (Vec<usize>, Vec<usize>) =
        files.iter().partition(|&&i| recurs(i) && parallel(i));
    let kind = |a: usize, b: usize| {
        class(a)
            .cmp(&class(b))
            .then_with(|| ext(a).cmp(ext(b)))
            .then_with(|| name(a).cmp(name(b)))
    };
    near.sort_by(|&a, &b| {
        let (ga, gb) = (group[entries[a].owner], group[entries[b].owner]);
        ga.cmp(&gb)
            .then_with(|| tail(a).cmp(&tail(b)))
            .then_with(|| kind(a, b))
            .then(a.cmp(&b))
    });
    family.sort_by(|&a, &b| {
        kind(a, b)
            .then_with(|| {
                tree.inodes[entries[a].owner]
                    .rel
                    .cmp(&tree.inodes[entries[b].owner].rel)
            })
            .then(a.cmp(&b))
    });
    if sketches.len() != entries.len() {
        near.extend(family);
        return near;
    }
    let mut out = Vec::with_capacity(files.len());
    let runs = near
        .chunk_by(|&a, &b| group[entries[a].owner] == group[entries[b].owner] && tail(a) == tail(b))
        .chain(family.chunk_by(|&a, &b| class(a) == class(b) && ext(a) == ext(b)));
    for run in runs {
        if run.len() > 2 {
            out.extend(similarity::chain(run, sketches));
        } else {
            out.extend_from_slice(run);
        }
    }
    out
}

/// Every fragment's sketch: the one made on its way in, or made now (on
/// the current rayon pool) from its bytes read back from the spool a MiB
/// at a time.
pub(crate) fn sketch_all(frags: &Fragments) -> Result<Vec<Sketch>> {
    const PIECE: u64 = 1 << 20;
    frags
        .entries
        .par_iter()
        .map_init(Vec::new, |buf: &mut Vec<u8>, e| -> Result<Sketch> {
            if let Some(s) = &e.sketch {
                return Ok(s.clone());
            }
            let mut sketch = None;
            let mut off = 0;
            while off < e.len || sketch.is_none() {
                // 7 bytes more: the shingles that start in this piece.
                let n = (e.len - off).min(PIECE + 7) as usize;
                buf.resize(n, 0);
                frags
                    .spool
                    .read_exact_at(buf, e.at + off)
                    .map_err(frags.io())?;
                sketch.get_or_insert_with(|| Sketch::start(buf)).add(buf);
                off += PIECE;
            }
            Ok(sketch.unwrap_or_else(|| Sketch::start(&[])))
        })
        .collect()
}

/// The packed inode [`add_packed_inode`] added.
pub(crate) struct PackedInode {
    pub(crate) id: InodeId,
    /// Each fragment's offset in it.
    pub(crate) offsets: Vec<u64>,
    /// Its byte ranges that hold machine code (the fragments of files that
    /// do), touching ones merged: what the encoder is told of its segments.
    pub(crate) machine_code: Vec<(u64, u64)>,
}

/// The ranges (start, end) of the fragments in `order` that come from
/// machine code, at their `offsets`, touching ones merged.
fn machine_code_ranges(order: &[usize], entries: &[FragEntry], offsets: &[u64]) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for &i in order.iter().filter(|&&i| entries[i].machine_code) {
        let (a, b) = (offsets[i], offsets[i] + entries[i].len);
        match ranges.last_mut() {
            Some(last) if last.1 == a => last.1 = b,
            _ => ranges.push((a, b)),
        }
    }
    ranges
}

/// Adds the packed inode to the tree and the plan: a regular file no
/// directory names, whose bytes are the long xattr prefix table (unless
/// `-E plain-xattr-prefixes` keeps it on the device: every kernel finds it
/// here when there is a packed inode) and then the fragments in their
/// order.
pub(crate) fn add_packed_inode(
    tree: &mut Tree,
    plan: &mut Plan,
    frags: Fragments,
    opts: &DataOptions<'_>,
) -> Result<PackedInode> {
    let bs = opts.block_size();
    let sketches = sketch_all(&frags)?;
    let (order, mut offsets) = fragment_offsets(tree, &frags.entries, opts.profile, &sketches);
    // (With a metabox, the table belongs in the metabox's data.)
    let table = if opts.plain_xattr_prefixes || opts.metabox.is_some() {
        Vec::new()
    } else {
        plan.xattrs.prefix_table()
    };
    let head = table.len() as u64;
    let mut segments = Vec::with_capacity(order.len() + 1);
    if head > 0 {
        frags
            .spool
            .write_all_at(&table, frags.len)
            .map_err(frags.io())?;
        segments.push(Segment {
            logical: 0,
            len: head,
            physical: frags.len,
        });
        plan.xattrs.prefixes_in_packed = true;
        for o in &mut offsets {
            *o += head;
        }
    }
    segments.extend(order.iter().map(|&i| Segment {
        logical: offsets[i],
        len: frags.entries[i].len,
        physical: frags.entries[i].at,
    }));
    let size = frags.len + head;
    let pcl = opts
        .compress
        .as_ref()
        .map_or(bs, |c| c.packed_pcluster.unwrap_or(c.pcluster_bytes));
    let id = add_internal_file(
        tree,
        plan,
        InternalFile {
            spool: frags.spool,
            segments,
            size,
            source: frags.output.clone(),
            compress: Some((pcl, 0)),
        },
        bs,
    );
    let machine_code = machine_code_ranges(&order, &frags.entries, &offsets);
    Ok(PackedInode {
        id,
        offsets,
        machine_code,
    })
}

/// A regular file the build makes itself (the packed inode, the metabox):
/// its bytes in a spool file, how it may be compressed.
pub(crate) struct InternalFile {
    pub(crate) spool: File,
    pub(crate) segments: Vec<Segment>,
    pub(crate) size: u64,
    /// For messages: the image it is built for.
    pub(crate) source: PathBuf,
    pub(crate) compress: Option<(u64, usize)>,
}

/// Adds an internal file to the tree and the plan (no directory names it;
/// root-owned 0644 at the image's epoch); returns its id.
pub(crate) fn add_internal_file(
    tree: &mut Tree,
    plan: &mut Plan,
    f: InternalFile,
    bs: u64,
) -> InodeId {
    let id = tree.inodes.len();
    tree.inodes.push(crate::tree::Inode {
        kind: Kind::File {
            size: f.size,
            data: None,
        },
        perm: 0o644,
        uid: 0,
        gid: 0,
        mtime: plan.epoch,
        mtime_nsec: plan.fixed_nsec,
        xattrs: Vec::new(),
        source: f.source,
        content: Content::Archive {
            archive: std::sync::Arc::new(f.spool),
            segments: f.segments.into(),
        },
        rel: Vec::new(),
        parent: tree.root,
        stamp: None,
    });
    plan.xattrs.bodies.push(Vec::new());
    plan.inodes.push(InodePlan {
        extended: f.size > u64::from(u32::MAX),
        layout: DataLayout::FlatPlain,
        mode: 0o100644,
        uid: 0,
        gid: 0,
        nlink: 1,
        size: f.size,
        mtime: plan.epoch,
        mtime_nsec: plan.fixed_nsec,
        rdev: None,
        tail: 0,
        blocks: f.size.div_ceil(bs),
        chunks: None,
        dir_blocks: Vec::new(),
        compress: f.compress,
        z: None,
        dot_omitted: false,
        all_hole: false,
        stored_at: None,
    });
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::Inode;
    use ferrofs_testkit::corpus::{mixed_bytes, text_bytes};

    fn file(dir: &Path, name: &str, bytes: &[u8]) -> Inode {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let kind = Kind::File {
            size: bytes.len() as u64,
            data: None,
        };
        Inode::new(kind, name.as_bytes(), 0, path)
    }

    /// A file read ahead on the pool joins the fragments as one the writer
    /// reads itself would: same bytes at the same place, identical bytes
    /// kept once whichever way either came, and the sketch made on the way
    /// in is the one `sketch_all` makes from the spool.
    #[test]
    fn a_file_read_ahead_is_kept_as_one_read_by_the_writer() {
        let dir = ferrofs_testkit::tmp::TempDir::new("read-ahead").unwrap();
        let (a, b) = (text_bytes(70_000, 3), mixed_bytes(50_000, 4));
        let inodes = [
            file(dir.path(), "a", &a),
            file(dir.path(), "a-again", &a),
            file(dir.path(), "b", &b),
            file(dir.path(), "b-again", &b),
        ];
        let mut frags = Fragments::new(&dir.path().join("out.img")).unwrap();
        let read = |k: usize| {
            let r = ContentReader::open(&inodes[k]).unwrap();
            ReadAhead::read(&r, inodes[k].data_size()).unwrap()
        };
        let by_writer = |frags: &mut Fragments, k: usize| {
            let r = ContentReader::open(&inodes[k]).unwrap();
            frags.add(k, &r, 0, inodes[k].data_size()).unwrap()
        };
        let fa = frags.add_read(0, read(0)).unwrap();
        assert_eq!(by_writer(&mut frags, 1), fa);
        let fb = by_writer(&mut frags, 2);
        assert_eq!(frags.add_read(3, read(3)).unwrap(), fb);
        assert_eq!((fa, fb, frags.entries.len()), (0, 1, 2));
        assert_eq!(frags.len, (a.len() + b.len()) as u64);
        let mut spool = vec![0u8; frags.len as usize];
        frags.spool.read_exact_at(&mut spool, 0).unwrap();
        assert!(spool[..a.len()] == a[..] && spool[a.len()..] == b[..]);
        assert!(frags.entries[0].sketch.is_some() && frags.entries[1].sketch.is_none());
        let made = sketch_all(&frags).unwrap();
        let fresh: Vec<Sketch> = [&a, &b].iter().map(|x| Sketch::of(x)).collect();
        assert_eq!(format!("{made:?}"), format!("{fresh:?}"));
    }

    /// A tree of `files` (path, file size, fragment bytes; parents made as
    /// needed, every directory's entries in name order) and its fragments,
    /// one per file, in the order given.
    fn tree_of<S: AsRef<str>>(files: &[(S, u64, Vec<u8>)]) -> (Tree, Vec<FragEntry>, Vec<Sketch>) {
        let mut tree = Tree::default();
        let dir = || Kind::Dir {
            entries: Vec::new(),
        };
        tree.inodes.push(Inode::new(dir(), b"", 0, PathBuf::new()));
        let mut by_path: HashMap<String, InodeId> = HashMap::new();
        let mut entries = Vec::new();
        let mut sketches = Vec::new();
        for (path, size, bytes) in files {
            let mut parent = 0;
            let parts: Vec<&str> = path.as_ref().split('/').collect();
            for (k, part) in parts.iter().enumerate() {
                let rel = parts[..=k].join("/");
                let last = k + 1 == parts.len();
                let id = *by_path.entry(rel.clone()).or_insert_with(|| {
                    let kind = match last {
                        true => Kind::File {
                            size: *size,
                            data: None,
                        },
                        false => dir(),
                    };
                    tree.inodes
                        .push(Inode::new(kind, rel.as_bytes(), parent, PathBuf::new()));
                    let id = tree.inodes.len() - 1;
                    if let Kind::Dir { entries } = &mut tree.inodes[parent].kind {
                        entries.push((part.as_bytes().to_vec(), id));
                        entries.sort();
                    }
                    id
                });
                parent = id;
            }
            entries.push(FragEntry {
                owner: parent,
                at: 0,
                len: bytes.len() as u64,
                sketch: None,
                machine_code: false,
            });
            sketches.push(Sketch::of(bytes));
        }
        (tree, entries, sketches)
    }

    fn paths(tree: &Tree, entries: &[FragEntry], order: &[usize]) -> Vec<String> {
        order
            .iter()
            .map(|&i| String::from_utf8_lossy(&tree.inodes[entries[i].owner].rel).into_owned())
            .collect()
    }

    /// Each directory's fragments form one run, directories depth first
    /// (a package's subdirectory right after it), whole files before the
    /// tails of larger files: even where the files of two directories are
    /// pairwise alike, which the similarity chain alone would interleave.
    #[test]
    fn a_directorys_fragments_stay_together_depth_first() {
        let t = |seed| text_bytes(3000, seed);
        let files = [
            ("b/one.txt", 3000, t(1)),
            ("a/one.txt", 3000, t(1)),
            ("b/two.txt", 3000, t(2)),
            ("a/big.txt", 90_000, t(3)),
            ("a/two.txt", 3000, t(2)),
            ("a/sub/x.txt", 3000, t(4)),
            ("b/big.txt", 90_000, t(3)),
            ("a2/y.txt", 3000, t(5)),
        ];
        let (tree, entries, sketches) = tree_of(&files);
        let (order, offsets) = fragment_offsets(&tree, &entries, None, &sketches);
        let got = paths(&tree, &entries, &order);
        let dirs: Vec<&str> = got.iter().map(|p| p.rsplit_once('/').unwrap().0).collect();
        assert_eq!(
            dirs,
            ["a", "a", "a", "a/sub", "a2", "b", "b", "b"],
            "{got:?}"
        );
        // The tails last in their directory.
        assert_eq!(
            (got[2].as_str(), got[7].as_str()),
            ("a/big.txt", "b/big.txt")
        );
        // Offsets follow the order, without gaps.
        let mut at = 0;
        for &i in &order {
            assert_eq!(offsets[i], at);
            at += entries[i].len;
        }
    }

    /// A name that many directories bear, in directories mostly of such
    /// names (a message catalogue in every language, each package's
    /// copyright), makes a family: its members go together after the
    /// directories, by path, and every other file stays with its
    /// directory; so does a recurring name among a directory's own files.
    #[test]
    fn a_name_many_directories_bear_is_kept_as_a_family() {
        // A 2000-byte text file at `path`, its content chosen by `seed`.
        let small = |path: String, seed: u64| (path, 2000u64, text_bytes(2000, seed));
        let mut files = Vec::new();
        let langs: Vec<String> = (0..FAMILY_MIN).map(|k| format!("l{k}")).collect();
        for (k, l) in langs.iter().enumerate() {
            files.push(small(format!("{l}/app.mo"), 7));
            files.push(small(format!("{l}/own{k}.mo"), 100 + k as u64));
        }
        let (tree, entries, sketches) = tree_of(&files);
        let (order, _) = fragment_offsets(&tree, &entries, None, &sketches);
        let got = paths(&tree, &entries, &order);
        let own: Vec<String> = langs
            .iter()
            .enumerate()
            .map(|(k, l)| format!("{l}/own{k}.mo"))
            .collect();
        let family: Vec<String> = langs.iter().map(|l| format!("{l}/app.mo")).collect();
        assert_eq!(got[..own.len()], own[..], "{got:?}");
        let mut tail = got[own.len()..].to_vec();
        tail.sort();
        assert_eq!(tail, family);
        // A recurring name in directories mostly of their own files
        // (`doc.go` beside a package's sources) stays with them.
        let mut src = Vec::new();
        for k in 0..FAMILY_MIN {
            src.push(small(format!("p{k}/doc.go"), 9));
            src.push(small(format!("p{k}/a{k}.go"), 200 + k as u64));
            src.push(small(format!("p{k}/b{k}.go"), 300 + k as u64));
        }
        let (tree, entries, sketches) = tree_of(&src);
        let (order, _) = fragment_offsets(&tree, &entries, None, &sketches);
        let got = paths(&tree, &entries, &order);
        let mut runs: Vec<&str> = got.iter().map(|p| p.split('/').next().unwrap()).collect();
        runs.dedup();
        assert_eq!(runs.len(), FAMILY_MIN, "{got:?}");
        // One fewer directory bearing the name: no family.
        let (tree, entries, sketches) = tree_of(&files[..files.len() - 2]);
        let (order, _) = fragment_offsets(&tree, &entries, None, &sketches);
        let got = paths(&tree, &entries, &order);
        let dirs: Vec<&str> = got.iter().map(|p| p.split('/').next().unwrap()).collect();
        let mut runs = dirs.clone();
        runs.dedup();
        assert_eq!(runs.len(), FAMILY_MIN - 1, "{got:?}");
    }
}
