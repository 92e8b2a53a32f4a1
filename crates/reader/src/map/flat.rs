//! FLAT_PLAIN and FLAT_INLINE: consecutive blocks from a start block, the
//! last partial block optionally inline right after the inode.

use ferrofs_format::inode::DataLayout;
use ferrofs_format::BlockAddr;

use super::{Extent, ExtentKind};
use crate::addr::MetaAddr;
use crate::error::{Error, OrCorrupt, Result};
use crate::image::Image;
use crate::inode::Inode;

/// Mapping state of a flat inode (plain or with an inline tail).
#[derive(Clone, Debug)]
pub struct FlatMap {
    /// `None`: a FLAT_PLAIN file stored without blocks (reads as zeros).
    startblk: Option<u64>,
    /// Bytes stored in whole blocks (the rest, if any, is inline).
    block_bytes: u64,
    inline_pos: Option<MetaAddr>,
}

impl FlatMap {
    pub(crate) fn new(image: &Image, inode: &Inode) -> Result<Self> {
        let bs = image.block_size();
        let startblk = inode.startblk;
        let size = inode.size;
        let last = size
            .checked_sub(1)
            .filter(|_| inode.layout == DataLayout::FlatInline);
        let (block_bytes, inline_pos) = if let Some(last) = last {
            // Whole blocks up to the one holding the last byte; the rest
            // (1..=bs bytes) is the inline tail.
            let block_bytes = bs.block_of(last) << bs.bits();
            let tail = size
                .checked_sub(block_bytes)
                .or_corrupt(inode.loc(), "inline tail")?;
            let pos = inode.inode_end();
            let tail_end = bs.offset_in_block(pos.offset()).checked_add(tail);
            if tail_end.is_none_or(|e| e > bs.bytes()) {
                return Err(Error::corrupt(
                    inode.loc().with_offset(pos.bits()),
                    "inline data crosses a block boundary",
                ));
            }
            (block_bytes, Some(pos))
        } else {
            (size, None)
        };
        if let (true, Some(startblk)) = (block_bytes > 0, startblk) {
            let end = startblk
                .checked_mul(bs.bytes())
                .and_then(|p| p.checked_add(block_bytes))
                .ok_or_else(|| {
                    Error::corrupt(inode.loc(), "data blocks overflow the address space")
                })?;
            // Blocks past the image and its devices can never be read (a
            // size field pushed up would otherwise have every bulk reader
            // plan the petabytes).
            if image.mapped_bytes().is_some_and(|m| end > m) {
                return Err(Error::corrupt(
                    inode.loc(),
                    format!(
                        "data blocks run past the end of the image: {block_bytes} bytes from \
                         block {startblk}, the image and its devices end at byte {}",
                        image.mapped_bytes().unwrap_or(0)
                    ),
                ));
            }
        }
        Ok(Self {
            startblk,
            block_bytes,
            inline_pos,
        })
    }

    pub(crate) fn map(&self, image: &Image, inode: &Inode, offset: u64) -> Result<Extent> {
        let bs = image.block_size();
        if offset < self.block_bytes {
            let kind = match self.startblk {
                // new() checked that the blocks fit the address space.
                Some(blk) => ExtentKind::Raw {
                    device: 0,
                    pos: bs
                        .pos(BlockAddr(blk))
                        .or_corrupt(inode.loc(), "data blocks overflow the address space")?,
                },
                None => ExtentKind::Hole,
            };
            return Ok(Extent {
                logical: 0,
                len: self.block_bytes,
                kind,
            });
        }
        match self.inline_pos {
            Some(pos) => Ok(Extent {
                logical: self.block_bytes,
                len: inode
                    .size
                    .checked_sub(self.block_bytes)
                    .or_corrupt(inode.loc(), "inline tail")?,
                kind: ExtentKind::Inline { pos },
            }),
            None => Err(Error::corrupt(inode.loc(), "offset past the data")),
        }
    }

    /// First data block, for the dump (`None`: no blocks, all hole).
    pub fn start_block(&self) -> Option<u64> {
        self.startblk
    }
    /// Position of the inline tail, if any.
    pub fn inline_pos(&self) -> Option<MetaAddr> {
        self.inline_pos
    }
}
