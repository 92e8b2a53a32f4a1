//! Pointing a layer file's chunks at its data on the layer's devices:
//! the chunk table (its tail, if the layer keeps one inline, as a chunk of
//! the new image), or why there is none.

use ferrofs::map::ExtentKind;
use ferrofs::raw::InodeFile;

use super::Layer;
use crate::options::BuildOptions;
use crate::tree::content::External;

/// Why a file of this layout cannot be indexed (for the summary).
pub(super) fn layout_reason(file: &InodeFile) -> String {
    use ferrofs::format::inode::DataLayout as D;
    match file.inode().layout() {
        D::FlatInline => "all inline",
        D::CompressedFull | D::CompressedCompact => "compressed",
        _ => "unaligned data",
    }
    .to_string()
}

/// The chunk table of `file` pointing into `l`'s devices, with the tail
/// a flat file keeps inline as a last chunk of its own (to be written to
/// the new image); `None` when its layout has no block to point at
/// (compressed, or all of it inline); an error for data outside its
/// device (a damaged layer).
pub(super) fn index(
    l: &Layer,
    file: &InodeFile,
    opts: &BuildOptions,
) -> std::result::Result<Option<External>, String> {
    let bs = opts.block_size();
    let size = file.size();
    // (logical start, (device id, block) or a hole), block-aligned.
    let mut runs: Vec<(u64, Option<(u16, u64)>)> = Vec::new();
    let mut tail = false;
    for e in file.extents() {
        let e = e.map_err(|e| e.to_string())?;
        if e.logical % bs != 0 || tail {
            return Ok(None);
        }
        let at = match e.kind {
            ExtentKind::Hole => None,
            ExtentKind::Raw { device, pos } => {
                if pos % bs != 0 {
                    return Ok(None);
                }
                Some(device_block(l, device, pos / bs, e.len.div_ceil(bs))?)
            }
            // An inline tail after whole blocks: a chunk of this image.
            ExtentKind::Inline { .. } if e.logical > 0 && e.end() == size => {
                tail = true;
                Some((0, 0))
            }
            ExtentKind::Inline { .. } | ExtentKind::Pcluster(_) | ExtentKind::Fragment { .. } => {
                return Ok(None)
            }
        };
        runs.push((e.logical, at));
    }
    // The largest chunk every run starts on a multiple of.
    let mut blocks = size.div_ceil(bs).next_power_of_two().max(1);
    for &(logical, _) in runs.iter().skip(1) {
        let b = logical / bs;
        if b > 0 {
            blocks = blocks.min(1 << b.trailing_zeros());
        }
    }
    let bits_extra = u8::try_from(blocks.trailing_zeros().min(31)).unwrap_or(31);
    let cs = bs << bits_extra;
    let n = size.div_ceil(cs);
    let mut chunks = Vec::new();
    let mut r = 0;
    for k in 0..n {
        let start = k * cs;
        while r + 1 < runs.len() && runs[r + 1].0 <= start {
            r += 1;
        }
        let Some(&(logical, at)) = runs.get(r) else {
            return Err("unmapped data".into());
        };
        chunks.push(at.map(|(d, b)| (d, b + (start - logical) / bs)));
    }
    if !opts.uses_48bit()
        && chunks
            .iter()
            .flatten()
            .any(|&(_, b)| b >= u64::from(u32::MAX))
    {
        return Err("data beyond block 2^32 (needs -E 48bit)".into());
    }
    Ok(Some(External {
        bits_extra,
        chunks,
        tail,
    }))
}

/// The new image's (device id, block) for `blocks` blocks at `blk` of
/// the layer's device `device` (0: its unified address space), checked to
/// lie inside that device.
fn device_block(
    l: &Layer,
    device: u16,
    blk: u64,
    blocks: u64,
) -> std::result::Result<(u16, u64), String> {
    let own = l.image.devices();
    let (new, blk, limit) = if device == 0 {
        let primary = u64::from(l.image.superblock().blocks);
        if blk < primary || own.is_empty() {
            (l.primary, blk, primary)
        } else {
            let found = own.iter().enumerate().find(|(_, d)| {
                blk.checked_sub(d.slot.uniaddr)
                    .is_some_and(|r| r < d.slot.blocks)
            });
            match found {
                Some((i, d)) => (l.extra[i], blk - d.slot.uniaddr, d.slot.blocks),
                None => return Err("data outside every device".into()),
            }
        }
    } else {
        let i = usize::from(device) - 1;
        match own.get(i) {
            Some(d) => (l.extra.get(i).copied().unwrap_or(0), blk, d.slot.blocks),
            None => return Err(format!("data on device {device}, which the layer lacks")),
        }
    };
    if new == 0 {
        return Err("data on the layer's primary device, which holds no indexed data".into());
    }
    if blk.checked_add(blocks).is_none_or(|end| end > limit) {
        return Err(format!(
            "data at block {blk} beyond its device's {limit} blocks"
        ));
    }
    Ok((new, blk))
}
