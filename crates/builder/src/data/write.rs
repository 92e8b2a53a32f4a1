//! Writing each file's data as the data pass reaches it, in order: a
//! compressed file's extents (or those of an earlier file with the same
//! bytes), a flat or chunk-based file's blocks (chunks already stored, or
//! all zeros, stored nowhere), rebuild mode's inline tails; and what the
//! data pass remembers for the files after (where each one went, which
//! extents later copies reuse). It reads the plan and keeps what it placed
//! for [`Placed`].

use std::collections::HashMap;

use crate::data::extent::Extent;
use crate::data::fragments::{Fragments, ReadAhead};
use crate::data::placed::Placed;
use crate::data::sparse::ZeroPclusters;
use crate::data::stored::{PclusterDedupe, CHUNK_KEY};
use crate::data::zfile::{compact_ok, read_ahead_fragment, write_compressed};
use crate::error::Result;
use crate::options::view::DataOptions;
use crate::plan::zmap::{encode_map, Tail, ZInode};
use crate::plan::{ChunkPlan, InodePlan, Plan};
use crate::tree::content::{Content, ContentReader};
use crate::tree::{InodeId, Tree};
use crate::util::out::Writer;

/// The writer's side of the data pass.
pub(crate) struct FileWriter<'p, 'a> {
    w: &'p mut Writer<'a>,
    blob: Option<&'p mut Writer<'a>>,
    tree: &'p Tree,
    plan: &'p Plan,
    opts: &'p DataOptions<'p>,
    frags: Option<Fragments>,
    pdedupe: Option<PclusterDedupe>,
    /// With `-E sparse`, what holes mapped by lcluster indexes point at.
    zeros: ZeroPclusters,
    buf: Vec<u8>,
    start_blk: Vec<u64>,
    chunk_blk: Vec<Vec<Option<u64>>>,
    /// The maps of the files stored compressed.
    z: HashMap<InodeId, ZInode>,
    /// Chunk tables merged into larger chunks.
    chunks: HashMap<InodeId, ChunkPlan>,
    /// Per file, an earlier file with the same bytes stored the same way
    /// (whole-file dedupe), whose data it shares.
    dup: Vec<Option<InodeId>>,
    /// Per file, an earlier file with the same bytes compressed the same
    /// way, whose extents it stores again.
    copies: &'p [Option<InodeId>],
    /// How many later files still copy each original's extents, and the
    /// extents of originals until their last copy is written.
    copies_left: HashMap<InodeId, usize>,
    kept: HashMap<InodeId, Option<Vec<Extent>>>,
}

