//! One layer made EROFS-native: its tar stream unpacked (blob checked,
//! diff_id computed), built by `ferrofs mkfs --tar=f --aufs` with the
//! UUID containerd derives from the diff_id, and for `--erofs zstd`
//! compressed whole as one zstd stream.

use std::ffi::OsString;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use ferrofs_remote::registry::manifest::Descriptor;
use sha1::Digest as _;
use sha2::Sha256;

use super::source::Source;

/// A layer converted.
pub struct Converted {
    /// The EROFS image (uncompressed).
    pub image: PathBuf,
    /// The blob to publish: the image, or its zstd stream.
    pub blob: PathBuf,
    pub digest: String,
    pub size: u64,
    pub media_type: &'static str,
    /// The digest of the EROFS image: the new diff_id.
    pub diff_id: String,
    /// The tar stream's digest: the source's diff_id, the cache's key.
    pub source_diff_id: String,
    /// The dm-verity tree appended to the image: root hash (hex) and
    /// hash offset.
    pub tree: Option<(String, u64)>,
}

/// The SHA-1 name-based (version 5) UUID of `name` in the URL namespace,
/// as Go's `uuid.NewSHA1(uuid.NameSpaceURL, name)`.
pub fn uuid_v5_url(name: &[u8]) -> String {
    const URL_NS: [u8; 16] = [
        0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30,
        0xc8,
    ];
    let mut h = sha1::Sha1::new();
    h.update(URL_NS);
    h.update(name);
    let d = h.finalize();
    let mut u = [0u8; 16];
    u.copy_from_slice(&d[..16]);
    u[6] = (u[6] & 0x0f) | 0x50;
    u[8] = (u[8] & 0x3f) | 0x80;
    let hex: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// `sha256:` and the hex digest of the file at `path`.
pub fn file_digest(path: &Path) -> Result<String> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).with_context(|| format!("reading {}", path.display()))?;
    Ok(format!(
        "sha256:{}",
        h.finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    ))
}

/// A progress report: what a conversion is doing, and bytes so far of
/// a total when it is downloading.
pub type Stage<'a> = dyn Fn(&str, Option<(u64, u64)>) + 'a;

/// What every layer is built with.
pub struct LayerOptions {
    /// `ferrofs mkfs` arguments after containerd's fixed ones.
    pub mkfs: Vec<OsString>,
    /// Whether to give `-b4096` (not when the options set -b).
    pub default_block: bool,
    /// Whether to give `-T CREATED --mkfs-time` (not when the options
    /// set times).
    pub fixed_time: bool,
    pub zstd: bool,
    pub zstd_level: i32,
    /// Append a dm-verity tree to each image.
    pub verity: bool,
}

