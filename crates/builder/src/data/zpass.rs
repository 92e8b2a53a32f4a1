//! The compression pass over one window of files: which files are worth
//! compressing (a sampled first pcluster, or a small file's own first
//! trial) and each segment's extents, computed on the rayon pool. The
//! result depends only on the input bytes, never on how the work was spread
//! over threads; the writer places it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rayon::prelude::*;

use crate::data::base::{Base, Reused};
use crate::data::compress::{compress_segment, is_machine_code, Shape, MAGIC_LEN};
use crate::data::cuts::segments;
use crate::data::extent::{alone_segment_len, segment_len, Extent};
use crate::data::fragments::{ReadAhead, READ_AHEAD_MAX};
use crate::data::sparse;
use crate::data::worth::{
    compressed_file_still_shrinks, flat_is_no_bigger, looks_compressed, worth_compressing,
};
use crate::error::Result;
use crate::options::compress::Compressor;
use crate::options::view::DataOptions;
use crate::tree::content::ContentReader;
use crate::tree::{InodeId, Tree};
use crate::util::out::stopped;

/// One segment of a file to compress.
struct Unit {
    id: InodeId,
    offset: u64,
    len: u64,
    pcluster: u64,
    compressor: usize,
    /// The file is cut where its bytes say ([`Shape::by_content`]).
    by_content: bool,
    /// Whether the segment holds machine code, when the window says
    /// (an inode the build made); else the file's first bytes tell.
    machine_code: Option<bool>,
    /// A hole of the source kept as one (`-E sparse`): nothing to read.
    hole: bool,
}

/// Whether a file's data is compressed (decided by sampling its first
/// pcluster, or by compressing a small file whole and looking at the result).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Worth {
    Yes,
    No,
    /// A file of one segment: compressing it is the sample; its first
    /// trial decides, and if that does not save a block (nor, with
    /// ztailpacking, does the file fit in one pcluster, whose tail may
    /// still shrink inline) the work stops and the file is stored flat.
    Decide,
}

/// One file's units (each with the file's index in the window), or the
/// file itself when it is a whole fragment read ahead.
type FileUnits = (Vec<(usize, Unit)>, Option<ReadAhead>);

/// A thread's encoders, one per (compressor index, pcluster size), made
/// on first use.
pub(crate) type Encoders = HashMap<(usize, u64), ferrofs_codec::Encoder>;

/// What the units of one window share: the build's inputs and each
/// file's decision. Units only read it, from any thread.
pub(crate) struct WindowUnits<'a> {
    tree: &'a Tree,
    opts: &'a DataOptions<'a>,
    fragments: bool,
    worth: Vec<Worth>,
    /// Segments to compress, each with its file's index in the window.
    units: Vec<(usize, Unit)>,
}

/// What a window settled without compressing: whole fragments (`Some`
/// with no extents; those small enough also [`ReadAhead`]) and files an
/// earlier image holds.
pub(crate) struct Settled {
    out: Vec<Option<Vec<Extent>>>,
    reused: Vec<Option<Reused>>,
    /// Indexed like the window's ids (empty when nothing was read).
    pub(crate) read: Vec<Option<ReadAhead>>,
}

