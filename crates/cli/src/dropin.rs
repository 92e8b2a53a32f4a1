//! `mkfs.erofs` as a drop-in: when the binary runs under that name (a
//! symlink), its command line is read as mkfs.erofs 1.8 reads it: the
//! common flags mean the same, `-d LEVEL` sets verbosity, and options
//! ferrofs does not implement are refused by name before anything is
//! written.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

/// mkfs.erofs options ferrofs does not implement (matched before `=`).
const UNSUPPORTED: &[&str] = &[
    "--block-list-file",
    "--clean",
    "--fs-config-file",
    "--fsalignblks",
    "--incremental",
    "--product-out",
    "--random-algorithms",
    "--random-pclusterblks",
    "--vmdk-desc",
    "--zfeature-bits",
    "-M",
];

/// Options mkfs.erofs accepts that only restate ferrofs's default.
const NO_OPS: &[&str] = &["--preserve-mtime", "--all-time"];

/// What `-V` prints after `mkfs.erofs `: the erofs-utils release whose
/// mkfs.erofs command line and image features the drop-in implements. Wrappers read it from the first line
/// of `mkfs.erofs -V` (`mkfs.erofs (erofs-utils) X.Y.Z`, the third word)
/// and compare it with the features they need, so it must not claim more
/// than is there: 1.9's options (-m, --zD, --MZ, --s3, --oci,
/// --xattr-inode-digest) and 1.8.7's (--fsalignblks, --vmdk-desc) are not
/// implemented, 1.8.6's command line is. After it, ferrofs's own version;
/// on the second line the compressors, as upstream prints them.
const VERSION: &str = concat!(
    "(erofs-utils) 1.8.6 (ferrofs ",
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
    about = "Build an EROFS image (ferrofs, mkfs.erofs-compatible command line)"
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

/// Runs mkfs with mkfs.erofs's command line.
pub fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    args.retain(|a| !NO_OPS.contains(&a.to_string_lossy().as_ref()));
    for a in args.iter().skip(1) {
        let s = a.to_string_lossy();
        if s == "--" {
            break;
        }
        let name = s.split('=').next().unwrap_or_default();
        let short_m = name.starts_with("-M") && !name.starts_with("--");
        if UNSUPPORTED.contains(&name) || short_m {
            let name = if short_m { "-M" } else { name };
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
