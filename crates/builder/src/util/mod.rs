//! Helpers every stage shares and none owns: C-style number parsing for
//! configuration files (`cnum`), nameless scratch files (`spool`), output
//! files that appear only when complete (`staged`), and phase timing
//! (`timing`).

pub(crate) mod cnum;
pub(crate) mod out;
pub(crate) mod spool;
pub(crate) mod staged;
pub(crate) mod timing;
