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
use crate::data::similarity::Sketch;
use crate::data::zpass::PAGE_END_MIN;
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
    /// The byte range (start, end, in whole blocks) `--zD`'s directories
    /// take and the pcluster size they take, when they have one of their
    /// own ([`dir_pcluster`]).
    pub(crate) dirs: Option<(u64, u64, u64)>,
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
    let (order, mut offsets, dirs) =
        crate::data::order::fragment_offsets(tree, &frags.entries, opts.profile, &sketches);
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
    // The directories' range in whole blocks: lcluster indexes (images
    // without extent records) cannot start two extents in one block.
    let dirs = dirs
        .zip(dir_pcluster(opts, pcl))
        .map(|((a, b), small)| ((a + head) / bs * bs, (b + head).div_ceil(bs) * bs, small));
    Ok(PackedInode {
        id,
        offsets,
        machine_code,
        dirs,
    })
}

/// The pcluster size of `--zD`'s directories in a packed inode of `packed`
/// byte pclusters. A path walk reads a directory a block at a time, and for
/// LZMA, DEFLATE and zstd the kernel decodes every page of the pcluster
/// that block is in (LZ4 only up to the block), so with those codecs
/// directories take the smallest pclusters whose extents still end on
/// pages ([`PAGE_END_MIN`]: a directory block never needs the next
/// pcluster), within the block size and `packed`. With LZ4 they keep the
/// packed inode's: 16 KiB ones read no less at a start there (measured) and
/// cost bytes. `None`: the directories take the packed inode's size.
fn dir_pcluster(opts: &DataOptions<'_>, packed: u64) -> Option<u64> {
    let bs = opts.block_size();
    let c = opts.compress.as_ref()?;
    let packed = packed.max(bs);
    let small = match c.compressors.first().map(|k| k.alg) {
        Some(ferrofs_codec::Algorithm::Lz4) | None => packed,
        Some(_) => PAGE_END_MIN.max(bs).min(packed),
    };
    (small < packed).then_some(small)
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
}
