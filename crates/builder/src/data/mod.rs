//! The data pass: every regular file's bytes become placed data, in the
//! plan's order. `pass` drives it: `schedule` cuts the files into windows
//! and a dispatcher thread compresses them on the pool (`zpass`, with the
//! fixed-output encoders in `compress`, the rules of an `extent`, and with
//! dedupe long files cut where their bytes say, `cuts`;
//! `worth` decides which files compression can shrink), while the writer
//! (`write`, compressed files in `zfile`) stores each file in order:
//! identical files and pclusters once (`dedupe`, `stored`), tails and small
//! files into the packed inode (`fragments`, in the `order` that keeps
//! what a start reads together, alike content by `similarity`), pclusters copied from a `--base` image (`base`), and with `-E
//! sparse` runs of zeros as holes (`sparse`). The pass reads the plan and
//! returns what it `placed`.

pub(crate) mod base;
pub(crate) mod compress;
pub(crate) mod cuts;
pub(crate) mod dedupe;
pub(crate) mod extent;
pub(crate) mod fragments;
pub(crate) mod order;
pub(crate) mod pass;
pub(crate) mod placed;
pub(crate) mod schedule;
pub(crate) mod similarity;
pub(crate) mod sparse;
pub(crate) mod stored;
pub(crate) mod worth;
pub(crate) mod write;
pub(crate) mod zfile;
pub(crate) mod zpass;
