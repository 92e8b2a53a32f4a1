//! `ferrofs convert SRC DST`: an image (`docker://` or `oci:`) made
//! EROFS-native as containerd 2.4's `ctr images convert --erofs raw|zstd`
//! lays it out: each tar layer built as an EROFS image (media type
//! `application/vnd.erofs.layer.v1`, or `…+zstd` compressed whole), the
//! config's diff_ids the EROFS images' digests and `os.features`
//! `["erofs"]`, the index entries' platforms the same feature; Docker
//! media types become OCI ones (as `ctr images convert --oci`). Written to
//! a registry or an OCI layout, and/or as containerd's layer content
//! cache (`--layer-cache`).
//!
//! `source` reads the image, `layer` converts one layer, `dest` writes.

mod dest;
mod layer;
mod source;

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use ferrofs_remote::registry::manifest::{self, Descriptor, Doc, Kind};
use ferrofs_remote::registry::pull::sha256_digest;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

use crate::registry::RegistryArgs;
use dest::{Blob, Dest, Output};
use layer::{Converted, LayerOptions};
use source::Source;

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// The image: docker://[HOST/]REPO[:TAG|@DIGEST] or oci:DIR[:REF].
    src: String,
    /// Where the EROFS-native image goes: docker://[HOST/]REPO[:TAG]
    /// (pushed; the tag moves only once everything else is there) or
    /// oci:DIR[:REF] (default tag or REF: the source's). May be left out
    /// with --layer-cache.
    dst: Option<String>,
    /// `raw`: each layer an EROFS image; `zstd`: the image compressed
    /// whole as one zstd stream (containerd decompresses it on pull).
    #[arg(long, value_name = "raw|zstd", default_value = "raw", value_parser = ["raw", "zstd"])]
    erofs: String,
    /// Convert every platform of an index (default: only --platform's,
    /// or this machine's).
    #[arg(long)]
    all_platforms: bool,
    /// As mkfs --preset, for every layer.
    #[arg(long, value_name = "NAME", value_parser = ["fast", "balanced", "dense"])]
    preset: Option<String>,
    /// As mkfs -z, for every layer (containerd's --erofs-compressors).
    #[arg(short = 'z', value_name = "ALG[,LEVEL]")]
    compress: Option<String>,
    /// As mkfs -C (default with -z: 65536, containerd's).
    #[arg(short = 'C', value_name = "BYTES")]
    pcluster: Option<String>,
    /// More `ferrofs mkfs` options for every layer, split at white space
    /// (containerd's --erofs-mkfs-options), e.g. "-Efragments,dedupe".
    #[arg(long, value_name = "OPTIONS", allow_hyphen_values = true)]
    mkfs_options: Option<String>,
    /// Keep file tails out of inodes, as containerd's converter does
    /// (-Enoinline_data); the default packs them inline (smaller, and
    /// every kernel with EROFS mounts it).
    #[arg(long)]
    noinline_data: bool,
    /// zstd level of --erofs zstd.
    #[arg(long, value_name = "N", default_value_t = 3)]
    zstd_level: i32,
    /// Layers converted at once.
    #[arg(long, value_name = "N", default_value_t = 2)]
    jobs: usize,
    /// Also write each converted layer into containerd's layer content
    /// cache at DIR (DIR/sha256/XX/HEX.erofs keyed by the source layer's
    /// diff_id), as `ctr images build-erofs-cache` does.
    #[arg(long, value_name = "DIR")]
    layer_cache: Option<PathBuf>,
    /// Append a dm-verity tree to each EROFS layer (zero salt, sha256,
    /// 4096-byte blocks) and name it in the layer's annotations
    /// (org.erofs.dmverity.root_digest, .hash_offset, .block_size, as the
    /// EROFS image spec has them): `ferrofs mount docker://...` then reads
    /// the layer lazily, every block checked. With --layer-cache, each
    /// cached layer also gets its `.dmverity` sidecar (containerd's).
    #[arg(long)]
    verity: bool,
    /// Print a JSON summary.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// A layer's converted result, shared by every manifest that has it.
