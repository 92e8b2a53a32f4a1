//! `ferrofs mkfs` (and the `mkfs.erofs` drop-in): its options, and the
//! build they drive with progress and a summary.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

mod options;

#[derive(clap::Args, Clone)]
pub(crate) struct MkfsArgs {
    /// The image file to write (replaced atomically).
    image: PathBuf,
    /// The directory tree to pack (with --tar: the archive; `-` or none
    /// for standard input), or `oci:DIR[:REF]`: the image REF names (by
    /// its org.opencontainers.image.ref.name; without REF the only one)
    /// in the OCI image layout DIR, its layers applied in order with
    /// their whiteouts (write ./oci:NAME for a directory of that name);
    /// or `docker://[HOST/]REPO[:TAG|@DIGEST]`: an image in a registry,
    /// pulled (digests checked) into a scratch layout beside IMAGE first.
    /// An EROFS image (a file with the EROFS magic) makes a rebuild: it
    /// and the LAYERs after it are merged as overlayfs layers.
    source: Option<PathBuf>,
    /// Rebuild mode: more EROFS images, the layers above SOURCE, bottom
    /// to top (later ones win).
    #[arg(value_name = "LAYER")]
    layers: Vec<PathBuf>,
    /// Rebuild mode: `data` (also `--clean` alone) copies every file's
    /// data into the image, which then stands alone; without it file data
    /// stays in the layers, which become the image's extra devices (one
    /// per layer, in order). Other sources always build clean.
    #[arg(long, value_name = "data", num_args = 0..=1, require_equals = true, default_missing_value = "data")]
    clean: Option<String>,
    /// With an `oci:` SOURCE: also write each layer as an image of its
    /// own into DIR (layer-1.img, layer-2.img, ... bottom first, built
    /// with these options, whiteouts as overlayfs ones) and make IMAGE
    /// their merge, whose file data stays in them: readers take them, in
    /// order, as IMAGE's devices.
    #[arg(long, value_name = "DIR")]
    layer_images: Option<PathBuf>,
    #[command(flatten)]
    registry: crate::registry::RegistryArgs,
    /// Read a tar archive (ustar, GNU, PAX; owners and devices from the
    /// headers, no root needed) instead of a directory. `--tar=f` is the
    /// same. `--tar=i` (or `=0`) writes a tar index: only metadata, with
    /// 512-byte blocks (-b is ignored, as mkfs.erofs ignores it), whose
    /// files point at their data in the archive; append the archive to the
    /// image (`cat IMAGE ARCHIVE`) and the result mounts and reads as the
    /// archive's tree. mkfs.erofs's headerball mode and block map files
    /// (`--tar=X,FILE`) are not supported.
    #[arg(long, value_name = "MODE", num_args = 0..=1, require_equals = true, default_missing_value = "f")]
    tar: Option<String>,
    /// With --tar: turn aufs whiteouts (.wh.NAME, .wh..wh..opq) into
    /// overlayfs ones.
    #[arg(long)]
    aufs: bool,
    /// With --tar or EROFS layers: 1 leaves overlayfs whiteouts and
    /// opaque/origin xattrs out of the image; 0 (default) keeps them.
    #[arg(long, value_name = "0|1", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=1))]
    ovlfs_strip: u8,
    /// With --tar: the order of file data, `path` (default) or `none`: in
    /// an uncompressed image without inline data (-E noinline_data), the
    /// order the archive holds it, as mkfs.erofs does.
    #[arg(long, value_name = "ORDER", default_value = "path", value_parser = ["path", "none"])]
    sort: String,
    /// With --tar: decompress a gzip archive (one that does not start as
    /// gzip is read as it is). =FILE also writes the decompressed archive
    /// to FILE, and file data is read back from there instead of a spool.
    #[arg(long, alias = "gzip", value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    ungzip: Option<String>,
    /// With --tar: decompress an xz, lzma or lzip archive (a plain tar
    /// archive is read as it is). =FILE as for --ungzip. Also spelled
    /// --unlzma, as mkfs.erofs accepts it.
    #[arg(long, alias = "unlzma", value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "", conflicts_with = "ungzip")]
    unxz: Option<String>,
    /// Block size in bytes: 512, 1024, 2048 or 4096.
    #[arg(short = 'b', value_name = "BYTES", default_value_t = 4096)]
    block_size: u32,
    /// Give every file this mtime (UNIX seconds) and use it as build time.
    /// Without -T, SOURCE_DATE_EPOCH (if set) clamps newer mtimes to it.
    #[arg(short = 'T', value_name = "SECONDS", allow_negative_numbers = true)]
    timestamp: Option<i64>,
    /// With -T: use the timestamp as build time only; keep file mtimes.
    #[arg(long)]
    mkfs_time: bool,
    /// Ignore file mtimes: every file gets the build time.
    #[arg(long)]
    ignore_mtime: bool,
    /// Volume UUID, `clear` (all zeros) or `random` (default: derived from
    /// the image's contents, so equal inputs give equal images).
    #[arg(short = 'U', value_name = "UUID")]
    uuid: Option<String>,
    /// Volume label (at most 15 bytes).
    #[arg(short = 'L', value_name = "LABEL")]
    label: Option<String>,
    /// Make every file owned by root (uid 0, gid 0).
    #[arg(long)]
    all_root: bool,
    /// Add this to every uid.
    #[arg(long, value_name = "N", default_value_t = 0)]
    uid_offset: u32,
    /// Add this to every gid.
    #[arg(long, value_name = "N", default_value_t = 0)]
    gid_offset: u32,
    /// Set every uid to this.
    #[arg(long, value_name = "UID")]
    force_uid: Option<u32>,
    /// Set every gid to this.
    #[arg(long, value_name = "GID")]
    force_gid: Option<u32>,
    /// Leave out this path (relative to SOURCE; repeatable).
    #[arg(long, value_name = "PATH")]
    exclude_path: Vec<OsString>,
    /// Leave out paths (relative to SOURCE) matching this regex (repeatable).
    #[arg(long, value_name = "REGEX")]
    exclude_regex: Vec<String>,
    /// Xattrs carried by at least N inodes are stored once, shared;
    /// a negative N drops all xattrs.
    #[arg(
        short = 'x',
        value_name = "N",
        default_value_t = 2,
        allow_negative_numbers = true
    )]
    xattr_tolerance: i32,
    /// Store this long xattr name prefix once (e.g. trusted.overlay.; repeatable).
    #[arg(long, value_name = "PREFIX")]
    xattr_prefix: Vec<String>,
    /// Put inodes, shared xattrs and the long-prefix table into the
    /// metabox (Linux 6.17+; implies -E 48bit), compressed in pclusters of
    /// BYTES with ALG (default: the first -z compressor; none without -z;
    /// naming one without -z compresses file data with it too, as
    /// mkfs.erofs does).
    #[arg(short = 'm', value_name = "BYTES[:ALG]")]
    metabox: Option<String>,
    /// Compress directories: every directory goes whole into the packed
    /// inode, compressed with the fragments (=0 turns it off; mkfs.erofs
    /// 1.9.4 reads its own `--zD=1` as off, ferrofs as its man page says).
    #[arg(long = "zD", value_name = "0|1", num_args = 0..=1, require_equals = true, default_missing_value = "1", value_parser = ["0", "1"])]
    compress_dirs: Option<String>,
    /// Give every non-empty regular file an xattr NAME (default
    /// erofs.fingerprint.v1, which the kernel does not list) holding
    /// `sha256:` and the SHA-256 of its contents.
    #[arg(long, value_name = "NAME", num_args = 0..=1, require_equals = true, default_missing_value = "erofs.fingerprint.v1")]
    xattr_inode_digest: Option<String>,
    /// Store every regular file chunk-based with chunks of this many bytes
    /// (sparse files are stored chunk-based, with holes, unless -E sparse
    /// compresses them).
    #[arg(long, value_name = "BYTES", value_parser = crate::size::parse_u64)]
    chunksize: Option<u64>,
    /// Extended options, comma-separated: force-inode-extended,
    /// force-inode-compact (an inode that needs the extended form is an
    /// error), noinline_data (or ^inline_data: regular files' tails get blocks
    /// of their own; directories and symlinks stay inline), ztailpacking,
    /// fragments[=PCLUSTER] (tails and small files compressed together in
    /// the packed inode), all-fragments (every file there), dedupe
    /// (identical files stored once, also done with fragments, and runs
    /// shared inside long files; without -z, identical blocks: files become
    /// chunk-based with one-block chunks unless --chunksize says
    /// otherwise), force-chunk-indexes (chunk
    /// tables of 8-byte indexes), force-inode-blockmap (4-byte block maps,
    /// the default), nosbcrc (no superblock checksum), ^xattr-name-filter
    /// (no xattr name bloom filters), 48bit (the 48-bit layout, Linux
    /// 6.15+: compact inodes keep their own mtime, all-hole files take no
    /// blocks), dot-omitted (directories without "."; implies 48bit),
    /// plain-xattr-prefixes (the long-prefix table raw on the device),
    /// legacy-compress (full, not compact, indexes of compressed files, as
    /// mkfs.erofs 1.9 writes them; its pre-5.4 layout without LZ4 0padding
    /// is not made, as 1.9 makes it no longer), sparse (runs of zeros in
    /// compressed files, holes of the source or written zeros, become
    /// sparse pclusters that take no blocks: with 48bit, empty extent
    /// records, read as holes by every kernel that mounts the image;
    /// otherwise Linux 7.2's LI_HOLE lclusters in full indexes, 8 bytes
    /// per block of the file, which older kernels read by decoding a shared
    /// pcluster of zeros).
    #[arg(short = 'E', value_name = "OPTS")]
    extended: Vec<String>,
    /// Metadata zone: i (inodes), d (directory blocks), id (both, the
    /// default) or 0 (none). ferrofs always writes inodes and directory
    /// blocks after all file data, so every value gives the same image.
    #[arg(long = "MZ", value_name = "i|d|id|0", num_args = 0..=1, require_equals = true, default_missing_value = "id", value_parser = ["i", "d", "id", "di", "0"])]
    metadata_zone: Option<String>,
    /// A named set of options, for those who would rather not pick them:
    /// `fast` (-z lz4 -C 65536: quick to build and to read; Linux 5.13+),
    /// `balanced` (-z lz4hc,9 -C 65536 -E ztailpacking; Linux 5.17+),
    /// `dense` (-z lzma,6 -C 131072 -E fragments,dedupe,ztailpacking: the
    /// smallest image older kernels mount; Linux 6.1+; add -m 4096 --zD
    /// for the 2025 format, smaller still, Linux 6.17+). Options given
    /// beside it win over the preset's.
    #[arg(long, value_name = "NAME", value_parser = ["fast", "balanced", "dense"])]
    preset: Option<String>,
    /// Compress file data: lz4, lz4hc[,LEVEL], lzma[,LEVEL], deflate[,LEVEL],
    /// zstd[,LEVEL] (also `level=N`); alternatives for --compress-hints
    /// separated by ':'. Default: none, data is stored uncompressed (or
    /// what --preset says).
    #[arg(short = 'z', value_name = "ALG[,LEVEL]")]
    compress: Option<String>,
    /// Physical cluster size in bytes (a multiple of the block size, up to
    /// 1 MiB); default: one block.
    #[arg(short = 'C', value_name = "BYTES", value_parser = crate::size::parse_u64)]
    pcluster: Option<u64>,
    /// Per-path compression: lines of `<pcluster bytes> <compressor index> <regex>`.
    #[arg(long, value_name = "FILE")]
    compress_hints: Option<PathBuf>,
    /// Compression threads (default: one per core); the image is the same
    /// for any number.
    #[arg(short = 'j', long = "workers", value_name = "N", default_value_t = 0)]
    workers: usize,
    /// Mount point the image is meant for (default /): the prefix of the
    /// paths --file-contexts, --fs-config-file and --block-list-file use.
    #[arg(long, value_name = "PATH")]
    mount_point: Option<OsString>,
    /// Lay data out for a recorded start-up (`ferrofs mount --trace`, or a
    /// list of paths): data in first-access order, pieces read in small
    /// bits in pclusters of their own, small hot fragments first. Repeat to
    /// merge traces (files read by at least half of them count).
    #[arg(long, value_name = "TRACE")]
    profile: Vec<PathBuf>,
    /// With --profile: the read-around of the kernel that will read the
    /// image (its readahead, e.g. 128K): hot pieces are widened by half of
    /// it on each side. 0: pieces are exactly what the traces read.
    #[arg(long, value_name = "BYTES", default_value = "0", value_parser = crate::size::parse)]
    profile_readahead: usize,
    /// With -z: no pcluster decodes to more than this many bytes (rounded
    /// down to whole blocks), so a small read of very compressible data
    /// decodes little.
    #[arg(long, value_name = "BYTES", value_parser = crate::size::parse)]
    max_extent_bytes: Option<usize>,
    /// Store every hard link as an inode of its own.
    #[arg(long)]
    hard_dereference: bool,
    /// Write the image this many bytes into IMAGE (the bytes before it
    /// are zeros); readers take the same `--offset`, the kernel a loop
    /// device's (`mount -o loop,offset=N`).
    #[arg(long, value_name = "BYTES", default_value = "0", value_parser = crate::size::parse_u64)]
    offset: u64,
    /// Label every file by its path (under --mount-point) from this SELinux
    /// file_contexts file: the last matching line wins, exact paths over
    /// regexes; labels from the source are dropped.
    #[arg(long, value_name = "FILE")]
    file_contexts: Option<PathBuf>,
    /// Android's canned fs_config file: every file's owner, permission
    /// bits and capabilities by its path under --mount-point (lines `PATH
    /// UID GID MODE [capabilities=N]`); a file without a line is an error.
    #[arg(long, value_name = "FILE")]
    fs_config_file: Option<PathBuf>,
    /// Android's product_out directory: accepted with --fs-config-file,
    /// which does not use it (as in mkfs.erofs); Android's built-in
    /// fs_config tables, which do, are not implemented.
    #[arg(long, value_name = "DIR", requires = "fs_config_file")]
    product_out: Option<PathBuf>,
    /// Android's block list: write to FILE a line for every regular file
    /// whose data takes blocks of the image, `/MOUNT_POINT/PATH` and its
    /// blocks (`A` or `A-B`, from the image's first block), as mkfs.erofs
    /// 1.8 built for Android does. Without --mount-point nothing is listed
    /// (the file is written empty), as there.
    #[arg(long, value_name = "FILE")]
    block_list_file: Option<PathBuf>,
    /// With --chunksize: write the chunks of chunk-based files to this file,
    /// the image's extra device (created or replaced; readers take it as
    /// `--device FILE`, the kernel as `-o device=FILE`).
    #[arg(long, value_name = "FILE")]
    blobdev: Option<PathBuf>,
    /// Make the root directory's inline xattr area at least this many
    /// bytes (16 to 65532), zero-filled room for xattrs added later.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    root_xattr_isize: u32,
    /// Start every file's data at a multiple of this many blocks (a RAID
    /// stripe unit, say); 0 or 1: anywhere.
    #[arg(long, value_name = "BLOCKS", default_value_t = 0)]
    dsunit: u64,
    /// Print nothing but errors.
    #[arg(long, overrides_with = "quiet")]
    pub(crate) quiet: bool,
    /// Run as the mkfs.erofs drop-in: options that mean nothing without
    /// -z are ignored with a warning, as mkfs.erofs ignores them, instead
    /// of refused.
    #[arg(skip)]
    pub(crate) dropin: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// Print where the build's time went: wall and CPU seconds and cores
    /// used per phase (scan, plan, data, meta, sync), on standard error.
    #[arg(long)]
    timings: bool,
    /// Rebuild from a previous image: every file whose bytes are unchanged
    /// (compared in full with what OLD decodes to) takes its compressed
    /// pclusters from OLD instead of being compressed again, when OLD was
    /// compressed with this build's options (checked on samples). The
    /// image is complete and self-contained; the summary says what was
    /// reused.
    #[arg(long, value_name = "OLD.img")]
    base: Option<PathBuf>,
    /// Put SOURCE over the image already at IMAGE and append only what
    /// changed: unchanged files keep their inodes and data, every byte of
    /// the image outside its superblock block stays as it was. MODE `data`
    /// (the default) takes file data from SOURCE; `rvsp` (with --tar)
    /// reserves the files' blocks filled with zeros. See docs/incremental.md.
    #[arg(long, value_name = "MODE", num_args = 0..=1, require_equals = true, default_missing_value = "data")]
    incremental: Option<String>,
    /// Append a dm-verity hash tree to the image (as `ferrofs verity`
    /// does: the image padded to 4 KiB, veritysetup's superblock, the tree;
    /// sha256, 4096-byte blocks), written and synced with the image; the
    /// summary gives its root hash and hash offset.
    /// Not with --incremental (which changes an image in place) or
    /// --blobdev (whose data the tree would not cover).
    #[arg(long, conflicts_with_all = ["incremental", "blobdev"])]
    verity: bool,
    /// The tree's salt (hex). Default: derived from the image's first
    /// block and size, so the same build always gives the same tree.
    #[arg(long, value_name = "HEX", requires = "verity")]
    verity_salt: Option<String>,
}

