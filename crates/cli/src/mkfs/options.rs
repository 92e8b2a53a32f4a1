//! `ferrofs mkfs`'s command line turned into the builder's options: times,
//! owners, exclusions, `-E` extended options, compression, metabox.

use std::os::unix::ffi::OsStrExt;

use anyhow::{bail, Context, Result};
use ferrofs_builder::{BuildOptions, TimePolicy};

use super::MkfsArgs;

/// The command line with `--preset`'s options filled in where the user
/// gave none of their own (`-E` lists add to the preset's).
pub(super) fn with_preset(a: &MkfsArgs) -> MkfsArgs {
    let mut a = a.clone();
    let (z, c, e): (&str, u64, &str) = match a.preset.as_deref() {
        Some("fast") => ("lz4", 65536, ""),
        Some("balanced") => ("lz4hc,9", 65536, "ztailpacking"),
        Some("dense") => ("lzma,6", 131072, "fragments,dedupe,ztailpacking"),
        _ => return a,
    };
    a.compress.get_or_insert_with(|| z.to_owned());
    a.pcluster.get_or_insert(c);
    if !e.is_empty() {
        a.extended.insert(0, e.to_owned());
    }
    a
}

/// The build options the command line asks for (`block_size`: `-b`, or
/// the layers' in rebuild mode).
pub(super) fn build_options(a: &MkfsArgs, block_size: u32) -> Result<BuildOptions> {
    let mut o = BuildOptions {
        blkszbits: match block_size {
            512 => 9,
            1024 => 10,
            2048 => 11,
            4096 => 12,
            b => bail!("-b {b}: block size must be 512, 1024, 2048 or 4096"),
        },
        ..BuildOptions::default()
    };
    o.time = time_policy(a)?;
    o.uuid = a.uuid.as_deref().map(parse_uuid).transpose()?;
    o.label = a.label.clone().unwrap_or_default().into_bytes();
    o.all_root = a.all_root;
    o.uid_offset = a.uid_offset;
    o.gid_offset = a.gid_offset;
    o.force_uid = a.force_uid;
    o.force_gid = a.force_gid;
    o.exclude_paths = a
        .exclude_path
        .iter()
        .map(|p| p.as_bytes().to_vec())
        .collect();
    o.exclude_regex = a
        .exclude_regex
        .iter()
        .map(|r| regex::bytes::Regex::new(r).with_context(|| format!("--exclude-regex {r:?}")))
        .collect::<Result<_>>()?;
    o.xattr_tolerance = a.xattr_tolerance;
    o.xattr_prefixes = a
        .xattr_prefix
        .iter()
        .map(|p| p.clone().into_bytes())
        .collect();
    o.xattr_digest = a
        .xattr_inode_digest
        .as_ref()
        .map(|n| n.clone().into_bytes());
    o.chunk_size = a.chunksize;
    if let Some(m) = &a.mount_point {
        o.mount_point = m.as_bytes().to_vec();
    }
    if let Some(p) = &a.block_list_file {
        if a.mount_point.is_none() && !a.quiet {
            eprintln!(
                "warning: --block-list-file without --mount-point lists no file \
                 (as mkfs.erofs); {} is written empty",
                p.display()
            );
        }
        o.block_list = Some(ferrofs_builder::BlockListOptions {
            path: p.clone(),
            mount_point_given: a.mount_point.is_some(),
        });
    }
    let x = extended(a, &mut o)?;
    o.workers = a.workers;
    o.archive_order = a.sort == "none";
    o.hard_dereference = a.hard_dereference;
    o.offset = a.offset;
    o.dsunit = a.dsunit;
    if a.verity {
        o.verity = Some(ferrofs_verity::dm::WriteOptions {
            salt: crate::verity::salt_arg(a.verity_salt.as_deref()).context("--verity-salt")?,
            ..Default::default()
        });
    }
    o.root_xattr_isize = a.root_xattr_isize;
    o.blobdev = a.blobdev.clone();
    if let Some(p) = &a.file_contexts {
        o.file_contexts = Some(std::sync::Arc::new(ferrofs_builder::FileContexts::load(p)?));
    }
    if let Some(p) = &a.fs_config_file {
        o.fs_config = Some(std::sync::Arc::new(
            ferrofs_builder::CannedFsConfig::load(p)
                .with_context(|| format!("--fs-config-file {}", p.display()))?,
        ));
    }
    if !a.profile.is_empty() {
        let mut p = ferrofs_builder::Profile::load(&a.profile)?;
        p.window = a.profile_readahead as u64;
        o.profile = Some(std::sync::Arc::new(p));
    }
    o.compress = compress_options(a, &x, block_size)?;
    o.compress_dirs = a.compress_dirs.as_deref() == Some("1");
    o.base = a.base.clone();
    if let Some(m) = &a.metabox {
        o.metabox = Some(metabox_options(m, &mut o)?);
    }
    if o.dedupe && o.compress.is_none() && o.chunk_size.is_none() {
        // As mkfs.erofs: without compression, dedupe works on chunks of one
        // block (every regular file chunk-based, equal blocks stored once).
        o.chunk_size = Some(u64::from(block_size));
    }
    Ok(o)
}