/// Decides, for one window of files, which are worth compressing (a
/// sampled first pcluster, or a small file's own first trial) and cuts
/// them into units: the first half of the compression pass, run on the
/// pool (the samples and `--base` comparisons are parallel). `zc` is each
/// inode's (pcluster bytes, compressor index), `None` for data stored flat.
/// Files with an entry in `copies` (indexed by inode; may be empty) are
/// skipped: the writer gives them the extents of the earlier file they copy.
/// `alone`: the window is one inode compressed while nothing else is (the
/// packed inode, the metabox), cut at [`alone_segment_len`], and what is
/// known of its bytes ([`Alone`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_window<'a>(
    tree: &'a Tree,
    zc: &[Option<(u64, usize)>],
    opts: &'a DataOptions<'a>,
    ids: &[InodeId],
    fragments: bool,
    sample: bool,
    base: Option<&Base>,
    copies: &[Option<InodeId>],
    alone: Option<Alone<'_>>,
) -> Result<(WindowUnits<'a>, Settled)> {
    let mut units = WindowUnits {
        tree,
        opts,
        fragments,
        worth: vec![Worth::No; ids.len()],
        units: Vec::new(),
    };
    let Some(c) = &opts.compress else {
        let out = vec![None; ids.len()];
        return Ok((
            units,
            Settled {
                out,
                reused: Vec::new(),
                read: Vec::new(),
            },
        ));
    };
    let window = Window {
        tree,
        zc,
        opts,
        ids,
        fragments,
        bs: opts.block_size(),
        // ztailpacking (without fragments, which take the tails): a file's
        // last pcluster, or the whole of a small file, may go inline.
        ztail: c.ztailpacking && !fragments,
        comps: &c.compressors,
        alone,
        holes: Vec::new(),
    };
    let window = Window {
        holes: window.find_holes(c.sparse)?,
        ..window
    };
    let reused = window.reused(base)?;
    let worth = window.worth(&reused, copies, sample)?;
    let mut out: Vec<Option<Vec<Extent>>> = vec![None; ids.len()];
    // Cut on the pool: with dedupe, a long file's cuts are where its
    // bytes say, which takes reading them. Small whole fragments are
    // read here too, for the writer.
    let cut: Vec<FileUnits> = ids
        .par_iter()
        .enumerate()
        .map(|(k, &id)| match worth[k] {
            Worth::No => Ok((Vec::new(), None)),
            _ if window.whole_fragment(id) => Ok((Vec::new(), window.read_ahead(id)?)),
            _ => Ok((window.cut_file(k, id)?, None)),
        })
        .collect::<Result<_>>()?;
    for (k, &id) in ids.iter().enumerate() {
        if worth[k] != Worth::No && window.whole_fragment(id) {
            out[k] = Some(Vec::new());
        }
    }
    let (cut, read): (Vec<_>, Vec<_>) = cut.into_iter().unzip();
    units.units = cut.into_iter().flatten().collect();
    units.worth = worth;
    Ok((units, Settled { out, reused, read }))
}

/// What the build knows of the bytes of an inode it compresses alone (the
/// packed inode, the metabox).
#[derive(Clone, Copy, Default)]
pub(crate) struct Alone<'a> {
    /// Byte ranges that hold machine code (sorted, not overlapping).
    pub(crate) machine_code: &'a [(u64, u64)],
    /// A byte range (start, end) compressed in pclusters of its own size
    /// (the third): `--zD`'s directories, which a path walk reads a block
    /// at a time, as the metabox's inodes are.
    pub(crate) small: Option<(u64, u64, u64)>,
}

/// What [`prepare_window`]'s steps share: the build's inputs and the
/// window's files, with the compression settings they all use.
struct Window<'w> {
    tree: &'w Tree,
    zc: &'w [Option<(u64, usize)>],
    opts: &'w DataOptions<'w>,
    ids: &'w [InodeId],
    fragments: bool,
    bs: u64,
    /// A file's last pcluster may go inline.
    ztail: bool,
    comps: &'w [Compressor],
    /// The window is one inode compressed while nothing else is.
    alone: Option<Alone<'w>>,
    /// With `-E sparse`, each file's holes (indexed like `ids`; empty
    /// without the option).
    holes: Vec<Vec<(u64, u64)>>,
}

