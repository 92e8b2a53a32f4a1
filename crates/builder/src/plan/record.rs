//! How long each inode's record in the metadata area is: its head (the
//! inode and its xattrs) and what follows the head (a compressed file's
//! index, a chunk table, an inline tail); and moving a directory's last
//! block out of line when its record must fit a smaller room.

use ferrofs_format::inode::DataLayout;

use super::Plan;
use crate::tree::InodeId;

impl Plan {
    /// Bytes of inode `id`'s head: the inode and its xattrs.
    pub(crate) fn head_len(&self, id: InodeId) -> u64 {
        self.inodes[id].inode_size() + self.xattrs.bodies[id].len() as u64
    }

    /// Bytes of inode `id`'s whole record: its head and what follows it.
    pub(crate) fn record_len(&self, id: InodeId) -> u64 {
        let p = &self.inodes[id];
        let ix = self.head_len(id);
        match &p.z {
            Some(z) => ix + z.tail_len(ix),
            None => ix + p.table_len(ix) + p.tail,
        }
    }

    /// [`Plan::record_len`] of every inode id below `n`.
    pub(crate) fn record_lens(&self, n: usize) -> Vec<u64> {
        (0..n).map(|id| self.record_len(id)).collect()
    }

    /// The length of directory `id`'s record if it fits in `room` bytes:
    /// as planned when that fits in `inline_room` (inline data must not
    /// cross a block), or else with its last entry block no longer inline
    /// (the plan is changed to that); `None`, the plan as it was, if
    /// neither fits.
    pub(crate) fn fit_record(
        &mut self,
        id: InodeId,
        (inline_room, room): (u64, u64),
        bs: u64,
    ) -> Option<u64> {
        let len = self.record_len(id);
        if len <= room.min(inline_room) {
            return Some(len);
        }
        let p = &mut self.inodes[id];
        if p.layout != DataLayout::FlatInline || p.z.is_some() || p.dir_blocks.is_empty() {
            return None;
        }
        let was = (p.layout, p.blocks, p.tail);
        (p.layout, p.blocks, p.tail) = (DataLayout::FlatPlain, p.size.div_ceil(bs), 0);
        let len = self.record_len(id);
        if len <= room {
            return Some(len);
        }
        let p = &mut self.inodes[id];
        (p.layout, p.blocks, p.tail) = was;
        None
    }
}
