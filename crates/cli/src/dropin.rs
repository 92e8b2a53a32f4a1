//! `mkfs.erofs` as a drop-in: when the binary runs under that name (a
//! symlink), its command line is read as mkfs.erofs 1.8 reads it: the
//! common flags mean the same, `-d LEVEL` sets verbosity, and options
//! ferrofs does not implement are refused by name before anything is
//! written.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

/// mkfs.erofs options ferrofs does not implement (matched before `=`;
/// `-M…` as a short option with its value attached).
const UNSUPPORTED: &[&str] = &[
    "--fsalignblks",
    "--gzinfo",
    "--oci",
    "--random-algorithms",
    "--random-pclusterblks",
    "--s3",
    "--vmdk-desc",
    "--zfeature-bits",
    "-M",
];

/// Options mkfs.erofs accepts that only restate ferrofs's default.
const NO_OPS: &[&str] = &["--preserve-mtime", "--all-time"];

/// Options with a value that change nothing in ferrofs's image (its
/// pipeline bounds its own queues): accepted and dropped, value included.
const NO_OP_VALUES: &[&str] = &["--async-queue-limit"];

/// Every option `mkfs.erofs --help` (1.9.4) lists, spelled as it spells
/// them (scripts grep the help for features), with what the drop-in does
/// with it. clap's list above it gives ferrofs's own spelling of each.
const UPSTREAM_OPTIONS: &str = "\
mkfs.erofs's options (as `mkfs.erofs --help` 1.9.4 spells them) in this drop-in:
 -V, --version         the erofs-utils version whose command line this implements, and ferrofs's
 -h, --help            this help
 -b#                   block size: 512, 1024, 2048 or 4096 (default 4096)
 -d<0-9>               verbosity; 0 prints errors only
 -x#                   xattrs on at least # inodes are shared (< 0: no xattrs; default 2)
 -zX[,level=Y]         compressor X: lz4, lz4hc (level 0-12), lzma (0-9, 100-109),
    [,dictsize=Z]      deflate or libdeflate (0-9), zstd (0-22); dictsize is accepted
    [:...]             and sized by ferrofs; alternatives for --compress-hints after ':'
 -C#                   physical cluster size in bytes (a multiple of the block size, <= 1 MiB)
 -EX[,...]             extended options: ztailpacking, fragments[=#], all-fragments, dedupe,
                       legacy-compress, noinline_data (^inline_data), force-inode-compact,
                       force-inode-extended, force-chunk-indexes, force-inode-blockmap,
                       nosbcrc, ^xattr-name-filter, 48bit, dot-omitted,
                       plain-xattr-prefixes, sparse (ferrofs's: zeros as sparse
                       pclusters, Linux 7.2) (^X or noX turns X off)
 -L volume-label       volume label (at most 15 bytes)
 -m#[:X]               metadata in a metabox compressed in #-byte pclusters (with X)
 -T#                   fixed UNIX timestamp # as build time and every file's mtime
    --all-time         the timestamp is every file's mtime too (the default)
    --mkfs-time        the timestamp is the build time only
 -UX                   filesystem UUID X, `clear` or `random`
 --MZ[=<0|[id]>]       accepted: ferrofs always writes inodes and directories after the data
 --all-root            every file owned by root
 --async-queue-limit=# accepted; no effect on the image
 --blobdev=X           chunks of chunk-based files go to the extra device X
 --clean=X             X=data (also --clean alone): with EROFS images as SOURCEs (rebuild
                       mode), copy all file data (without it, the images become extra
                       devices the new image indexes); X=rvsp and X=0 are not supported
 --chunksize=#         every regular file chunk-based with #-byte chunks (zero chunks are holes)
 --compress-hints=X    per-file pcluster size and compressor from file X
 --dsunit=#            file data starts at multiples of # blocks
 --exclude-path=X      leave out the path X
 --exclude-regex=X     leave out paths matching X
 --file-contexts=X     SELinux labels from the file_contexts file X
 --force-uid=#         every uid is #
 --force-gid=#         every gid is #
 --uid-offset=#        add # to every uid
 --gid-offset=#        add # to every gid
 --hard-dereference    every hard link an inode of its own
 --ignore-mtime        every file gets the build time
 --max-extent-bytes=#  no pcluster decodes to more than # bytes
 --mount-point=X       prefix of the paths --file-contexts, --fs-config-file and
                       --block-list-file use (default /)
 --preserve-mtime      per-file mtimes (the default)
 --offset=#            the image starts # bytes into FILE
 --root-xattr-isize=#  room for # bytes of inline xattrs in the root directory
 --aufs                with --tar: aufs whiteouts become overlayfs ones
 --sort=<path,none>    with --tar: data order (none: the archive's, without inline data)
 --tar=X               build from a tar archive; X = f (full data) or i (an index of the
                       archive, which is appended to the image; headerball is not supported)
 --incremental=X       put SOURCE over the image FILE, appending only what changed
                       (X = data, the default, or rvsp with --tar: zero-filled room for data)
 --ovlfs-strip=<0,1>   with --tar or EROFS images: 1 leaves overlayfs metadata out
 --quiet               print nothing but errors
 --ungzip[=X]          with --tar: gunzip the archive (and keep it plain in X)
 --unxz[=X]            with --tar: unxz/unlzma/unlzip the archive (and keep it plain in X)
 --workers=#           compression threads (the image is the same for any number)
 --xattr-inode-digest=X record every regular file's SHA-256 in the xattr X
 --xattr-prefix=X      store the long xattr name prefix X once
 --zD[=<0|1>]          directories whole in the packed inode, compressed (=0: off)
Android's options (mkfs.erofs built for Android):
 --fs-config-file=X    owners, modes and capabilities by path from the canned fs_config X
 --product-out=X       product_out directory (with --fs-config-file, which does not use it)
 --block-list-file=X   write to X the blocks holding each file's data, as
                       /MOUNT_POINT/PATH A-B C ... (1.8's; without --mount-point X is empty)
Rebuild mode: FILE SOURCE [SOURCE...] with EROFS images as sources merges them as
overlayfs layers (the last wins), as mkfs.erofs 1.9 does.
Not supported by ferrofs (refused by name; nothing is written):
 --fsalignblks=#, --s3=X, --oci=[f|i],
 --gzinfo[=X], --vmdk-desc=X, --zfeature-bits=#
";

/// What `-V` prints after `mkfs.erofs `: the erofs-utils release whose
/// mkfs.erofs command line and image features the drop-in implements.
/// Wrappers read it from the first line of `mkfs.erofs -V` (`mkfs.erofs
/// (erofs-utils) X.Y.Z`, the third word) and compare it with the features
/// they need (containerd's differ, for one), so it must not claim more than
/// is there. That is 1.9.4's: the 48-bit layout, dot-omitted directories,
/// the metabox, compressed directories, inode digests, incremental builds,
/// rebuild mode with `--clean`, and tar index layers (`--tar=i`). Its S3
/// and OCI sources are build-time options upstream too (a 1.9.4 built
/// without libcurl lacks them), and are refused by name here. After it,
/// ferrofs's own version; on the second line the compressors, as upstream
/// prints them.
const VERSION: &str = concat!(
    "(erofs-utils) 1.9.4 (ferrofs ",
    env!("CARGO_PKG_VERSION"),
    ")\navailable compressors: lz4, lz4hc, lzma, deflate, libdeflate, zstd"
);

/// As getopt does for mkfs.erofs, an option given twice keeps its last
/// value (`-zlz4hc -zlz4` is lz4); list options (-E, --exclude-path, ...)
/// add up.
#[derive(Parser)]
#[command(
    name = "mkfs.erofs",
    version = VERSION,
    args_override_self = true,
    about = "Build an EROFS image (ferrofs, mkfs.erofs-compatible command line)",
    after_help = UPSTREAM_OPTIONS
)]
struct DropIn {
    #[command(flatten)]
    mkfs: crate::mkfs::MkfsArgs,
    /// Verbosity as mkfs.erofs's: 0 prints errors only.
    #[arg(short = 'd', value_name = "LEVEL", allow_negative_numbers = true)]
    debug: Option<i32>,
}

/// Whether the program was started as `mkfs.erofs`.
pub fn invoked_as_mkfs() -> bool {
    std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n == "mkfs.erofs"))
        .unwrap_or(false)
}

