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

use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use ferrofs_format::device::{blob_trailer, BLOB_TRAILER_LEN};
use xxhash_rust::xxh3::Xxh3;

use crate::data::pass as data;
use crate::data::placed::Placed;
use crate::emit::{blocklist, meta, metabox, superblock, zdirs};
use crate::error::{BuildError, Result};
use crate::incremental::Layer as IncrementalLayer;
use crate::layout::head::Head;
use crate::options::view::{Basis, DataOptions, EmitOptions, Views};
use crate::options::BuildOptions;
use crate::plan::{plan, Labels, Plan};
use crate::source::layers::{self, DataMode};
use crate::source::{oci, tar, Input};
use crate::summary::{Progress, Summary};
use crate::tree::{InodeId, Tree};
use crate::util::out::{check_stop, worker_pool, Writer};
use crate::util::staged::{dir_of, Staged};
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
    build_timed(
        tree,
        output,
        opts,
        interrupted,
        progress,
        (pool, clock, None),
    )
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
        (pool, Clock::start(), None),
    )
}

/// How the output is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// A new image (replacing the file when the build succeeds).
    #[default]
    Fresh,
    /// `--incremental`: the input is appended to the existing image as a
    /// new layer; with `zero_data` (`rvsp`, tar input only) its files get
    /// zero-filled blocks instead of their data.
    Incremental {
        /// Reserve space for file data instead of writing it.
        zero_data: bool,
    },
}

/// Builds an image of `input` at `output`: the one entry for every source
/// and mode (what `ferrofs mkfs` calls). Scratch files go beside `output`.
pub fn build_from(
    input: Input<'_>,
    mode: Mode,
    output: &Path,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
) -> Result<Summary> {
    let spool = dir_of(output);
    check_tar_index(&input, mode, opts)?;
    let zero_data = match mode {
        Mode::Fresh => return build_fresh(input, output, opts, interrupted, progress),
        Mode::Incremental { zero_data } => zero_data,
    };
    let layer = match input {
        Input::Dir(_) if zero_data => {
            return Err(BuildError::Option(
                "--incremental=rvsp needs --tar (it reserves room for an archive's files)".into(),
            ))
        }
        Input::Dir(dir) => IncrementalLayer::Dir(dir),
        Input::Tar { input, opts: t } => IncrementalLayer::Tar {
            input,
            opts: t.clone(),
            spool,
            zero_data,
        },
        Input::Oci { .. } => {
            return Err(BuildError::Option(
                "--incremental does not take oci: sources".into(),
            ))
        }
        Input::Layers { .. } => {
            return Err(BuildError::Option(
                "--incremental does not take EROFS images as sources".into(),
            ))
        }
    };
    crate::incremental::build(output, layer, opts, interrupted, progress)
}

/// A tar index (`TarOptions::index`) is a new image of one plain archive
/// with tar's 512-byte blocks.
fn check_tar_index(input: &Input<'_>, mode: Mode, opts: &BuildOptions) -> Result<()> {
    let refuse = |why: &str| Err(BuildError::Option(format!("a tar index (--tar=i) {why}")));
    match input {
        Input::Tar { opts: t, .. } if t.index => {
            if mode != Mode::Fresh {
                return refuse("cannot be built incrementally");
            }
            if opts.blobdev.is_some() {
                return refuse("has its archive as its device: --blobdev is not taken");
            }
            if opts.blkszbits != 9 {
                return refuse(&format!(
                    "has tar's 512-byte blocks, not {}",
                    opts.block_size()
                ));
            }
            Ok(())
        }
        Input::Oci { opts: t, .. } if t.index => refuse("takes one archive, not an OCI layout"),
        _ => Ok(()),
    }
}

