//! Encoded extents (48-bit images): a compressed inode whose map is a table
//! of extent records rather than lcluster indexes. The long record forms
//! (16 and 32 bytes) carry their logical start and are binary-searched; the
//! short forms hold one record per logical cluster, the 4-byte form with
//! pclusters back to back from a base address (so a record's address is a
//! sum over the records before it, kept as lazily built checkpoints).

use std::sync::OnceLock;

use ferrofs_codec::Algorithm;
use ferrofs_format::zmap::extent::{ExtentRecord, ExtentTable};
use ferrofs_format::zmap::{MapHeader, MAP_HEADER_SIZE};

use super::compressed::check_pcluster;
use super::{Extent, ExtentKind, Pcluster, PclusterAt, PclusterFormat};
use crate::addr::MetaAddr;
use crate::error::{Error, OrCorrupt, Result};
use crate::image::Image;
use crate::inode::Inode;

/// Records between two checkpoints of the 4-byte form's running sum.
const CHECKPOINT_EVERY: u64 = 64;

/// Mapping state of an extent-mapped inode.
#[derive(Debug)]
pub struct ExtentMap {
    pub(crate) table: ExtentTable,
    /// Metadata address of record 0.
    records: MetaAddr,
    /// Form 4: physical byte address of the first pcluster.
    base: u64,
    /// Short forms: log2 of the logical cluster size.
    pub(crate) lclusterbits: u32,
    /// Short forms: records in the table (one per logical cluster).
    lclusters: u64,
    /// Form 4: physical address of records 0, 64, 128, ...
    checkpoints: OnceLock<Vec<u64>>,
}

impl Clone for ExtentMap {
    fn clone(&self) -> Self {
        Self {
            table: self.table,
            records: self.records,
            base: self.base,
            lclusterbits: self.lclusterbits,
            lclusters: self.lclusters,
            checkpoints: OnceLock::new(),
        }
    }
}

impl ExtentMap {
    /// The extent table header (record size, count).
    pub fn table(&self) -> &ExtentTable {
        &self.table
    }
    /// Short record forms: log2 of the logical cluster size.
    pub fn lclusterbits(&self) -> u32 {
        self.lclusterbits
    }

    pub(crate) fn new(
        image: &Image,
        inode: &Inode,
        hpos: MetaAddr,
        header: &MapHeader,
        is_packed: bool,
    ) -> Result<Self> {
        let at = inode.loc();
        let table = ExtentTable::from_header(header);
        if table.fragment && is_packed {
            return Err(Error::corrupt(at, "the packed inode has a fragment tail"));
        }
        let recsz = u64::from(table.recsz);
        let header_end = hpos
            .checked_add(MAP_HEADER_SIZE as u64)
            .ok_or_else(|| Error::corrupt(at, "map header address overflows"))?;
        let mut records = header_end
            .round_up(recsz)
            .or_corrupt(at, "extent table address overflows")?;
        let lclusterbits = u32::from(image.block_size().bits())
            .checked_add(u32::from(table.cluster_bits))
            .or_corrupt(at, "lcluster size")?;
        let mut base = 0;
        let mut lclusters = 0;
        if !table.has_lstart() {
            lclusters = inode.size.div_ceil(1u64 << lclusterbits);
            if table.recsz == 4 {
                let mut b = [0u8; 8];
                image.read_raw(&mut b, records)?;
                base = u64::from_le_bytes(b);
                records = records
                    .checked_add(8)
                    .or_corrupt(at, "extent table address overflows")?;
            }
        }
        Ok(Self {
            table,
            records,
            base,
            lclusterbits,
            lclusters,
            checkpoints: OnceLock::new(),
        })
    }

    /// Reads record `i` (no bounds check against the count).
    fn record(&self, image: &Image, inode: &Inode, i: u64) -> Result<ExtentRecord> {
        let recsz = self.table.recsz;
        let pos = i
            .checked_mul(u64::from(recsz))
            .and_then(|o| self.records.checked_add(o))
            .ok_or_else(|| Error::corrupt(inode.loc(), "extent table overflows"))?;
        let mut b = [0u8; 32];
        let b = usize::try_from(recsz)
            .ok()
            .and_then(|n| b.get_mut(..n))
            .or_corrupt(inode.loc(), "extent record size")?;
        image.read_raw(b, pos)?;
        ExtentRecord::parse(b, recsz)
            .ok_or_else(|| Error::corrupt(inode.loc().with_offset(pos.bits()), "bad extent record"))
    }

    /// Number of records in the table.
    pub fn records(&self) -> u64 {
        if self.table.has_lstart() {
            self.table.count
        } else {
            self.lclusters
        }
    }

    /// Form 4: the physical byte address of record 0's pcluster (the
    /// others follow back to back); 0 in the other forms.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Record `i` as stored, for the dump and fsck.
    pub fn record_at(&self, image: &Image, inode: &Inode, i: u64) -> Result<ExtentRecord> {
        if i >= self.records() {
            return Err(Error::corrupt(
                inode.loc(),
                format!("extent record {i} past the table"),
            ));
        }
        self.record(image, inode, i)
    }