pub(crate) fn mkfs(a: &MkfsArgs) -> Result<ExitCode> {
    let a = &options::with_preset(a);
    let rebuild = crate::rebuild::layers(a.tar.is_some(), &a.source, &a.layers, &a.clean)?;
    // Rebuild mode: the layers' block size, as mkfs.erofs takes it; a tar
    // index: tar's.
    let block_size = match tar_index(a)? {
        true => 512,
        false => crate::rebuild::block_size(a.block_size, &rebuild)?,
    };
    let o = options::build_options(a, block_size)?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let pb = progress_bar(a.quiet);
    let tick = |p: ferrofs_builder::Progress| {
        pb.set_length(p.bytes_total);
        pb.set_position(p.bytes_done);
        if p.packing > 0 {
            pb.set_message(format!(
                "{}/{} files; compressing {} of fragments into the packed inode",
                p.files_done,
                p.files_total,
                indicatif::BinaryBytes(p.packing)
            ));
        } else {
            pb.set_message(format!("{}/{} files", p.files_done, p.files_total));
        }
    };
    let res = dispatch(a, &o, &rebuild, &stop, &tick);
    pb.finish_and_clear();
    let s = match res? {
        Ok(s) => s,
        Err(e @ ferrofs_builder::BuildError::Interrupted { .. }) => {
            eprintln!("ferrofs mkfs: {e}");
            return Ok(ExitCode::from(130));
        }
        Err(e) => return Err(e.into()),
    };
    if !a.profile.is_empty() {
        crate::hotrecord::write(&a.image, a.offset, &a.profile, a.quiet || a.json)?;
    }
    crate::summary::print(&a.image, a.offset, &s, block_size, a.json, a.quiet)?;
    if a.compress.is_none() && a.metabox.is_none() && !a.dropin && !a.quiet && !a.json {
        use std::io::Write;
        let mut out = crate::out::stdout();
        writeln!(
            out,
            "note: no -z or --preset given: file data is stored uncompressed"
        )?;
        out.flush()?;
    }
    if a.timings {
        crate::summary::print_timings(&s.phases);
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds an image as `ferrofs mkfs ARGS…` does (ARGS without the
/// program name), printing nothing: the layers of `ferrofs convert`.
pub(crate) fn build_quiet(
    args: &[OsString],
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<ferrofs_builder::Summary> {
    #[derive(clap::Parser)]
    struct Line {
        #[command(flatten)]
        a: MkfsArgs,
    }
    let line = <Line as clap::Parser>::try_parse_from(
        std::iter::once(OsString::from("mkfs")).chain(args.iter().cloned()),
    )
    .map_err(|e| anyhow::anyhow!("mkfs options: {}", e.render().to_string().trim()))?;
    let a = &options::with_preset(&line.a);
    let o = options::build_options(a, a.block_size)?;
    let s = dispatch(a, &o, &[], stop, &|_| {})??;
    if !a.profile.is_empty() {
        crate::hotrecord::write(&a.image, a.offset, &a.profile, true)?;
    }
    Ok(s)
}

/// The progress bar of a build (hidden with `--quiet`; indicatif draws
/// nothing when standard error is not a terminal).
fn progress_bar(quiet: bool) -> ProgressBar {
    let pb = ProgressBar::new(0);
    if quiet {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    pb.set_style(
        ProgressStyle::with_template(
            "{elapsed} [{bar:30}] {binary_bytes}/{binary_total_bytes} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    // The clock keeps running through long steps between file updates
    // (a large file, the packed inode).
    pb.enable_steady_tick(std::time::Duration::from_millis(500));
    pb
}

/// Builds from the source the command line names: EROFS layers (rebuild
/// mode), an OCI layout (`oci:`, maybe with `--layer-images`), a tar
/// stream, a directory, each maybe `--incremental`. The outer error is the
/// command line's; the inner one the build's.
fn dispatch(
    a: &MkfsArgs,
    o: &ferrofs_builder::BuildOptions,
    rebuild: &[PathBuf],
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
    tick: &dyn Fn(ferrofs_builder::Progress),
) -> Result<Result<ferrofs_builder::Summary, ferrofs_builder::BuildError>> {
    use ferrofs_builder::source::tar::{Compressed, TarInput, TarOptions};
    use ferrofs_builder::Input;
    let mode = match a.incremental.as_deref() {
        None => ferrofs_builder::Mode::Fresh,
        Some("data") => ferrofs_builder::Mode::Incremental { zero_data: false },
        Some("rvsp") => ferrofs_builder::Mode::Incremental { zero_data: true },
        Some(m) => bail!("--incremental={m}: MODE is data or rvsp"),
    };
    // A registry image is pulled into a layout first, removed after.
    let mut _pulled = None;
    let oci = match (&a.tar, &a.source) {
        (None, Some(s)) if !a.dropin && s.to_str().is_some_and(crate::registry::is_docker) => {
            let reference = s.to_str().unwrap_or_default();
            let scratch = crate::registry::scratch_beside(&a.image, "pull")?;
            let (_, pulled) = crate::registry::pull_into(reference, &a.registry, &scratch.0)?;
            let spec = (scratch.0.clone(), Some(pulled.ref_name));
            _pulled = Some(scratch);
            Some(spec)
        }
        // mkfs.erofs reads `oci:...` as a directory name.
        (None, Some(s)) if !a.dropin => s
            .to_str()
            .and_then(ferrofs_builder::source::oci::parse_spec),
        _ => None,
    };
    if a.layer_images.is_some() && oci.is_none() {
        bail!("--layer-images needs an oci: or docker:// SOURCE");
    }
    let tar_only = a.aufs || a.ovlfs_strip == 1 || a.ungzip.is_some() || a.unxz.is_some();
    if tar_only && a.tar.is_none() && rebuild.is_empty() {
        match oci {
            Some(_) => {
                bail!("--aufs, --ovlfs-strip, --ungzip and --unxz do not apply to oci: sources")
            }
            None => bail!("--aufs, --ovlfs-strip, --ungzip and --unxz need --tar"),
        }
    }
    let (compressed, raw_copy) = match (&a.ungzip, &a.unxz) {
        (Some(c), _) => (Compressed::Gzip, Some(PathBuf::from(c))),
        (_, Some(c)) => (Compressed::Xz, Some(PathBuf::from(c))),
        (None, None) => (Compressed::No, None),
    };
    let topts = TarOptions {
        root_mtime: root_mtime(o),
        compressed,
        raw_copy: raw_copy.filter(|c| !c.as_os_str().is_empty()),
        aufs: a.aufs,
        ovlfs_strip: a.ovlfs_strip == 1,
        index: tar_index(a)?,
    };
    let tar_input;
    let input = match (&a.tar, &a.source, &oci) {
        _ if !rebuild.is_empty() => Input::Layers {
            images: rebuild,
            mode: match a.clean {
                Some(_) => ferrofs_builder::source::layers::DataMode::Full,
                None => ferrofs_builder::source::layers::DataMode::BlobIndex,
            },
            strip_overlay: a.ovlfs_strip == 1,
        },
        (None, Some(_), Some((dir, reference))) => Input::Oci {
            layout: dir,
            reference: reference.as_deref(),
            opts: &topts,
            layer_images: a.layer_images.as_deref(),
        },
        (Some(_), source, _) => {
            tar_input = match source {
                Some(p) if p.as_os_str() != "-" => TarInput::Path(p.clone()),
                _ => TarInput::Stdin,
            };
            Input::Tar {
                input: &tar_input,
                opts: &topts,
            }
        }
        (None, Some(source), None) => Input::Dir(source),
        (None, None, _) => bail!("mkfs needs a SOURCE directory (or --tar)"),
    };
    Ok(ferrofs_builder::Build::new(input)
        .mode(mode)
        .options(o)
        .progress(tick)
        .interrupt_on(stop)
        .write_to(&a.image))
}

/// Whether `--tar=MODE` asks for a tar index (`i`, or `0` as mkfs.erofs
/// also spells it) rather than a full image (`f`); other modes are refused
/// by name.
fn tar_index(a: &MkfsArgs) -> Result<bool> {
    match a.tar.as_deref() {
        None | Some("f") => Ok(false),
        Some("i" | "0") => Ok(true),
        Some("headerball") => {
            bail!("--tar=headerball: archives of headers without data are not supported")
        }
        Some(m) if m.contains(',') => bail!(
            "--tar={m}: block map files (--tar=MODE,FILE) are not supported; \
             --tar=i alone writes an index for the archive appended to the image"
        ),
        Some(m) => bail!("--tar={m}: the mode is f (full data, the default) or i (an index)"),
    }
}

/// The root's mtime when an archive has no entry for it: the fixed time
/// the options give, else the build time.
fn root_mtime(o: &ferrofs_builder::BuildOptions) -> i64 {
    use ferrofs_builder::TimePolicy;
    match o.time {
        TimePolicy::Fixed(t) | TimePolicy::BuildTimeOnly(t) | TimePolicy::Clamp(t) => t,
        TimePolicy::Keep | TimePolicy::IgnoreMtime => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0)),
    }
}