/// [`build_from`] for a new image.
fn build_fresh(
    input: Input<'_>,
    output: &Path,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
) -> Result<Summary> {
    // Before a long scan of an archive or a layout, not after it.
    opts.validate()?;
    let spool = dir_of(output);
    let tree = match input {
        Input::Dir(dir) => return build(dir, output, opts, interrupted, progress),
        Input::Tar { input, opts: t } if opts.streams_in_place() && !t.index => {
            // A piped archive's data goes straight into the image.
            let mut out = Outputs::create(output, opts)?;
            let in_place = out.in_place(&Views::new(opts, Basis::of(opts)))?;
            let tree = tar::scan(input, opts, t.clone(), (spool, Some(in_place)))?;
            let pool = worker_pool(opts.workers)?;
            let clock = Clock::start();
            return build_timed(
                tree,
                output,
                opts,
                interrupted,
                progress,
                (pool, clock, Some(out)),
            );
        }
        Input::Tar { input, opts: t } => tar::scan(input, opts, t.clone(), (spool, None))?,
        Input::Oci {
            layout,
            reference,
            opts: t,
            layer_images: None,
        } => oci::scan(layout, reference, opts, t, spool)?,
        Input::Oci {
            layout,
            reference,
            opts: t,
            layer_images: Some(dir),
        } => {
            let trees = oci::scan_layers(layout, reference, opts, t, spool)?;
            let images = write_layers(trees, dir, opts, interrupted)?;
            return build_merged(
                &images,
                DataMode::BlobIndex,
                true,
                output,
                opts,
                interrupted,
                progress,
            );
        }
        Input::Layers {
            images,
            mode,
            strip_overlay,
        } => {
            return build_merged(
                images,
                mode,
                strip_overlay,
                output,
                opts,
                interrupted,
                progress,
            )
        }
    };
    build_tree(tree, output, opts, interrupted, progress)
}

/// Each of an OCI image's layer trees as an image of its own,
/// `dir/layer-N.img` (bottom first).
fn write_layers(
    trees: Vec<Tree>,
    dir: &Path,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(BuildError::output(dir))?;
    let mut paths = Vec::new();
    for (i, tree) in trees.into_iter().enumerate() {
        let p = dir.join(format!("layer-{}.img", i + 1));
        build_tree(tree, &p, opts, interrupted, &|_| {})?;
        paths.push(p);
    }
    Ok(paths)
}

/// Rebuild mode: the merge of EROFS `images` as layers, their data
/// indexed or copied as `mode` says.
/// Builds at `output` the merge of layer images already opened (their
/// names for messages; bottom first), as a rebuild of files does:
/// `ferrofs mount docker://…` merges a registry's EROFS layers read
/// lazily.
pub fn build_merged_images(
    layers: Vec<(PathBuf, ferrofs::Image)>,
    mode: DataMode,
    strip_overlay: bool,
    output: &Path,
    opts: &BuildOptions,
) -> Result<Summary> {
    let merged = layers::scan_images(layers, opts, mode, strip_overlay)?;
    let mut s = build_tree(merged.tree, output, opts, None, &|_| {})?;
    s.layers = Some(merged.stats);
    Ok(s)
}

fn build_merged(
    images: &[PathBuf],
    mode: DataMode,
    strip_overlay: bool,
    output: &Path,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
) -> Result<Summary> {
    let merged = layers::scan(images, opts, mode, strip_overlay)?;
    let mut s = build_tree(merged.tree, output, opts, interrupted, progress)?;
    s.layers = Some(merged.stats);
    Ok(s)
}

/// What a build is told while it runs, besides its options: a flag that
/// interrupts it, where to report progress, and the clock that times its
/// phases (which may already hold the scan's).
struct Control<'a> {
    interrupted: Option<&'a AtomicBool>,
    progress: &'a dyn Fn(Progress),
    clock: Clock,
}

