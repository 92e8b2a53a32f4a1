//! Writing metadata into the image once the data pass has placed every
//! file's data: the inodes, xattrs and directory blocks (`meta`, or inside
//! a metabox, `metabox`; with `--zD` the directories join the fragments,
//! `zdirs`), the superblock last (`superblock`), Android's block list
//! (`blocklist`), and an incremental build's append to an existing image
//! (`append`).

pub(crate) mod append;
pub(crate) mod blocklist;
pub(crate) mod meta;
pub(crate) mod metabox;
pub(crate) mod superblock;
pub(crate) mod zdirs;
