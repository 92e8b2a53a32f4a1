//! Planning: for every inode, its effective metadata (timestamps and owners
//! after the options), compact or extended form, data layout (flat plain,
//! flat inline with the tail after the inode, or chunk-based with holes),
//! and for directories the sorted entries cut into blocks.

use std::collections::HashMap;

use ferrofs_format::dirent::DIRENT_SIZE;
use ferrofs_format::inode::{DataLayout, COMPACT_INODE_SIZE, EXTENDED_INODE_SIZE};

use crate::error::{BuildError, Result};
use crate::options::view::PlanOptions;
use crate::options::TimePolicy;
use crate::tree::relabel::{self, OwnerMap};
use crate::tree::{InodeId, Kind, Tree};
use xattrs::XattrPlan;

mod chunks;
mod record;
pub(crate) mod xattrs;
pub(crate) mod zmap;

pub use chunks::ChunkPlan;
use chunks::{chunk_plan, external_plan};

/// One directory entry as written (the nid is filled in by the layout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntryPlan {
    pub name: Vec<u8>,
    pub target: InodeId,
    pub file_type: u8,
}

/// Everything the layout and the writer need about one inode.
#[derive(Clone, Debug)]
pub struct InodePlan {
    pub extended: bool,
    pub layout: DataLayout,
    pub mode: u16,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: u32,
    /// Device number encoded for `i_u` (devices only).
    pub rdev: Option<u32>,
    /// Bytes of data stored inline after the inode.
    pub tail: u64,
    /// Data blocks of a flat layout.
    pub blocks: u64,
    pub chunks: Option<ChunkPlan>,
    /// Directory blocks (directories only).
    pub dir_blocks: Vec<Vec<DirEntryPlan>>,
    /// Regular files to try compressing: (pcluster bytes, compressor).
    pub compress: Option<(u64, usize)>,
    /// Filled by the writer when the file was stored compressed.
    pub z: Option<crate::plan::zmap::ZInode>,
    /// A directory written without its "." entry (`-E dot-omitted`).
    pub dot_omitted: bool,
    /// A regular file of holes only, stored without blocks (48-bit
    /// layout: FLAT_PLAIN with the null start address).
    pub all_hole: bool,
    /// Flat data already in the image at this block (an incremental
    /// build): nothing is written for it.
    pub stored_at: Option<u64>,
}

impl InodePlan {
    pub fn inode_size(&self) -> u64 {
        ferrofs_format::inode::inode_size(self.extended)
    }
    /// Bytes from `ix` (the end of the inode and its xattrs, counted from
    /// the inode's start) to the end of its chunk table: the table starts
    /// aligned to its entry size.
    pub fn table_len(&self, ix: u64) -> u64 {
        self.chunks.as_ref().map_or(0, |c| {
            let unit = c.entry_size();
            ix.next_multiple_of(unit) - ix + unit * c.chunks.len() as u64
        })
    }
}

/// The plan of a whole image.
#[derive(Clone, Debug)]
pub struct Plan {
    pub inodes: Vec<InodePlan>,
    pub xattrs: XattrPlan,
    /// Inodes in nid order.
    pub order: Vec<InodeId>,
    pub epoch: i64,
    pub fixed_nsec: u32,
    /// 48-bit layout: the build time as an offset from the epoch.
    pub build_time: u32,
    /// The image uses the 48-bit layout.
    pub bit48: bool,
    pub chunked: bool,
}

/// The 48-bit layout's epoch and fixed nanoseconds for these mtimes: the
/// earliest mtime (so every later one within 2^32 s is a compact offset)
/// and the most common nanoseconds (ties to the smaller), so that every
/// mtime reads back exactly from a compact inode or an extended one.
fn epoch_48bit(times: &[(i64, u32)]) -> (i64, u32) {
    let epoch = times.iter().map(|t| t.0).min().unwrap_or(0);
    let mut counts: HashMap<u32, u64> = HashMap::new();
    for &(_, n) in times {
        *counts.entry(n).or_default() += 1;
    }
    let nsec = counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map_or(0, |(n, _)| n);
    (epoch, nsec)
}