impl Window<'_> {
    /// Whether file `id` goes whole to the packed inode.
    fn whole_fragment(&self, id: InodeId) -> bool {
        whole_fragment(self.tree, self.zc, self.opts, self.fragments, id)
    }

    /// A whole fragment of at most [`READ_AHEAD_MAX`] bytes, read.
    fn read_ahead(&self, id: InodeId) -> Result<Option<ReadAhead>> {
        let ino = &self.tree.inodes[id];
        let size = ino.data_size();
        match size <= READ_AHEAD_MAX {
            true => Ok(Some(ReadAhead::read(&ContentReader::open(ino)?, size)?)),
            false => Ok(None),
        }
    }

    /// Files an earlier image holds as this build would store them
    /// (indexed like the window's ids; empty without `--base`).
    fn reused(&self, base: Option<&Base>) -> Result<Vec<Option<Reused>>> {
        let Some(b) = base else {
            return Ok(Vec::new());
        };
        self.ids
            .par_iter()
            .map(|&id| match self.zc[id] {
                Some(_) if plain_segments(self.tree, self.zc, self.opts, self.fragments, id) => {
                    b.reuse(self.tree, id)
                }
                _ => Ok(None),
            })
            .collect()
    }

    /// Phase A: whether each file of the window is compressed, sampling
    /// the first pcluster of every larger candidate (without `sample`,
    /// every candidate is). Files `reused` from the base or in `copies`
    /// are not.
    fn worth(
        &self,
        reused: &[Option<Reused>],
        copies: &[Option<InodeId>],
        sample: bool,
    ) -> Result<Vec<Worth>> {
        let is_reused = |k: usize| reused.get(k).is_some_and(Option::is_some);
        self.ids
            .par_iter()
            .enumerate()
            .map_init(
                HashMap::new,
                |encs: &mut Encoders, (k, &id)| -> Result<Worth> {
                    let Some((pcl, comp)) = self.zc[id] else {
                        return Ok(Worth::No);
                    };
                    if is_reused(k) || copies.get(id).is_some_and(Option::is_some) {
                        return Ok(Worth::No);
                    }
                    if self.whole_fragment(id) || !sample {
                        return Ok(Worth::Yes);
                    }
                    self.sample(encs, k, id, pcl, comp)
                },
            )
            .collect()
    }

    /// Whether candidate `id` (pcluster `pcl`, compressor `comp`) is worth
    /// compressing, by its size or by samples of its start and middle.
    fn sample(
        &self,
        encs: &mut Encoders,
        k: usize,
        id: InodeId,
        pcl: u64,
        comp: usize,
    ) -> Result<Worth> {
        let bs = self.bs;
        let ino = &self.tree.inodes[id];
        let size = ino.data_size();
        // A file of one block cannot save a block by compression
        // (its first trial would decide so): stored flat untried,
        // unless it may shrink into an inline tail pcluster.
        if size <= bs && !self.ztail {
            return Ok(Worth::No);
        }
        // A file whose holes are kept (-E sparse) is mapped with them,
        // whatever its data makes of compression.
        if !self.holes(k, (0, size), pcl).is_empty() {
            return Ok(Worth::Yes);
        }
        // A file of one segment decides with its first trial (and a
        // probe of its middle).
        if size <= segment_len(pcl) && hot_pieces(self.tree, self.opts, id).is_empty() {
            return Ok(Worth::Decide);
        }
        // Samples of the start and of the middle.
        let n = size.min(pcl.max(4 * bs)) as usize;
        let mid = size / 2 / bs * bs;
        let r = ContentReader::open(ino)?;
        let mut buf = vec![0u8; 2 * n];
        let (head, middle) = buf.split_at_mut(n);
        r.read_exact_at(head, 0)?;
        let m = (size - mid).min(n as u64) as usize;
        r.read_exact_at(&mut middle[..m], mid)?;
        if looks_compressed(head) && !compressed_file_still_shrinks(head)? {
            return Ok(Worth::No);
        }
        let enc = encoder_for(encs, self.comps, comp, pcl)?;
        enc.set_machine_code(is_machine_code(head));
        enc.set_one_file(true);
        Ok(if worth_compressing(enc, &[head, &middle[..m]], pcl, bs) {
            Worth::Yes
        } else {
            Worth::No
        })
    }

    /// Phase B's units of file `id` (the window's `k`th): every segment of
    /// every piece of it, added to `units`.
    fn cut_file(&self, k: usize, id: InodeId) -> Result<Vec<(usize, Unit)>> {
        let (pcl, comp) = self.zc[id].unwrap_or((self.bs, 0));
        let ino = &self.tree.inodes[id];
        let size = ino.data_size();
        // The packed inode and the metabox (compressed alone) are cut finer
        // to keep every core busy, and never by content: no other file
        // shares their bytes.
        let seg = match self.alone {
            Some(_) => alone_segment_len(pcl),
            None => segment_len(pcl),
        };
        let content = self.opts.dedupe && self.alone.is_none() && pcl >= 4 * self.bs;
        let mut reader = None;
        let mut units = Vec::new();
        let unit = |offset, len, pcluster, by_content, hole| Unit {
            id,
            offset,
            len,
            pcluster,
            compressor: comp,
            by_content,
            machine_code: self
                .alone
                .map(|a| mostly_within(a.machine_code, offset, len)),
            hole,
        };
        let mut parts = Vec::new();
        for piece in pieces(&hot_pieces(self.tree, self.opts, id), size) {
            // The source's holes, kept (-E sparse), are units of their own.
            let holes = self.holes(k, piece, pcl);
            parts.extend(sparse::split(piece.0, piece.1, &holes));
        }
        // A range of its own pcluster size: its pieces are cut at its edges.
        let small = self.alone.and_then(|a| a.small);
        let parts = parts.into_iter().flat_map(|(a, b, hole)| {
            let mut cut = vec![(a, b, hole, pcl)];
            if let (Some((sa, sb, spcl)), false) = (small, hole) {
                let (x, y) = (sa.clamp(a, b), sb.clamp(a, b));
                cut = [(a, x, pcl), (x, y, spcl), (y, b, pcl)]
                    .into_iter()
                    .filter(|p| p.1 > p.0)
                    .map(|(a, b, p)| (a, b, false, p))
                    .collect();
            }
            cut
        });
        for (a, b, hole, pcl) in parts {
            if hole {
                units.push((k, unit(a, b - a, pcl, false, true)));
                continue;
            }
            let seg = match small {
                Some((_, _, spcl)) if pcl == spcl => alone_segment_len(pcl),
                _ => seg,
            };
            let piece = (a, b);
            // Opened on the first read: files cut on the grid are not.
            let read = |buf: &mut [u8], off: u64| -> Result<()> {
                let r = match &mut reader {
                    Some(r) => r,
                    None => reader.insert(ContentReader::open(ino)?),
                };
                r.read_exact_at(buf, off)
            };
            let by_content = content && piece.1 - piece.0 > seg;
            let segs = segments(read, piece, seg, content)?;
            for (offset, len) in segs {
                units.push((k, unit(offset, len, pcl, by_content, false)));
            }
        }
        Ok(units)
    }

    /// Every file's holes (`-E sparse`; a file the build made has none),
    /// found on the pool.
    fn find_holes(&self, sparse: bool) -> Result<Vec<Vec<(u64, u64)>>> {
        if !sparse || self.alone.is_some() {
            return Ok(Vec::new());
        }
        let records = self.opts.bit48 && !self.opts.compress.is_some_and(|c| c.legacy_compress);
        let may = |id: InodeId| {
            sparse::may_have_holes(self.tree.inodes[id].data_size(), self.bs, records)
        };
        self.ids
            .par_iter()
            .map(|&id| match self.zc[id] {
                Some((pcl, _)) if !self.whole_fragment(id) && may(id) => sparse::find_holes(
                    &self.tree.inodes[id],
                    self.bs,
                    sparse::min_hole(pcl, self.bs),
                ),
                _ => Ok(Vec::new()),
            })
            .collect()
    }

    /// The holes of the window's `k`th file in `range`, in whole blocks
    /// of at least the shortest hole.
    fn holes(&self, k: usize, range: (u64, u64), pcl: u64) -> Vec<(u64, u64)> {
        match self.holes.get(k) {
            Some(h) => sparse::clip(h, range, self.bs, sparse::min_hole(pcl, self.bs)),
            None => Vec::new(),
        }
    }
}

