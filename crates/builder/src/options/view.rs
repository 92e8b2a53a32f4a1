//! The options as each stage of the pipeline sees them: a borrowed view of
//! only the knobs that stage reads ([`PlanOptions`], [`DataOptions`],
//! [`LayoutOptions`], [`EmitOptions`]), built once by the `build` module
//! (or the incremental build) from the [`BuildOptions`] and a [`Basis`],
//! the settings an image's format is fixed to: a new image takes them from
//! the options, an incremental build from the image it extends (so the
//! options are never cloned and patched).

use std::path::Path;

use crate::options::compress::CompressOptions;
use crate::options::profile::Profile;
use crate::options::{BuildOptions, MetaboxOptions};

/// The settings that fix an image's format and that an existing image
/// dictates to a build that extends it: block size, the 48-bit layout,
/// the compact inodes' epoch, the xattr name filter and whether xattrs
/// may be shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Basis {
    /// log2 of the block size.
    pub(crate) blkszbits: u8,
    /// Whether the image uses the 48-bit layout.
    pub(crate) bit48: bool,
    /// The epoch and fixed nanoseconds compact inodes count from, when
    /// fixed; `None` lets the plan choose.
    pub(crate) fixed_epoch: Option<(i64, u32)>,
    /// Whether the xattr name bloom filters are written.
    pub(crate) xattr_filter: bool,
    /// Xattrs used by at least this many inodes are shared; negative
    /// disables xattrs.
    pub(crate) xattr_tolerance: i32,
}

impl Basis {
    /// A new image's basis: what the options ask for.
    pub(crate) fn of(opts: &BuildOptions) -> Basis {
        Basis {
            blkszbits: opts.blkszbits,
            bit48: opts.uses_48bit(),
            fixed_epoch: opts.fixed_epoch,
            xattr_filter: opts.xattr_filter,
            xattr_tolerance: opts.xattr_tolerance,
        }
    }
}

/// What the plan reads: how inodes, xattrs, directories, chunks and the
/// data order are planned.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanOptions<'a> {
    /// log2 of the block size.
    pub(crate) blkszbits: u8,
    /// The 48-bit layout.
    pub(crate) bit48: bool,
    /// The compact inodes' epoch, when fixed.
    pub(crate) fixed_epoch: Option<(i64, u32)>,
    /// Xattr name bloom filters.
    pub(crate) xattr_filter: bool,
    /// Share xattrs used this often (negative: no xattrs).
    pub(crate) xattr_tolerance: i32,
    /// Extra long xattr name prefixes.
    pub(crate) xattr_prefixes: &'a [Vec<u8>],
    /// `--xattr-inode-digest`'s xattr name.
    pub(crate) xattr_digest: Option<&'a [u8]>,
    /// The root's inline xattr area's least size.
    pub(crate) root_xattr_isize: u32,
    /// Directories without ".".
    pub(crate) dot_omitted: bool,
    /// Every regular file chunk-based with this chunk size.
    pub(crate) chunk_size: Option<u64>,
    /// Chunk tables of 8-byte indexes (asked for, or a blob's chunks).
    pub(crate) chunk_indexes: bool,
    /// Always 64-byte inodes.
    pub(crate) force_extended: bool,
    /// Only 32-byte inodes.
    pub(crate) force_compact: bool,
    /// Regular files' tails inline.
    pub(crate) inline_data: bool,
    /// Compression settings.
    pub(crate) compress: Option<&'a CompressOptions>,
    /// The access profile the data order follows.
    pub(crate) profile: Option<&'a Profile>,
}

/// What the data pass reads: how file data is compressed, shared, ordered
/// and packed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DataOptions<'a> {
    /// log2 of the block size.
    pub(crate) blkszbits: u8,
    /// Compression settings.
    pub(crate) compress: Option<&'a CompressOptions>,
    /// The access profile (data order, hot pieces, fragment order).
    pub(crate) profile: Option<&'a Profile>,
    /// Files with equal contents share their data.
    pub(crate) dedupe: bool,
    /// The previous image whose compressed data is reused.
    pub(crate) base: Option<&'a Path>,
    /// The long-prefix table stays raw on the primary device.
    pub(crate) plain_xattr_prefixes: bool,
    /// The metabox, when there is one.
    pub(crate) metabox: Option<MetaboxOptions>,
    /// Directories go into the packed inode (`--zD`).
    pub(crate) compress_dirs: bool,
    /// File data in the order the archive holds it
    /// ([`BuildOptions::data_in_archive_order`]).
    pub(crate) archive_order: bool,
    /// The 48-bit layout (files with holes are mapped by extent records).
    pub(crate) bit48: bool,
}

