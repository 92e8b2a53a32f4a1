//! Working out a file's part of a plan: which unit each range of an extent
//! belongs to (a decode, a shared raw read of the packed inode, raw steps),
//! checked before the plan changes.

use crate::error::{Error, Location, OrCorrupt, Result};
use crate::map::{Extent, ExtentKind, PclusterFormat};

use super::{direct_order, Decode, Direct, DIRECT_STEP};

/// One change to a plan, worked out (and checked) before any is made.
#[derive(Clone, Copy, Debug)]
pub(super) enum Step {
    /// A raw range read for one file.
    Direct {
        direct: Direct,
        order: (u8, u16, u64),
        file_off: u64,
    },
    /// `len` bytes from `rel` of a raw extent of the packed inode, read
    /// once for every fragment in it.
    SharedDirect {
        direct: Direct,
        rel: u64,
        len: u64,
        file_off: u64,
    },
    /// `len` bytes from `rel` of a compressed pcluster.
    Decode {
        decode: Decode,
        rel: u64,
        len: u64,
        file_off: u64,
    },
}

/// The steps for `len` bytes of extent `ext` from its offset `pos`, for a
/// file at `file_off`.
pub(super) fn extent_steps(
    steps: &mut Vec<Step>,
    ext: &Extent,
    pos: u64,
    len: u64,
    file_off: u64,
    base: Location,
) -> Result<()> {
    let at = base.with_offset(pos);
    let rel = pos
        .checked_sub(ext.logical)
        .or_corrupt(at, "extent starts after its byte")?;
    match ext.kind {
        ExtentKind::Pcluster(pc) if matches!(pc.format, PclusterFormat::Codec(_)) => {
            steps.push(Step::Decode {
                decode: Decode {
                    pc,
                    llen: ext.len,
                    exact: !pc.partial,
                    at: base.with_offset(ext.logical),
                },
                rel,
                len,
                file_off,
            });
            Ok(())
        }
        ExtentKind::Fragment { .. } => Err(Error::corrupt(at, "a fragment inside a fragment")),
        _ => {
            // Raw bytes (or zeros), read in steps.
            let mut done = 0u64;
            while done < len {
                let n = len.saturating_sub(done).min(DIRECT_STEP);
                let p = pos.checked_add(done).or_corrupt(at, "offset overflows")?;
                let off = file_off
                    .checked_add(done)
                    .or_corrupt(at, "offset overflows")?;
                let r = rel.checked_add(done).or_corrupt(at, "offset overflows")?;
                steps.push(Step::Direct {
                    direct: Direct {
                        ext: *ext,
                        base,
                        pos: p,
                        len: n,
                    },
                    order: direct_order(ext, r),
                    file_off: off,
                });
                done = done.saturating_add(n);
            }
            Ok(())
        }
    }
}

/// The steps for `len` bytes of packed extent `pe` from packed offset
/// `pos`, for a file at `file_off`: a small raw extent is read once for
/// every fragment in it.
pub(super) fn packed_steps(
    steps: &mut Vec<Step>,
    pe: &Extent,
    pos: u64,
    len: u64,
    base: Location,
    file_off: u64,
) -> Result<()> {
    let raw = matches!(pe.kind, ExtentKind::Raw { .. } | ExtentKind::Inline { .. })
        || matches!(pe.kind, ExtentKind::Pcluster(pc) if !matches!(pc.format, PclusterFormat::Codec(_)));
    if raw && pe.len <= DIRECT_STEP {
        let at = base.with_offset(pos);
        let rel = pos
            .checked_sub(pe.logical)
            .or_corrupt(at, "packed extent starts after its byte")?;
        steps.push(Step::SharedDirect {
            direct: Direct {
                ext: *pe,
                base,
                pos: pe.logical,
                len: pe.len,
            },
            rel,
            len,
            file_off,
        });
        return Ok(());
    }
    extent_steps(steps, pe, pos, len, file_off, base)
}