    /// Form 4: the physical address of record `k`'s pcluster, summing the
    /// lengths before it from the nearest checkpoint.
    fn summed_address(&self, image: &Image, inode: &Inode, k: u64) -> Result<u64> {
        let overflow = || Error::corrupt(inode.loc(), "extent addresses overflow");
        let (mut i, mut pa) = if k < CHECKPOINT_EVERY {
            (0, self.base)
        } else {
            let cps = match self.checkpoints.get() {
                Some(c) => c,
                None => {
                    let built = self.build_checkpoints(image, inode)?;
                    self.checkpoints.get_or_init(|| built)
                }
            };
            let c = usize::try_from(k / CHECKPOINT_EVERY).map_err(|_| overflow())?;
            let pa = *cps.get(c).ok_or_else(overflow)?;
            // The checkpoint's record: k rounded down to a multiple of 64.
            (k & !(CHECKPOINT_EVERY - 1), pa)
        };
        while i < k {
            let r = self.record(image, inode, i)?;
            pa = pa.checked_add(u64::from(r.len())).ok_or_else(overflow)?;
            i = i.checked_add(1).ok_or_else(overflow)?;
        }
        Ok(pa)
    }

    fn build_checkpoints(&self, image: &Image, inode: &Inode) -> Result<Vec<u64>> {
        let overflow = || Error::corrupt(inode.loc(), "extent addresses overflow");
        // One u64 per 64 records: at most a 256th of the table's own bytes,
        // which must lie in the image.
        let mut out = Vec::new();
        let mut pa = self.base;
        for i in 0..self.lclusters {
            if i % CHECKPOINT_EVERY == 0 {
                out.push(pa);
            }
            let r = self.record(image, inode, i)?;
            pa = pa.checked_add(u64::from(r.len())).ok_or_else(overflow)?;
        }
        Ok(out)
    }

    /// The extent holding byte `la` (< the file size).
    pub(crate) fn map(&self, image: &Image, inode: &Inode, la: u64) -> Result<Extent> {
        let at = inode.loc().with_offset(la);
        let size = inode.size;
        let (lstart, lend, rec, last) = if self.table.has_lstart() {
            match self.search(image, inode, la)? {
                Found::Before(first) => {
                    return Ok(Extent {
                        logical: 0,
                        len: first,
                        kind: ExtentKind::Hole,
                    })
                }
                Found::At {
                    lstart,
                    lend,
                    rec,
                    last,
                } => (lstart, lend, rec, last),
            }
        } else {
            let lb = self.lclusterbits;
            let k = la >> lb;
            let mut rec = self.record(image, inode, k)?;
            if self.table.recsz == 4 {
                rec.pstart = self.summed_address(image, inode, k)?;
            }
            let lstart = k << lb;
            let next = lstart.saturating_add(1 << lb);
            let last = k.checked_add(1).is_none_or(|n| n >= self.lclusters);
            (lstart, next.min(size), rec, last)
        };
        let llen = lend
            .checked_sub(lstart)
            .or_corrupt(at, "extent ends before it starts")?;
        if last && self.table.fragment {
            let mut off = u64::from(rec.plen);
            if self.table.recsz >= 8 {
                off |= rec.pstart << 32;
            }
            return Ok(Extent {
                logical: lstart,
                len: llen,
                kind: ExtentKind::Fragment { offset: off },
            });
        }
        if rec.is_empty() {
            return Ok(Extent {
                logical: lstart,
                len: llen,
                kind: ExtentKind::Hole,
            });
        }
        let plen = u64::from(rec.len());
        let bs = image.block_size();
        let format = match rec.algorithm() {
            Some(id) => {
                let alg = Algorithm::from_id(id)
                    .ok_or_else(|| Error::unsupported(at, format!("compression algorithm {id}")))?;
                if image.superblock().available_algorithms() & (1 << id) == 0 {
                    return Err(Error::corrupt(
                        at,
                        format!("algorithm {id} is not enabled in the superblock"),
                    ));
                }
                PclusterFormat::Codec(alg)
            }
            None if self.table.interlaced && bs.offset_in_block(rec.pstart | plen) == 0 => {
                PclusterFormat::Interlaced
            }
            None => PclusterFormat::Shifted,
        };
        check_pcluster(at, plen, llen, format)?;
        Ok(Extent {
            logical: lstart,
            len: llen,
            kind: ExtentKind::Pcluster(Pcluster {
                at: PclusterAt::Blocks(rec.pstart),
                len: plen,
                format,
                partial: rec.partial(),
            }),
        })
    }

    /// Binary search of the long forms: the last record starting at or
    /// before `la`, and where its extent ends.
    fn search(&self, image: &Image, inode: &Inode, la: u64) -> Result<Found> {
        let size = inode.size;
        let (mut l, mut r) = (0u64, self.table.count);
        let mut lend = size;
        let mut hit: Option<(u64, ExtentRecord)> = None;
        while l < r {
            let mid = l.midpoint(r);
            let rec = self.record(image, inode, mid)?;
            if rec.lstart > la {
                if rec.lstart > lend {
                    return Err(Error::corrupt(
                        inode.loc().with_offset(la),
                        format!("extent records out of order at record {mid}"),
                    ));
                }
                lend = rec.lstart;
                r = mid;
            } else {
                // mid < r, so these cannot overflow; checked all the same.
                let at = inode.loc().with_offset(la);
                l = mid.checked_add(1).or_corrupt(at, "extent record index")?;
                if rec.lstart == la {
                    // The next record (if any) bounds the extent.
                    r = r.min(l.checked_add(1).or_corrupt(at, "extent record index")?);
                }
                hit = Some((mid, rec));
            }
        }
        // Every record kept in `hit` starts at or before `la`, and `lend`
        // is past `la`, so the extent is never empty.
        match hit {
            None => Ok(Found::Before(lend)),
            Some((_, rec)) => Ok(Found::At {
                lstart: rec.lstart,
                lend,
                rec,
                last: l >= self.table.count,
            }),
        }
    }
}

enum Found {
    /// `la` lies before the first record, which starts at this offset.
    Before(u64),
    At {
        lstart: u64,
        lend: u64,
        rec: ExtentRecord,
        last: bool,
    },
}
