//! What the data pass placed, by inode: the first block of flat data,
//! the blocks of chunks, a compressed inode's map, chunk tables merged
//! into larger chunks, the packed inode and its fragments' offsets; and
//! [`Placed::settle`], which hands all that to the plan once the pass
//! (or `--zD`'s and the metabox's writes after it) is done.

use std::collections::HashMap;

use ferrofs_format::inode::DataLayout;

use crate::data::fragments::Fragments;
use crate::data::zfile::compact_ok;
use crate::options::view::DataOptions;
use crate::plan::zmap::{encode_map, encode_whole_fragment, Tail, ZInode};
use crate::plan::{ChunkPlan, Plan};
use crate::tree::InodeId;

/// Where the data pass put each inode's data (indexed by inode id).
pub(crate) struct Placed {
    /// First block of a flat file's, a long symlink's or (set by the
    /// metadata pass) a directory's data.
    pub(crate) start_blk: Vec<u64>,
    /// Block of each chunk of a chunk-based file (`None`: a hole).
    pub(crate) chunk_blk: Vec<Vec<Option<u64>>>,
    /// The packed inode, when fragments went into one.
    pub(crate) packed: Option<InodeId>,
    /// Chunks are on the blob (extra device 1).
    pub(crate) chunks_on_blob: bool,
    /// Fragments not written yet (`--zD` adds the directories first).
    pub(crate) frags: Option<Fragments>,
    /// What `--base` gave.
    pub(crate) base: Option<crate::summary::BaseStats>,
    /// The map of each inode stored compressed, until it is settled into
    /// the plan.
    pub(crate) z: HashMap<InodeId, ZInode>,
    /// The chunk table of each chunk-based file whose chunks the writer
    /// merged into larger ones, until it is settled into the plan.
    pub(crate) chunks: HashMap<InodeId, ChunkPlan>,
    /// Where each fragment starts in the packed inode, once that is
    /// written: the maps of files (and `--zD` directories) whose tail is
    /// a fragment name it, so they are encoded again when settled.
    pub(crate) frag_offsets: Option<Vec<u64>>,
}

impl Placed {
    /// Room for `n` inodes' placements.
    pub(crate) fn grow(&mut self, n: usize) {
        if self.start_blk.len() < n {
            self.start_blk.resize(n, 0);
        }
        if self.chunk_blk.len() < n {
            self.chunk_blk.resize(n, Vec::new());
        }
    }

    /// Hands the plan what was placed since the last call: a compressed
    /// inode's layout and map (it has no flat blocks nor inline tail), a
    /// merged chunk table, and, once the packed inode is written, the
    /// fragment offsets in every map with a fragment tail. The metadata
    /// layout reads the plan after this.
    pub(crate) fn settle(&mut self, plan: &mut Plan, opts: &DataOptions<'_>) {
        for (id, z) in self.z.drain() {
            if let Some(p) = plan.inodes.get_mut(id) {
                p.layout = layout_of(&z);
                p.tail = 0;
                p.blocks = 0;
                p.z = Some(z);
            }
        }
        for (id, c) in self.chunks.drain() {
            if let Some(p) = plan.inodes.get_mut(id) {
                p.chunks = Some(c);
            }
        }
        if let Some(offsets) = self.frag_offsets.take() {
            put_fragment_offsets(plan, &offsets, opts);
        }
    }
}

/// The layout of an inode stored compressed with map `z`.
fn layout_of(z: &ZInode) -> DataLayout {
    if z.compact {
        DataLayout::CompressedCompact
    } else {
        DataLayout::CompressedFull
    }
}

/// Encodes again the map of every inode whose tail is a fragment, with
/// the fragment's offset in the packed inode.
fn put_fragment_offsets(plan: &mut Plan, offsets: &[u64], opts: &DataOptions<'_>) {
    let bs = opts.block_size();
    for id in 0..plan.inodes.len() {
        let ix = plan.head_len(id);
        let (size, bit48) = (plan.inodes[id].size, plan.bit48);
        let p = &mut plan.inodes[id];
        let Some(z) = p.z.as_mut() else {
            continue;
        };
        let Some(off) = z.fragment.and_then(|(fid, _)| offsets.get(fid).copied()) else {
            continue;
        };
        if z.fragment.is_some_and(|(_, from)| from == 0) {
            z.index = encode_whole_fragment(off);
        } else {
            let tail = Tail::Fragment(off);
            (z.index, z.compact) = encode_map(
                &z.extents,
                size,
                bs,
                z.alg,
                tail,
                ix,
                compact_ok(opts),
                bit48,
                false,
            );
        }
        p.layout = layout_of(z);
    }
}
