//! Android's block list (`--block-list-file`, an option of mkfs.erofs 1.8
//! built for Android; 1.9 dropped it): which blocks of the image hold each
//! regular file's data, for Android's OTA tools (which read it as a map
//! from path to a set of blocks).
//!
//! The format, as mkfs.erofs 1.8 writes it: one line per regular file
//! whose data takes blocks of the image, `/MOUNT_POINT/PATH` (PATH relative
//! to the source root, a hard-linked file under its first name) followed
//! by its blocks, each item after one space, either a block number `A` or
//! an inclusive range `A-B`, in the order of the file's bytes. Block
//! numbers count from the image's first block (not the output file's,
//! under `--offset`). Nothing is listed without `--mount-point`: the file
//! is then written empty. Lines come in the order file data is written.
//!
//! What is listed, per kind of file (as upstream, unless said otherwise):
//! - empty files, directories, symlinks, devices: nothing;
//! - flat files: their data blocks; a tail stored inline after the inode
//!   (in a metadata block shared with other inodes) is not listed, so a
//!   file smaller than a block with an inline tail has no line;
//! - compressed files: the blocks of their pclusters; an inline
//!   (ztailpacking) tail pcluster and a tail or whole file in the packed
//!   inode (`-E fragments`) are not listed, so a file entirely inline or
//!   in a fragment has no line; the packed inode and the metabox are
//!   never listed;
//! - chunk-based files: the blocks of their chunks; holes are skipped.
//!
//! Where upstream's output has quirks, ferrofs chooses:
//! - Paths are `/` + the mount point + `/` + PATH with the mount point
//!   normalised ([`crate::BuildOptions::mount_prefix`]). mkfs.erofs prints
//!   `/` before the mount point as given, so `--mount-point=/system`
//!   gives `//system/bin/sh` there; Android's build passes `system`, for
//!   which both print `/system/bin/sh`, and the drop-in spells the mount
//!   point the same way for `--file-contexts` and `--fs-config-file`.
//! - Contiguous blocks are one range: mkfs.erofs prints a flat file's tail
//!   block, written separately after its full blocks, as an item of its
//!   own (`10-12 13`); ferrofs prints `10-13`. Readers take the items as a
//!   set of blocks, so the two lists say the same.
//! - Every block is listed once, under the first file (in data order)
//!   that uses it. Data shared by deduplication (`-E dedupe`, or a whole
//!   file equal to an earlier one) is listed under the file that wrote
//!   it; a file whose blocks are all another's has no line. mkfs.erofs
//!   does so for compressed files (it lists only the pclusters a file
//!   writes) but lists shared chunks of chunk-based files again, which
//!   Android's reader rejects (it asserts that no block is in two files).
//! - A file without blocks has no line. mkfs.erofs prints an empty line
//!   for a chunk-based file of holes only and for a compressed file of a
//!   block or more whose one pcluster is inline, which Android's reader
//!   cannot split into a path and ranges.
//! - The last chunk counts only the blocks the file's bytes fill;
//!   mkfs.erofs counts the whole chunk and cuts it to the file's size in
//!   blocks minus those listed before, which overshoots after a hole and
//!   then lists blocks of the next chunk written (another file's).
//! - With `--blobdev` the chunks are on the extra device, not in the
//!   image, and are not listed; mkfs.erofs lists the last chunk of each
//!   file with its address on the blob.
//! - A path is written as it is (like upstream): a name with a space or a
//!   newline makes its line ambiguous to a reader.

use std::collections::BTreeMap;
use std::io::Write;

use crate::data::placed::Placed;
use crate::plan::Plan;
use crate::tree::{InodeId, Tree};

