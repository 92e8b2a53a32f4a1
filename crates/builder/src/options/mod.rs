//! What a build may be asked to do, with mkfs.erofs's meanings: the
//! [`BuildOptions`] knob set, compression settings (`compress`), the files
//! options name (`--compress-hints`: `hints`; `--profile`: `profile`), and
//! the one check of them all (`check`), run before anything is read, and
//! each stage's borrowed view of them (`view`).

mod check;
pub(crate) mod compress;
pub(crate) mod hints;
pub(crate) mod profile;
pub(crate) mod view;

use regex::bytes::Regex;

use crate::tree::relabel::OwnerMap;
pub use crate::tree::relabel::TimePolicy;

/// Options of one build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// log2 of the block size (9..=12).
    pub blkszbits: u8,
    /// How inode timestamps are chosen (`-T`, `--mkfs-time`,
    /// `SOURCE_DATE_EPOCH`, `--ignore-mtime`).
    pub time: TimePolicy,
    /// Volume uuid; `None` derives one from the image's contents, so equal
    /// inputs give equal images.
    pub uuid: Option<[u8; 16]>,
    /// Volume label (at most 15 bytes).
    pub label: Vec<u8>,
    /// `--all-root`: every file owned by root.
    pub all_root: bool,
    /// `--uid-offset`: added to every owner.
    pub uid_offset: u32,
    /// `--gid-offset`: added to every group.
    pub gid_offset: u32,
    /// `--force-uid`: every file gets this owner.
    pub force_uid: Option<u32>,
    /// `--force-gid`: every file gets this group.
    pub force_gid: Option<u32>,
    /// Paths relative to the source root that are left out (with subtrees).
    pub exclude_paths: Vec<Vec<u8>>,
    /// Relative paths matching any of these are left out.
    pub exclude_regex: Vec<Regex>,
    /// Xattrs used by at least this many inodes go to the shared area;
    /// negative disables xattrs altogether.
    pub xattr_tolerance: i32,
    /// Extra long xattr name prefixes (e.g. `trusted.overlay.`).
    pub xattr_prefixes: Vec<Vec<u8>>,
    /// Store every regular file chunk-based with this chunk size.
    pub chunk_size: Option<u64>,
    /// Pack regular files' tails after their inodes (`-E noinline_data`
    /// turns this off; directories and symlinks are inlined where they fit
    /// either way, as mkfs.erofs does).
    pub inline_data: bool,
    /// Always write 64-byte inodes.
    pub force_extended: bool,
    /// `-E force-inode-compact`: every inode must be a 32-byte one; an
    /// inode that needs the extended form is an error.
    pub force_compact: bool,
    /// `-E force-chunk-indexes`: chunk tables of 8-byte chunk indexes
    /// instead of the 4-byte block map.
    pub chunk_indexes: bool,
    /// Target mount point; used as the prefix of the paths mkfs reports.
    pub mount_point: Vec<u8>,
    /// Compress regular files (`-z`); `None` builds an uncompressed image.
    pub compress: Option<compress::CompressOptions>,
    /// Worker threads for compression (0: one per core).
    pub workers: usize,
    /// `-E dedupe`: files with identical contents share their data.
    pub dedupe: bool,
    /// `--profile`: lay data out for this access profile.
    pub profile: Option<std::sync::Arc<crate::options::profile::Profile>>,
    /// Write the xattr name bloom filters (`-E ^xattr-name-filter` turns
    /// them off).
    pub xattr_filter: bool,
    /// Checksum the superblock (blocks of 2 KiB and more; `-E nosbcrc`
    /// turns it off).
    pub sb_checksum: bool,
    /// `--hard-dereference`: every hard link becomes an inode of its own.
    pub hard_dereference: bool,
    /// `--sort=none`: in an uncompressed image without inline data, file
    /// data in the order an archive holds it rather than in path order
    /// (as mkfs.erofs writes tar data then).
    pub archive_order: bool,
    /// `--dsunit`: every file's data starts at a multiple of this many
    /// blocks (0 or 1: anywhere).
    pub dsunit: u64,
    /// `--root-xattr-isize`: the root's inline xattr area is at least
    /// this many bytes (zero-filled room to add xattrs in place later).
    pub root_xattr_isize: u32,
    /// `--blobdev`: the data of chunk-based files goes to this file, the
    /// image's one extra device (named in its device table; chunk indexes
    /// point into it). Needs `chunk_size`.
    pub blobdev: Option<std::path::PathBuf>,
    /// `--file-contexts`: SELinux labels by path.
    pub file_contexts: Option<std::sync::Arc<crate::tree::selabel::FileContexts>>,
    /// `--fs-config-file`: Android's canned fs_config (owners, modes,
    /// capabilities by path, under `mount_point`).
    pub fs_config: Option<std::sync::Arc<crate::tree::fsconfig::CannedFsConfig>>,
    /// `--offset`: the image starts this many bytes into the output file
    /// (the bytes before it are zeros).
    pub offset: u64,
    /// `-E 48bit`: the 48-bit layout (Linux 6.15+): compact inodes keep
    /// their own mtime as an offset from a signed epoch, all-hole files
    /// need no blocks.
    pub bit48: bool,
    /// `-E dot-omitted`: directories without their "." entry (turns the
    /// 48-bit layout on, as mkfs.erofs does).
    pub dot_omitted: bool,
    /// `-E plain-xattr-prefixes`: the long-prefix table stays raw on the
    /// primary device (COMPAT_PLAIN_XATTR_PFX).
    pub plain_xattr_prefixes: bool,
    /// `--xattr-inode-digest[=NAME]`: every non-empty regular file gets an
    /// xattr NAME holding `sha256:` and the SHA-256 of its contents (the
    /// kernel shares page cache between files with equal digests).
    pub xattr_digest: Option<Vec<u8>>,
    /// `-m BYTES[:ALG]`: inodes (with their xattrs, indexes and inline
    /// tails), shared xattrs and the long-prefix table go into the
    /// metabox, an inode whose data is a second metadata space (Linux
    /// 6.17+), compressed in pclusters of this size.
    pub metabox: Option<MetaboxOptions>,
    /// `--zD`: directories go whole into the packed inode, compressed
    /// together with the fragments.
    pub compress_dirs: bool,
    /// `--block-list-file`: Android's list of the blocks that hold each
    /// regular file's data, written beside the image.
    pub block_list: Option<BlockListOptions>,
    /// `--base`: a previous image whose compressed data of unchanged files
    /// is copied instead of compressed again (what was reused is reported in [`Summary::base`](crate::Summary::base)).
    pub base: Option<std::path::PathBuf>,
    /// The epoch and fixed nanoseconds compact inodes count from, when an
    /// existing image fixes them (an incremental build); `None` chooses.
    pub fixed_epoch: Option<(i64, u32)>,
    /// `--verity`: append a dm-verity hash tree to the image (veritysetup's
    /// layout: the image padded to a data block, its superblock, the tree).
    pub verity: Option<ferrofs_verity::dm::WriteOptions>,
}