/// The smallest pclusters of the packed inode and the metabox whose extents
/// end on page boundaries ([`Shape::page_end`]).
pub(crate) const PAGE_END_MIN: u64 = 16 << 10;

/// The pieces (start, end) a file of `size` bytes is compressed in, one
/// after another: its `hot` pieces and the cold data between them. With a
/// profile, the pieces a start reads in small bits get pclusters of their
/// own (FPC §4.1): a cold read of them decodes no unrelated data.
fn pieces(hot: &[(u64, u64)], size: u64) -> Vec<(u64, u64)> {
    let mut pieces = Vec::new();
    let mut at = 0;
    for &(a, b) in hot {
        if a > at {
            pieces.push((at, a));
        }
        // Every byte of a piece is read (the trace's ranges, or them
        // widened to the kernel's read-around), so a piece keeps the
        // build's pcluster size for a better ratio: it is cut at its
        // edges, and no pcluster mixes it with cold data.
        pieces.push((a, b));
        at = b;
    }
    if at < size {
        pieces.push((at, size));
    }
    pieces
}

impl WindowUnits<'_> {
    /// How many units the window has.
    pub(crate) fn len(&self) -> usize {
        self.units.len()
    }

    /// The order to start the units in: as they come, or, for the last
    /// window (nothing follows to keep the cores busy), the longest first,
    /// so the ones left running at the very end are the shortest.
    pub(crate) fn start_order(&self, last: bool) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.units.len()).collect();
        if last {
            order.sort_by_key(|&i| std::cmp::Reverse(self.units[i].1.len));
        }
        order
    }

    /// Compresses unit `i` (Phase B) with this thread's encoders: its
    /// extents, or `None` when it is a small file's only segment and
    /// compressing it does not save a block, nor (with ztailpacking) fit
    /// in one pcluster (the file is stored flat).
    pub(crate) fn compress(&self, i: usize, encs: &mut Encoders) -> Result<Option<Vec<Extent>>> {
        let Some(c) = &self.opts.compress else {
            return Ok(None);
        };
        let bs = self.opts.block_size();
        let (k, u) = &self.units[i];
        if u.hole {
            return Ok(Some(vec![Extent::hole(u.offset, u.len)]));
        }
        let ino = &self.tree.inodes[u.id];
        let r = ContentReader::open(ino)?;
        let mut buf = vec![0u8; u.len as usize];
        r.read_exact_at(&mut buf, u.offset)?;
        // Each segment is read on its own: a file rewritten between two
        // of them would be stored torn.
        r.unchanged()?;
        let decide = self.worth[*k] == Worth::Decide;
        // A whole file in a compressed format that fast LZ4 cannot shrink
        // is stored flat untried.
        if decide && looks_compressed(&buf) && !compressed_file_still_shrinks(&buf)? {
            return Ok(None);
        }
        let enc = encoder_for(encs, &c.compressors, u.compressor, u.pcluster)?;
        let machine_code = match u.machine_code {
            Some(m) => m,
            None if u.offset == 0 => is_machine_code(&buf[..buf.len().min(MAGIC_LEN)]),
            None => {
                let mut magic = [0u8; MAGIC_LEN];
                r.read_exact_at(&mut magic, 0)?;
                is_machine_code(&magic)
            }
        };
        enc.set_machine_code(machine_code);
        // A file's own segment, not one of the packed inode's (which the
        // window names machine code or not).
        enc.set_one_file(u.machine_code.is_none());
        // The file's last segment leaves its tail to the packed inode.
        let last = u.offset + u.len == ino.data_size();
        let cut_end = !last && !(u.offset + u.len).is_multiple_of(bs);
        let leave = (self.fragments && last).then_some(u.pcluster);
        let shape = Shape {
            pcluster: u.pcluster,
            bs,
            big: u.pcluster > bs,
            leave_tail: leave,
            max_extent: c.max_extent_bytes,
            ztail: c.ztailpacking && !self.fragments && last,
            cut_end,
            by_content: u.by_content,
            // The packed inode's and the metabox's units, where a
            // pcluster read for nothing costs more than the bytes page
            // ends lose (a 4 KiB pcluster of the metabox ending on a page
            // would hold about 2 KiB less).
            page_end: u.machine_code.is_some() && u.pcluster >= PAGE_END_MIN,
        };
        let (ex, keep) = compress_segment(enc, &buf, u.offset, &shape, decide)?;
        Ok((!decide || keep).then_some(ex))
    }

    /// Every file's extents (indexed like the window's ids), from each
    /// unit's result (`results[i]` is unit `i`'s): `None` for data stored
    /// flat.
    pub(crate) fn finish(
        &self,
        settled: Settled,
        results: Vec<Option<Vec<Extent>>>,
        ids: &[InodeId],
        zc: &[Option<(u64, usize)>],
        base: Option<&Base>,
    ) -> Vec<Option<Vec<Extent>>> {
        let Settled {
            mut out, reused, ..
        } = settled;
        for ((k, _), ex) in self.units.iter().zip(results) {
            match ex {
                Some(ex) => out[*k].get_or_insert_with(Vec::new).extend(ex),
                // A small file (one unit) that did not compress: stored flat.
                None => out[*k] = None,
            }
        }
        // Holes cut by segments are one (their pieces come in order).
        for ex in out.iter_mut().flatten() {
            sparse::merge_holes(ex);
        }
        // Files that compressed to no less than their size are stored flat
        // (and their tails inline), as mkfs.erofs does. Not with fragments:
        // their tails are in the packed inode, not in these extents.
        if let Some(c) = self.opts.compress.as_ref().filter(|_| !self.fragments) {
            let bs = self.opts.block_size();
            for (k, ex) in out.iter_mut().enumerate() {
                let size = self.tree.inodes[ids[k]].data_size();
                if ex.as_ref().is_some_and(|e| {
                    !e.is_empty() && flat_is_no_bigger(e, size, bs, c.ztailpacking)
                }) {
                    *ex = None;
                }
            }
        }
        if let Some(b) = base {
            for (k, r) in reused.into_iter().enumerate() {
                match r {
                    Some(Reused::Extents(ex)) => out[k] = Some(ex),
                    Some(Reused::Flat) => out[k] = None,
                    None if zc[ids[k]].is_some() => {
                        b.compressed(self.tree.inodes[ids[k]].data_size())
                    }
                    None => {}
                }
            }
        }
        out
    }
}

