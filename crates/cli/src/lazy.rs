//! `ferrofs mount docker://…`: an EROFS-native image served from its
//! registry without downloading it. Only the manifest and config are
//! fetched; each layer blob is read with range requests through the
//! chunk cache, and a merged metadata image of the layers (rebuild mode:
//! its files' chunk indexes point into the layer blobs, its extra
//! devices) is built locally once per manifest and served through FUSE.
//!
//! Every byte served is vouched for by the manifest's digest: a layer
//! whose descriptor names a dm-verity tree (`ferrofs convert --verity`:
//! `org.erofs.dmverity.root_digest`, `…hash_offset`, `…block_size`) is
//! read lazily with each block checked against that tree (the manifest
//! covers the annotation, the annotation the tree, the tree the block);
//! any other layer is downloaded whole and checked against its digest
//! first, unless `--insecure-lazy` asks to read it lazily unchecked.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use ferrofs::verity::{RootHash, Verity, VerityOptions};
use ferrofs::{Image, OpenOptions, ReadAt};
use ferrofs_remote::registry::manifest::{self, Descriptor};
use ferrofs_remote::registry::{blob, Reference, Registry};

use crate::registry::RegistryArgs;
use crate::source::{RemoteArgs, Sources};

/// The annotations of a layer's dm-verity tree.
pub const ROOT_DIGEST: &str = "org.erofs.dmverity.root_digest";
pub const HASH_OFFSET: &str = "org.erofs.dmverity.hash_offset";
pub const BLOCK_SIZE: &str = "org.erofs.dmverity.block_size";

/// One source read by two images (a layer while merging, then the
/// merged image's device).
#[derive(Clone)]
struct Both(Arc<dyn ReadAt>);

impl ReadAt for Both {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
}

/// How a layer is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    Verified,
    Insecure,
    Whole,
}

impl How {
    fn says(self) -> &'static str {
        match self {
            How::Verified => "read lazily, every block checked against its dm-verity tree",
            How::Insecure => "read lazily UNCHECKED (--insecure-lazy)",
            How::Whole => "downloaded whole, its digest checked (no dm-verity tree)",
        }
    }
}

/// The dm-verity tree a descriptor names: root hash (hex) and hash
/// offset; `None` without one. A malformed annotation is an error.
fn tree_of(d: &Descriptor) -> Result<Option<(RootHash, u64)>> {
    let Some(root) = d.annotations.get(ROOT_DIGEST) else {
        return Ok(None);
    };
    let hex = root.strip_prefix("sha256:").unwrap_or(root);
    let root: RootHash = hex
        .parse()
        .with_context(|| format!("layer {}: {ROOT_DIGEST} {root:?}", d.digest))?;
    let off: u64 = d
        .annotations
        .get(HASH_OFFSET)
        .and_then(|v| v.parse().ok())
        .with_context(|| {
            format!(
                "layer {}: {ROOT_DIGEST} without a numeric {HASH_OFFSET}",
                d.digest
            )
        })?;
    let bs: u64 = match d.annotations.get(BLOCK_SIZE) {
        Some(v) => v
            .parse()
            .with_context(|| format!("layer {}: {BLOCK_SIZE} {v:?}", d.digest))?,
        None => 4096,
    };
    if bs != 4096 || !off.is_multiple_of(bs) || off >= d.size {
        bail!("layer {}: dm-verity tree at {off} with {bs}-byte blocks in a blob of {} bytes: not usable", d.digest, d.size);
    }
    Ok(Some((root, off)))
}

/// Where merged images are kept: `--cache-dir DIR/merged`, else a
/// directory of this user's under the temporary directory.
fn merged_dir(remote: &RemoteArgs) -> PathBuf {
    match remote.cache_dir() {
        Some(d) => d.join("merged"),
        None => {
            std::env::temp_dir().join(format!("ferrofs-merged-{}", nix::unistd::Uid::effective()))
        }
    }
}

/// Makes `dir` (mode 0700) if missing and checks it is this user's
/// alone: a merged image found there is trusted as built here, so a
/// directory another user can write (a planted one in /tmp) is refused.
fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
    }
    let md = std::fs::symlink_metadata(dir).with_context(|| format!("{}", dir.display()))?;
    let me = nix::unistd::Uid::effective().as_raw();
    if !md.is_dir() || md.uid() != me || md.mode() & 0o022 != 0 {
        bail!(
            "{}: not a directory of this user's that only it can write: merged images are \
             kept there (give --cache-dir, or remove it)",
            dir.display()
        );
    }
    Ok(())
}