impl<'p, 'a> FileWriter<'p, 'a> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        w: &'p mut Writer<'a>,
        blob: Option<&'p mut Writer<'a>>,
        tree: &'p Tree,
        plan: &'p Plan,
        opts: &'p DataOptions<'p>,
        frags: Option<Fragments>,
        dup: Vec<Option<InodeId>>,
        copies: &'p [Option<InodeId>],
    ) -> Self {
        let mut copies_left: HashMap<InodeId, usize> = HashMap::new();
        for &orig in copies.iter().flatten() {
            *copies_left.entry(orig).or_default() += 1;
        }
        let n = tree.inodes.len();
        FileWriter {
            w,
            blob,
            tree,
            plan,
            opts,
            frags,
            pdedupe: opts.dedupe.then(PclusterDedupe::default),
            zeros: ZeroPclusters::default(),
            buf: vec![0u8; 1 << 20],
            start_blk: vec![0u64; n],
            chunk_blk: vec![Vec::new(); n],
            z: HashMap::new(),
            chunks: HashMap::new(),
            dup,
            copies,
            copies_left,
            kept: HashMap::new(),
        }
    }

    /// The extents file `id` is written with: those `fresh` from its own
    /// compression, or, when it copies an earlier file, that file's (kept
    /// until its last copy is written).
    pub(crate) fn extents_of(
        &mut self,
        id: InodeId,
        fresh: &Option<Vec<Extent>>,
    ) -> Option<Vec<Extent>> {
        let mine = match self.copies.get(id).copied().flatten() {
            Some(orig) => {
                let left = self.copies_left.get_mut(&orig).map(|n| {
                    *n -= 1;
                    *n
                });
                match left {
                    Some(0) => self.kept.remove(&orig).flatten(),
                    _ => self.kept.get(&orig).cloned().flatten(),
                }
            }
            None => fresh.clone(),
        };
        if self.copies_left.contains_key(&id) {
            self.kept.insert(id, mine.clone());
        }
        mine
    }

    /// Writes file `id`'s data: shared with an earlier file, compressed
    /// (`extents`; whole into the packed inode from `read` when the pool
    /// read it ahead), rebuild mode's tail, or flat.
    pub(crate) fn write_file(
        &mut self,
        id: InodeId,
        extents: Option<Vec<Extent>>,
        read: Option<ReadAhead>,
    ) -> Result<()> {
        let bs = self.opts.block_size();
        let tree = self.tree;
        match (self.dup[id], extents) {
            // Same bytes as an earlier file stored the same way: its data
            // serve this one too.
            (Some(orig), _) => match self.z.get(&orig).cloned() {
                Some(z) => {
                    let z = share_map(self.plan, z, id, self.opts);
                    self.z.insert(id, z);
                }
                None => self.start_blk[id] = self.start_blk[orig],
            },
            (None, Some(ex)) => {
                let z = match (read, self.frags.as_mut()) {
                    (Some(r), Some(fr)) if ex.is_empty() => {
                        read_ahead_fragment(fr, self.plan, id, r, self.opts)?
                    }
                    (_, frags) => write_compressed(
                        self.w,
                        tree,
                        self.plan,
                        id,
                        ex,
                        self.opts,
                        frags,
                        self.pdedupe.as_mut(),
                        &mut self.zeros,
                    )?,
                };
                self.z.insert(id, z);
            }
            (None, None) if tree.inodes[id].content.external().is_some() => {
                self.start_blk[id] = write_tail(self.w, tree, id, bs, &mut self.buf)?;
            }
            (None, None) => {
                let (s, mut c) = write_flat(
                    (self.w, self.blob.as_deref_mut()),
                    tree,
                    &self.plan.inodes[id],
                    (id, bs),
                    &mut self.buf,
                    self.pdedupe.as_mut(),
                )?;
                self.start_blk[id] = s;
                if let Some(planned) = &self.plan.inodes[id].chunks {
                    let mut cp = planned.clone();
                    cp.merge(&mut c, tree.inodes[id].data_size(), bs);
                    if cp != *planned {
                        self.chunks.insert(id, cp);
                    }
                }
                self.chunk_blk[id] = c;
            }
        }
        Ok(())
    }

    /// Where each file's data went (first blocks, chunk blocks, maps,
    /// merged chunk tables) and the fragments collected.
    pub(crate) fn finish(self) -> Placed {
        Placed {
            start_blk: self.start_blk,
            chunk_blk: self.chunk_blk,
            packed: None,
            chunks_on_blob: false,
            frags: self.frags,
            base: None,
            z: self.z,
            chunks: self.chunks,
            frag_offsets: None,
        }
    }
}

/// The map of file `id`, which has the same bytes as a compressed file
/// stored the same way whose map is `z`: that file's data serve it too,
/// through an index of its own (but a whole fragment's, which is the same).
fn share_map(plan: &Plan, mut z: ZInode, id: InodeId, opts: &DataOptions<'_>) -> ZInode {
    if z.fragment.is_none() {
        let ix = plan.head_len(id);
        let tail = z
            .inline
            .as_ref()
            .map_or(Tail::Blocks, |v| Tail::Inline(v.len() as u16));
        (z.index, z.compact) = encode_map(
            &z.extents,
            plan.inodes[id].size,
            opts.block_size(),
            z.alg,
            tail,
            ix,
            compact_ok(opts),
            plan.bit48,
            false,
        );
    }
    z
}

/// Whether `len` bytes of `f` from `from` are all zeros (read through
/// `buf`, stopping at the first byte that is not).
fn all_zeros(f: &ContentReader, buf: &mut [u8], from: u64, len: u64) -> Result<bool> {
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(buf.len() as u64) as usize;
        f.read_exact_at(&mut buf[..n], from + done)?;
        if buf[..n].iter().any(|b| *b != 0) {
            return Ok(false);
        }
        done += n as u64;
    }
    Ok(true)
}

