//! The data pass's parts: which files are worth compressing (`worth`),
//! compressing every segment on all cores (`zpass`, with the fixed-output
//! encoders in `compress` and the compressed inode's index in `zinode`),
//! identical pclusters stored once (`dedupe`), tails and small files
//! packed into the packed inode (`fragments`, ordered by content
//! `similarity`), pclusters copied from a `--base` image (`base`), and the
//! decompressed-size arithmetic both sides share (`cnum`). `emit` drives
//! the pass and writes what it returns.

pub(crate) mod base;
pub(crate) mod compress;
pub(crate) mod dedupe;
pub(crate) mod extent;
pub(crate) mod fragments;
pub(crate) mod pass;
pub(crate) mod schedule;
pub(crate) mod similarity;
pub(crate) mod stored;
pub(crate) mod worth;
pub(crate) mod write;
pub(crate) mod zfile;
pub(crate) mod zpass;