/// Whether a compact inode of a 48-bit image holds this mtime exactly.
fn compact_48bit_holds(mtime: i64, nsec: u32, epoch: i64, fixed_nsec: u32) -> bool {
    nsec == fixed_nsec
        && mtime
            .checked_sub(epoch)
            .is_some_and(|d| (0..1 << 32).contains(&d))
}

fn dirent_type(kind: &Kind) -> u8 {
    match kind {
        Kind::File { .. } => 1,
        Kind::Dir { .. } => 2,
        Kind::CharDevice { .. } => 3,
        Kind::BlockDevice { .. } => 4,
        Kind::Fifo => 5,
        Kind::Socket => 6,
        Kind::Symlink { .. } => 7,
    }
}

/// Cuts sorted entries into directory blocks; returns the blocks and the
/// directory size (full blocks, then the last block up to its last name).
fn dir_blocks(mut entries: Vec<DirEntryPlan>, bs: u64) -> (Vec<Vec<DirEntryPlan>>, u64) {
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let mut blocks: Vec<Vec<DirEntryPlan>> = vec![Vec::new()];
    let mut used = 0u64;
    for e in entries {
        let need = DIRENT_SIZE as u64 + e.name.len() as u64;
        if used + need > bs {
            blocks.push(Vec::new());
            used = 0;
        }
        used += need;
        if let Some(b) = blocks.last_mut() {
            b.push(e);
        }
    }
    let size = (blocks.len() as u64 - 1) * bs + used;
    (blocks, size)
}