/// The pipeline, on the worker `pool`: relabel the tree, plan it, lay out
/// the head, write the data, lay out and write the metadata, the
/// superblock last, then make everything durable and put it in place.
fn build_timed(
    mut tree: Tree,
    output: &Path,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
    (pool, clock, out): (rayon::ThreadPool, Clock, Option<Outputs<'_>>),
) -> Result<Summary> {
    let mut ctl = Control {
        interrupted,
        progress,
        clock,
    };
    opts.validate()?;
    if opts.blobdev.is_some() && !tree.devices.is_empty() {
        return Err(BuildError::Option(
            "--blobdev cannot be used with layer images (their devices fill the table)".into(),
        ));
    }
    relabel(&mut tree, opts)?;
    let views = Views::new(opts, Basis::of(opts));
    let labels = Labels {
        owners: opts.owners(),
        time: opts.time,
    };
    let mut plan = plan(&tree, &views.plan, labels)?;
    ctl.clock.lap("plan");
    let mut out = match out {
        Some(out) => out,
        None => Outputs::create(output, opts)?,
    };
    let head = Head::new(&tree, &mut plan, &views.layout, out.blob.is_some());
    if out.in_place.is_some() && head.data_start != Head::data_start_of(&views.layout, 0) {
        // The scan put piped data where the data pass would not look.
        return Err(BuildError::Option(format!(
            "{}: file data starts at block {}, not where it was put",
            output.display(),
            head.data_start
        )));
    }
    let (mut summary, list) =
        write_image(&mut tree, &mut plan, &views, &out, head, &pool, &mut ctl)?;
    if let Some(v) = &opts.verity {
        let tree = ferrofs_verity::dm::append_file(&out.image.file, v);
        summary.verity = Some(tree.map_err(|e| BuildError::output(output)(e.into()))?);
    }
    out.commit(&list, ctl.interrupted)?;
    ctl.clock.lap("sync");
    summary.phases = ctl.clock.take();
    Ok(summary)
}

/// Applies Android's fs_config and file_contexts tables to the tree:
/// owners, modes, capabilities and SELinux labels.
fn relabel(tree: &mut Tree, opts: &BuildOptions) -> Result<()> {
    if let Some(fc) = &opts.fs_config {
        fc.apply(tree, &opts.mount_point)?;
    }
    if let Some(fc) = &opts.file_contexts {
        fc.apply(tree, &opts.mount_prefix());
    }
    Ok(())
}

/// The files a build writes, each under a temporary name until
/// [`Outputs::commit`]: the image, the `--blobdev` blob, the block list.
struct Outputs<'p> {
    image: Staged<'p>,
    blob: Option<Staged<'p>>,
    block_list: Option<Staged<'p>>,
    /// The prefix of the paths the block list names (the mount point),
    /// when it lists files (`--mount-point` given; else it is empty).
    list_prefix: Option<Vec<u8>>,
    /// The image file as a piped archive's scan writes its data into it.
    in_place: Option<Arc<std::fs::File>>,
}

impl<'p> Outputs<'p> {
    fn create(output: &'p Path, opts: &'p BuildOptions) -> Result<Self> {
        let image = Staged::new(output)?;
        let blob = opts.blobdev.as_deref().map(Staged::new).transpose()?;
        let block_list = match &opts.block_list {
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
        let list_prefix = opts
            .block_list
            .as_ref()
            .filter(|bl| bl.mount_point_given)
            .map(|_| opts.mount_prefix());
        Ok(Outputs {
            image,
            blob,
            block_list,
            list_prefix,
            in_place: None,
        })
    }

    /// Where the scan of a piped archive puts its data (see
    /// [`tar::InPlace`]): this image, from the first data block on.
    fn in_place(&mut self, views: &Views<'_>) -> Result<tar::InPlace> {
        let file = self.image.file.try_clone().map_err(self.image.err())?;
        let file = Arc::new(file);
        self.in_place = Some(file.clone());
        let bs = views.emit.block_size();
        Ok(tar::InPlace {
            file,
            at: views.emit.offset + Head::data_start_of(&views.layout, 0) * bs,
            align: bs,
        })
    }

    /// Writers for the image, its data starting at `head`'s first data
    /// block, and for the blob when there is one.
    fn writers<'a>(
        &'a self,
        head: &Head,
        opts: &EmitOptions<'_>,
        stop: Option<&'a AtomicBool>,
    ) -> Result<(Writer<'a>, Option<Writer<'a>>)> {
        let bs = opts.block_size();
        let blob = self.blob.as_ref().map(|b| Writer {
            data: BufWriter::with_capacity(1 << 20, &b.file),
            base: 0,
            align: 0,
            hash: Xxh3::new(),
            pos: 0,
            output: b.target,
            stop,
            in_place: None,
        });
        let mut image = Writer {
            data: BufWriter::with_capacity(1 << 20, &self.image.file),
            base: opts.offset,
            align: opts.data_align(),
            hash: Xxh3::new(),
            pos: head.data_start * bs,
            output: self.image.target,
            stop,
            in_place: self.in_place.clone(),
        };
        image
            .data
            .seek(SeekFrom::Start(opts.offset + head.data_start * bs))
            .map_err(BuildError::output(self.image.target))?;
        Ok((image, blob))
    }

    /// Writes the block list, syncs every file and renames them into
    /// place: the blob first (an image is never there without the data it
    /// names), the image last.
    fn commit(&mut self, list: &[u8], interrupted: Option<&AtomicBool>) -> Result<()> {
        self.image.sync()?;
        if let Some(b) = &self.blob {
            b.sync()?;
        }
        if let Some(l) = &mut self.block_list {
            (&l.file).write_all(list).map_err(l.err())?;
            l.sync()?;
        }
        // The last moment an interrupt can still cancel the build.
        check_stop(interrupted, self.image.target)?;
        if let Some(b) = &mut self.blob {
            b.commit()?;
        }
        if let Some(l) = &mut self.block_list {
            l.commit()?;
        }
        self.image.commit()
    }
}

