//! `ferrofs mount`: serve an image through FUSE until unmounted or signalled.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

#[derive(clap::Args)]
pub struct MountArgs {
    /// The EROFS image: a file, an http:// or https:// URL, an
    /// s3://BUCKET/KEY object, or an EROFS-native container image in a
    /// registry, docker://[HOST/]REPO[:TAG|@DIGEST] (its layers read
    /// lazily, merged; see --insecure-lazy).
    image: PathBuf,
    /// Where to mount it (an existing directory).
    mountpoint: PathBuf,
    /// The image starts this many bytes into the file (`mkfs --offset`).
    #[arg(long, value_name = "BYTES", default_value = "0", value_parser = crate::size::parse_u64)]
    offset: u64,
    /// Extra device (blob) files or URLs, in device-table order; without
    /// them, extra devices are expected concatenated to the image.
    #[arg(long = "device", value_name = "PATH")]
    devices: Vec<PathBuf>,
    #[command(flatten)]
    remote: crate::source::RemoteArgs,
    #[command(flatten)]
    verity: crate::verified::VerityArgs,
    /// Stay in the foreground (default: detach once mounted).
    #[arg(short = 'f', long)]
    foreground: bool,
    /// FUSE worker threads.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Byte budget of the decoded-pcluster cache (e.g. 64M).
    #[arg(long, default_value = "64M", value_parser = crate::size::parse)]
    cache_size: usize,
    /// Mount options: allow_other.
    #[arg(short = 'o', value_name = "OPTS")]
    options: Vec<String>,
    /// Do not prefetch. By default decoded data goes into the kernel's page
    /// cache in the background: the small files after the one being read
    /// in a listed directory, and the whole pcluster a small read decoded.
    #[arg(long)]
    no_prefetch: bool,
    /// Most file bytes prefetched per directory.
    #[arg(long, default_value = "16M", value_parser = crate::size::parse)]
    prefetch_size: usize,
    /// Append every read (path, offset, length, in arrival order) to this
    /// file, for `mkfs --profile` and `dump --profile`.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Serve a composefs image as its overlay mount shows it, over this
    /// object store: file contents come from the objects the redirect
    /// xattrs name; whiteouts and overlayfs's own xattrs are hidden.
    #[arg(long, value_name = "DIR")]
    basedir: Option<PathBuf>,
    /// With --basedir: check each object's fs-verity digest against the
    /// image's metacopy xattr before serving a byte of it (a mismatch, or
    /// a missing digest, is EIO and logged).
    #[arg(long, requires = "basedir")]
    verify_objects: bool,
    /// For a docker:// image: read layers that carry no dm-verity tree
    /// lazily too, unchecked (by default they are downloaded whole and
    /// checked against their digests first; layers with a tree, from
    /// `ferrofs convert --verity`, are always read lazily, every block
    /// checked).
    #[arg(long)]
    insecure_lazy: bool,
    #[command(flatten)]
    registry: crate::registry::RegistryArgs,
}

pub fn run(a: &MountArgs) -> Result<ExitCode> {
    let mut allow_other = false;
    for o in a.options.iter().flat_map(|o| o.split(',')) {
        match o {
            "allow_other" => allow_other = true,
            "ro" | "" => {}
            other => bail!("-o {other}: unsupported mount option"),
        }
    }
    // The detached daemon may run elsewhere: the store by absolute path,
    // checked before anything is mounted.
    let objects = match &a.basedir {
        Some(d) => {
            let abs =
                std::fs::canonicalize(d).with_context(|| format!("--basedir {}", d.display()))?;
            if !abs.is_dir() {
                bail!("--basedir {}: not a directory", d.display());
            }
            Some(abs)
        }
        None => None,
    };
    let mopts = ferrofs_fuse::MountOptions {
        foreground: a.foreground,
        threads: a.threads,
        allow_other,
        prefetch: (!a.no_prefetch).then_some(a.prefetch_size as u64),
        trace: a.trace.clone(),
        // As `mount` shows a loop device's file: the image's full path
        // (or its URL).
        source: Some(
            std::fs::canonicalize(&a.image)
                .unwrap_or_else(|_| a.image.clone())
                .display()
                .to_string(),
        ),
        objects,
        verify_objects: a.verify_objects,
    };
    // A bad mount point is reported before the image is opened.
    ferrofs_fuse::prepare(&a.mountpoint, &mopts)?;
    let opts = ferrofs::OpenOptions {
        cache_bytes: a.cache_size,
        // Prefetch stores what was decoded in the page cache, so decoding
        // a whole pcluster once beats decoding prefixes again and again.
        whole_extents: a.trace.is_none() && !a.no_prefetch,
        // The page cache keeps what the kernel reads.
        cache_whole_reads: false,
        ..Default::default()
    };
    // Only the process that serves the mount prefetches.
    let mut remote = a.remote.clone();
    remote.prefetch_here = ferrofs_fuse::serves_here(&mopts);
    let docker = a.image.to_str().filter(|s| crate::registry::is_docker(s));
    if docker.is_some() && (!a.devices.is_empty() || a.offset != 0 || a.verity.is_on()) {
        bail!("a docker:// image takes no --device, --offset or --verity (its layers' own trees check it)");
    }
    let image = match docker {
        Some(reference) => {
            let say = !remote.prefetch_here || a.foreground;
            crate::lazy::open(reference, &a.registry, &remote, a.insecure_lazy, say, opts)?
        }
        None => {
            crate::source::open_image(&a.image, &a.devices, a.offset, (&remote, &a.verity), opts)?
        }
    };
    // Extra devices neither given nor appended to the image: every read
    // of their data would fail (a rebuild's layers, a --blobdev blob).
    let bs = image.block_size().bytes();
    let end = image
        .devices()
        .iter()
        .map(|d| d.slot.uniaddr.saturating_add(d.slot.blocks));
    if docker.is_none()
        && a.devices.is_empty()
        && end.max().unwrap_or(0).saturating_mul(bs) > image.source_len()
    {
        anyhow::bail!(
            "{}: its data is on {} extra devices; give them with --device, in order",
            a.image.display(),
            image.devices().len()
        );
    }
    match ferrofs_fuse::mount(image, &a.mountpoint, &mopts) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // The detached daemon failed (it re-ran this command and met an
        // error this process did not): its own message, as `mount -f`
        // would have printed it, and its exit status.
        Err(ferrofs_fuse::MountError::DaemonExited { status, output, .. })
            if !output.trim().is_empty() =>
        {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(output.as_bytes());
            if !output.ends_with('\n') {
                let _ = err.write_all(b"\n");
            }
            let code = status.code().and_then(|c| u8::try_from(c).ok());
            Ok(ExitCode::from(code.filter(|&c| c != 0).unwrap_or(2)))
        }
        Err(e) => Err(e).with_context(|| {
            format!(
                "mounting {} on {}",
                a.image.display(),
                a.mountpoint.display()
            )
        }),
    }
}
