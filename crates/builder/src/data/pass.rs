//! The data pass: every regular file's data, in the plan's order (or a
//! profile's), compressed in windows on the worker pool and written in
//! order, so the image does not depend on the thread count; then the
//! packed inode that holds the fragments, and symlink targets too long to
//! be inline. The pass reads the plan and returns what it [`Placed`]; the
//! pipeline hands that to the plan with [`Placed::settle`] before the
//! metadata is laid out. (The one inode the pass adds to the plan is the
//! packed inode, planned once the fragments are known.)

use crate::data::fragments::{add_packed_inode, Fragments};
use crate::data::placed::Placed;
use crate::data::schedule::{window_bytes, windows, Dispatch, Inbox};
use crate::data::sparse::ZeroPclusters;
use crate::data::write::{write_flat, FileWriter};
use crate::data::zfile::write_compressed;
use crate::data::zpass::{compress_alone, Alone};
use crate::error::Result;
use crate::options::view::DataOptions;
use crate::plan::Plan;
use crate::summary::Progress;
use crate::tree::content::Content;
use crate::tree::{InodeId, Kind, Tree};
use crate::util::out::{check_stop, Writer};

/// Writes every file's data, the packed inode and long symlink targets;
/// the chunks of chunk-based files into `blob` when there is one. The
/// plan is read, not changed, but for the packed inode it gains.
pub(crate) fn write_data<'a>(
    w: &mut Writer<'a>,
    blob: Option<&mut Writer<'a>>,
    tree: &mut Tree,
    plan: &mut Plan,
    opts: &DataOptions<'_>,
    progress: &dyn Fn(Progress),
    pool: &rayon::ThreadPool,
) -> Result<Placed> {
    let (mut placed, mut prog) = write_files(w, blob, tree, plan, opts, progress, pool)?;
    if opts.compress_dirs {
        // `--zD` adds the directories first (see `emit::zdirs`).
    } else if let Some(fr) = placed.frags.take().filter(|f| !f.entries.is_empty()) {
        check_stop(w.stop, w.output)?;
        prog.packing = fr.len.max(1);
        progress(prog);
        placed.packed = Some(write_packed(w, tree, plan, opts, fr, &mut placed, pool)?);
    }
    write_symlinks(w, tree, plan, &mut placed, opts.block_size())?;
    Ok(placed)
}