/// Writes the image into `out` (chunk data into its blob when there is
/// one): the data pass, the metadata, the superblock; returns what was
/// built and the block list (empty unless asked for).
fn write_image(
    tree: &mut Tree,
    plan: &mut Plan,
    views: &Views<'_>,
    out: &Outputs<'_>,
    head: Head,
    pool: &rayon::ThreadPool,
    ctl: &mut Control<'_>,
) -> Result<(Summary, Vec<u8>)> {
    let bs = views.emit.block_size();
    // The source's inodes; the build adds its own (packed inode, metabox).
    let source_inodes = tree.inodes.len();
    let (mut w, mut blob_w) = out.writers(&head, &views.emit, ctl.interrupted)?;
    let mut placed = data::write_data(
        &mut w,
        blob_w.as_mut(),
        tree,
        plan,
        &views.data,
        ctl.progress,
        pool,
    )?;
    placed.settle(plan, &views.data);
    ctl.clock.lap("data");
    let meta = write_meta(
        &mut w,
        tree,
        plan,
        &mut placed,
        &views.data,
        head.root_at,
        pool,
    )?;
    ctl.clock.lap("meta");
    w.data.flush().map_err(BuildError::output(w.output))?;
    let sb_head = superblock::Head {
        packed: placed.packed,
        blob: blob_w
            .map(|b| finish_blob(b, bs, head.devt_at.unwrap_or(0)))
            .transpose()?,
        records: head.records,
        sb_end: head.sb_end,
        devt_at: head.devt_at.unwrap_or(0),
        devices: &tree.devices,
    };
    superblock::write_head(&out.image.file, &w, &views.emit, plan, &meta, sb_head)?;
    let list = match out.block_list {
        Some(_) => {
            let files: Vec<InodeId> = data::data_order(tree, plan, &views.data)
                .into_iter()
                .filter(|&id| id < source_inodes)
                .collect();
            blocklist::render(tree, plan, &placed, &files, out.list_prefix.as_deref())
        }
        None => Vec::new(),
    };
    Ok((summarize(plan, &meta, &mut placed, bs), list))
}

/// Lays out and writes the metadata: the inodes, their xattrs and
/// directory blocks (in a metabox with `--metabox`); with `--zD` the
/// directories join the fragments first (their entries need the nids,
/// which the layout fixes, so it is computed first and checked after).
fn write_meta(
    w: &mut Writer<'_>,
    tree: &mut Tree,
    plan: &mut Plan,
    placed: &mut Placed,
    opts: &DataOptions<'_>,
    root_at: Option<(u64, u64)>,
    pool: &rayon::ThreadPool,
) -> Result<meta::Meta> {
    let dir_nids = match opts.compress_dirs {
        true => Some(zdirs::pack_dirs(w, tree, plan, placed, opts, pool)?),
        false => None,
    };
    let meta = match &opts.metabox {
        Some(mb) => metabox::write_meta(w, tree, plan, placed, opts, *mb, pool)?,
        None => meta::write_meta(
            w,
            tree,
            plan,
            placed,
            opts.block_size(),
            root_at.map(|r| r.0),
            pool,
        )?,
    };
    if let Some(nids) = dir_nids {
        zdirs::check_nids(&nids, &meta)?;
    }
    Ok(meta)
}

/// Ends the blob with its trailer block, which binds it to this image
/// (after its recorded blocks: nothing maps it); `slot_at` is its device
/// slot in the image's head.
fn finish_blob(mut b: Writer<'_>, bs: u64, slot_at: u64) -> Result<superblock::Blob> {
    b.pad_to_block(bs)?;
    let (blocks, id) = (b.pos / bs, b.hash.digest128());
    let mut trailer = vec![0u8; bs as usize];
    trailer[..BLOB_TRAILER_LEN].copy_from_slice(&blob_trailer(id, blocks));
    b.data
        .write_all(&trailer)
        .and_then(|_| b.data.flush())
        .map_err(BuildError::output(b.output))?;
    Ok(superblock::Blob {
        slot_at,
        blocks,
        hash: id,
    })
}

/// What was built, for the caller (phases are filled in at the end).
fn summarize(plan: &Plan, meta: &meta::Meta, placed: &mut Placed, bs: u64) -> Summary {
    let counts = (meta.total_blocks, meta.lay.meta_blocks);
    Summary {
        base: placed.base.take(),
        ..Summary::of(plan, plan.order.len() as u64, counts, bs)
    }
}
