//! Building a dm-verity tree over data: the data level hashed in parallel
//! (one hash block's worth of data blocks per work item, each result
//! written to its own place, so the output does not depend on the thread
//! count), the levels above it from the level below, the root last.

use std::sync::Mutex;

use super::{Geometry, Params};
use crate::error::{Error, Result};
use crate::source::Bytes;

/// A built tree: its root hash and its hash blocks, in on-disk order (top
/// level first), ready to be written after a superblock.
#[derive(Clone, Debug)]
pub struct Tree {
    /// The root hash.
    pub root: Vec<u8>,
    /// The hash blocks (empty for one data block).
    pub blocks: Vec<u8>,
    /// The geometry they follow.
    pub geometry: Geometry,
}

impl Tree {
    /// The bytes veritysetup puts at the hash offset `hash_offset`: the
    /// superblock of `params` (with `superblock`), zeros up to the next hash
    /// block ([`super::tree_offset`]), then the tree.
    pub fn hash_area(
        &self,
        params: &Params,
        hash_offset: u64,
        superblock: bool,
    ) -> Result<Vec<u8>> {
        let start = super::tree_offset(hash_offset, params.hash_block_size, superblock)?;
        let pad = usize::try_from(start.saturating_sub(hash_offset))
            .map_err(|_| Error::Params("hash offset overflows".into()))?;
        let mut out = Vec::with_capacity(pad.saturating_add(self.blocks.len()));
        if superblock {
            out.extend_from_slice(&params.superblock()?);
        }
        out.resize(pad, 0);
        out.extend_from_slice(&self.blocks);
        Ok(out)
    }
}

/// Hash blocks of the data level one work item fills.
const ITEM_HASH_BLOCKS: usize = 2;

/// Builds the tree `params` describe over `data`, on every core. The last
/// data block may be short in `data`: it is hashed zero-padded.
pub fn build(data: &dyn Bytes, params: &Params) -> Result<Tree> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    build_with_threads(data, params, threads)
}

/// [`build`] on `threads` threads (the output is the same for any count).
pub fn build_with_threads(data: &dyn Bytes, params: &Params, threads: usize) -> Result<Tree> {
    let geometry = params.geometry()?;
    let data_len = data.len().map_err(|source| Error::Io {
        what: "data",
        offset: 0,
        source,
    })?;
    let covered = params.data_len()?;
    let short_by = covered.saturating_sub(data_len);
    if short_by >= u64::from(params.data_block_size) {
        return Err(Error::Params(format!(
            "{} data blocks of {} bytes need {covered} bytes of data, there are {data_len}",
            params.data_blocks, params.data_block_size
        )));
    }
    let tree_len = usize::try_from(geometry.tree_len()?)
        .map_err(|_| Error::Params("the tree does not fit in memory".into()))?;
    let mut blocks = vec![0u8; tree_len];
    let hbs = geometry.hash_block_size as usize;
    let Some(bottom) = geometry.levels.first().copied() else {
        // One data block: its digest is the root.
        let mut block = vec![0u8; params.data_block_size as usize];
        read_padded(data, &mut block, 0, data_len)?;
        let root = geometry.digest(&params.salt, &block);
        return Ok(Tree {
            root: root.as_bytes().to_vec(),
            blocks,
            geometry,
        });
    };
    let at = |start: u64| {
        usize::try_from(start)
            .ok()
            .and_then(|s| s.checked_mul(hbs))
            .ok_or_else(|| Error::Params("tree offset overflows".into()))
    };
    let out = blocks
        .get_mut(at(bottom.start)?..)
        .ok_or_else(|| Error::Params("tree level out of range".into()))?;
    let level = LevelInput {
        src: data,
        src_len: data_len,
        block_size: params.data_block_size,
        count: params.data_blocks,
    };
    hash_level(&geometry, &params.salt, &level, out, threads)?;
    for pair in geometry.levels.windows(2) {
        let [below, above] = pair else { continue };
        let (head, tail) = blocks.split_at_mut(at(below.start)?);
        let tail: &[u8] = tail;
        let src_len = u64::try_from(tail.len()).unwrap_or(u64::MAX);
        let level = LevelInput {
            src: &tail,
            src_len,
            block_size: geometry.hash_block_size,
            count: below.blocks,
        };
        let out = head
            .get_mut(at(above.start)?..)
            .ok_or_else(|| Error::Params("tree level out of range".into()))?;
        hash_level(&geometry, &params.salt, &level, out, 1)?;
    }
    let top = blocks.get(..hbs).unwrap_or_default();
    let root = geometry.digest(&params.salt, top);
    Ok(Tree {
        root: root.as_bytes().to_vec(),
        blocks,
        geometry,
    })
}