/// Opens the image `reference` names, as the module docs say; `say`
/// prints what became of each layer.
pub fn open(
    reference: &str,
    reg_args: &RegistryArgs,
    remote: &RemoteArgs,
    insecure_lazy: bool,
    say: bool,
    mut opts: OpenOptions,
) -> Result<Image> {
    let r = Reference::parse(reference)?;
    let reg = Arc::new(Registry::connect(&r, &reg_args.options())?);
    let res = reg.resolve(&r, &reg_args.platform()?)?;
    let layers = res.doc.layers.clone().unwrap_or_default();
    if layers.is_empty() {
        bail!("{r}: the image has no layers");
    }
    let mut sources = Sources::new(remote);
    let cache = sources.shared_cache()?;
    let store = merged_dir(remote);
    private_dir(&store)?;
    // A layer's cold reads are whole files: chunks of 1 MiB.
    let ropts = ferrofs_remote::RemoteOptions {
        chunk_size: 1 << 20,
        ..remote.options()
    };
    // The merged metadata image, built once per manifest (its bytes do
    // not depend on how the layers are read).
    let hex = res.manifest.digest.trim_start_matches("sha256:");
    let merged = store.join(format!("{}.img", &hex[..32.min(hex.len())]));
    let need_meta = !merged.exists();
    // Every layer opened at once: each costs round trips (where its blob
    // is, its length, its superblock, its metadata).
    let open_one = |i: usize, d: &Descriptor| -> Result<(PathBuf, Both, How)> {
        let name = PathBuf::from(format!("{r} layer {} ({})", i + 1, d.digest));
        let tree = tree_of(d)?;
        let (src, how): (Arc<dyn ReadAt>, How) = match d.media_type.as_str() {
            manifest::EROFS_LAYER if tree.is_some() || insecure_lazy => {
                let b = Arc::new(blob::open_blob(reg.clone(), &r, d, cache.clone(), &ropts)?);
                crate::source::remember(&b);
                if remote.prefetch_here {
                    let image_len = tree.as_ref().map(|(_, off)| *off);
                    crate::source::prefetch_hot_of(&b, 0, image_len);
                }
                if need_meta {
                    prefetch_metadata(&b);
                }
                match tree {
                    Some((root, off)) => {
                        let v = Verity::open(
                            Box::new(Both(b)),
                            VerityOptions {
                                hash_offset: Some(off),
                                ..VerityOptions::appended(root)
                            },
                        )
                        .with_context(|| format!("{}: its dm-verity tree", name.display()))?;
                        (Arc::new(v), How::Verified)
                    }
                    None => (b, How::Insecure),
                }
            }
            manifest::EROFS_LAYER | manifest::EROFS_LAYER_ZSTD => {
                let f = whole(&reg, &r, d, &store)?;
                (Arc::new(f), How::Whole)
            }
            other => bail!(
                "{}: media type {other:?} is not an EROFS layer: convert the image first \
                 (ferrofs convert), or build an image from it (ferrofs mkfs IMAGE {reference})",
                name.display()
            ),
        };
        Ok((name, Both(src), how))
    };
    let mut opened: Vec<(PathBuf, Both, How)> = Vec::new();
    for batch in layers.chunks(8).enumerate() {
        let (b, ds) = batch;
        let got: Vec<Result<(PathBuf, Both, How)>> = std::thread::scope(|s| {
            let jobs: Vec<_> = ds
                .iter()
                .enumerate()
                .map(|(j, d)| {
                    let open_one = &open_one;
                    s.spawn(move || open_one(b * 8 + j, d))
                })
                .collect();
            jobs.into_iter()
                .map(|j| {
                    j.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("opening a layer panicked")))
                })
                .collect()
        });
        for g in got {
            let (name, src, how) = g?;
            if say {
                eprintln!("{}: {}", name.display(), how.says());
            }
            opened.push((name, src, how));
        }
    }
    if !merged.exists() {
        let mut images = Vec::new();
        for (name, src, _) in &opened {
            let img = Image::open_with(Box::new(src.clone()), OpenOptions::default())
                .with_context(|| format!("{}: not a readable EROFS image", name.display()))?;
            images.push((name.clone(), img));
        }
        let bopts = ferrofs_builder::BuildOptions {
            time: ferrofs_builder::TimePolicy::BuildTimeOnly(0),
            ..Default::default()
        };
        ferrofs_builder::build_merged_images(
            images,
            ferrofs_builder::source::layers::DataMode::BlobIndex,
            true,
            &merged,
            &bopts,
        )
        .with_context(|| format!("merging the layers of {r}"))?;
    }
    for (_, src, _) in &opened {
        opts.devices.push(Box::new(src.clone()));
    }
    let f = std::fs::File::open(&merged)
        .with_context(|| format!("cannot open {}", merged.display()))?;
    Image::open_with(Box::new(f), opts).with_context(|| format!("{}", merged.display()))
}