type Done = HashMap<String, Converted>;

pub fn run(a: &ConvertArgs) -> Result<ExitCode> {
    if a.dst.is_none() && a.layer_cache.is_none() {
        bail!("convert needs a DST, or --layer-cache DIR");
    }
    let started = std::time::Instant::now();
    let near = match &a.dst {
        Some(d) if !crate::registry::is_docker(d) => ferrofs_builder::source::oci::parse_spec(d)
            .map(|(dir, _)| dir.join("x"))
            .unwrap_or_else(|| PathBuf::from("./x")),
        _ => a
            .layer_cache
            .clone()
            .map(|d| d.join("x"))
            .unwrap_or_else(|| PathBuf::from("./x")),
    };
    if let Some(p) = near.parent() {
        std::fs::create_dir_all(p).with_context(|| format!("creating {}", p.display()))?;
    }
    let scratch = crate::registry::scratch_beside(&near, "convert")?;
    let src = Source::open(&a.src, &a.registry, &scratch.0)?;
    let work = scratch.0.join("work");
    std::fs::create_dir_all(&work)?;
    let top = src.top()?;
    let (doc, kind) = Doc::parse(&top.bytes, &a.src, None)?;
    let want = a.registry.platform()?;

    // The manifests to convert (with their index entries).
    let mut entries: Vec<Descriptor> = Vec::new();
    if kind == Kind::Index {
        for d in doc.manifests.as_deref().unwrap_or_default() {
            let keep = match &d.platform {
                None => true,
                Some(p) => a.all_platforms || want.matches(p),
            };
            if keep {
                entries.push(d.clone());
            }
        }
        if entries.is_empty() {
            manifest::choose(doc.manifests.as_deref().unwrap_or_default(), &want, &a.src)?;
        }
    }
    let manifests: Vec<(Option<Descriptor>, Vec<u8>)> = if kind == Kind::Index {
        entries
            .iter()
            .map(|d| Ok((Some(d.clone()), src.small(d, manifest::MAX_MANIFEST)?)))
            .collect::<Result<_>>()?
    } else {
        vec![(None, top.bytes.clone())]
    };

    // Every distinct tar layer, converted `jobs` at a time.
    // Each with its image's creation time: the build time of its layer
    // (the root's mtime where the tar has no root entry), so the same
    // layer always converts to the same blob.
    let mut todo: Vec<Descriptor> = Vec::new();
    let mut created: HashMap<String, i64> = HashMap::new();
    for (_, bytes) in &manifests {
        let (m, k) = Doc::parse(bytes, &a.src, None)?;
        if k != Kind::Manifest {
            bail!("{}: an index inside an index is not converted", a.src);
        }
        let time = match &m.config {
            Some(c) => created_time(&src.small(c, manifest::MAX_CONFIG)?),
            None => 0,
        };
        for l in m.layers.unwrap_or_default() {
            if convertible(&l.media_type) && !todo.iter().any(|t| t.digest == l.digest) {
                created.insert(l.digest.clone(), time);
                todo.push(l);
            }
        }
    }
    let opts = layer_options(a)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let done = convert_layers(a, &src, &todo, &created, &opts, &work, &stop)?;

    // The documents rewritten, the destination written.
    let mut out = Output {
        blobs: Vec::new(),
        manifests: Vec::new(),
        top_type: String::new(),
        top: Vec::new(),
    };
    let mut new_entries = Vec::new();
    for (entry, bytes) in &manifests {
        let (mtype, mbytes) = rewrite_manifest(&src, bytes, entry.as_ref(), &done, &mut out)?;
        let mdigest = sha256_digest(&mbytes);
        if let Some(e) = entry {
            let mut e = e.clone();
            e.media_type = mtype.clone();
            e.digest = mdigest.clone();
            e.size = mbytes.len() as u64;
            let mut p = e.platform.clone().unwrap_or_else(|| want.clone());
            add_erofs(&mut p.os_features);
            e.platform = Some(p);
            new_entries.push(e);
            out.manifests.push((mdigest, mtype, mbytes));
        } else {
            out.top_type = mtype;
            out.top = mbytes;
        }
    }
    if kind == Kind::Index {
        let mut index: Value = serde_json::from_slice(&top.bytes)?;
        index["mediaType"] = Value::from(manifest::OCI_INDEX);
        index["manifests"] = serde_json::to_value(&new_entries)?;
        out.top_type = manifest::OCI_INDEX.to_owned();
        out.top = serde_json::to_vec(&index)?;
    }
    let mut cached = Vec::new();
    if let Some(cache) = &a.layer_cache {
        for c in done.values() {
            cached.push(dest::write_cache(
                cache,
                &c.source_diff_id,
                &c.image,
                c.tree.as_ref(),
            )?);
        }
    }
    let mut written = dest::Written::default();
    let mut dst_name = None;
    if let Some(d) = &a.dst {
        let dst = Dest::open(d, top.tag.as_deref(), &a.registry)?;
        written = dst
            .write(&out, src.repository(), &stop)
            .with_context(|| format!("writing {}", dst.name()))?;
        dst_name = Some(dst.name());
    }
    let source_bytes: u64 = todo.iter().map(|d| d.size).sum();
    let erofs_bytes: u64 = done.values().map(|c| c.size).sum();
    let digest = sha256_digest(&out.top);
    if a.json {
        let j = serde_json::json!({
            "source": a.src,
            "source_digest": top.digest,
            "destination": dst_name,
            "digest": digest,
            "media_type": out.top_type,
            "layers": todo.len(),
            "source_layer_bytes": source_bytes,
            "erofs_layer_bytes": erofs_bytes,
            "blobs_uploaded": written.uploaded,
            "blobs_present": written.present,
            "blobs_mounted": written.mounted,
            "layer_cache": cached,
            "seconds": started.elapsed().as_secs_f64(),
        });
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        println!(
            "{}: {} layer{} converted ({} -> {} bytes), {}{}",
            a.src,
            todo.len(),
            if todo.len() == 1 { "" } else { "s" },
            source_bytes,
            erofs_bytes,
            dst_name
                .map(|n| format!("written to {n} as {digest}"))
                .unwrap_or_default(),
            if cached.is_empty() {
                String::new()
            } else {
                format!("; {} in the layer cache", cached.len())
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The `created` time of an image config in UNIX seconds (0 without
/// one).
fn created_time(config: &[u8]) -> i64 {
    #[derive(serde::Deserialize)]
    struct C {
        #[serde(default)]
        created: Option<String>,
    }
    serde_json::from_slice::<C>(config)
        .ok()
        .and_then(|c| c.created)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map_or(0, |t| t.as_second())
}

/// Whether a layer is a tar layer converted (not EROFS already, not
/// non-distributable, as containerd leaves those).
fn convertible(media_type: &str) -> bool {
    ferrofs_builder::source::oci::is_tar_layer(media_type)
        && !media_type.contains("nondistributable")
}

fn add_erofs(features: &mut Vec<String>) {
    if !features.iter().any(|f| f == "erofs") {
        features.push("erofs".to_owned());
    }
    features.sort();
    features.dedup();
}

/// The mkfs arguments every layer gets after containerd's fixed ones.
fn layer_options(a: &ConvertArgs) -> Result<LayerOptions> {
    let mut mkfs: Vec<OsString> = Vec::new();
    if a.noinline_data {
        mkfs.push("-Enoinline_data".into());
    }
    if let Some(p) = &a.preset {
        mkfs.push(format!("--preset={p}").into());
    }
    if let Some(z) = &a.compress {
        mkfs.push(format!("-z{z}").into());
        mkfs.push(format!("-C{}", a.pcluster.as_deref().unwrap_or("65536")).into());
    } else if let Some(c) = &a.pcluster {
        mkfs.push(format!("-C{c}").into());
    }
    let extra: Vec<&str> = a
        .mkfs_options
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let default_block = !extra.iter().any(|o| o.starts_with("-b"));
    let fixed_time = !extra
        .iter()
        .any(|o| o.starts_with("-T") || *o == "--mkfs-time" || *o == "--ignore-mtime");
    for o in &extra {
        if o.starts_with("-U") || *o == "--tar" || o.starts_with("--tar=") {
            bail!("--mkfs-options {o}: convert sets the UUID and tar mode itself");
        }
    }
    mkfs.extend(extra.iter().map(OsString::from));
    Ok(LayerOptions {
        mkfs,
        default_block,
        fixed_time,
        zstd: a.erofs == "zstd",
        zstd_level: a.zstd_level,
        verity: a.verity,
    })
}

/// Converts `todo`, `jobs` at a time, each with a progress line.
fn convert_layers(
    a: &ConvertArgs,
    src: &Source,
    todo: &[Descriptor],
    created: &HashMap<String, i64>,
    opts: &LayerOptions,
    work: &std::path::Path,
    stop: &Arc<AtomicBool>,
) -> Result<Done> {
    let multi = MultiProgress::with_draw_target(if std::io::stderr().is_terminal() && !a.json {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let style = ProgressStyle::with_template("{prefix:.bold} {spinner} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Mutex<Done> = Mutex::new(HashMap::new());
    let failed: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..a.jobs.clamp(1, 16).min(todo.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(d) = todo.get(i) else { break };
                if failed.lock().map(|f| f.is_some()).unwrap_or(true) {
                    break;
                }
                let pb = multi.add(ProgressBar::new_spinner());
                pb.set_style(style.clone());
                let hex = d.digest.strip_prefix("sha256:").unwrap_or(&d.digest);
                pb.set_prefix(format!(
                    "layer {}/{} {}",
                    i + 1,
                    todo.len(),
                    &hex[..12.min(hex.len())]
                ));
                pb.enable_steady_tick(std::time::Duration::from_millis(200));
                let stage = |what: &str, bytes: Option<(u64, u64)>| match bytes {
                    Some((got, total)) => pb.set_message(format!(
                        "{what} {}/{}",
                        indicatif::BinaryBytes(got),
                        indicatif::BinaryBytes(total)
                    )),
                    None => pb.set_message(what.to_owned()),
                };
                let time = created.get(&d.digest).copied().unwrap_or(0);
                match layer::convert(src, d, opts, time, work, stop, &stage) {
                    Ok(c) => {
                        pb.finish_with_message(format!("done, {} bytes", c.size));
                        if let Ok(mut r) = results.lock() {
                            r.insert(d.digest.clone(), c);
                        }
                    }
                    Err(e) => {
                        pb.abandon_with_message("failed");
                        if let Ok(mut f) = failed.lock() {
                            f.get_or_insert(e);
                        }
                        break;
                    }
                }
            });
        }
    });
    multi.clear().ok();
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a layer conversion panicked"))
}

/// The OCI media type of a Docker one.
fn to_oci(media_type: &str) -> &str {
    match media_type {
        manifest::DOCKER_MANIFEST => manifest::OCI_MANIFEST,
        manifest::DOCKER_LIST => manifest::OCI_INDEX,
        manifest::DOCKER_CONFIG => manifest::OCI_CONFIG,
        "application/vnd.docker.image.rootfs.diff.tar.gzip" => {
            "application/vnd.oci.image.layer.v1.tar+gzip"
        }
        "application/vnd.docker.image.rootfs.diff.tar" => "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" => {
            "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
        }
        m => m,
    }
}

/// Rewrites one manifest and its config for the converted layers,
/// adding their blobs to `out`; returns its media type and bytes.
fn rewrite_manifest(
    src: &Source,
    bytes: &[u8],
    entry: Option<&Descriptor>,
    done: &Done,
    out: &mut Output,
) -> Result<(String, Vec<u8>)> {
    let mut m: Value = serde_json::from_slice(bytes)?;
    let (doc, _) = Doc::parse(bytes, "manifest", None)?;
    let config_desc = doc.config.context("a manifest without a config")?;
    let layers = doc.layers.unwrap_or_default();
    let mut cfg: Value = serde_json::from_slice(&src.small(&config_desc, manifest::MAX_CONFIG)?)
        .context("the image config is not JSON")?;

    // Layers: converted ones replaced, the others kept (their blobs too).
    let mut new_layers = Vec::new();
    let mut diff_changes: Vec<(usize, String)> = Vec::new();
    let json_layers = m["layers"].as_array().cloned().unwrap_or_default();
    for (i, (l, lj)) in layers.iter().zip(json_layers.iter()).enumerate() {
        let mut lj = lj.clone();
        match done.get(&l.digest) {
            Some(c) => {
                lj["mediaType"] = Value::from(c.media_type);
                lj["digest"] = Value::from(c.digest.clone());
                lj["size"] = Value::from(c.size);
                if let Some((root, offset)) = &c.tree {
                    if !lj["annotations"].is_object() {
                        lj["annotations"] = serde_json::json!({});
                    }
                    let an = &mut lj["annotations"];
                    an[crate::lazy::ROOT_DIGEST] = Value::from(format!("sha256:{root}"));
                    an[crate::lazy::HASH_OFFSET] = Value::from(offset.to_string());
                    an[crate::lazy::BLOCK_SIZE] = Value::from("4096");
                }
                diff_changes.push((i, c.diff_id.clone()));
                if !out.blobs.iter().any(|(d, _, _)| *d == c.digest) {
                    out.blobs
                        .push((c.digest.clone(), c.size, Blob::File(c.blob.clone())));
                }
            }
            None => {
                lj["mediaType"] = Value::from(to_oci(&l.media_type));
                src.fetch(l, &mut |_| {})?;
                let p = source::blob_path(src.layout_dir(), &l.digest)?;
                if !out.blobs.iter().any(|(d, _, _)| *d == l.digest) {
                    out.blobs.push((l.digest.clone(), l.size, Blob::File(p)));
                }
            }
        }
        new_layers.push(lj);
    }

    // The config: new diff_ids, os.features with erofs.
    if let Some(ids) = cfg
        .pointer_mut("/rootfs/diff_ids")
        .and_then(Value::as_array_mut)
    {
        if ids.len() != layers.len() {
            bail!(
                "the config lists {} diff_ids for {} layers",
                ids.len(),
                layers.len()
            );
        }
        for (i, id) in &diff_changes {
            if let Some(slot) = ids.get_mut(*i) {
                *slot = Value::from(id.clone());
            }
        }
        if !diff_changes.is_empty() {
            for k in ["config", "container_config"] {
                if let Some(o) = cfg.get_mut(k).and_then(Value::as_object_mut) {
                    o.remove("Image");
                }
            }
        }
    }
    let mut features: Vec<String> = entry
        .and_then(|e| e.platform.as_ref())
        .map(|p| p.os_features.clone())
        .or_else(|| {
            cfg.get("os.features")
                .and_then(|v| serde_json::from_value::<Vec<String>>(v.clone()).ok())
        })
        .unwrap_or_default();
    add_erofs(&mut features);
    cfg["os.features"] = serde_json::to_value(&features)?;
    let cfg_bytes = serde_json::to_vec(&cfg)?;
    let cfg_digest = sha256_digest(&cfg_bytes);
    m["config"]["mediaType"] = Value::from(to_oci(&config_desc.media_type));
    m["config"]["digest"] = Value::from(cfg_digest.clone());
    m["config"]["size"] = Value::from(cfg_bytes.len() as u64);
    m["layers"] = Value::Array(new_layers);
    let mtype = to_oci(doc.media_type.as_deref().unwrap_or(manifest::OCI_MANIFEST)).to_owned();
    m["mediaType"] = Value::from(mtype.clone());
    out.blobs
        .push((cfg_digest, cfg_bytes.len() as u64, Blob::Bytes(cfg_bytes)));
    Ok((mtype, serde_json::to_vec(&m)?))
}