/// Where Android's block list goes (`--block-list-file`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockListOptions {
    /// The file written (replaced, as the image is, when the build
    /// succeeds).
    pub path: std::path::PathBuf,
    /// Whether `--mount-point` was given: mkfs.erofs lists files only
    /// then (as `/MOUNT_POINT/PATH`); without it the file is written empty.
    pub mount_point_given: bool,
}

/// Where and how the metabox is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaboxOptions {
    /// Pcluster size of the metabox's data.
    pub pcluster_bytes: u64,
    /// Index into the `-z` compressors; `None` stores it uncompressed.
    pub compressor: Option<usize>,
}

impl BuildOptions {
    /// The options of a `ferrofs mkfs --preset` (the rest default):
    /// `fast` (`-zlz4 -C65536`), `balanced` (`-zlz4hc,9 -C65536
    /// -Eztailpacking`) or `dense` (`-zlzma,6 -C131072
    /// -Efragments,dedupe,ztailpacking`).
    pub fn preset(name: &str) -> crate::Result<BuildOptions> {
        let (alg, pcluster, tail, fragments) = match name {
            "fast" => ("lz4", 65536, false, false),
            "balanced" => ("lz4hc,9", 65536, true, false),
            "dense" => ("lzma,6", 131072, true, true),
            other => {
                return Err(crate::BuildError::Option(format!(
                    "preset {other:?}: the presets are fast, balanced and dense"
                )))
            }
        };
        let mut c = compress::CompressOptions::new(compress::Compressor::parse(alg)?, pcluster);
        c.ztailpacking = tail;
        c.fragments = fragments;
        Ok(BuildOptions {
            compress: Some(c),
            dedupe: fragments,
            ..Default::default()
        })
    }