/// Writes the tail of a file whose other chunks stay on the layers
/// (rebuild mode) into a block of its own; returns the block.
fn write_tail(w: &mut Writer, tree: &Tree, id: InodeId, bs: u64, buf: &mut [u8]) -> Result<u64> {
    let ino = &tree.inodes[id];
    let size = ino.data_size();
    let from = size - size % bs;
    let n = (size - from) as usize;
    let f = ContentReader::open(ino)?;
    f.read_exact_at(&mut buf[..n], from)?;
    f.finish()?;
    w.align_data()?;
    let blk = w.block(bs);
    w.write(&buf[..n])?;
    w.pad_to_block(bs)?;
    Ok(blk)
}

/// Copies a flat or chunk-based file into the data area. With `dedupe`,
/// a chunk whose (zero-padded) blocks are already stored points at them
/// instead (confirmed against the stored bytes); a chunk of zeros is a hole.
pub(crate) fn write_flat<'a>(
    (w, blob): (&mut Writer<'a>, Option<&mut Writer<'a>>),
    tree: &Tree,
    p: &InodePlan,
    (id, bs): (InodeId, u64),
    buf: &mut [u8],
    mut dedupe: Option<&mut PclusterDedupe>,
) -> Result<(u64, Vec<Option<u64>>)> {
    let ino = &tree.inodes[id];
    let size = ino.data_size();
    // Chunks go to the blob when there is one.
    let w = match (blob, &p.chunks) {
        (Some(b), Some(_)) => b,
        _ => w,
    };
    let f = ContentReader::open(ino)?;
    let copy = |w: &mut Writer, buf: &mut [u8], from: u64, len: u64| -> Result<()> {
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(buf.len() as u64) as usize;
            f.read_exact_at(&mut buf[..n], from + done)?;
            w.write(&buf[..n])?;
            done += n as u64;
        }
        w.pad_to_block(bs)
    };
    let stored = |c: &crate::plan::ChunkPlan| c.chunks.iter().any(Option::is_some);
    if p.blocks > 0 || p.chunks.as_ref().is_some_and(stored) {
        w.align_data()?;
    }
    let start = w.block(bs);
    let mut chunks = Vec::new();
    if let Some(c) = &p.chunks {
        let cs = bs << c.bits_extra;
        for (k, ch) in c.chunks.iter().enumerate() {
            if ch.is_none() {
                chunks.push(None);
                continue;
            }
            let from = k as u64 * cs;
            let len = cs.min(size - from);
            // As mkfs.erofs: a chunk of zeros is a hole (a null index),
            // read back as zeros and stored nowhere.
            if all_zeros(&f, buf, from, len)? {
                chunks.push(None);
                continue;
            }
            let padded = len.div_ceil(bs) * bs;
            match dedupe.as_deref_mut() {
                Some(d) if padded as usize <= buf.len() => {
                    let chunk = &mut buf[..padded as usize];
                    f.read_exact_at(&mut chunk[..len as usize], from)?;
                    chunk[len as usize..].fill(0);
                    // Keyed like a pcluster of its own "algorithm", by the
                    // stored blocks (a file's last chunk may share blocks
                    // with any chunk of the same bytes and zeros).
                    if let Some(blk) = d.find(w, chunk, padded, CHUNK_KEY, bs)? {
                        chunks.push(Some(blk));
                        continue;
                    }
                    let blk = w.block(bs);
                    w.write(chunk)?;
                    d.insert(chunk, padded, CHUNK_KEY, blk);
                    chunks.push(Some(blk));
                }
                _ => {
                    chunks.push(Some(w.block(bs)));
                    copy(w, buf, from, len)?;
                }
            }
        }
    } else {
        let len = (size - p.tail).min(p.blocks * bs);
        if already_here(w, &ino.content, len) {
            w.pass_over(len, buf)?;
            w.pad_to_block(bs)?;
        } else {
            copy(w, buf, 0, len)?;
        }
    }
    f.finish()?;
    Ok((start, chunks))
}

/// Whether the `len` bytes of `content` already stand at `w`'s position:
/// a piped archive's data that its scan put into the image, where the
/// data pass, writing in archive order, comes to it.
fn already_here(w: &Writer, content: &Content, len: u64) -> bool {
    let (Some(image), Content::Archive { archive, segments }) = (&w.in_place, content) else {
        return false;
    };
    std::sync::Arc::ptr_eq(image, archive)
        && matches!(segments.as_ref(), [s] if s.logical == 0 && s.len == len
            && s.physical == w.base + w.pos)
}