/// The time policy of `-T`, `--mkfs-time`, `--ignore-mtime` and
/// `SOURCE_DATE_EPOCH`.
fn time_policy(a: &MkfsArgs) -> Result<TimePolicy> {
    let sde = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .filter(|v| !v.is_empty());
    Ok(match (a.timestamp, a.mkfs_time, a.ignore_mtime, sde) {
        (Some(t), true, _, _) => TimePolicy::BuildTimeOnly(t),
        (Some(t), false, _, _) => TimePolicy::Fixed(t),
        (None, _, true, _) => TimePolicy::IgnoreMtime,
        (None, _, false, Some(v)) => TimePolicy::Clamp(
            v.parse()
                .with_context(|| format!("SOURCE_DATE_EPOCH={v:?}"))?,
        ),
        (None, _, false, None) => TimePolicy::Keep,
    })
}

/// What `-E` says about compression (the rest it sets on `o`).
#[derive(Default)]
struct Extended {
    ztailpacking: bool,
    legacy_compress: bool,
    sparse: bool,
    fragments: bool,
    all_fragments: bool,
    packed_pcluster: Option<u64>,
}

/// Applies the `-E` options to `o`; returns those about compression.
fn extended(a: &MkfsArgs, o: &mut BuildOptions) -> Result<Extended> {
    let mut x = Extended::default();
    for e in a.extended.iter().flat_map(|s| s.split(',')) {
        match e {
            "ztailpacking" => x.ztailpacking = true,
            "^ztailpacking" | "noztailpacking" => x.ztailpacking = false,
            "fragments" => x.fragments = true,
            "^fragments" | "nofragments" => x.fragments = false,
            "all-fragments" => x.all_fragments = true,
            "dedupe" => o.dedupe = true,
            "^dedupe" | "nodedupe" => o.dedupe = false,
            _ if e.starts_with("fragments=") => {
                x.fragments = true;
                let v = &e["fragments=".len()..];
                x.packed_pcluster = Some(
                    v.parse::<u64>()
                        .with_context(|| format!("-E {e}: bad pcluster size"))?,
                );
            }
            "force-inode-extended" => (o.force_extended, o.force_compact) = (true, false),
            "force-inode-compact" => (o.force_extended, o.force_compact) = (false, true),
            "force-chunk-indexes" => o.chunk_indexes = true,
            "force-inode-blockmap" => o.chunk_indexes = false,
            "nosbcrc" => o.sb_checksum = false,
            "48bit" => o.bit48 = true,
            "^48bit" | "no48bit" => o.bit48 = false,
            "dot-omitted" => o.dot_omitted = true,
            "^dot-omitted" | "nodot-omitted" => o.dot_omitted = false,
            "plain-xattr-prefixes" => o.plain_xattr_prefixes = true,
            "^plain-xattr-prefixes" => o.plain_xattr_prefixes = false,
            "xattr-name-filter" => o.xattr_filter = true,
            "^xattr-name-filter" | "noxattr-name-filter" => o.xattr_filter = false,
            "legacy-compress" => x.legacy_compress = true,
            "^legacy-compress" | "nolegacy-compress" => x.legacy_compress = false,
            "sparse" => x.sparse = true,
            "^sparse" | "nosparse" => x.sparse = false,
            "noinline_data" | "^inline_data" => o.inline_data = false,
            "inline_data" => o.inline_data = true,
            other => bail!("-E {other}: unsupported extended option"),
        }
    }
    Ok(x)
}

