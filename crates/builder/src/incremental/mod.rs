//! `--incremental`: a layer (a directory or a tar stream) put over the tree
//! of an existing image, with only new data and new metadata appended to
//! it. Every byte of the image outside its superblock block stays as it
//! was (but for the root's record when a new root could not have a 16-bit
//! nid, see below): files the layer does not change (or brings back with the same
//! bytes and metadata) keep their inodes and data, directories keep theirs
//! when nothing under them changed and their parent keeps its place, and
//! everything else is written after the image's last block. The superblock
//! block is written last; on any failure the file is cut back to its old
//! length and block 0 put back. See docs/incremental.md.

mod load;
mod merge;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use ferrofs::format::inode::DataLayout;
use ferrofs::format::superblock::{checksum_len, compat, incompat, Superblock};
use ferrofs::Image;

use crate::emit::append::{append, RootPlace, Target};
use crate::error::{BuildError, Result};
use crate::options::view::{Basis, Views};
use crate::options::BuildOptions;
use crate::plan::{Labels, Plan};
use crate::source::tar::{TarInput, TarOptions};
use crate::summary::{IncrementalStats, Progress, Summary};
use crate::tree::{InodeId, Tree};

/// What is put over the image.
pub enum Layer<'a> {
    /// A directory tree.
    Dir(&'a Path),
    /// A tar stream (whiteouts and opaque directories honoured).
    Tar {
        /// The archive (a file or a pipe).
        input: &'a TarInput,
        /// How it is read.
        opts: TarOptions,
        /// Where data read from a pipe is spooled.
        spool: &'a Path,
        /// `--incremental=rvsp`: the archive's files get their blocks,
        /// filled with zeros, instead of their data.
        zero_data: bool,
    },
}

