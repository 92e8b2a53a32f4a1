//! The build, top to bottom: the source's tree is relabelled, planned,
//! its data written and its metadata laid out and written, the superblock
//! last, then the outputs are synced and put in place (blob first).

//! Writing the image: file data first (`data`: flat, chunk-based or
//! compressed; blocks already stored are shared, `stored`), then the
//! metadata area and directory blocks (`meta`), and the superblock last
//! (`superblock`), into a temporary file beside the target (`staged`; and the
//! chunks into a blob, with `--blobdev`; Android's block list, `blocklist`)
//! that is fsynced and renamed only when everything succeeded. Any failure
//! or an interrupt removes the temporary files.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::AtomicBool;

use ferrofs_format::device::{blob_trailer, BLOB_TRAILER_LEN, DEVICE_SLOT_SIZE};
use xxhash_rust::xxh3::Xxh3;

use crate::data::pass as data;
use crate::emit::{blocklist, meta, metabox, superblock, zdirs};
use crate::error::{BuildError, Result};
use crate::options::BuildOptions;
use crate::plan::{plan, Plan};
use crate::summary::{Progress, Summary};
use crate::tree::{InodeId, Tree};
use crate::util::out::{check_stop, worker_pool, Writer};
use crate::util::staged::Staged;
use crate::util::timing::Clock;

/// Builds an image of the directory `source` at `output`.
pub fn build(
    source: &Path,
    output: &Path,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
) -> Result<Summary> {
    opts.validate()?;
    let mut clock = Clock::start();
    let pool = worker_pool(opts.workers)?;
    let tree = pool.install(|| crate::source::dir::scan(source, opts))?;
    clock.lap("scan");
    build_timed(tree, output, opts, interrupted, progress, (pool, clock))
}

/// Builds an image of an already scanned tree (a directory or an archive)
/// at `output`.
pub fn build_tree(
    tree: Tree,
    output: &Path,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
) -> Result<Summary> {
    let pool = worker_pool(opts.workers)?;
    build_timed(
        tree,
        output,
        opts,
        interrupted,
        progress,
        (pool, Clock::start()),
    )
}

/// [`build_tree`] on the worker `pool`, timing its phases on `clock`
/// (which may hold the scan's).
fn build_timed(
    mut tree: Tree,
    output: &Path,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
    (pool, mut clock): (rayon::ThreadPool, Clock),
) -> Result<Summary> {
    opts.validate()?;
    if let Some(fc) = &opts.fs_config {
        fc.apply(&mut tree, &opts.mount_point)?;
    }
    if let Some(fc) = &opts.file_contexts {
        fc.apply(&mut tree, &opts.mount_prefix());
    }
    let mut plan = plan(&tree, opts)?;
    clock.lap("plan");

    let mut image = Staged::new(output)?;
    let mut blob = opts.blobdev.as_deref().map(Staged::new).transpose()?;
    let mut block_list = match &opts.block_list {
        // Its own path in the message, not the temporary file's.
        Some(bl) => Some(Staged::new(&bl.path).map_err(|e| match e {
            BuildError::Output { source, .. } => BuildError::Output {
                path: bl.path.clone(),
                source,
            },
            other => other,
        })?),
        None => None,
    };
    let (mut summary, list) = write_image(
        &mut tree,
        &mut plan,
        opts,
        (&image.file, output),
        blob.as_ref().map(|b| (&b.file, b.target)),
        interrupted,
        progress,
        (&pool, &mut clock),
    )?;
    image.sync()?;
    if let Some(b) = &blob {
        b.sync()?;
    }
    if let Some(l) = &mut block_list {
        (&l.file).write_all(&list).map_err(l.err())?;
        l.sync()?;
    }
    // The last moment an interrupt can still cancel the build.
    check_stop(interrupted, output)?;
    // The blob first: an image is never there without the data it names.
    if let Some(b) = &mut blob {
        b.commit()?;
    }
    if let Some(l) = &mut block_list {
        l.commit()?;
    }
    image.commit()?;
    clock.lap("sync");
    summary.phases = clock.take();
    Ok(summary)
}

/// Where the root's record goes in the superblock's block (right after
/// the superblock, its compression records and device table), and its
/// length: so an incremental build, which rewrites that block anyway,
/// writes the new root there and no other block of the image. Nids then
/// count from byte 0 (`meta_blkaddr` 0). Not with the 48-bit layout (its
/// root nid has 64 bits: a new root goes after the image), a metabox, or
/// `--zD` (its directories' nids must not depend on where the metadata
/// area starts). The root's entries stay inline only if they fit there
/// too; a root whose record does not fit even without them (large
/// xattrs) stays in the metadata area, nids counting from its start.
fn root_home(
    tree: &Tree,
    plan: &mut Plan,
    opts: &BuildOptions,
    sb_end: u64,
    bs: u64,
) -> Option<(u64, u64)> {
    if plan.bit48 || opts.metabox.is_some() || opts.compress_dirs {
        return None;
    }
    if plan.order.first() != Some(&tree.root) || !tree.inodes[tree.root].is_dir() {
        return None;
    }
    let at = sb_end.next_multiple_of(32);
    let block_end = (1024 / bs + 1) * bs;
    let room = block_end.checked_sub(at)?;
    meta::fit_record(plan, tree.root, (room, room), bs).map(|len| (at, len))
}