/// Plans every inode of `tree`.
/// Refuses what Linux would read differently from what the source holds,
/// whatever the source: names that are empty, `.` or `..`, longer than
/// 255 bytes or hold `/` or NUL, and symlink targets that are empty or
/// longer than 4095 bytes (the kernel cuts them). Nothing is written yet.
fn check_names_and_targets(tree: &Tree) -> Result<()> {
    for ino in &tree.inodes {
        match &ino.kind {
            Kind::Dir { entries } => {
                for (name, _) in entries {
                    let why = if name.is_empty() {
                        Some("an empty name".to_string())
                    } else if name == b"." || name == b".." {
                        Some("an entry named . or ..".into())
                    } else if name.len() > ferrofs_format::NAME_MAX {
                        Some(format!("a name of {} bytes (at most 255)", name.len()))
                    } else if name.contains(&b'/') || name.contains(&0) {
                        Some(format!(
                            "a name with a / or NUL byte ({:?})",
                            String::from_utf8_lossy(name)
                        ))
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        return Err(BuildError::input(
                            &ino.source,
                            format!("directory has {why}"),
                        ));
                    }
                }
            }
            Kind::Symlink { target } => {
                crate::tree::check_symlink_target(target)
                    .map_err(|why| BuildError::input(&ino.source, why))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// How the plan maps owners and times (the relabel stage's view of the
/// options: their own mapping for a new image, neutral for a tree
/// relabelled already).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Labels {
    /// How owners are mapped.
    pub(crate) owners: OwnerMap,
    /// How timestamps are chosen.
    pub(crate) time: TimePolicy,
}

/// Plans every inode of `tree`, its owners and times mapped as `labels`
/// says (the options' own, or neutral ones for a tree relabelled already).
pub fn plan(tree: &Tree, opts: &PlanOptions<'_>, labels: Labels) -> Result<Plan> {
    check_names_and_targets(tree)?;
    let xattrs = xattrs::plan(tree, opts)?;
    let nlinks = tree.link_counts();
    let newest = tree.inodes.iter().map(|i| i.mtime).max().unwrap_or(0);
    let times: Vec<(i64, u32)> = tree
        .inodes
        .iter()
        .map(|i| relabel::time(labels.time, i.mtime, i.mtime_nsec, newest))
        .collect();
    let bit48 = opts.bit48;
    let clock = image_clock(opts, labels.time, (&times, newest), bit48);
    let mut chunked = false;
    let mut inodes = Vec::with_capacity(tree.inodes.len());
    for (id, ino) in tree.inodes.iter().enumerate() {
        let (uid, gid) = relabel::owner(ino.uid, ino.gid, &labels.owners);
        let (mtime, mtime_nsec) = times[id];
        let (dir_entries, size) = match &ino.kind {
            Kind::Dir { entries } => dir_listing(tree, id, entries, opts),
            _ => (Vec::new(), ino.data_size()),
        };
        let nlink = nlinks[id];
        let why = why_extended(size, (uid, gid), nlink, (mtime, mtime_nsec), &clock, bit48);
        if let (Some(why), true) = (why, opts.force_compact) {
            return Err(BuildError::input(
                ino.source.clone(),
                format!("cannot be stored in a compact inode (-E force-inode-compact): {why}"),
            ));
        }
        let extended = opts.force_extended || why.is_some();
        let rdev = match ino.kind {
            Kind::CharDevice { major, minor } | Kind::BlockDevice { major, minor } => {
                Some(ferrofs_format::inode::encode_rdev(major, minor))
            }
            _ => None,
        };
        let mut p = InodePlan {
            extended,
            layout: DataLayout::FlatPlain,
            mode: ino.mode(),
            uid,
            gid,
            nlink,
            size,
            mtime,
            mtime_nsec,
            rdev,
            tail: 0,
            blocks: 0,
            chunks: None,
            dir_blocks: dir_entries,
            compress: None,
            z: None,
            dot_omitted: opts.dot_omitted && matches!(ino.kind, Kind::Dir { .. }),
            all_hole: false,
            stored_at: None,
        };
        let xattr_len = xattrs.bodies[id].len() as u64;
        chunked |= place_data(&mut p, ino, xattr_len, opts, bit48)?;
        inodes.push(p);
    }
    let bfs = tree.bfs_order();
    let order = match opts.profile {
        Some(p) => p.hot_first(tree, &bfs),
        None => bfs,
    };
    Ok(Plan {
        inodes,
        xattrs,
        order,
        epoch: clock.epoch,
        fixed_nsec: clock.fixed_nsec,
        build_time: u32::try_from(clock.build.saturating_sub(clock.epoch).max(0))
            .unwrap_or(u32::MAX),
        bit48,
        chunked,
    })
}

/// The image's times: the build time the superblock names, and the epoch
/// and nanoseconds compact inodes count from.
struct Clock {
    build: i64,
    epoch: i64,
    fixed_nsec: u32,
}

/// The image's [`Clock`] under the time policy; `times` are every inode's
/// effective mtime, `newest` the newest source mtime.
fn image_clock(
    opts: &PlanOptions<'_>,
    time: TimePolicy,
    (times, newest): (&[(i64, u32)], i64),
    bit48: bool,
) -> Clock {
    // The build time the superblock names (the 48-bit layout stores it as
    // an offset from the epoch).
    let build = match time {
        TimePolicy::Fixed(t) | TimePolicy::BuildTimeOnly(t) | TimePolicy::Clamp(t) => t,
        TimePolicy::IgnoreMtime | TimePolicy::Keep => newest,
    };
    let (epoch, fixed_nsec) = match time {
        _ if opts.fixed_epoch.is_some() => opts.fixed_epoch.unwrap_or_default(),
        _ if bit48 => epoch_48bit(times),
        TimePolicy::Fixed(t) | TimePolicy::BuildTimeOnly(t) | TimePolicy::Clamp(t) => (t.max(0), 0),
        TimePolicy::IgnoreMtime => (newest.max(0), 0),
        TimePolicy::Keep => {
            // The most common non-negative mtime: those inodes can be compact.
            let mut counts: HashMap<(i64, u32), u64> = HashMap::new();
            for &(t, n) in times {
                if t >= 0 {
                    *counts.entry((t, n)).or_default() += 1;
                }
            }
            counts
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|(k, _)| k)
                .unwrap_or((0, 0))
        }
    };
    Clock {
        build,
        epoch,
        fixed_nsec,
    }
}

/// Directory `id`'s blocks of entries (`.` unless dot-omitted, `..`, then
/// its children) and its size.
fn dir_listing(
    tree: &Tree,
    id: InodeId,
    entries: &[(Vec<u8>, InodeId)],
    opts: &PlanOptions<'_>,
) -> (Vec<Vec<DirEntryPlan>>, u64) {
    let dot = DirEntryPlan {
        name: b".".to_vec(),
        target: id,
        file_type: 2,
    };
    let dotdot = DirEntryPlan {
        name: b"..".to_vec(),
        target: tree.inodes[id].parent,
        file_type: 2,
    };
    let mut all = match opts.dot_omitted {
        true => vec![dotdot],
        false => vec![dot, dotdot],
    };
    for (name, child) in entries {
        all.push(DirEntryPlan {
            name: name.clone(),
            target: *child,
            file_type: dirent_type(&tree.inodes[*child].kind),
        });
    }
    dir_blocks(all, opts.block_size())
}

/// Why a compact inode cannot hold an inode with these values, if it
/// cannot.
fn why_extended(
    size: u64,
    (uid, gid): (u32, u32),
    nlink: u32,
    (mtime, mtime_nsec): (i64, u32),
    clock: &Clock,
    bit48: bool,
) -> Option<&'static str> {
    let (epoch, fixed_nsec) = (clock.epoch, clock.fixed_nsec);
    [
        (size > u64::from(u32::MAX), "its size is 4 GiB or more"),
        (uid > 0xFFFF, "its uid is above 65535"),
        (gid > 0xFFFF, "its gid is above 65535"),
        (nlink > 0xFFFF, "it has more than 65535 links"),
        (
            !bit48 && (mtime, mtime_nsec) != (epoch, fixed_nsec),
            "its mtime is not the image's build time (-T or --ignore-mtime give every file that time)",
        ),
        (
            bit48 && !compact_48bit_holds(mtime, mtime_nsec, epoch, fixed_nsec),
            "its mtime is more than 2^32 s after the image's epoch or has other nanoseconds",
        ),
    ]
    .into_iter()
    .find_map(|(yes, why)| yes.then_some(why))
}

/// Chooses how `p`'s data is stored: chunks (on the layers' devices, or
/// with `--chunksize` / sparse files), no blocks at all (holes only),
/// compressed, or flat with or without an inline tail. Returns whether
/// the inode is chunk-based.
fn place_data(
    p: &mut InodePlan,
    ino: &crate::tree::Inode,
    xattr_len: u64,
    opts: &PlanOptions<'_>,
    bit48: bool,
) -> Result<bool> {
    let (bs, size) = (opts.block_size(), p.size);
    let file_data = match &ino.kind {
        Kind::File { data, .. } => Some(data.as_deref()),
        _ => None,
    };
    // With -E sparse, a compressed file's holes become sparse pclusters
    // rather than null chunks.
    let sparse = opts.compress.is_some_and(|c| {
        c.sparse
            && c.choose(&ino.rel).is_some()
            && crate::data::sparse::may_have_holes(size, bs, bit48 && !c.legacy_compress)
    });
    let chunk_it = match file_data {
        Some(data) => size > 0 && (opts.chunk_size.is_some() || (data.is_some() && !sparse)),
        None => false,
    };
    if let Some(x) = ino.content.external().filter(|_| size > 0) {
        // Rebuild mode: the data stays on the layers' devices.
        p.layout = DataLayout::ChunkBased;
        p.chunks = Some(external_plan(x, size, bs));
        return Ok(true);
    }
    if bit48 && size > 0 && file_data.flatten().is_some_and(|d| d.is_empty()) {
        // Holes only: no blocks, no chunk table (the null address).
        p.all_hole = true;
    } else if chunk_it {
        p.layout = DataLayout::ChunkBased;
        p.chunks = Some(chunk_plan(size, file_data.flatten(), opts)?);
        return Ok(true);
    } else if size > 0 {
        if let (Some(c), Some(_)) = (opts.compress, file_data) {
            p.compress = c.choose(&ino.rel);
        }
        let inode_size = if p.extended {
            EXTENDED_INODE_SIZE
        } else {
            COMPACT_INODE_SIZE
        } as u64;
        let tail = size % bs;
        let fits = inode_size + xattr_len + tail <= bs;
        // -E noinline_data is about regular files only.
        let inline = opts.inline_data || file_data.is_none();
        if inline && tail > 0 && fits {
            p.layout = DataLayout::FlatInline;
            p.tail = tail;
            p.blocks = size / bs;
        } else {
            p.blocks = size.div_ceil(bs);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(name: &str) -> DirEntryPlan {
        DirEntryPlan {
            name: name.as_bytes().to_vec(),
            target: 0,
            file_type: 1,
        }
    }

    #[test]
    fn dir_blocks_are_sorted_and_split_without_crossing() {
        let mut v = vec![e("."), e(".."), e("!bang"), e("b")];
        for i in 0..400 {
            v.push(e(&format!("name-{i:04}")));
        }
        let (blocks, size) = dir_blocks(v, 4096);
        let flat: Vec<&[u8]> = blocks.iter().flatten().map(|e| &e.name[..]).collect();
        let mut sorted = flat.clone();
        sorted.sort();
        assert_eq!(flat, sorted);
        assert_eq!(flat[0], b"!bang");
        for b in &blocks {
            let used: usize = b.iter().map(|e| 12 + e.name.len()).sum();
            assert!(used <= 4096);
        }
        let last: u64 = blocks
            .last()
            .unwrap()
            .iter()
            .map(|e| 12 + e.name.len() as u64)
            .sum();
        assert_eq!(size, (blocks.len() as u64 - 1) * 4096 + last);
    }

    #[test]
    fn chunks_mark_holes() {
        let opts = crate::options::BuildOptions::default();
        let views = crate::options::view::Views::new(&opts, crate::options::view::Basis::of(&opts));
        let c = chunk_plan(
            5 * 4096 + 10,
            Some(&[(0, 100), (4 * 4096 + 5, 5 * 4096 + 10)]),
            &views.plan,
        )
        .unwrap();
        assert_eq!(c.chunks, vec![Some(1), None, None, None, Some(1), Some(1)]);
    }

    fn merged(blks: &[Option<u64>], size: u64) -> (u8, Vec<Option<u64>>) {
        let mut c = ChunkPlan {
            bits_extra: 0,
            chunks: blks.iter().map(|b| b.map(|_| 1)).collect(),
            indexes: false,
        };
        let mut b = blks.to_vec();
        c.merge(&mut b, size, 4096);
        assert_eq!(c.chunks.len(), b.len());
        (c.bits_extra, b)
    }

    #[test]
    fn chunks_merge_as_mkfs_erofs_merges_them() {
        // 20 MiB of zeros: 5120 one-block holes, one run; 1024 blocks
        // divide it: five 4 MiB holes.
        assert_eq!(merged(&[None; 5120], 20 << 20), (10, vec![None; 5]));
        // Contiguous data of 8 blocks then 8 holes: 32 KiB chunks.
        let mut v: Vec<Option<u64>> = (10..18).map(Some).collect();
        v.extend([None; 8]);
        assert_eq!(merged(&v, 16 * 4096), (3, vec![Some(10), None]));
        // A break in contiguity or a short run keeps the chunk size.
        let v = [Some(1), Some(3), None, None];
        assert_eq!(merged(&v, 4 * 4096), (0, v.to_vec()));
        let v = [Some(1), Some(2), Some(3), None];
        assert_eq!(merged(&v, 4 * 4096), (0, v.to_vec()));
        // The last run counts in whole blocks: 2 blocks and 100 bytes.
        let v = [Some(5), Some(6), Some(7)];
        assert_eq!(merged(&v, 2 * 4096 + 100), (1, vec![Some(5), Some(7)]));
    }
}