/// Fetches, in a few large parallel requests, what merging a layer reads:
/// where the image keeps its metadata at its end, as ferrofs lays images
/// out (`[superblock][file data][xattrs, inodes][directories]`, from the
/// shared-xattr block on), that area and what follows it (the dm-verity
/// tree); nothing for images whose metadata does not end them (a failed
/// prefetch leaves the reads to fetch what they need).
fn prefetch_metadata(b: &ferrofs_remote::HttpSource) {
    use ferrofs_format::superblock::{Superblock, SB_BASE_SIZE};
    let mut raw = [0u8; SB_BASE_SIZE];
    if b.read_exact_at(&mut raw, 1024).is_err() {
        return;
    }
    let Ok(sb) = Superblock::parse(&raw) else {
        return;
    };
    let len = ReadAt::len(b).unwrap_or(0);
    let start = u64::from(sb.xattr_blkaddr) << sb.blkszbits.min(16);
    let image_end = u64::from(sb.blocks) << sb.blkszbits.min(16);
    // Metadata at the end: a modest tail of the image.
    if start == 0 || start >= image_end || image_end - start > image_end / 4 {
        return;
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    let _ = b.prefetch(&[(start, len)], &stop);
}

/// Downloads blob `d` whole into `store` (its digest checked), a `+zstd`
/// one decompressed: the local file of a layer read whole.
fn whole(reg: &Registry, r: &Reference, d: &Descriptor, store: &Path) -> Result<std::fs::File> {
    let hex = d.digest.trim_start_matches("sha256:");
    let blob = store.join(format!("{hex}.blob"));
    reg.blob_to_file(r, d, &blob, &mut |_| {})?;
    if d.media_type != manifest::EROFS_LAYER_ZSTD {
        return std::fs::File::open(&blob)
            .with_context(|| format!("cannot open {}", blob.display()));
    }
    let out = store.join(format!("{hex}.erofs"));
    if !out.exists() {
        let tmp = store.join(format!("{hex}.erofs.{}", std::process::id()));
        unzstd(&blob, &tmp).with_context(|| format!("decompressing layer {}", d.digest))?;
        std::fs::rename(&tmp, &out)?;
    }
    std::fs::File::open(&out).with_context(|| format!("cannot open {}", out.display()))
}

/// Decompresses the zstd frames of `from` into `to`.
fn unzstd(from: &Path, to: &Path) -> Result<()> {
    use zstd_safe::{DCtx, InBuffer, OutBuffer};
    let mut r = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(from)?);
    let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(to)?);
    let mut ctx = DCtx::create();
    let mut inbuf = vec![0u8; DCtx::in_size()];
    let mut outbuf = vec![0u8; DCtx::out_size()];
    let mut frame_done = true;
    loop {
        let n = r.read(&mut inbuf)?;
        if n == 0 {
            if !frame_done {
                bail!("the zstd stream ends inside a frame");
            }
            break;
        }
        let mut input = InBuffer::around(&inbuf[..n]);
        loop {
            let mut output = OutBuffer::around(&mut outbuf[..]);
            let hint = ctx
                .decompress_stream(&mut output, &mut input)
                .map_err(|e| anyhow::anyhow!("zstd: {}", zstd_safe::get_error_name(e)))?;
            frame_done = hint == 0;
            let produced = output.pos();
            let full = produced == outbuf.len();
            w.write_all(&outbuf[..produced])?;
            // All input taken and nothing more held back.
            if input.pos() == n && !full {
                break;
            }
        }
    }
    w.flush()?;
    Ok(())
}