/// Converts layer `d` of `src` in `work`; `stage` reports what it does.
pub fn convert(
    src: &Source,
    d: &Descriptor,
    opts: &LayerOptions,
    created: i64,
    work: &Path,
    stop: &Arc<AtomicBool>,
    stage: &Stage<'_>,
) -> Result<Converted> {
    let hex = d.digest.strip_prefix("sha256:").unwrap_or(&d.digest);
    src.fetch(d, &mut |got| stage("downloading", Some((got, d.size))))?;
    stage("unpacking", None);
    let tar = work.join(format!("{hex}.tar"));
    let source_diff_id = {
        let f =
            std::fs::File::create(&tar).with_context(|| format!("creating {}", tar.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        let id = ferrofs_builder::source::oci::unpack_layer(
            src.layout_dir(),
            &d.digest,
            d.size,
            &d.media_type,
            &mut w,
        )
        .with_context(|| format!("layer {}", d.digest))?;
        w.flush()
            .with_context(|| format!("writing {}", tar.display()))?;
        id
    };
    stage("building", None);
    let image = work.join(format!("{hex}.erofs"));
    let uuid = uuid_v5_url(format!("erofs:blobs/{source_diff_id}").as_bytes());
    let mut args: Vec<OsString> = vec!["--tar=f".into(), "--aufs".into(), "--quiet".into()];
    if opts.default_block {
        args.push("-b4096".into());
    }
    if opts.fixed_time {
        args.extend([
            "-T".into(),
            created.to_string().into(),
            "--mkfs-time".into(),
        ]);
    }
    args.extend(opts.mkfs.iter().cloned());
    args.extend([
        "-U".into(),
        uuid.into(),
        image.clone().into(),
        tar.clone().into(),
    ]);
    let built = crate::mkfs::build_quiet(&args, stop);
    let _ = std::fs::remove_file(&tar);
    built.with_context(|| format!("building layer {} as EROFS", d.digest))?;
    let tree = match opts.verity {
        true => {
            stage("hashing", None);
            Some(append_tree(&image)?)
        }
        false => None,
    };
    let diff_id = file_digest(&image)?;
    let (blob, media_type) = if opts.zstd {
        stage("compressing", None);
        let z = work.join(format!("{hex}.erofs.zst"));
        zstd_file(&image, &z, opts.zstd_level)?;
        (z, ferrofs_remote::registry::manifest::EROFS_LAYER_ZSTD)
    } else {
        (
            image.clone(),
            ferrofs_remote::registry::manifest::EROFS_LAYER,
        )
    };
    let digest = if opts.zstd {
        file_digest(&blob)?
    } else {
        diff_id.clone()
    };
    let size = std::fs::metadata(&blob)
        .with_context(|| format!("{}", blob.display()))?
        .len();
    Ok(Converted {
        image,
        blob,
        digest,
        size,
        media_type,
        diff_id,
        source_diff_id,
        tree,
    })
}

/// Appends a dm-verity tree to the image at `path` (zero salt, sha256,
/// 4096-byte blocks, veritysetup's superblock at the image's end rounded
/// up to 4096), as containerd's differ and cache builder make them;
/// returns its root hash (hex) and hash offset.
pub fn append_tree(path: &Path) -> Result<(String, u64)> {
    let len = std::fs::metadata(path)?.len();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let w = ferrofs_verity::dm::append(
        &f,
        len,
        &ferrofs_verity::dm::WriteOptions {
            salt: Some(vec![0u8; 32]),
            ..Default::default()
        },
    )
    .with_context(|| format!("dm-verity tree of {}", path.display()))?;
    f.sync_all()?;
    Ok((ferrofs_verity::to_hex(&w.root), w.hash_offset))
}

/// Compresses `from` into `to` as one zstd frame (with its content
/// size and checksum).
fn zstd_file(from: &Path, to: &Path, level: i32) -> Result<()> {
    use zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer};
    let err = |e: usize| anyhow::anyhow!("zstd: {}", zstd_safe::get_error_name(e));
    let len = std::fs::metadata(from)?.len();
    let mut r = BufReader::with_capacity(1 << 20, std::fs::File::open(from)?);
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(to)?);
    let mut ctx = CCtx::create();
    ctx.set_parameter(CParameter::CompressionLevel(level))
        .map_err(err)?;
    ctx.set_parameter(CParameter::ChecksumFlag(true))
        .map_err(err)?;
    ctx.set_pledged_src_size(Some(len)).map_err(err)?;
    let mut inbuf = vec![0u8; 1 << 20];
    let mut outbuf = vec![0u8; zstd_safe::CCtx::out_size()];
    loop {
        let n = r.read(&mut inbuf)?;
        let mut input = InBuffer::around(&inbuf[..n]);
        let end = n == 0;
        loop {
            let mut output = OutBuffer::around(&mut outbuf[..]);
            let left = if end {
                ctx.end_stream(&mut output).map_err(err)?
            } else {
                ctx.compress_stream2(
                    &mut output,
                    &mut input,
                    zstd_safe::zstd_sys::ZSTD_EndDirective::ZSTD_e_continue,
                )
                .map_err(err)?
            };
            let produced = output.pos();
            w.write_all(&outbuf[..produced])?;
            if end {
                if left == 0 {
                    break;
                }
            } else if input.pos() == n {
                break;
            }
        }
        if end {
            break;
        }
    }
    w.flush()?;
    w.get_ref().sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn uuids_are_gos_sha1_url_uuids() {
        // uuid.NewSHA1(uuid.NameSpaceURL, []byte("http://example.com/")) in Go,
        // the same as Python's uuid.uuid5(uuid.NAMESPACE_URL, ...).
        assert_eq!(
            super::uuid_v5_url(b"http://example.com/"),
            "0a300ee9-f9e4-5697-a51a-efc7fafaba67"
        );
    }
}
