//! Writing the image: file data first (`data`: flat, chunk-based or
//! compressed; blocks already stored are shared, `stored`), then the
//! metadata area and directory blocks (`meta`), and the superblock last
//! (`superblock`), into a temporary file beside the target (`staged`; and the
//! chunks into a blob, with `--blobdev`; Android's block list, `blocklist`)
//! that is fsynced and renamed only when everything succeeded. Any failure
//! or an interrupt removes the temporary files.

pub(crate) mod append;
mod blocklist;
mod data;
mod dispatch;
mod meta;
mod metabox;
mod staged;
mod stored;
mod superblock;
mod zdirs;
mod zfile;

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use ferrofs_format::device::{blob_trailer, BLOB_TRAILER_LEN, DEVICE_SLOT_SIZE};
use ferrofs_format::BlockSize;
use xxhash_rust::xxh3::Xxh3;

use crate::error::{BuildError, Result};
use crate::options::BuildOptions;
use crate::plan::{plan, Plan};
use crate::timing::Clock;
use crate::tree::{InodeId, Tree};
pub(crate) use staged::temp_beside;
use staged::Staged;
pub(crate) use superblock::compression_records;

/// Progress of the data pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Regular files whose data is written so far.
    pub files_done: u64,
    /// Regular files in the build.
    pub files_total: u64,
    /// Their sizes, summed (before compression).
    pub bytes_done: u64,
    /// The sizes of all regular files, summed.
    pub bytes_total: u64,
    /// Every file is placed, and this many bytes of fragments (tails and
    /// small files, `-E fragments`) are being compressed into the packed
    /// inode, the pass's last long step; 0 before it.
    pub packing: u64,
}

/// What was built; serializes as `mkfs --json` prints it (the parts that
/// do not apply left out).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// Inodes in the image.
    pub inodes: u64,
    /// Blocks of the image.
    pub blocks: u64,
    /// Blocks of the metadata area (inodes with their xattrs, indexes and
    /// inline tails, shared xattrs).
    pub meta_blocks: u64,
    /// Bytes of the image (`blocks` times the block size; without
    /// `--offset`'s leading zeros).
    pub bytes: u64,
    /// Inodes in the 32-byte compact form.
    pub compact_inodes: u64,
    /// Regular files stored compressed.
    pub compressed_files: u64,
    /// Physical clusters written.
    pub pclusters: u64,
    /// With `--base`: what came from the base image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<crate::data::base::BaseStats>,
    /// Wall and CPU time of each phase of the build, in order.
    pub phases: Vec<crate::timing::Phase>,
    /// With EROFS images as the source: what became of their files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layers: Option<crate::source::layers::LayerStats>,
    /// With `--incremental`: what was kept and what was appended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incremental: Option<crate::incremental::IncrementalStats>,
    /// With `--verity`: the dm-verity tree appended to the image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verity: Option<ferrofs_verity::dm::Written>,
}

fn check_options(opts: &BuildOptions) -> Result<()> {
    BlockSize::from_bits(opts.blkszbits).map_err(|_| {
        BuildError::Option(format!("block size 2^{} (use 512..4096)", opts.blkszbits))
    })?;
    let bs = opts.block_size();
    if opts.label.len() > 15 {
        return Err(BuildError::Option(
            "volume label longer than 15 bytes".into(),
        ));
    }
    // An image is at most 2^32 blocks of 4 KiB; file offsets end at 2^63.
    if opts.offset > (i64::MAX as u64) - (1 << 44) {
        return Err(BuildError::Option(format!(
            "--offset {}: leaves no room for an image before the largest file offset",
            opts.offset
        )));
    }
    if let Some(bl) = &opts.block_list {
        if bl.path.is_dir() {
            return Err(BuildError::Output {
                path: bl.path.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::IsADirectory,
                    "the block list file is a directory",
                ),
            });
        }
    }
    if opts.blobdev.is_some() && !opts.devices.is_empty() {
        return Err(BuildError::Option(
            "--blobdev cannot be used with layer images (their devices fill the table)".into(),
        ));
    }
    if opts.blobdev.is_some() && opts.chunk_size.is_none() {
        return Err(BuildError::Option(
            "--blobdev needs --chunksize (the blob holds chunks)".into(),
        ));
    }
    if opts.dsunit > 1 << 20 {
        return Err(BuildError::Option(format!(
            "--dsunit {}: more than 2^20 blocks",
            opts.dsunit
        )));
    }
    if let Some(cs) = opts.chunk_size {
        if !cs.is_power_of_two() || cs < bs {
            return Err(BuildError::Option(format!(
                "chunk size {cs} is not a power of two >= the block size"
            )));
        }
    }
    if let Some(c) = &opts.compress {
        if c.compressors.is_empty() {
            return Err(BuildError::Option("no compressor given".into()));
        }
        for p in std::iter::once(c.pcluster_bytes)
            .chain(c.packed_pcluster)
            .chain(c.hints.iter().map(|h| h.pcluster_bytes).filter(|p| *p != 0))
        {
            if p < bs || !p.is_multiple_of(bs) || p > 1 << 20 {
                return Err(BuildError::Option(format!(
                    "pcluster size {p} must be a multiple of the block size ({bs}) up to 1 MiB"
                )));
            }
        }
    }
    Ok(())
}