/// The compression settings of `-z`, `-C`, `--compress-hints`,
/// `--max-extent-bytes` and the `-E` options about compression; `None`
/// without `-z` (the others are then refused, or ignored with a warning
/// by the drop-in, as mkfs.erofs does).
fn compress_options(
    a: &MkfsArgs,
    x: &Extended,
    block_size: u32,
) -> Result<Option<ferrofs_builder::CompressOptions>> {
    if let Some(z) = &a.compress {
        let compressors = z
            .split(':')
            .map(ferrofs_builder::Compressor::parse)
            .collect::<Result<Vec<_>, _>>()?;
        let hints = match &a.compress_hints {
            Some(p) => {
                let text = std::fs::read(p)
                    .with_context(|| format!("--compress-hints {}", p.display()))?;
                let h =
                    ferrofs_builder::Hints::parse(&text, compressors.len(), u64::from(block_size))
                        .with_context(|| format!("--compress-hints {}", p.display()))?;
                for w in &h.warnings {
                    eprintln!("warning: {w}");
                }
                h.hints
            }
            None => Vec::new(),
        };
        return Ok(Some(ferrofs_builder::CompressOptions {
            compressors,
            pcluster_bytes: a.pcluster.unwrap_or(u64::from(block_size)),
            ztailpacking: x.ztailpacking,
            fragments: x.fragments,
            all_fragments: x.all_fragments,
            packed_pcluster: x.packed_pcluster,
            hints,
            max_extent_bytes: a.max_extent_bytes.map(|n| {
                let bs = u64::from(block_size);
                (n as u64 / bs * bs).max(bs)
            }),
            legacy_compress: x.legacy_compress,
            sparse: x.sparse,
        }));
    }
    if a.pcluster.is_some()
        || a.compress_hints.is_some()
        || a.max_extent_bytes.is_some()
        || x.ztailpacking
        || x.fragments
        || x.all_fragments
        || x.sparse
    {
        let what = "-C, --compress-hints, --max-extent-bytes and -E \
                    ztailpacking/fragments/all-fragments/sparse need -z";
        if !a.dropin {
            bail!("{what}");
        }
        eprintln!("mkfs.erofs: warning: {what}; ignored (the image is not compressed)");
    }
    Ok(None)
}

/// Reads `-U`: `clear`, `random`, or a UUID (32 hex digits, dashes
/// allowed between them).
fn parse_uuid(s: &str) -> Result<[u8; 16]> {
    let mut u = [0u8; 16];
    match s {
        "clear" => return Ok(u),
        "random" => {
            use std::io::Read;
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut u))
                .context("reading /dev/urandom for a random UUID")?;
            // A version 4, variant 1 UUID.
            u[6] = (u[6] & 0x0f) | 0x40;
            u[8] = (u[8] & 0x3f) | 0x80;
            return Ok(u);
        }
        _ => {}
    }
    let hex: String = s.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 {
        bail!("invalid UUID {s:?}");
    }
    for (i, b) in u.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
            .with_context(|| format!("invalid UUID {s:?}"))?;
    }
    Ok(u)
}

/// Reads `-m BYTES[:ALG]`: the metabox's pcluster size and compressor (an
/// index into the -z list, which ALG joins when it is not there yet).
fn metabox_options(
    m: &str,
    o: &mut ferrofs_builder::BuildOptions,
) -> Result<ferrofs_builder::MetaboxOptions> {
    let (size, alg) = match m.split_once(':') {
        Some((s, a)) => (s, Some(a)),
        None => (m, None),
    };
    let bs = o.block_size();
    let pcluster_bytes: u64 = size
        .parse()
        .with_context(|| format!("-m {m}: bad pcluster size"))?;
    if pcluster_bytes < bs || !pcluster_bytes.is_multiple_of(bs) || pcluster_bytes > 1 << 20 {
        bail!("-m {m}: the pcluster size must be a multiple of the block size ({bs}) up to 1 MiB");
    }
    let compressor = match alg {
        None => o.compress.as_ref().map(|_| 0),
        Some(a) => {
            let c = ferrofs_builder::Compressor::parse(a)?;
            match &mut o.compress {
                Some(z) => Some(match z.compressors.iter().position(|x| x.alg == c.alg) {
                    Some(i) => i,
                    None => {
                        z.compressors.push(c);
                        z.compressors.len() - 1
                    }
                }),
                None => {
                    o.compress = Some(ferrofs_builder::CompressOptions::new(c, bs));
                    Some(0)
                }
            }
        }
    };
    Ok(ferrofs_builder::MetaboxOptions {
        pcluster_bytes,
        compressor,
    })
}