/// Writes the image into `file` (for `output`), chunk data into `blob`
/// when there is one; returns what was built and the block list (empty
/// unless asked for).
#[allow(clippy::too_many_arguments)]
fn write_image(
    tree: &mut Tree,
    plan: &mut Plan,
    opts: &BuildOptions,
    (file, output): (&File, &Path),
    blob: Option<(&File, &Path)>,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
    (pool, clock): (&rayon::ThreadPool, &mut Clock),
) -> Result<(Summary, Vec<u8>)> {
    let bs = opts.block_size();
    // The source's inodes; the build adds its own (packed inode, metabox).
    let source_inodes = tree.inodes.len();
    let records = superblock::compression_records(opts, bs);
    let mut sb_end = 1024 + superblock::sb_size(opts) as u64 + records.0.len() as u64;
    // The device table (one slot for the blob, or rebuild mode's layers)
    // follows, slot-aligned.
    let slots = if blob.is_some() {
        1
    } else {
        opts.devices.len()
    };
    let devt = (slots > 0).then(|| {
        let at = sb_end.next_multiple_of(DEVICE_SLOT_SIZE as u64);
        sb_end = at + (slots * DEVICE_SLOT_SIZE) as u64;
        at
    });
    let root_at = root_home(tree, plan, opts, sb_end, bs);
    let head_end = root_at.map_or(sb_end, |(at, len)| at + len);
    let data_start = head_end.div_ceil(bs).max(1);
    let mut blob_w = blob.map(|(f, path)| Writer {
        data: BufWriter::with_capacity(1 << 20, f),
        base: 0,
        align: 0,
        hash: Xxh3::new(),
        pos: 0,
        output: path,
        stop: interrupted,
    });
    let mut w = Writer {
        data: BufWriter::with_capacity(1 << 20, file),
        base: opts.offset,
        align: if opts.dsunit > 1 { opts.dsunit * bs } else { 0 },
        hash: Xxh3::new(),
        pos: data_start * bs,
        output,
        stop: interrupted,
    };
    w.data
        .seek(SeekFrom::Start(opts.offset + data_start * bs))
        .map_err(BuildError::output(output))?;
    let mut placed = data::write_data(&mut w, blob_w.as_mut(), tree, plan, opts, progress, pool)?;
    clock.lap("data");
    // --zD: the directories join the fragments (their entries need the
    // nids, which the metadata layout fixes, so it is done first).
    let dir_nids = match opts.compress_dirs {
        true => Some(zdirs::pack_dirs(
            &mut w,
            tree,
            plan,
            &mut placed,
            opts,
            pool,
        )?),
        false => None,
    };
    let meta = match &opts.metabox {
        Some(mb) => metabox::write_meta(&mut w, tree, plan, &mut placed, opts, *mb, pool)?,
        None => meta::write_meta(
            &mut w,
            tree,
            plan,
            &mut placed,
            bs,
            root_at.map(|r| r.0),
            pool,
        )?,
    };
    if let Some(nids) = dir_nids {
        zdirs::check_nids(&nids, &meta)?;
    }
    clock.lap("meta");
    w.data.flush().map_err(BuildError::output(output))?;
    let blob = match blob_w {
        Some(mut b) => {
            b.pad_to_block(bs)?;
            let (blocks, id) = (b.pos / bs, b.hash.digest128());
            // The trailer block binding the blob to this image (after its
            // recorded blocks: nothing maps it).
            let mut trailer = vec![0u8; bs as usize];
            trailer[..BLOB_TRAILER_LEN].copy_from_slice(&blob_trailer(id, blocks));
            b.data
                .write_all(&trailer)
                .and_then(|_| b.data.flush())
                .map_err(BuildError::output(b.output))?;
            Some(superblock::Blob {
                slot_at: devt.unwrap_or(0),
                blocks,
                hash: id,
            })
        }
        None => None,
    };
    let head = superblock::Head {
        packed: placed.packed,
        records,
        sb_end,
        blob,
        devt_at: devt.unwrap_or(0),
    };
    superblock::write_head(file, &w, opts, plan, &meta, head)?;
    let list = match opts.block_list {
        Some(_) => {
            let files: Vec<InodeId> = data::data_order(tree, plan, opts)
                .into_iter()
                .filter(|&id| id < source_inodes)
                .collect();
            blocklist::render(tree, plan, &placed, &files, opts)
        }
        None => Vec::new(),
    };
    let zinodes = || {
        plan.order
            .iter()
            .filter_map(|&id| plan.inodes[id].z.as_ref())
    };
    let summary = Summary {
        inodes: plan.order.len() as u64,
        blocks: meta.total_blocks,
        meta_blocks: meta.lay.meta_blocks,
        bytes: meta.total_blocks * bs,
        compact_inodes: plan
            .order
            .iter()
            .filter(|&&id| !plan.inodes[id].extended)
            .count() as u64,
        compressed_files: zinodes().count() as u64,
        pclusters: zinodes().map(|z| z.extents.len() as u64).sum(),
        base: placed.base.take(),
        phases: Vec::new(),
        layers: None,
        incremental: None,
    };
    Ok((summary, list))
}
