//! `ferrofs verity IMAGE`: a dm-verity hash tree for an existing image,
//! appended to it (veritysetup's layout with `--hash-offset`) or written
//! into a separate hash file, and its root hash printed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use ferrofs_verity::dm::{self, HashType, WriteOptions, Written};
use ferrofs_verity::{parse_hex, to_hex, Algorithm};

use crate::out;

#[derive(clap::Args)]
pub struct VerityArgs {
    /// The EROFS image (a local file). Without --hash-file the tree is
    /// appended: the image padded with zeros to a data block, then the
    /// verity superblock and the tree (an older tree is replaced).
    image: PathBuf,
    /// Write the tree (with its superblock) into this file instead; the
    /// image is left as it is.
    #[arg(long, value_name = "FILE")]
    hash_file: Option<PathBuf>,
    /// The salt (hex; `-` for none). Default: derived from the image's
    /// first block and size, so the same image always gets the same tree.
    #[arg(long, value_name = "HEX")]
    salt: Option<String>,
    /// Bytes per data block: 4096, or 512 (tar-index layers).
    #[arg(long, value_name = "BYTES", default_value_t = 4096, value_parser = data_block_size)]
    data_block_size: u32,
    /// The hash algorithm: sha256 or sha512.
    #[arg(long, value_name = "NAME", default_value = "sha256")]
    hash: Algorithm,
    /// The hash type, as veritysetup's --format: 1 (its default: the salt
    /// before each block) or 0 (Chrome OS's: the salt after it).
    #[arg(long, value_name = "0|1", default_value = "1")]
    format: HashType,
    /// The EROFS image starts this many bytes into the file (`mkfs
    /// --offset`); the tree covers the file from its first byte.
    #[arg(long, value_name = "BYTES", default_value_t = 0, value_parser = crate::size::parse_u64)]
    offset: u64,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// `--data-block-size`: 512 or 4096.
pub(crate) fn data_block_size(s: &str) -> Result<u32, String> {
    match s.trim() {
        "512" => Ok(512),
        "4096" | "4K" | "4k" => Ok(4096),
        _ => Err(format!("{s:?}: 512 or 4096")),
    }
}

/// The salt option as bytes.
pub(crate) fn salt_arg(salt: Option<&str>) -> Result<Option<Vec<u8>>> {
    Ok(salt.map(|s| parse_hex("salt", s)).transpose()?)
}

/// `ferrofs verity`: writes the tree and prints what a reader needs.
pub fn run(a: &VerityArgs) -> Result<ExitCode> {
    let data_len = covered_len(&a.image, a.offset)?;
    let opts = WriteOptions {
        algorithm: a.hash,
        data_block_size: a.data_block_size,
        salt: salt_arg(a.salt.as_deref()).context("--salt")?,
        hash_type: a.format,
    };
    let written = write(&a.image, a.hash_file.as_deref(), data_len, &opts)?;
    print(&a.image, a.hash_file.as_deref(), &written, a.json)?;
    Ok(ExitCode::SUCCESS)
}

/// The bytes of `path` the tree covers: from the file's start to the end
/// of the image at `offset`, or, when extra devices are appended to it (a
/// tar index and its archive), to the end of the last one.
fn covered_len(path: &Path, offset: u64) -> Result<u64> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let file_len = file.metadata()?.len();
    let image = ferrofs::Image::open(ferrofs::source::Offset::new(file, offset))
        .with_context(|| path.display().to_string())?;
    let own = image
        .superblock()
        .total_blocks()
        .checked_mul(image.block_size().bytes())
        .context("the image's size overflows")?;
    let mapped = image.mapped_bytes().context("the image's size overflows")?;
    let end = if image.devices().is_empty() {
        own
    } else if offset.checked_add(mapped).is_some_and(|m| m <= file_len) {
        mapped
    } else {
        bail!(
            "{}: the image has extra devices that are not appended to it; a tree over the \
             primary device alone would leave their data unprotected (not supported)",
            path.display()
        );
    };
    offset
        .checked_add(end)
        .context("the image's size overflows")
}