/// The blocks one level's digests are taken of.
struct LevelInput<'a> {
    src: &'a dyn Bytes,
    src_len: u64,
    block_size: u32,
    count: u64,
}

/// Fills `out` (the level's hash blocks, zero) with the salted digests of
/// `input`'s blocks, on up to `threads` threads.
fn hash_level(
    geometry: &Geometry,
    salt: &[u8],
    input: &LevelInput<'_>,
    out: &mut [u8],
    threads: usize,
) -> Result<()> {
    let hbs = geometry.hash_block_size as usize;
    let per_block = 1usize
        .checked_shl(geometry.per_block_bits)
        .unwrap_or(usize::MAX);
    let item_bytes = hbs.saturating_mul(ITEM_HASH_BLOCKS);
    let item_blocks = per_block.saturating_mul(ITEM_HASH_BLOCKS) as u64;
    let work = Mutex::new(out.chunks_mut(item_bytes).enumerate());
    let failed: Mutex<Option<Error>> = Mutex::new(None);
    let worker = || {
        let mut buf = Vec::new();
        loop {
            let next = work.lock().ok().and_then(|mut w| w.next());
            let Some((item, chunk)) = next else { break };
            let first = (item as u64).saturating_mul(item_blocks);
            if let Err(e) = hash_item(geometry, salt, input, &mut buf, chunk, first) {
                if let Ok(mut f) = failed.lock() {
                    f.get_or_insert(e);
                }
                break;
            }
        }
    };
    std::thread::scope(|s| {
        for _ in 1..threads.max(1) {
            s.spawn(worker);
        }
        worker();
    });
    match failed.into_inner().ok().flatten() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Digests of input blocks `first..` into `chunk`, one slot each, until
/// the chunk or the level's blocks run out: the blocks are read in one
/// piece into `buf` and hashed together.
fn hash_item(
    geometry: &Geometry,
    salt: &[u8],
    input: &LevelInput<'_>,
    buf: &mut Vec<u8>,
    chunk: &mut [u8],
    first: u64,
) -> Result<()> {
    let slot = geometry.digest_slot;
    let slots = chunk.len().checked_div(slot).unwrap_or(0) as u64;
    let count = slots.min(input.count.saturating_sub(first));
    if count == 0 {
        return Ok(());
    }
    let bs = input.block_size as usize;
    let len = usize::try_from(count)
        .ok()
        .and_then(|c| c.checked_mul(bs))
        .ok_or_else(|| Error::Params("hash item overflows".into()))?;
    buf.resize(len, 0);
    let offset = first
        .checked_mul(u64::from(input.block_size))
        .ok_or_else(|| Error::Params("data offset overflows".into()))?;
    read_padded(input.src, buf, offset, input.src_len)?;
    let mut digests = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    geometry.digests(salt, buf, bs, &mut digests);
    for (dst, d) in chunk.chunks_exact_mut(slot).zip(&digests) {
        let bytes = d.as_bytes();
        dst.get_mut(..bytes.len())
            .ok_or_else(|| Error::Params("digest slot too small".into()))?
            .copy_from_slice(bytes);
    }
    Ok(())
}

/// Reads the block at `offset` into `buf`, zero-filling what lies past
/// `src_len` (the short last block of the data).
pub(crate) fn read_padded(
    src: &dyn Bytes,
    buf: &mut [u8],
    offset: u64,
    src_len: u64,
) -> Result<()> {
    let avail = usize::try_from(src_len.saturating_sub(offset)).unwrap_or(usize::MAX);
    let n = avail.min(buf.len());
    let (head, tail) = buf.split_at_mut(n);
    src.read_exact_at(head, offset)
        .map_err(|source| Error::Io {
            what: "data",
            offset,
            source,
        })?;
    tail.fill(0);
    Ok(())
}