/// The whole compression pass for one inode the build made itself (the
/// packed inode, the metabox), compressed while nothing else is, on the
/// current pool: [`prepare_window`], every unit in parallel,
/// [`WindowUnits::finish`]. `alone`: what is known of its bytes. The
/// result depends only on the input bytes. Once `stop`
/// is set no more units start, and `None` comes back (the caller checks
/// the same flag).
pub(crate) fn compress_alone(
    tree: &Tree,
    zc: &[Option<(u64, usize)>],
    opts: &DataOptions<'_>,
    id: InodeId,
    alone: Alone<'_>,
    stop: Option<&AtomicBool>,
) -> Result<Option<Vec<Extent>>> {
    let ids = [id];
    let (units, settled) =
        prepare_window(tree, zc, opts, &ids, false, false, None, &[], Some(alone))?;
    // Every thread of the pool takes the next unit, longest first, until
    // none is left (a parallel iterator would hand each thread runs of
    // units, and the last run would keep one core busy alone).
    let order = units.start_order(true);
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, Result<Option<Vec<Extent>>>)> = rayon::broadcast(|_| {
        let mut encs = HashMap::new();
        let mut mine = Vec::new();
        while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            if stopped(stop) {
                break;
            }
            mine.push((i, units.compress(i, &mut encs)));
        }
        mine
    })
    .into_iter()
    .flatten()
    .collect();
    // Interrupted: units are missing, and the caller's own check of the
    // same flag ends the build.
    if stopped(stop) {
        return Ok(None);
    }
    done.sort_by_key(|d| d.0);
    let results = done.into_iter().map(|d| d.1).collect::<Result<Vec<_>>>()?;
    let out = units.finish(settled, results, &ids, zc, None);
    Ok(out.into_iter().next().flatten())
}

