//! One compressed file into the image: its fragment (with `-E
//! fragments`), where each pcluster goes, the last one inline when it fits
//! after the inode (ztailpacking), the pclusters themselves (zero-padded
//! in front, or shared with `-E dedupe`), and the file's map.

use crate::data::extent::Extent;
use crate::data::fragments::{Fragments, ReadAhead};
use crate::data::sparse::ZeroPclusters;
use crate::data::stored::PclusterDedupe;
use crate::error::Result;
use crate::options::view::DataOptions;
use crate::plan::zmap::{encode_index, encode_map, encode_whole_fragment, Tail, ZExtent, ZInode};
use crate::plan::Plan;
use crate::tree::content::ContentReader;
use crate::tree::{InodeId, Tree};
use crate::util::out::Writer;

/// Whether compressed files may take compact indexes (not with `-E
/// legacy-compress`).
pub(crate) fn compact_ok(opts: &DataOptions<'_>) -> bool {
    !opts.compress.as_ref().is_some_and(|c| c.legacy_compress)
}

/// A file the pool read ahead (all of it goes to the packed inode): its
/// fragment and its inode state.
pub(crate) fn read_ahead_fragment(
    frags: &mut Fragments,
    plan: &Plan,
    id: InodeId,
    read: ReadAhead,
    opts: &DataOptions<'_>,
) -> Result<ZInode> {
    let fid = frags.add_read(id, read)?;
    Ok(whole_fragment_map(alg_of(plan, id, opts), fid))
}

/// The inode state of a file that is all fragment `fid`.
fn whole_fragment_map(alg: u8, fid: usize) -> ZInode {
    ZInode {
        alg,
        extents: Vec::new(),
        inline: None,
        index: encode_whole_fragment(0),
        compact: false,
        blocks: 0,
        fragment: Some((fid, 0)),
    }
}

/// The algorithm id file `id` is compressed with.
fn alg_of(plan: &Plan, id: InodeId, opts: &DataOptions<'_>) -> u8 {
    let comp = opts
        .compress
        .as_ref()
        .map(|c| c.compressors[plan.inodes[id].compress.map_or(0, |x| x.1)]);
    comp.map_or(0, |c| c.alg.id())
}

/// Writes one compressed file's pclusters and returns its inode state:
/// its fragment first (a whole-file one ends the work), then where each
/// pcluster goes, the last one inline when it fits (ztailpacking), the
/// pclusters themselves, and the file's map.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_compressed(
    w: &mut Writer,
    tree: &Tree,
    plan: &Plan,
    id: InodeId,
    extents: Vec<Extent>,
    opts: &DataOptions<'_>,
    frags: Option<&mut Fragments>,
    dedupe: Option<&mut PclusterDedupe>,
    zeros: &mut ZeroPclusters,
) -> Result<ZInode> {
    let bs = opts.block_size();
    let ino = &tree.inodes[id];
    let size = ino.data_size();
    let alg = alg_of(plan, id, opts);
    let f = ContentReader::open(ino)?;
    let inode_and_xattrs = plan.head_len(id);
    // Extents stop short of the end when the rest is the file's fragment.
    let covered = extents.last().map_or(0, |e| e.la + e.llen);
    let fragment = match frags {
        Some(fr) if covered < size => Some((fr.add(id, &f, covered, size)?, covered)),
        _ => None,
    };
    if let Some((fid, 0)) = fragment {
        f.finish()?;
        return Ok(whole_fragment_map(alg, fid));
    }
    if !extents.is_empty() {
        w.align_data()?;
    }
    let mut zext = place_extents(&extents, w.block(bs), bs);
    let shape = MapShape {
        size,
        bs,
        alg,
        inode_and_xattrs,
        compact: compact_ok(opts),
        internal: ino.rel.is_empty(),
    };
    // ztailpacking: the last pcluster inline, when it fits in the inode's
    // block; not for a file with holes in a 48-bit image, which extent
    // records map (they have no inline pcluster).
    let holes_by_records = plan.bit48 && shape.compact && extents.iter().any(|e| e.hole);
    let ztail = opts.compress.as_ref().is_some_and(|c| c.ztailpacking)
        && fragment.is_none()
        && !holes_by_records;
    let inline = match (ztail, extents.last()) {
        (true, Some(last)) => inline_tail(&f, last, &mut zext, &shape)?,
        _ => None,
    };
    let n_written = extents.len() - usize::from(inline.is_some());
    write_pclusters(w, &f, &extents[..n_written], &mut zext, dedupe, alg, bs)?;
    f.finish()?;
    // Holes mapped by lcluster indexes name the shared pcluster of zeros
    // (extent records, in 48-bit images, need none).
    let extent_records = plan.bit48 && shape.compact && inline.is_none();
    if !extent_records && zext.iter().any(|z| z.hole) {
        let comp = plan.inodes[id].compress.map_or(0, |x| x.1);
        let zero = zeros.get(w, opts, comp)?;
        zext = zero.map_holes(zext);
    }
    // The inline tail's block address is not used; the next free block
    // keeps compact indexes possible.
    let next = w.block(bs);
    if let Some(z) = zext.last_mut().filter(|_| inline.is_some()) {
        z.pblk = next;
    }
    Ok(zinode(zext, inline, fragment, next, &shape, plan.bit48))
}