/// Builds an image of the directory `source` at `output`.
pub fn build(
    source: &Path,
    output: &Path,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
) -> Result<Summary> {
    check_options(opts)?;
    let mut clock = Clock::start();
    let pool = worker_pool(opts)?;
    let tree = pool.install(|| crate::source::dir::scan(source, opts))?;
    clock.lap("scan");
    build_timed(tree, output, opts, interrupted, progress, (pool, clock))
}

/// The build's worker threads (`opts.workers`).
pub(crate) fn worker_pool(opts: &BuildOptions) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(opts.workers)
        .build()
        .map_err(|e| BuildError::Option(format!("worker threads: {e}")))
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
    let pool = worker_pool(opts)?;
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
    check_options(opts)?;
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
    if let Some(v) = &opts.verity {
        summary.verity = Some(
            ferrofs_verity::dm::append_file(&image.file, v).map_err(|e| BuildError::Output {
                path: output.to_path_buf(),
                source: e.into(),
            })?,
        );
    }
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

/// The directory `path` is in.
fn dir_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Writes an image (or its blob) front to back: tracks the position,
/// hashes every byte (for the default uuid), stops on an interrupt.
struct Writer<'a> {
    data: BufWriter<&'a File>,
    /// Where the image starts in the output file.
    base: u64,
    /// Bytes file data starts at multiples of (`--dsunit`; 0: none).
    align: u64,
    hash: Xxh3,
    pos: u64,
    output: &'a Path,
    stop: Option<&'a AtomicBool>,
}

impl Writer<'_> {
    fn write(&mut self, b: &[u8]) -> Result<()> {
        let out = self.output;
        if b.len() >= 65536 {
            check_stop(self.stop, out)?;
        }
        self.data
            .write_all(b)
            .map_err(|source| BuildError::Output {
                path: out.to_path_buf(),
                source,
            })?;
        self.hash.update(b);
        self.pos += b.len() as u64;
        Ok(())
    }
    fn zeros(&mut self, n: u64) -> Result<()> {
        const Z: [u8; 4096] = [0; 4096];
        let mut left = n;
        while left > 0 {
            let k = left.min(4096) as usize;
            self.write(&Z[..k])?;
            left -= k as u64;
        }
        Ok(())
    }
    fn pad_to_block(&mut self, bs: u64) -> Result<()> {
        let rem = self.pos % bs;
        if rem != 0 {
            self.zeros(bs - rem)?;
        }
        Ok(())
    }
    fn block(&self, bs: u64) -> u64 {
        self.pos / bs
    }
    /// Pads (a block boundary) to where file data may start.
    fn align_data(&mut self) -> Result<()> {
        if self.align > 0 && !self.pos.is_multiple_of(self.align) {
            self.zeros(self.align - self.pos % self.align)?;
        }
        Ok(())
    }
    /// Reads back bytes written at image position `pos`.
    fn read_back(&mut self, buf: &mut [u8], pos: u64) -> Result<()> {
        let err = |source| BuildError::Output {
            path: self.output.to_path_buf(),
            source,
        };
        self.data.flush().map_err(err)?;
        std::os::unix::fs::FileExt::read_exact_at(*self.data.get_ref(), buf, self.base + pos)
            .map_err(err)
    }
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

pub(crate) fn check_stop(interrupted: Option<&AtomicBool>, output: &Path) -> Result<()> {
    if interrupted.is_some_and(|f| f.load(Ordering::Relaxed)) {
        return Err(BuildError::Interrupted {
            path: output.to_path_buf(),
        });
    }
    Ok(())
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
        .map_err(|source| BuildError::Output {
            path: output.to_path_buf(),
            source,
        })?;
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
    w.data.flush().map_err(|source| BuildError::Output {
        path: output.to_path_buf(),
        source,
    })?;
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
                .map_err(|source| BuildError::Output {
                    path: b.output.to_path_buf(),
                    source,
                })?;
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
        verity: None,
    };
    Ok((summary, list))
}
