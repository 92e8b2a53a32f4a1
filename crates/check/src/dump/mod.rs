//! dump: describe an image (superblock, features, compression config),
//! one inode (fields, xattrs, extent map) or the whole image (files by
//! layout, compressed vs original bytes, pclusters by algorithm). Values are
//! built as JSON so the CLI prints them as text or `--json` alike.

use std::collections::{BTreeMap, HashSet};

use ferrofs::composefs;
use ferrofs::format::compress::algorithm_name;
use ferrofs::format::inode::DataLayout;
use ferrofs::format::superblock::{compat, compat_names, incompat};
use ferrofs::format::xattr::short_prefix;
use ferrofs::map::extents::ExtentMap;
use ferrofs::map::{DataMap, ExtentKind, PclusterFormat};
use ferrofs::raw::METABOX_SPACE;
use ferrofs::{raw::Inode, Image};
use serde_json::{json, Value};

use crate::walk::{walk, Visit};

mod profile;
pub use profile::profile;

/// Superblock, features and compression configuration.
pub fn superblock(image: &Image) -> Value {
    let sb = image.superblock();
    let cfg = image.compression_config();
    let algs: Vec<&str> = (0..4u8)
        .filter(|a| cfg.available & (1 << a) != 0)
        .map(algorithm_name)
        .collect();
    let devices: Vec<Value> = image
        .devices()
        .iter()
        .map(|d| json!({"tag": d.slot.tag_str(), "blocks": d.slot.blocks, "uniaddr": d.slot.uniaddr}))
        .collect();
    // The build time: the epoch plus the 48-bit layout's offset from it
    // (0 in older images, whose epoch is the build time).
    let created = sb.epoch().saturating_add(i64::from(sb.build_time));
    let ishare = if sb.has_compat(compat::ISHARE_XATTRS) {
        let id = sb.ishare_xattr_prefix_id;
        let name = image
            .xattr_prefixes()
            .get(usize::from(id))
            .map(|(base, infix)| {
                let mut n = short_prefix(*base).unwrap_or_default().to_vec();
                n.extend_from_slice(infix);
                String::from_utf8_lossy(&n).into_owned()
            });
        json!({"id": id, "name": name})
    } else {
        Value::Null
    };
    json!({
        "magic": format!("{:#010x}", sb.magic),
        "checksum": format!("{:#010x}", sb.checksum),
        "block_size": image.block_size().bytes(),
        "sb_size": sb.sb_size(),
        "blocks": sb.total_blocks(),
        "inodes": sb.inos,
        "root_nid": image.root_nid().0,
        "root_in_metabox": image.root_nid().0 & METABOX_SPACE != 0,
        "meta_blkaddr": sb.meta_blkaddr,
        "xattr_blkaddr": sb.xattr_blkaddr,
        "packed_nid": sb.packed_nid,
        "metabox": metabox(image),
        "epoch": sb.epoch(),
        "build_time": sb.build_time,
        "fixed_nsec": sb.fixed_nsec,
        "created": created,
        "created_utc": utc_string(created),
        "ishare_xattr_prefix": ishare,
        "uuid": sb.uuid_string(),
        "label": String::from_utf8_lossy(sb.label()),
        "feature_compat": compat_names(sb.feature_compat),
        "feature_incompat": incompat::names(sb.feature_incompat),
        "algorithms": algs,
        "lz4_max_distance": cfg.lz4_max_distance,
        "lz4_max_pclusterblks": cfg.lz4_max_pclusterblks,
        "lzma_dict_size": cfg.lzma_dict_size,
        "zstd_window_log": cfg.zstd_window_log,
        "xattr_prefixes": image.xattr_prefixes().iter().map(|(b, i)| json!({"base": b, "infix": String::from_utf8_lossy(i)})).collect::<Vec<_>>(),
        "devices": devices,
        "image_bytes": image.source_len(),
        "composefs": composefs_header(image),
    })
}