/// The regular files' data, in order; returns where each went (the
/// fragments collected, not written yet) and the progress so far.
fn write_files<'a>(
    w: &mut Writer<'a>,
    blob: Option<&mut Writer<'a>>,
    tree: &Tree,
    plan: &Plan,
    opts: &DataOptions<'_>,
    progress: &dyn Fn(Progress),
    pool: &rayon::ThreadPool,
) -> Result<(Placed, Progress)> {
    let (interrupted, output) = (w.stop, w.output);
    let files = data_order(tree, plan, opts);
    let mut prog = Progress {
        files_total: files.len() as u64,
        bytes_total: files.iter().map(|&id| tree.inodes[id].data_size()).sum(),
        ..Default::default()
    };
    let frag_mode = opts
        .compress
        .as_ref()
        .is_some_and(|c| c.fragments || c.all_fragments);
    let frags = frag_mode.then(|| Fragments::new(output)).transpose()?;
    let dup = duplicates(tree, plan, opts, frag_mode, pool)?;
    let windows = windows(tree, &files);
    // What each file is compressed with: as planned, but a duplicate is
    // not compressed again (it shares its original's data).
    let zc: Vec<Option<(u64, usize)>> = (plan.inodes.iter().zip(&dup))
        .map(|(p, d)| p.compress.filter(|_| d.is_none()))
        .collect();
    let eligible = |id| crate::data::zpass::plain_segments(tree, &zc, opts, frag_mode, id);
    let base = pool.install(|| crate::data::base::open_for(opts, tree, &zc, &eligible))?;
    let copies = same_bytes(tree, plan, opts, frag_mode, &zc, pool)?;
    let chunks_on_blob = blob.is_some();
    let mut fw = FileWriter::new(w, blob, tree, plan, opts, frags, dup, &copies);
    // A dispatcher thread prepares windows in order and puts every unit on
    // the pool, oldest first (one window's last segments overlap the next
    // ones' first), while this thread writes finished windows in order.
    std::thread::scope(|s| -> Result<()> {
        let (msg_tx, msg_rx) = std::sync::mpsc::channel();
        let (ack_tx, ack_rx) = std::sync::mpsc::channel();
        {
            let (windows, files, zc) = (&windows, &files, &zc);
            let (base, copies) = (base.as_ref(), &copies);
            s.spawn(move || {
                let ctx = Dispatch {
                    tree,
                    zc,
                    opts,
                    frag_mode,
                    base,
                    copies,
                    interrupted,
                    output,
                };
                ctx.run(pool, windows, files, &msg_tx, &ack_rx);
            });
        }
        let mut inbox = Inbox::default();
        for (n, r) in windows.iter().enumerate() {
            let window = &files[r.clone()];
            let (compressed, mut read) =
                inbox.take(n, &msg_rx, window, &zc, base.as_ref(), output)?;
            for (k, &id) in window.iter().enumerate() {
                check_stop(interrupted, output)?;
                let extents = fw.extents_of(id, &compressed[k]);
                fw.write_file(id, extents, read.get_mut(k).and_then(Option::take))?;
                prog.files_done += 1;
                prog.bytes_done += tree.inodes[id].data_size();
                progress(prog);
            }
            // The dispatcher may run one more window ahead (it stops
            // when this thread returns early and the channel closes).
            let _ = ack_tx.send(window_bytes(tree, window));
        }
        Ok(())
    })?;
    let mut placed = fw.finish();
    placed.chunks_on_blob = chunks_on_blob;
    placed.base = base.map(|b| b.stats());
    Ok((placed, prog))
}

/// The regular files with data, in the order their data is written.
pub(crate) fn data_order(tree: &Tree, plan: &Plan, opts: &DataOptions<'_>) -> Vec<InodeId> {
    let mut files: Vec<InodeId> = plan
        .order
        .iter()
        .copied()
        .filter(|&id| matches!(tree.inodes[id].kind, Kind::File { size, .. } if size > 0))
        // Rebuild mode's indexed files have their data on the layers
        // (but for a tail the layer kept inline).
        .filter(|&id| tree.inodes[id].content.external().is_none_or(|x| x.tail))
        // Incremental builds: files whose data the old image holds.
        .filter(|&id| plan.inodes[id].stored_at.is_none())
        .collect();
    if let Some(p) = &opts.profile {
        // Data in first-access order, so a start reads few, mostly
        // sequential runs; files it does not read follow in nid order.
        files.sort_by_key(|&id| p.get(&tree.inodes[id].rel).map_or(usize::MAX, |f| f.rank));
    } else if opts.archive_order {
        // Where each file's first bytes are in its archive; files of a
        // directory (or without data) keep their place after those.
        files.sort_by_key(|&id| match &tree.inodes[id].content {
            Content::Archive { segments, .. } => segments.first().map_or(u64::MAX, |s| s.physical),
            Content::Local | Content::Image { .. } | Content::Placed(_) => u64::MAX,
        });
    }
    files
}

/// Whole-file dedupe (`-E dedupe`, and with fragments, as mkfs.erofs
/// does): for each file, an earlier file with the same bytes stored the
/// same way, whose data it shares (such a file is not compressed again).
fn duplicates(
    tree: &Tree,
    plan: &Plan,
    opts: &DataOptions<'_>,
    frag_mode: bool,
    pool: &rayon::ThreadPool,
) -> Result<Vec<Option<InodeId>>> {
    if opts.dedupe || frag_mode {
        let ztail = opts.compress.as_ref().is_some_and(|c| c.ztailpacking);
        pool.install(|| crate::data::dedupe::find_duplicates(tree, plan, ztail))
    } else {
        Ok(vec![None; tree.inodes.len()])
    }
}