/// What the head's layout reads: the superblock's size, the compression
/// records and where the root's record may go.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LayoutOptions<'a> {
    /// log2 of the block size.
    pub(crate) blkszbits: u8,
    /// Compression settings (the records).
    pub(crate) compress: Option<&'a CompressOptions>,
    /// The metabox, when there is one.
    pub(crate) metabox: Option<MetaboxOptions>,
    /// Directories go into the packed inode (`--zD`).
    pub(crate) compress_dirs: bool,
}

/// What writing the superblock and the outputs reads (the metadata
/// writers that add a packed inode or a metabox take the data pass's view,
/// whose writers they call).
#[derive(Clone, Copy, Debug)]
pub(crate) struct EmitOptions<'a> {
    /// log2 of the block size.
    pub(crate) blkszbits: u8,
    /// The 48-bit layout.
    pub(crate) bit48: bool,
    /// Xattr name bloom filters.
    pub(crate) xattr_filter: bool,
    /// Compression settings (the superblock's compression fields).
    pub(crate) compress: Option<&'a CompressOptions>,
    /// The metabox, when there is one.
    pub(crate) metabox: Option<MetaboxOptions>,
    /// The long-prefix table stays raw on the primary device.
    pub(crate) plain_xattr_prefixes: bool,
    /// Volume uuid, or `None` to derive one.
    pub(crate) uuid: Option<[u8; 16]>,
    /// Volume label.
    pub(crate) label: &'a [u8],
    /// Where the image starts in the output file.
    pub(crate) offset: u64,
    /// File data aligned to this many blocks (0 or 1: anywhere).
    pub(crate) dsunit: u64,
    /// Checksum the superblock.
    pub(crate) sb_checksum: bool,
}

/// Each stage's view of one build's options.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Views<'a> {
    /// The plan's.
    pub(crate) plan: PlanOptions<'a>,
    /// The data pass's.
    pub(crate) data: DataOptions<'a>,
    /// The head layout's.
    pub(crate) layout: LayoutOptions<'a>,
    /// The emitters'.
    pub(crate) emit: EmitOptions<'a>,
}

impl<'a> Views<'a> {
    /// The views of `opts` for an image whose format `basis` fixes.
    pub(crate) fn new(opts: &'a BuildOptions, basis: Basis) -> Views<'a> {
        let Basis {
            blkszbits,
            bit48,
            fixed_epoch,
            xattr_filter,
            xattr_tolerance,
        } = basis;
        let compress = opts.compress.as_ref();
        let profile = opts.profile.as_deref();
        let plan = PlanOptions {
            blkszbits,
            bit48,
            fixed_epoch,
            xattr_filter,
            xattr_tolerance,
            xattr_prefixes: &opts.xattr_prefixes,
            xattr_digest: opts.xattr_digest.as_deref(),
            root_xattr_isize: opts.root_xattr_isize,
            dot_omitted: opts.dot_omitted,
            chunk_size: opts.chunk_size,
            chunk_indexes: opts.chunk_indexes || opts.blobdev.is_some(),
            force_extended: opts.force_extended,
            force_compact: opts.force_compact,
            inline_data: opts.inline_data,
            compress,
            profile,
        };
        let data = DataOptions {
            blkszbits,
            compress,
            profile,
            dedupe: opts.dedupe,
            base: opts.base.as_deref(),
            plain_xattr_prefixes: opts.plain_xattr_prefixes,
            metabox: opts.metabox,
            compress_dirs: opts.compress_dirs,
            archive_order: opts.data_in_archive_order(),
            bit48,
        };
        let layout = LayoutOptions {
            blkszbits,
            compress,
            metabox: opts.metabox,
            compress_dirs: opts.compress_dirs,
        };
        let emit = EmitOptions {
            blkszbits,
            bit48,
            xattr_filter,
            compress,
            metabox: opts.metabox,
            plain_xattr_prefixes: opts.plain_xattr_prefixes,
            uuid: opts.uuid,
            label: &opts.label,
            offset: opts.offset,
            dsunit: opts.dsunit,
            sb_checksum: opts.sb_checksum,
        };
        Views {
            plan,
            data,
            layout,
            emit,
        }
    }
}

impl PlanOptions<'_> {
    /// The block size in bytes.
    pub(crate) fn block_size(&self) -> u64 {
        1u64 << self.blkszbits
    }
}

impl DataOptions<'_> {
    /// The block size in bytes.
    pub(crate) fn block_size(&self) -> u64 {
        1u64 << self.blkszbits
    }
}

impl LayoutOptions<'_> {
    /// The block size in bytes.
    pub(crate) fn block_size(&self) -> u64 {
        1u64 << self.blkszbits
    }
}

impl EmitOptions<'_> {
    /// The block size in bytes.
    pub(crate) fn block_size(&self) -> u64 {
        1u64 << self.blkszbits
    }
    /// The image's file data alignment in bytes (0: none).
    pub(crate) fn data_align(&self) -> u64 {
        if self.dsunit > 1 {
            self.dsunit * self.block_size()
        } else {
            0
        }
    }
}