/// Removes the options of [`NO_OP_VALUES`] with their values
/// (`--opt=V` or `--opt V`) before `--`.
fn drop_no_op_values(args: &mut Vec<OsString>) {
    let mut i = 1;
    while i < args.len() {
        let s = args[i].to_string_lossy().into_owned();
        if s == "--" {
            break;
        }
        let name = s.split('=').next().unwrap_or_default();
        if NO_OP_VALUES.contains(&name) {
            let n = if s.contains('=') { 1 } else { 2 };
            args.drain(i..(i + n).min(args.len()));
            continue;
        }
        i += 1;
    }
}

/// Runs mkfs with mkfs.erofs's command line.
pub fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    args.retain(|a| !NO_OPS.contains(&a.to_string_lossy().as_ref()));
    drop_no_op_values(&mut args);
    for a in args.iter().skip(1) {
        let s = a.to_string_lossy();
        if s == "--" {
            break;
        }
        let name = s.split('=').next().unwrap_or_default();
        let short = ["-M"]
            .into_iter()
            .find(|o| name.starts_with(o) && !name.starts_with("--"));
        if UNSUPPORTED.contains(&name) || short.is_some() {
            let name = short.unwrap_or(name);
            eprintln!(
                "mkfs.erofs: option {name} is not supported by ferrofs; nothing was written \
                 (see `mkfs.erofs --help` for what is)"
            );
            return ExitCode::from(1);
        }
    }
    let d = match DropIn::try_parse_from(args) {
        Ok(d) => d,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 1 } else { 0 });
        }
    };
    let mut m = d.mkfs;
    m.dropin = true;
    if d.debug.is_some_and(|l| l <= 0) {
        m.quiet = true;
    }
    crate::out::finish("mkfs.erofs", crate::mkfs::mkfs(&m), 1)
}