/// Whether at least half of `len` bytes from `offset` lie in `ranges`
/// (sorted, not overlapping).
fn mostly_within(ranges: &[(u64, u64)], offset: u64, len: u64) -> bool {
    let end = offset.saturating_add(len);
    let inside: u64 = ranges
        .iter()
        .map(|&(a, b)| b.min(end).saturating_sub(a.max(offset)))
        .sum();
    inside.saturating_mul(2) >= len
}

/// Whether file `id` goes whole to the packed inode, without being
/// compressed on its own.
fn whole_fragment(
    tree: &Tree,
    zc: &[Option<(u64, usize)>],
    opts: &DataOptions<'_>,
    fragments: bool,
    id: InodeId,
) -> bool {
    match (zc[id], &opts.compress) {
        (Some((pcl, _)), Some(c)) if fragments => {
            c.all_fragments || tree.inodes[id].data_size() <= pcl
        }
        _ => false,
    }
}

/// Pieces of the file a profiled start reads in small bits.
fn hot_pieces(tree: &Tree, opts: &DataOptions<'_>, id: InodeId) -> Vec<(u64, u64)> {
    let bs = opts.block_size();
    opts.profile
        .as_ref()
        .and_then(|p| p.get(&tree.inodes[id].rel))
        .and_then(|f| {
            let w = opts.profile.as_ref().map_or(0, |p| p.window);
            f.hot_pieces(tree.inodes[id].data_size(), bs, w)
        })
        .unwrap_or_default()
}