/// Without dedupe, a file with the same bytes as an earlier one is still
/// stored on its own; but the same bytes compressed the same way give the
/// same extents, so it copies the earlier file's instead of being
/// compressed again (the image is what it would be anyway). For each inode
/// that earlier file; empty when dedupe or fragments share such files'
/// data anyway, and with a profile (hot pieces depend on the path) or
/// `--base` (which reuses per file).
fn same_bytes(
    tree: &Tree,
    plan: &Plan,
    opts: &DataOptions<'_>,
    frag_mode: bool,
    zc: &[Option<(u64, usize)>],
    pool: &rayon::ThreadPool,
) -> Result<Vec<Option<InodeId>>> {
    let Some(c) = &opts.compress else {
        return Ok(Vec::new());
    };
    if opts.dedupe || frag_mode || opts.profile.is_some() || opts.base.is_some() {
        return Ok(Vec::new());
    }
    let mut same =
        pool.install(|| crate::data::dedupe::find_duplicates(tree, plan, c.ztailpacking))?;
    for (id, s) in same.iter_mut().enumerate() {
        if s.is_some_and(|orig| zc[id].is_none() || zc[orig] != zc[id]) {
            *s = None;
        }
    }
    Ok(same)
}

/// Plans the packed inode (the fragments) and writes it; the fragment
/// offsets go into the maps that name them when `placed` is settled.
/// Returns its id.
pub(crate) fn write_packed(
    w: &mut Writer,
    tree: &mut Tree,
    plan: &mut Plan,
    opts: &DataOptions<'_>,
    fr: Fragments,
    placed: &mut Placed,
    pool: &rayon::ThreadPool,
) -> Result<InodeId> {
    let packed = pool.install(|| add_packed_inode(tree, plan, fr, opts))?;
    let pid = packed.id;
    plan.order.push(pid);
    let alone = Alone {
        machine_code: &packed.machine_code,
        small: packed.dirs,
    };
    write_synthetic(w, tree, plan, placed, pid, opts, alone, pool)?;
    placed.frag_offsets = Some(packed.offsets);
    Ok(pid)
}

/// Writes the data of an inode the build made itself (the packed inode,
/// the metabox), just added to the tree and the plan: compressed as its
/// plan says when that saves space, else flat. `alone`: what is known of
/// its bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_synthetic(
    w: &mut Writer,
    tree: &Tree,
    plan: &Plan,
    placed: &mut Placed,
    id: InodeId,
    opts: &DataOptions<'_>,
    alone: Alone<'_>,
    pool: &rayon::ThreadPool,
) -> Result<()> {
    let bs = opts.block_size();
    placed.grow(tree.inodes.len());
    let zc: Vec<Option<(u64, usize)>> = plan.inodes.iter().map(|p| p.compress).collect();
    let ex = pool.install(|| compress_alone(tree, &zc, opts, id, alone, w.stop))?;
    check_stop(w.stop, w.output)?;
    match ex {
        Some(ex) => {
            let mut zeros = ZeroPclusters::default();
            let z = write_compressed(w, tree, plan, id, ex, opts, None, None, &mut zeros)?;
            placed.z.insert(id, z);
        }
        None => {
            let mut buf = vec![0u8; 1 << 20];
            let (s, _) = write_flat((w, None), tree, &plan.inodes[id], (id, bs), &mut buf, None)?;
            placed.start_blk[id] = s;
        }
    }
    Ok(())
}

/// Writes symlink targets that need blocks (longer than an inline tail
/// allows).
fn write_symlinks(
    w: &mut Writer,
    tree: &Tree,
    plan: &Plan,
    placed: &mut Placed,
    bs: u64,
) -> Result<()> {
    placed.grow(tree.inodes.len());
    for &id in &plan.order {
        if let Kind::Symlink { target } = &tree.inodes[id].kind {
            let p = &plan.inodes[id];
            if p.blocks > 0 {
                w.align_data()?;
                placed.start_blk[id] = w.block(bs);
                let split = (p.blocks * bs).min(target.len() as u64) as usize;
                w.write(&target[..split])?;
                w.pad_to_block(bs)?;
            }
        }
    }
    Ok(())
}