fn refuse(path: &Path, reason: impl Into<String>) -> BuildError {
    BuildError::Incremental {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Takes the writers' exclusive lock on the image at `dest` (see
/// `ferrofs::lock`), or says who holds it.
fn lock_image(file: &File, dest: &Path) -> Result<()> {
    match ferrofs::lock::try_exclusive(file) {
        Ok(()) => Ok(()),
        Err(ferrofs::lock::LockError::Busy { holder }) => Err(BuildError::Locked {
            path: dest.to_path_buf(),
            by: match holder {
                Some(h) if h.exclusive => format!("being changed by {h}"),
                Some(h) => format!("open for reading in {h}"),
                None => "locked by another process".into(),
            },
        }),
        Err(ferrofs::lock::LockError::Io(e)) => Err(BuildError::Output {
            path: dest.to_path_buf(),
            source: e,
        }),
    }
}

/// Options an incremental build cannot honour, by name.
fn check_options(dest: &Path, opts: &BuildOptions) -> Result<()> {
    let c = opts.compress.as_ref();
    let unsupported = [
        (
            c.is_some_and(|c| c.fragments || c.all_fragments),
            "-E fragments/all-fragments (the image's packed inode cannot grow in place)",
        ),
        (
            opts.compress_dirs,
            "--zD (directories would go into a packed inode)",
        ),
        (opts.dedupe, "-E dedupe"),
        (
            opts.metabox.is_some(),
            "-m (a metabox cannot grow in place)",
        ),
        (opts.blobdev.is_some(), "--blobdev"),
        (opts.profile.is_some(), "--profile"),
        (opts.base.is_some(), "--base"),
        (opts.block_list.is_some(), "--block-list-file"),
        (opts.offset != 0, "--offset"),
        (
            !opts.xattr_prefixes.is_empty(),
            "--xattr-prefix (the image's prefix table cannot grow in place)",
        ),
        (opts.xattr_digest.is_some(), "--xattr-inode-digest"),
        (opts.fs_config.is_some(), "--fs-config-file"),
        (opts.file_contexts.is_some(), "--file-contexts"),
        (opts.root_xattr_isize != 0, "--root-xattr-isize"),
    ];
    if let Some((_, what)) = unsupported.iter().find(|(yes, _)| *yes) {
        return Err(refuse(
            dest,
            format!("{what} is not supported with --incremental"),
        ));
    }
    Ok(())
}

/// Checks that the image can take this build's inodes and returns the
/// basis they are planned on, which the image dictates: its block size,
/// 48-bit layout, epoch and xattr name filter, and new xattrs kept inline
/// (its shared area cannot grow).
fn image_basis(dest: &Path, image: &Image, head: &[u8], opts: &BuildOptions) -> Result<Basis> {
    let sb = image.superblock();
    if !image.devices().is_empty() || sb.has_incompat(incompat::METABOX) {
        return Err(refuse(
            dest,
            "images with extra devices or a metabox are not supported",
        ));
    }
    let bit48 = sb.has_incompat(incompat::BIT48);
    if opts.uses_48bit() && !bit48 {
        return Err(refuse(
            dest,
            "-E 48bit/dot-omitted: the image does not use the 48-bit layout",
        ));
    }
    let basis = Basis {
        blkszbits: sb.blkszbits,
        bit48,
        fixed_epoch: Some((sb.epoch(), sb.fixed_nsec)),
        xattr_filter: sb.has_compat(compat::XATTR_FILTER),
        // New xattrs stay inline: the image's shared area cannot grow.
        xattr_tolerance: match opts.xattr_tolerance {
            t if t >= 0 => i32::MAX,
            t => t,
        },
    };
    if opts.compress.is_some() {
        let layout = Views::new(opts, basis).layout;
        let bs = layout.block_size();
        let (records, algs, cfgs) = crate::layout::head::compression_records(&layout, bs);
        let zero_pad = sb.has_incompat(incompat::ZERO_PADDING);
        let old_cfgs = sb.has_incompat(incompat::COMPR_CFGS);
        let ok = zero_pad
            && algs & !sb.available_algorithms() == 0
            && match (cfgs, old_cfgs) {
                (false, _) => true,
                (true, false) => false,
                (true, true) => {
                    let at = 1024 + sb.sb_size();
                    head.get(at..at + records.len()) == Some(&records[..])
                }
            };
        if !ok {
            return Err(refuse(
                dest,
                "the image was not compressed with these algorithms and pcluster sizes \
                 (an incremental build cannot change its compression configuration; use \
                 the -z and -C the image was built with)",
            ));
        }
        // ZTAILPACKING, if new inodes need it, is set in the superblock:
        // it changes nothing for inodes without inline pclusters.
    }
    Ok(basis)
}

/// Points the new inodes whose bytes the image has (`same_data`: the nid)
/// at the image's blocks when the image stores them flat and the new inode
/// can be flat the same way (its own inline tail, read from the layer);
/// returns how many.
fn point_at_stored(image: &Image, plan: &mut Plan, same_data: &[Option<u64>], bs: u64) -> u64 {
    let mut n = 0;
    for &id in &plan.order {
        let Some(nid) = same_data.get(id).copied().flatten() else {
            continue;
        };
        let Ok(old) = image.raw().inode(ferrofs::format::Nid(nid)) else {
            continue;
        };
        let (Some(start), layout) = (old.startblk(), old.layout()) else {
            continue;
        };
        let ix = plan.head_len(id);
        let p = &mut plan.inodes[id];
        let (blocks, tail) = match layout {
            DataLayout::FlatPlain => (p.size.div_ceil(bs), 0),
            DataLayout::FlatInline => (p.size / bs, p.size % bs),
            _ => continue,
        };
        if p.chunks.is_some() || blocks == 0 || (tail > 0 && ix + tail > bs) {
            continue;
        }
        (p.layout, p.blocks, p.tail, p.compress) = (layout, blocks, tail, None);
        p.stored_at = Some(start);
        n += 1;
    }
    n
}

/// How many bytes from `pos` to the end of its block (in `head`, the
/// image's first bytes) are free: all of them when they are all zeros
/// (whatever the image keeps there, an inode, an xattr entry or a prefix,
/// has a non-zero byte near its start, and nothing of what lies before
/// `pos` reaches past it), else none.
fn free_after(head: &[u8], pos: u64, bs: u64) -> u64 {
    let end = pos.next_multiple_of(bs);
    match head.get(pos as usize..end as usize) {
        Some(rest) if rest.iter().all(|&b| b == 0) => rest.len() as u64,
        _ => 0,
    }
}

/// The image being extended, opened, locked and read.
struct Old {
    file: File,
    image: Image,
    sb: Superblock,
    /// Its first bytes (block 0 and at least the superblock's checksum
    /// range), as they were.
    head: Vec<u8>,
    /// Its length once dead bytes are cut off.
    old_len: u64,
    /// Bytes past its recorded end a killed run left.
    dead_bytes: u64,
}

impl Drop for Old {
    fn drop(&mut self) {
        // As a staged file's: a child started meanwhile must not keep the
        // lock past this run.
        let _ = self.file.unlock();
    }
}

impl Old {
    /// Opens the image at `dest` for appending: one writer at a time, and
    /// readers (which take a shared lock) wait for this run to end (the
    /// lock is released when the file is closed, or if this process
    /// dies). Bytes past the image's recorded end are what a killed run
    /// appended before it could write the superblock: dead, cut off
    /// before this run appends (a failure puts back the image as the
    /// superblock has it).
    fn open(dest: &Path) -> Result<Old> {
        let file = File::options()
            .read(true)
            .write(true)
            .open(dest)
            .map_err(BuildError::output(dest))?;
        lock_image(&file, dest)?;
        let image = Image::open(file.try_clone().map_err(BuildError::io(dest))?)
            .map_err(|e| refuse(dest, format!("not a readable EROFS image: {e}")))?;
        let sb = image.superblock().clone();
        let bsz = image.block_size();
        let bs = bsz.bytes();
        let file_len = file.metadata().map_err(BuildError::io(dest))?.len();
        let recorded = sb.total_blocks().saturating_mul(bs);
        let dead_bytes = file_len.saturating_sub(recorded.max(bs));
        let old_len = file_len - dead_bytes;
        if dead_bytes > 0 {
            file.set_len(old_len).map_err(BuildError::io(dest))?;
        }
        let mut head = vec![0u8; (bs as usize).max(1024 + checksum_len(bsz))];
        file.read_exact_at(&mut head, 0)
            .map_err(BuildError::io(dest))?;
        Ok(Old {
            file,
            image,
            sb,
            head,
            old_len,
            dead_bytes,
        })
    }
}

/// Puts `layer` over the image at `dest` and appends what changed.
pub fn build(
    dest: &Path,
    layer: Layer,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
) -> Result<Summary> {
    check_options(dest, opts)?;
    let old = Old::open(dest)?;
    let bs = old.image.block_size().bytes();
    let views = Views::new(opts, image_basis(dest, &old.image, &old.head, opts)?);
    let old_tree = load::load(&old.image, dest)?;
    // The layer over the image's tree (its inodes keep their ids), then
    // what no name reaches any more cut off.
    let merged = overlay(layer, &old_tree, opts, dest)?;
    let n = merged.inodes.len();
    let origin: Vec<Option<InodeId>> = (0..n)
        .map(|i| (i < old_tree.tree.inodes.len()).then_some(i))
        .collect();
    let (mut tree, mut origin, _) = merge::prune::<u64>(merged, &origin, &[]);
    let mut same_data = Vec::new();
    let unchanged = merge::reuse_unchanged(
        &mut tree,
        &mut origin,
        &mut same_data,
        &old_tree,
        &old.image,
    )?;
    let (mut tree, origin, same_data) = merge::prune(tree, &origin, &same_data);
    let root = root_place(&old, dest)?;
    let (kept, nothing_new) = merge::kept_nids(&tree, &origin, &old_tree, root.in_place());
    let mut stats = IncrementalStats {
        old_bytes: old.old_len,
        dead_bytes: old.dead_bytes,
        kept_inodes: kept.iter().filter(|k| k.is_some()).count() as u64,
        unchanged_files: unchanged,
        root_in_place: root.in_place(),
        rewritten_outside_block0: root.saved.len() as u64,
        ..Default::default()
    };
    if nothing_new {
        // The layer changes nothing: the image is left alone.
        stats.kept_inodes += 1;
        stats.rewritten_outside_block0 = 0;
        return Ok(Summary {
            inodes: old.sb.inos,
            blocks: old.sb.total_blocks(),
            bytes: old.sb.total_blocks() * bs,
            incremental: Some(stats),
            ..Default::default()
        });
    }
    // Neutral owners and times: the layer's were mapped when it was read.
    let mut plan = crate::plan::plan(&tree, &views.plan, Labels::default())?;
    let root_id = tree.root;
    plan.order.retain(|&id| kept[id].is_none() && id != root_id);
    stats.shared_files = point_at_stored(&old.image, &mut plan, &same_data, bs);
    stats.new_inodes = plan.order.len() as u64 + 1;
    let pool = crate::util::out::worker_pool(opts.workers)?;
    let target = Target {
        file: &old.file,
        path: dest,
        sb: old.sb.clone(),
        head: old.head.clone(),
        old_len: old.old_len,
        root: root.place,
        kept,
    };
    let res = append(
        &target,
        &mut tree,
        &mut plan,
        &views,
        (interrupted, progress),
        &pool,
    );
    match res {
        Ok(a) => {
            let mut s = a.summary;
            stats.appended_bytes = s.bytes.saturating_sub(a.start_block * bs);
            s.incremental = Some(stats);
            Ok(s)
        }
        Err(e) => Err(restore(&old, &root, dest, e)),
    }
}

/// The layer's tree put over the image's (`old`), the layer's owners and
/// times mapped as the options say.
fn overlay(layer: Layer, old: &load::OldTree, opts: &BuildOptions, dest: &Path) -> Result<Tree> {
    let n_old = old.tree.inodes.len();
    Ok(match layer {
        Layer::Dir(src) => {
            let pool = crate::util::out::worker_pool(opts.workers)?;
            let mut s = pool.install(|| crate::source::dir::scan(src, opts))?;
            let all: Vec<InodeId> = (0..s.inodes.len()).collect();
            crate::tree::relabel::layer(&mut s, &all, &opts.owners(), opts.time);
            merge::overlay_dir(old.tree.clone(), s)
        }
        Layer::Tar {
            input,
            opts: t,
            spool,
            zero_data,
        } => {
            if zero_data && opts.compress.is_some() {
                return Err(refuse(
                    dest,
                    "--incremental=rvsp reserves uncompressed blocks; it does not take -z",
                ));
            }
            let mut m = crate::source::tar::scan_onto(input, opts, t, spool, old.tree.clone())?;
            if zero_data {
                for ino in &mut m.inodes[n_old..] {
                    if let crate::tree::content::Content::Archive { segments, .. } =
                        &mut ino.content
                    {
                        *segments = Vec::new().into();
                    }
                }
            }
            let ids: Vec<InodeId> = (0..m.inodes.len())
                .filter(|&i| {
                    i >= n_old
                        || m.inodes[i].mtime != old.tree.inodes[i].mtime
                        || m.inodes[i].uid != old.tree.inodes[i].uid
                        || m.inodes[i].gid != old.tree.inodes[i].gid
                })
                .collect();
            crate::tree::relabel::layer(&mut m, &ids, &opts.owners(), opts.time);
            m
        }
    })
}

/// Where the new root goes, and the old record's bytes when it is
/// rewritten outside block 0 (to put back on failure).
struct Root {
    place: RootPlace,
    /// Where the old root's record is.
    at: u64,
    /// Its bytes, saved when they are outside block 0; empty otherwise.
    saved: Vec<u8>,
}

impl Root {
    fn in_place(&self) -> bool {
        matches!(self.place, RootPlace::InPlace { .. })
    }
}

/// The root in its place when the image keeps it in block 0 (mkfs.erofs's
/// images and ferrofs's): rewritten where it is, with the zeros after it
/// (to the end of its block) when nothing follows it there. Elsewhere,
/// the new root goes after the image, unless its nid would not fit the 16
/// bits an image without the 48-bit layout has: then, as mkfs.erofs does,
/// it is rewritten where it is too, the one record outside block 0 that
/// changes (reported, and put back on failure). A metabox image was
/// refused before: the root is on the primary device.
fn root_place(old: &Old, dest: &Path) -> Result<Root> {
    let bs = old.image.block_size().bytes();
    let raw_root = old
        .image
        .raw()
        .root()
        .map_err(|e| refuse(dest, format!("its root inode: {e}")))?;
    let flat = matches!(
        raw_root.layout(),
        DataLayout::FlatPlain | DataLayout::FlatInline
    );
    let inline = if raw_root.layout() == DataLayout::FlatInline {
        raw_root.size() % bs
    } else {
        0
    };
    let capacity = raw_root.inode_size() + raw_root.xattr_isize() + inline;
    let at = raw_root.pos().offset();
    let in_head = flat && at + capacity <= old.head.len() as u64;
    let capacity = match in_head {
        true => capacity + free_after(&old.head, at + capacity, bs),
        false => capacity,
    };
    let sb = &old.sb;
    let appended_nid = (old.old_len.div_ceil(bs).max(sb.total_blocks()) * bs)
        .saturating_sub(u64::from(sb.meta_blkaddr) * bs)
        / 32;
    let outside = !in_head && !sb.has_incompat(incompat::BIT48) && appended_nid > 0xFFFF;
    if outside && !flat {
        return Err(refuse(
            dest,
            "the root inode cannot be rewritten in place (it is not stored flat), and a new \
             one after the image would be beyond the 16-bit root nid; rebuild the image with \
             -E 48bit",
        ));
    }
    let mut saved = vec![0u8; if outside { capacity as usize } else { 0 }];
    old.file
        .read_exact_at(&mut saved, at)
        .map_err(BuildError::io(dest))?;
    let place = match in_head || outside {
        true => RootPlace::InPlace { capacity, pos: at },
        false => RootPlace::Appended,
    };
    Ok(Root { place, at, saved })
}

/// After a failed append (`e`), back to the image as it was: block 0 (and
/// the root's record) first, which make the old image whole again
/// whatever follows its end, then its length.
fn restore(old: &Old, root: &Root, dest: &Path, e: BuildError) -> BuildError {
    let f = &old.file;
    let undo = f
        .write_all_at(&root.saved, root.at)
        .and_then(|_| f.write_all_at(&old.head, 0))
        .and_then(|_| f.sync_data())
        .and_then(|_| f.set_len(old.old_len))
        .and_then(|_| f.sync_all());
    match undo {
        Ok(()) => e,
        Err(u) => refuse(
            dest,
            format!("{e}; and restoring the image failed too: {u}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::free_after;

    #[test]
    fn free_after_counts_only_zeros_to_the_end_of_the_block() {
        let mut head = vec![0u8; 4096];
        head[1024..1152].fill(0xE2);
        // Nothing after a root record ending at 1216: the rest is free.
        assert_eq!(free_after(&head, 1216, 4096), 4096 - 1216);
        // An inode after it (mkfs.erofs): nothing is.
        head[1280 + 4] = 0xA4;
        assert_eq!(free_after(&head, 1216, 4096), 0);
        // A record that ends at a block's end has no room after it, even
        // when the next block (smaller blocks) is zeros.
        let head = vec![0u8; 1536];
        assert_eq!(free_after(&head, 1024, 512), 0);
        assert_eq!(free_after(&head, 1184, 512), 1536 - 1184);
        // Beyond the bytes read: none.
        assert_eq!(free_after(&head, 1600, 512), 0);
    }
}