/// The block list of a laid-out image: `files` are the source's regular
/// files with data in data order, their paths under `prefix` (the mount
/// point; `None` when `--mount-point` was not given: then nothing is
/// listed).
pub(crate) fn render(
    tree: &Tree,
    plan: &Plan,
    placed: &Placed,
    files: &[InodeId],
    prefix: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(prefix) = prefix else {
        return out;
    };
    let mut listed = Listed::default();
    for &id in files {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for (start, count) in file_blocks(plan, placed, id) {
            for (a, b) in listed.take(start, start.saturating_add(count)) {
                match runs.last_mut() {
                    Some(last) if last.1 == a => last.1 = b,
                    _ => runs.push((a, b)),
                }
            }
        }
        if runs.is_empty() {
            continue;
        }
        out.extend_from_slice(prefix);
        out.push(b'/');
        out.extend_from_slice(&tree.inodes[id].rel);
        for (a, b) in runs {
            // Writing into a Vec cannot fail.
            let _ = match b - a {
                1 => write!(out, " {a}"),
                _ => write!(out, " {a}-{}", b - 1),
            };
        }
        out.push(b'\n');
    }
    out
}

/// The block runs (first block, count) holding file `id`'s data in the
/// image, in the order of its bytes: pclusters of a compressed file (not
/// an inline or fragment tail), chunks of a chunk-based one (not holes,
/// nor chunks on the blob), the blocks of a flat one (not an inline tail).
fn file_blocks(plan: &Plan, placed: &Placed, id: InodeId) -> Vec<(u64, u64)> {
    let p = &plan.inodes[id];
    if let Some(z) = &p.z {
        return z
            .extents
            .iter()
            .filter(|e| e.blocks > 0)
            .map(|e| (e.pblk, e.blocks))
            .collect();
    }
    if let Some(c) = &p.chunks {
        if placed.chunks_on_blob {
            return Vec::new();
        }
        let blks = placed.chunk_blk.get(id).map_or(&[][..], Vec::as_slice);
        return blks
            .iter()
            .zip(&c.chunks)
            .filter_map(|(blk, count)| Some(((*blk)?, (*count)?)))
            .collect();
    }
    match placed.start_blk.get(id) {
        Some(&start) if p.blocks > 0 => vec![(start, p.blocks)],
        _ => Vec::new(),
    }
}

/// Blocks already listed, as disjoint `[start, end)` runs by start.
#[derive(Default)]
struct Listed(BTreeMap<u64, u64>);

impl Listed {
    /// The parts of `[start, end)` not listed yet, in order; they count as
    /// listed from now on.
    fn take(&mut self, start: u64, end: u64) -> Vec<(u64, u64)> {
        if start >= end {
            return Vec::new();
        }
        let before = self
            .0
            .range(..start)
            .next_back()
            .map(|(&s, &e)| (s, e))
            .filter(|&(_, e)| e >= start);
        let inside: Vec<(u64, u64)> = self.0.range(start..=end).map(|(&s, &e)| (s, e)).collect();
        let mut free = Vec::new();
        let mut at = before.map_or(start, |(_, e)| e.max(start));
        for &(s, e) in &inside {
            if s > at {
                free.push((at, s.min(end)));
            }
            at = at.max(e);
        }
        if at < end {
            free.push((at, end));
        }
        // Merge [start, end) with every run it touches.
        let (mut lo, mut hi) = (start, end);
        if let Some((s, e)) = before {
            self.0.remove(&s);
            (lo, hi) = (s, hi.max(e));
        }
        for (s, e) in inside {
            self.0.remove(&s);
            hi = hi.max(e);
        }
        self.0.insert(lo, hi);
        free
    }
}

#[cfg(test)]
mod tests {
    use super::Listed;

    #[test]
    fn blocks_are_taken_once() {
        let mut l = Listed::default();
        assert_eq!(l.take(10, 20), vec![(10, 20)]);
        assert_eq!(l.take(10, 20), vec![]);
        assert_eq!(l.take(5, 12), vec![(5, 10)]);
        assert_eq!(l.take(18, 25), vec![(20, 25)]);
        assert_eq!(l.take(30, 31), vec![(30, 31)]);
        assert_eq!(l.take(0, 40), vec![(0, 5), (25, 30), (31, 40)]);
        assert_eq!(l.take(0, 40), vec![]);
        assert_eq!(l.take(40, 41), vec![(40, 41)]);
        assert_eq!(l.0.len(), 1);
        assert_eq!(l.take(7, 7), vec![]);
    }
}