/// Whether file `id` is compressed on its own in plain segments (not
/// whole in the packed inode, no hot pieces): what `--base` can reuse.
pub(crate) fn plain_segments(
    tree: &Tree,
    zc: &[Option<(u64, usize)>],
    opts: &DataOptions<'_>,
    fragments: bool,
    id: InodeId,
) -> bool {
    zc[id].is_some()
        && !whole_fragment(tree, zc, opts, fragments, id)
        && hot_pieces(tree, opts, id).is_empty()
}

/// The thread's encoder for a compressor and pcluster size, made once.
fn encoder_for<'a>(
    encs: &'a mut Encoders,
    comps: &[Compressor],
    comp: usize,
    pcl: u64,
) -> Result<&'a mut ferrofs_codec::Encoder> {
    match encs.entry((comp, pcl)) {
        std::collections::hash_map::Entry::Occupied(e) => Ok(e.into_mut()),
        std::collections::hash_map::Entry::Vacant(e) => Ok(e.insert(comps[comp].encoder(pcl)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::mostly_within;

    #[test]
    fn a_segment_is_machine_code_when_half_of_it_is() {
        let ranges = [(100, 200), (300, 350)];
        assert!(mostly_within(&ranges, 100, 100));
        assert!(mostly_within(&ranges, 150, 100));
        assert!(!mostly_within(&ranges, 151, 100));
        // Two ranges together make half; either alone does not.
        let two = [(0, 40), (60, 100)];
        assert!(mostly_within(&two, 0, 160));
        assert!(!mostly_within(&two, 0, 161));
        assert!(!mostly_within(&two[..1], 0, 160));
        assert!(!mostly_within(&[], 0, 10));
    }
}