/// The compressed inode of a file whose pclusters are `zext` (written),
/// maybe followed by an `inline` tail or a `fragment` (its id and where
/// it starts in the file); `next` is the next free block.
fn zinode(
    mut zext: Vec<ZExtent>,
    inline: Option<Vec<u8>>,
    fragment: Option<(InodeId, u64)>,
    next: u64,
    shape: &MapShape,
    bit48: bool,
) -> ZInode {
    // A hole's blocks are the shared pcluster of zeros, not the file's.
    let blocks: u64 = zext.iter().filter(|z| !z.hole).map(|z| z.blocks).sum();
    let tail = match (&inline, fragment) {
        (Some(v), _) => Tail::Inline(v.len() as u16),
        (None, Some((_, from))) => {
            // The fragment is the last extent; its head's block address is
            // not used (the next free block keeps compact indexes possible).
            zext.push(ZExtent {
                la: from,
                llen: shape.size - from,
                plain: false,
                pblk: next,
                blocks: 0,
                csize: 0,
                hole: false,
                partial: false,
            });
            // Placeholder offset: set once the packed inode is laid out.
            Tail::Fragment(0)
        }
        (None, None) => Tail::Blocks,
    };
    let (index, compact) = encode_map(
        &zext,
        shape.size,
        shape.bs,
        shape.alg,
        tail,
        shape.inode_and_xattrs,
        shape.compact,
        bit48,
        shape.internal,
    );
    ZInode {
        alg: shape.alg,
        extents: zext,
        inline,
        index,
        compact,
        blocks,
        fragment,
    }
}

/// The map records of `extents`, placed one after another from block
/// `first`.
fn place_extents(extents: &[Extent], first: u64, bs: u64) -> Vec<ZExtent> {
    let mut cursor = first;
    extents
        .iter()
        .map(|e| {
            let blocks = e.blocks(bs);
            let z = ZExtent {
                la: e.la,
                llen: e.llen,
                plain: e.compressed.is_none() && !e.hole,
                pblk: cursor,
                blocks,
                csize: match e.hole {
                    true => 0,
                    false => e.compressed.as_ref().map_or(e.llen, |c| c.len() as u64),
                },
                hole: e.hole,
                partial: e.partial,
            };
            cursor += blocks;
            z
        })
        .collect()
}

/// What a compressed file's map depends on besides its extents.
struct MapShape {
    size: u64,
    bs: u64,
    alg: u8,
    inode_and_xattrs: u64,
    compact: bool,
    /// The packed inode or the metabox (no directory names them).
    internal: bool,
}

/// The bytes of the last pcluster (`last`), if they fit after the inode,
/// its xattrs and its map in the inode's block (ztailpacking); `zext`'s
/// last record then takes no blocks.
fn inline_tail(
    f: &ContentReader,
    last: &Extent,
    zext: &mut Vec<ZExtent>,
    m: &MapShape,
) -> Result<Option<Vec<u8>>> {
    let bytes = match &last.compressed {
        Some(c) => c.clone(),
        None => {
            let mut raw = vec![0u8; last.llen as usize];
            f.read_exact_at(&mut raw, last.la)?;
            raw
        }
    };
    if bytes.len() >= m.bs as usize {
        return Ok(None);
    }
    let mut trial = zext.clone();
    let t = trial.len() - 1;
    trial[t].blocks = 0;
    let (index, _) = encode_index(
        &trial,
        m.size,
        m.bs,
        m.alg,
        Tail::Inline(bytes.len() as u16),
        m.inode_and_xattrs,
        m.compact,
    );
    let pad = m.inode_and_xattrs.div_ceil(8) * 8 - m.inode_and_xattrs;
    if m.inode_and_xattrs + pad + index.len() as u64 + bytes.len() as u64 > m.bs {
        return Ok(None);
    }
    *zext = trial;
    Ok(Some(bytes))
}

/// Writes the pclusters of `extents` (all but an inline tail), filling in
/// `zext`'s block addresses: a compressed stream that saves a block,
/// zero-padded in front (or, with `-E dedupe`, the same stream already
/// stored), else the raw bytes.
fn write_pclusters(
    w: &mut Writer,
    f: &ContentReader,
    extents: &[Extent],
    zext: &mut [ZExtent],
    mut dedupe: Option<&mut PclusterDedupe>,
    alg: u8,
    bs: u64,
) -> Result<()> {
    let mut buf = Vec::new();
    for (e, z) in extents.iter().zip(zext.iter_mut()) {
        if e.hole {
            continue;
        }
        match &e.compressed {
            Some(c)
                if (c.len() as u64).div_ceil(bs) < e.llen.div_ceil(bs)
                    || z.blocks * bs < e.llen =>
            {
                if let Some(d) = dedupe.as_deref_mut() {
                    if let Some(at) = d.find(w, c, e.llen, alg, bs)? {
                        // The same stream for the same length is stored:
                        // point at it.
                        z.pblk = at;
                        continue;
                    }
                }
                z.pblk = w.block(bs);
                // Zero padding in front: the stream ends at the pcluster's end.
                w.zeros(z.blocks * bs - c.len() as u64)?;
                w.write(c)?;
                if let Some(d) = dedupe.as_deref_mut() {
                    d.insert(c, e.llen, alg, z.pblk);
                }
            }
            Some(_) | None => {
                // Raw (PLAIN) pcluster: the tail extent that saves no block
                // is stored raw too.
                buf.resize(e.llen as usize, 0);
                f.read_exact_at(&mut buf, e.la)?;
                z.plain = true;
                z.partial = false;
                z.csize = e.llen;
                z.blocks = e.llen.div_ceil(bs);
                z.pblk = w.block(bs);
                w.write(&buf)?;
                w.pad_to_block(bs)?;
            }
        }
    }
    Ok(())
}