fn write(
    image: &Path,
    hash_file: Option<&Path>,
    data_len: u64,
    opts: &WriteOptions,
) -> Result<Written> {
    let ctx = || format!("writing a verity tree for {}", image.display());
    match hash_file {
        None => {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(image)
                .with_context(|| format!("cannot open {} for writing", image.display()))?;
            // Readers wait while the tree is changed.
            ferrofs::lock::try_exclusive(&f)
                .with_context(|| format!("cannot lock {}", image.display()))?;
            check_tail(&f, data_len).with_context(|| image.display().to_string())?;
            dm::append(&f, data_len, opts).with_context(ctx)
        }
        Some(h) => {
            let data = std::fs::File::open(image)
                .with_context(|| format!("cannot open {}", image.display()))?;
            let hash = std::fs::File::create(h)
                .with_context(|| format!("cannot create {}", h.display()))?;
            dm::write_hash_file(&data, data_len, opts, &hash).with_context(ctx)
        }
    }
}

/// Refuses to cut what follows the EROFS image unless it is an older
/// tree (zero padding, then a verity superblock, or the zeros an
/// interrupted run leaves in its place) or zeros only.
fn check_tail(f: &std::fs::File, data_len: u64) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let len = f.metadata()?.len();
    for align in [4096, 512] {
        let at = data_len.next_multiple_of(align);
        let mut head = vec![0u8; (at - data_len) as usize + dm::SUPERBLOCK_LEN];
        if f.read_exact_at(&mut head, data_len).is_err() {
            continue;
        }
        let (pad, sb) = head.split_at(head.len() - dm::SUPERBLOCK_LEN);
        let zero = |b: &[u8]| b.iter().all(|&x| x == 0);
        if zero(pad) && (sb.starts_with(dm::SUPERBLOCK_MAGIC) || zero(sb)) {
            return Ok(());
        }
    }
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = data_len;
    while pos < len {
        let n = usize::try_from(len - pos).map_or(buf.len(), |n| n.min(buf.len()));
        f.read_exact_at(&mut buf[..n], pos)?;
        if buf[..n].iter().any(|&b| b != 0) {
            bail!(
                "{} bytes follow the EROFS image (it ends at byte {data_len}) and they are \
                 not a verity tree: not cut (write the tree with --hash-file)",
                len - data_len
            );
        }
        pos += n as u64;
    }
    Ok(())
}

/// The tree's facts as JSON (`ferrofs verity --json`, `mkfs --json`).
pub(crate) fn json(w: &Written) -> serde_json::Value {
    serde_json::json!({
        "root_hash": to_hex(&w.root),
        "hash_offset": w.hash_offset,
        "salt": to_hex(&w.params.salt),
        "data_blocks": w.params.data_blocks,
        "data_block_size": w.params.data_block_size,
        "hash_block_size": w.params.hash_block_size,
        "algorithm": w.params.algorithm.name(),
        "hash_type": w.params.hash_type.number(),
        "uuid": dm::uuid_text(&w.params.uuid),
    })
}

/// The tree's facts as text lines.
pub(crate) fn lines(w: &Written) -> Vec<String> {
    vec![
        format!("root hash:   {}", to_hex(&w.root)),
        format!("hash offset: {}", w.hash_offset),
        format!("salt:        {}", to_hex(&w.params.salt)),
        format!(
            "data blocks: {} of {} bytes",
            w.params.data_blocks, w.params.data_block_size
        ),
        format!(
            "algorithm:   {} (hash type {})",
            w.params.algorithm,
            w.params.hash_type.number()
        ),
    ]
}

fn print(image: &Path, hash_file: Option<&Path>, w: &Written, as_json: bool) -> Result<()> {
    let mut out = out::stdout();
    if as_json {
        let mut v = json(w);
        if let (Some(h), Some(map)) = (hash_file, v.as_object_mut()) {
            map.insert("hash_file".into(), h.display().to_string().into());
        }
        writeln!(out, "{v}")?;
    } else {
        for l in lines(w) {
            writeln!(out, "{l}")?;
        }
        let (hash, at) = match hash_file {
            Some(h) => (h, String::new()),
            None => (image, format!(" --hash-offset={}", w.hash_offset)),
        };
        writeln!(
            out,
            "check: veritysetup verify {} {} {}{at}",
            image.display(),
            hash.display(),
            to_hex(&w.root)
        )?;
    }
    out.flush()?;
    Ok(())
}