    /// How owners are mapped (`--all-root`, `--force-uid/gid`, the
    /// offsets): the relabel stage's view of the options.
    pub(crate) fn owners(&self) -> OwnerMap {
        OwnerMap {
            all_root: self.all_root,
            force_uid: self.force_uid,
            force_gid: self.force_gid,
            uid_offset: self.uid_offset,
            gid_offset: self.gid_offset,
        }
    }
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self {
            blkszbits: 12,
            time: TimePolicy::Keep,
            uuid: None,
            label: Vec::new(),
            all_root: false,
            uid_offset: 0,
            gid_offset: 0,
            force_uid: None,
            force_gid: None,
            exclude_paths: Vec::new(),
            exclude_regex: Vec::new(),
            xattr_tolerance: 2,
            xattr_prefixes: Vec::new(),
            chunk_size: None,
            inline_data: true,
            force_extended: false,
            force_compact: false,
            chunk_indexes: false,
            mount_point: b"/".to_vec(),
            compress: None,
            workers: 0,
            dedupe: false,
            profile: None,
            xattr_filter: true,
            sb_checksum: true,
            hard_dereference: false,
            archive_order: false,
            offset: 0,
            file_contexts: None,
            fs_config: None,
            blobdev: None,
            root_xattr_isize: 0,
            dsunit: 0,
            bit48: false,
            dot_omitted: false,
            plain_xattr_prefixes: false,
            xattr_digest: None,
            metabox: None,
            compress_dirs: false,
            block_list: None,
            base: None,
            fixed_epoch: None,
            verity: None,
        }
    }
}

impl BuildOptions {
    /// The block size in bytes.
    pub fn block_size(&self) -> u64 {
        1u64 << self.blkszbits
    }
    /// Whether file data is written in the order the archive holds it
    /// (`--sort=none`, with neither compression, inline tails nor a
    /// profile, as mkfs.erofs does).
    pub(crate) fn data_in_archive_order(&self) -> bool {
        self.archive_order && self.compress.is_none() && !self.inline_data && self.profile.is_none()
    }
    /// Whether data read from a piped archive can go straight where the
    /// data pass puts it (`source::tar::InPlace`): archive order, and
    /// nothing that moves or shares a file's blocks (dedupe, chunks, a
    /// blob, `--dsunit`, `--base`).
    pub(crate) fn streams_in_place(&self) -> bool {
        self.data_in_archive_order()
            && !self.dedupe
            && self.chunk_size.is_none()
            && self.blobdev.is_none()
            && self.dsunit <= 1
            && self.base.is_none()
    }
    /// The mount point as an absolute path without a trailing `/`, empty
    /// for the root (`system/`, `/system` and `//system` are all
    /// `/system`): the prefix of the paths the image's files are looked up
    /// (file_contexts) and listed (block list) by.
    pub(crate) fn mount_prefix(&self) -> Vec<u8> {
        self.mount_point
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty())
            .flat_map(|c| [b"/".as_slice(), c].concat())
            .collect()
    }
    /// Whether the image uses the 48-bit layout (asked for, or implied by
    /// a feature that needs it).
    pub(crate) fn uses_48bit(&self) -> bool {
        self.bit48 || self.dot_omitted || self.metabox.is_some()
    }
}