/// The composefs header (format version, flags), or null for an image
/// libcomposefs did not write.
fn composefs_header(image: &Image) -> Value {
    match composefs::Header::of(image) {
        Ok(Some(h)) => json!({
            "format_version": h.format_version,
            "header_version": h.header_version,
            "flags": h.flags,
            "has_acl": h.flags & composefs::FLAG_HAS_ACL != 0,
        }),
        Ok(None) => Value::Null,
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// Where a composefs metacopy file's contents live: the object (its
/// redirect) and the fs-verity digest it must have.
fn composefs_object(image: &Image, inode: &Inode) -> Option<Value> {
    match composefs::backing(&image.raw(), inode) {
        Ok(Some(b)) => Some(json!({
            "object": b.object.as_deref().map(String::from_utf8_lossy),
            "digest": b.digest_hex().map(|h| format!("sha256:{h}")),
        })),
        Ok(None) => None,
        Err(e) => Some(json!({"error": e.to_string()})),
    }
}

/// The metabox inode (nid, size, layout), or null without one.
fn metabox(image: &Image) -> Value {
    let sb = image.superblock();
    if !sb.has_incompat(incompat::METABOX) {
        return Value::Null;
    }
    match image.raw().metabox_file() {
        Some(f) => json!({
            "nid": sb.metabox_nid,
            "size": f.size(),
            "layout": f.inode().layout().name(),
            "map": map_form(f.data_map()),
        }),
        None => json!({"nid": sb.metabox_nid}),
    }
}

/// An inode fingerprint as text: `ALG:` followed by the raw digest bytes,
/// shown as hex (`sha256:a594...`); other values as lossy text.
fn fingerprint_text(v: &[u8]) -> String {
    match v.iter().position(|&c| c == b':') {
        Some(i) if v[..i].iter().all(u8::is_ascii_alphanumeric) => {
            let hex: String = v[i + 1..].iter().map(|b| format!("{b:02x}")).collect();
            format!("{}:{hex}", String::from_utf8_lossy(&v[..i]))
        }
        _ => String::from_utf8_lossy(v).into_owned(),
    }
}

/// Seconds since 1970 as `YYYY-MM-DD hh:mm:ss` (UTC, proleptic Gregorian).
pub fn utc_string(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Days to a civil date (H. Hinnant's algorithm), in i128 so no input
    // can overflow.
    let z = i128::from(days) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i128::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// How an inode's data is mapped: a short name for the statistics.
fn map_form(m: &DataMap) -> String {
    match m {
        DataMap::Flat(_) => "flat".into(),
        DataMap::Chunk(c) => format!("chunks ({})", chunk_table(c)),
        DataMap::Compressed(z) if z.whole_fragment().is_some() => "whole-file fragment".into(),
        DataMap::Compressed(z) if z.is_full() => "full lcluster index".into(),
        DataMap::Compressed(_) => "compact lcluster index".into(),
        DataMap::Extents(x) => format!("extents, {}-byte records", x.table().recsz),
    }
}

/// Records listed per inode at most (a damaged count can claim 2^48).
const MAX_LISTED_RECORDS: u64 = 100_000;

/// The extent table of an extent-mapped inode: its form and each record
/// as stored, with the logical start and physical address it resolves to
/// (forms 4 and 8 have one record per logical cluster; form 4 sums the
/// lengths from its base address).
fn extent_table(image: &Image, inode: &Inode, x: &ExtentMap) -> Value {
    let t = &x.table();
    let count = x.records();
    let mut records = Vec::new();
    let mut pstart = x.base();
    let mut error = Value::Null;
    for i in 0..count.min(MAX_LISTED_RECORDS) {
        let r = match x.record_at(image, inode, i) {
            Ok(r) => r,
            Err(e) => {
                error = json!(e.to_string());
                break;
            }
        };
        let lstart = if t.has_lstart() {
            r.lstart
        } else {
            i.checked_shl(x.lclusterbits()).unwrap_or(u64::MAX)
        };
        let at = if t.recsz == 4 { pstart } else { r.pstart };
        pstart = pstart.saturating_add(u64::from(r.len()));
        let mut v = json!({
            "index": i,
            "lstart": lstart,
            "plen": r.len(),
            "pstart": at,
            "format": match r.algorithm() {
                None => "stored",
                Some(id) => algorithm_name(id),
            },
            "partial": r.partial(),
        });
        if t.fragment && i + 1 == count {
            // The last record names the tail in the packed inode.
            let mut off = u64::from(r.plen);
            if t.recsz >= 8 {
                off |= r.pstart << 32;
            }
            v = json!({"index": i, "lstart": lstart, "fragment_offset": off});
        }
        records.push(v);
    }
    json!({
        "record_size": t.recsz,
        "records": count,
        "lclusterbits": if t.has_lstart() { Value::Null } else { json!(x.lclusterbits()) },
        "base": if t.recsz == 4 { json!(x.base()) } else { Value::Null },
        "interlaced": t.interlaced,
        "fragment_tail": t.fragment,
        "entries": records,
        "error": error,
    })
}

fn extent_json(e: &ferrofs::map::Extent) -> Value {
    let kind = match e.kind {
        ExtentKind::Hole => json!({"type": "hole"}),
        ExtentKind::Raw { device, pos } => json!({"type": "raw", "device": device, "pos": pos}),
        ExtentKind::Inline { pos } => json!({"type": "inline", "pos": pos.bits()}),
        ExtentKind::Fragment { offset } => json!({"type": "fragment", "offset": offset}),
        ExtentKind::Pcluster(p) => json!({
            "type": "pcluster",
            "pos": p.at.bits(),
            "plen": p.len,
            "format": format_name(p.format),
            "partial": p.partial,
            "inline": p.at.is_inline(),
        }),
    };
    json!({"logical": e.logical, "len": e.len, "map": kind})
}

fn format_name(f: PclusterFormat) -> &'static str {
    match f {
        PclusterFormat::Shifted => "plain",
        PclusterFormat::Interlaced => "interlaced",
        PclusterFormat::Codec(a) => a.name(),
    }
}

/// One inode: fields, xattrs and its extent map.
pub fn inode(image: &Image, inode: &Inode) -> Value {
    let xattrs: Value = match image.raw().xattrs(inode) {
        Ok(xs) => xs
            .iter()
            .map(|x| json!({"name": String::from_utf8_lossy(&x.name), "value": String::from_utf8_lossy(&x.value), "shared": x.shared}))
            .collect(),
        Err(e) => json!({"error": e.to_string()}),
    };
    let mut v = json!({
        "nid": inode.nid().0,
        "type": inode.file_type().name(),
        "mode": format!("{:o}", inode.mode()),
        "uid": inode.uid(),
        "gid": inode.gid(),
        "nlink": inode.nlink(),
        "size": inode.size(),
        "mtime": inode.mtime(),
        "mtime_nsec": inode.mtime_nsec(),
        "layout": inode.layout().name(),
        "extended": inode.is_extended(),
        "in_metabox": inode.nid().0 & METABOX_SPACE != 0,
        "nlink_1": inode.nlink1(),
        "dot_omitted": inode.dot_omitted(),
        "xattr_icount": inode.xattr_icount(),
        "position": inode.pos().offset(),
        "xattrs": xattrs,
    });
    if let Some(o) = composefs_object(image, inode) {
        v["composefs"] = o;
    }
    match image.raw().fingerprint(inode) {
        Ok(Some(fp)) => v["fingerprint"] = json!(fingerprint_text(&fp)),
        Ok(None) => {}
        Err(e) => v["fingerprint"] = json!({"error": e.to_string()}),
    }
    if matches!(
        inode.layout(),
        DataLayout::FlatPlain | DataLayout::FlatInline
    ) {
        // The 48-bit start block; none for an all-hole FLAT_PLAIN file.
        v["startblk"] = json!(inode.startblk());
        v["all_hole"] = json!(inode.startblk().is_none());
    }
    if matches!(
        inode.file_type(),
        ferrofs::format::inode::FileType::CharDevice
            | ferrofs::format::inode::FileType::BlockDevice
    ) {
        v["rdev"] = json!(format!("{}:{}", inode.rdev().0, inode.rdev().1));
    }
    match image.raw().open(inode.clone()) {
        Ok(f) => {
            if let DataMap::Chunk(c) = f.data_map() {
                v["chunks"] = json!({
                    "chunk_size": 1u64 << c.chunkbits(),
                    "count": c.chunks(),
                    "table": chunk_table(c),
                });
            }
            if let DataMap::Compressed(z) = f.data_map() {
                v["compression"] = json!({
                    "advise": format!("{:#x}", z.header().advise),
                    "algorithms": z.header().algorithms().iter().map(|a| algorithm_name(*a)).collect::<Vec<_>>(),
                    "lclusterbits": z.lclusterbits(),
                    "index": if z.is_full() { "full" } else { "compact" },
                    "inline_tail": z.idata().map(|(p, s)| json!({"pos": p.bits(), "size": s})),
                    "fragment_off": z.fragment_off(),
                    "whole_file_fragment": z.whole_fragment().is_some(),
                });
            }
            v["map"] = json!(map_form(f.data_map()));
            if let DataMap::Extents(x) = f.data_map() {
                v["extent_table"] = extent_table(image, inode, x);
            }
            let exts: Vec<Value> = f
                .extents()
                .take(100_000)
                .map(|e| match e {
                    Ok(e) => extent_json(&e),
                    Err(err) => json!({"error": err.to_string()}),
                })
                .collect();
            v["extents"] = Value::Array(exts);
        }
        Err(e) => v["error"] = json!(e.to_string()),
    }
    v
}

/// Whether the kernel can decode a pcluster in place (its output pages
/// reuse the compressed pages): zero padding, a whole (not partial) decode,
/// and room after the decoded data up to the page end of at least
/// `csize / 256 + 32` bytes, where `csize` is the stream length without the
/// zero padding.
pub fn in_place_safe(image: &Image, e: &ferrofs::map::Extent, p: &ferrofs::map::Pcluster) -> bool {
    const PAGE: u64 = 4096;
    if p.partial || !image.superblock().has_incompat(incompat::ZERO_PADDING) {
        return false;
    }
    let window = p.len.min(image.block_size().bytes()) as usize;
    let mut head = vec![0u8; window];
    if image.raw().read_stored(p.at, &mut head).is_err() {
        return false;
    }
    let zeros = head.iter().take_while(|&&b| b == 0).count() as u64;
    let csize = p.len - zeros;
    let oend = e.logical % PAGE + e.len;
    let margin = oend.div_ceil(PAGE) * PAGE - oend;
    margin >= (csize >> 8) + 32
}

/// The kind of a chunk-based file's table.
fn chunk_table(c: &ferrofs::map::chunk::ChunkMap) -> &'static str {
    if c.format().indexes {
        "indexes"
    } else {
        "block_map"
    }
}

/// Whole-image statistics.
pub fn statistics(image: &Image) -> Value {
    let mut by_type: BTreeMap<&str, u64> = BTreeMap::new();
    let mut by_layout: BTreeMap<&str, u64> = BTreeMap::new();
    let mut chunk_tables: BTreeMap<&str, u64> = BTreeMap::new();
    let mut extended = 0u64;
    let mut maps: BTreeMap<String, u64> = BTreeMap::new();
    let mut extent_records: BTreeMap<String, u64> = BTreeMap::new();
    let (mut in_metabox, mut dot_omitted, mut nlink1, mut all_hole) = (0u64, 0u64, 0u64, 0u64);
    let mut pclusters: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new(); // count, plen, llen
    let (mut inplace_total, mut inplace_safe) = (0u64, 0u64);
    let mut seen_inodes = HashSet::new();
    let mut seen_pclusters = HashSet::new();
    let (mut logical, mut compressed_logical, mut compressed_physical) = (0u64, 0u64, 0u64);
    let (mut inline_bytes, mut fragment_bytes, mut hole_bytes, mut errors) =
        (0u64, 0u64, 0u64, 0u64);
    let mut visit_inode = |inode: &Inode| {
        if !seen_inodes.insert(inode.nid()) {
            return;
        }
        *by_type.entry(inode.file_type().name()).or_default() += 1;
        extended += u64::from(inode.is_extended());
        in_metabox += u64::from(inode.nid().0 & METABOX_SPACE != 0);
        dot_omitted += u64::from(inode.dot_omitted());
        nlink1 += u64::from(inode.nlink1());
        all_hole +=
            u64::from(inode.layout() == DataLayout::FlatPlain && inode.startblk().is_none());
        if !matches!(
            inode.file_type(),
            ferrofs::format::inode::FileType::Regular
                | ferrofs::format::inode::FileType::Directory
                | ferrofs::format::inode::FileType::Symlink
        ) {
            return;
        }
        *by_layout.entry(inode.layout().name()).or_default() += 1;
        logical += inode.size();
        let Ok(f) = image.raw().open(inode.clone()) else {
            errors += 1;
            return;
        };
        if let DataMap::Chunk(c) = f.data_map() {
            *chunk_tables.entry(chunk_table(c)).or_default() += 1;
        }
        *maps.entry(map_form(f.data_map())).or_default() += 1;
        if let DataMap::Extents(x) = f.data_map() {
            *extent_records
                .entry(x.table().recsz.to_string())
                .or_default() += x.records();
        }
        for e in f.extents() {
            let Ok(e) = e else {
                errors += 1;
                break;
            };
            match e.kind {
                ExtentKind::Hole => hole_bytes += e.len,
                ExtentKind::Inline { .. } => inline_bytes += e.len,
                ExtentKind::Fragment { .. } => fragment_bytes += e.len,
                ExtentKind::Raw { .. } => {}
                ExtentKind::Pcluster(p) => {
                    compressed_logical += e.len;
                    let entry = pclusters.entry(format_name(p.format)).or_default();
                    entry.2 += e.len;
                    if seen_pclusters.insert(p.at) {
                        compressed_physical += p.len;
                        entry.0 += 1;
                        entry.1 += p.len;
                        if let (false, PclusterFormat::Codec(_)) = (p.at.is_inline(), p.format) {
                            inplace_total += 1;
                            if in_place_safe(image, &e, &p) {
                                inplace_safe += 1;
                            }
                        }
                    }
                }
            }
        }
    };
    if let Ok(root) = image.raw().root() {
        visit_inode(&root);
    }
    walk(image, |v| {
        if let Visit::Entry { inode, .. } = v {
            visit_inode(inode);
        }
    });
    // The packed inode (fragments) and the metabox are no entries of the
    // tree: their pclusters are counted on their own.
    let mut special_file = |f: Option<ferrofs::raw::InodeFile>| {
        let (mut n, mut physical, mut logical) = (0u64, 0u64, 0u64);
        let mut seen = HashSet::new();
        for e in f.iter().flat_map(|f| f.extents()) {
            let Ok(e) = e else {
                errors += 1;
                break;
            };
            logical += e.len;
            if let ExtentKind::Pcluster(p) = e.kind {
                if matches!(p.format, PclusterFormat::Codec(_)) && seen.insert(p.at) {
                    n += 1;
                    physical += p.len;
                }
            }
        }
        json!({"logical_bytes": logical, "compressed_pclusters": n, "physical_bytes": physical})
    };
    let packed = special_file(image.raw().packed_file());
    let metabox = special_file(image.raw().metabox_file());
    let algs: BTreeMap<&str, Value> = pclusters
        .into_iter()
        .map(|(k, (n, p, l))| {
            (
                k,
                json!({"pclusters": n, "physical_bytes": p, "logical_bytes": l}),
            )
        })
        .collect();
    json!({
        "inodes_by_type": by_type,
        "inodes_by_layout": by_layout,
        "extended_inodes": extended,
        "inodes_by_map": maps,
        "extent_records_by_size": extent_records,
        "metabox_inodes": in_metabox,
        "dot_omitted_dirs": dot_omitted,
        "nlink_1_inodes": nlink1,
        "all_hole_files": all_hole,
        "chunk_tables": chunk_tables,
        "logical_bytes": logical,
        "compressed_logical_bytes": compressed_logical,
        "compressed_physical_bytes": compressed_physical,
        "inline_bytes": inline_bytes,
        "fragment_bytes": fragment_bytes,
        "hole_bytes": hole_bytes,
        "pclusters": algs,
        "packed_inode": packed,
        "metabox_inode": metabox,
        "in_place": {
            "rule": "kernel LZ4 in-place margin: page_align(oend) - oend >= csize/256 + 32",
            "pclusters": inplace_total,
            "safe": inplace_safe,
            "share": if inplace_total == 0 { 0.0 } else { inplace_safe as f64 / inplace_total as f64 },
        },
        "errors": errors,
        "image_bytes": image.source_len(),
    })
}
