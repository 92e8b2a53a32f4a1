//! Reference tools: Debian's erofs-utils 1.5 (`/usr/bin`), upstream erofs-utils 1.8.6 and the
//! newest upstream set (erofs-utils 1.9.x, squashfs-tools 4.7.x).
//!
//! The upstream tools' bin directory is found, in order, from the `UPSTREAM_TOOLS_BIN`
//! environment variable, from the output of the installer script
//! `<workspace>/../shared/tools/upstream-tools` (which installs them when missing and prints the
//! bin directory), or at `~/.cache/upstream-tools/bin`. The newest set likewise from
//! `UPSTREAM_NEXT_BIN`, `upstream-tools --next`, or `~/.cache/upstream-tools-next/bin`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Which build of erofs-utils a tool comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Flavor {
    /// Debian's packaged erofs-utils (1.5) in `/usr/bin`.
    Debian,
    /// Upstream erofs-utils (1.8.6), installed privately by `upstream-tools`.
    Upstream,
    /// The newest upstream erofs-utils (1.9.x), installed by `upstream-tools --next`.
    Next,
}

impl Flavor {
    /// `debian` or `upstream`, for messages and file names (the version is in
    /// [`Tool::version`]).
    pub fn label(self) -> &'static str {
        match self {
            Flavor::Debian => "debian",
            Flavor::Upstream => "upstream",
            Flavor::Next => "next",
        }
    }
}

/// One erofs-utils binary and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    /// Executable path (for upstream, a wrapper script that runs it with its own libraries).
    pub path: PathBuf,
    /// Version string, e.g. `1.5` or `1.8.6`.
    pub version: String,
    /// Where the binary comes from.
    pub flavor: Flavor,
}

/// A `mkfs.erofs`.
pub type Mkfs = Tool;
/// A `fsck.erofs`.
pub type Fsck = Tool;
/// A `dump.erofs`.
pub type Dump = Tool;

impl Tool {
    /// `mkfs.erofs 1.8.6 (upstream)`-style description for messages.
    pub fn describe(&self) -> String {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("{name} {} ({})", self.version, self.flavor.label())
    }

    /// Runs the tool with `args`, returning its combined stdout+stderr on success.
    pub fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> io::Result<String> {
        let out = Command::new(&self.path)
            .args(args)
            .env_remove("SOURCE_DATE_EPOCH")
            .stdin(Stdio::null())
            .output()?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            Ok(text)
        } else {
            Err(io::Error::other(format!(
                "{} {:?} failed ({}): {}",
                self.describe(),
                args.iter()
                    .map(|a| a.as_ref().to_string_lossy().into_owned())
                    .collect::<Vec<_>>(),
                out.status,
                text.trim_end()
            )))
        }
    }
}

/// The fixed filesystem UUID given to every image (`-U`).
pub const IMAGE_UUID: &str = "f3a7c0de-0b5e-4e2f-9c1d-5eed0f5eed01";

/// Placeholder option in [`option_matrix`]: [`build_image`] replaces it with
/// `--compress-hints=FILE`, FILE holding [`COMPRESS_HINTS`].
pub const COMPRESS_HINTS_ARG: &str = "--compress-hints=@TESTKIT_HINTS@";

/// Compression hints used with `-zlz4hc,12:lzma` (1.8.6 syntax:
/// `<pcluster-size> [algorithm-index] <regex>`, regexes match paths without the leading `/`):
/// text under `files/text/` with lzma (index 1) in 16 KiB pclusters, random data with lz4hc
/// (index 0) in 4 KiB pclusters; everything else gets the defaults (the first algorithm).
pub const COMPRESS_HINTS: &str = "16384 1 ^files/text/\n4096 0 ^files/random/\n8192 1 ^dup/\n";

/// The option sets of the pinned-image test (`crates/cli/tests/mkfs/pinned.rs`),
/// by name, as `ferrofs mkfs` options: plain, 1 KiB blocks, chunks in a
/// blob (`BLOB` stands for the blob's path), each codec, ztailpacking,
/// fragments with dedupe, 48-bit, metabox with compressed directories,
/// `--offset`, a tar source, the dense preset. The kernel matrix builds
/// them too.
pub const PINNED_OPTION_SETS: &[(&str, &[&str])] = &[
    ("plain", &[]),
    ("block-1k", &["-b", "1024"]),
    ("chunks-blobdev", &["--chunksize=8192", "--blobdev=BLOB"]),
    ("lz4", &["-zlz4"]),
    ("lz4hc", &["-zlz4hc,12", "-C65536"]),
    ("lzma", &["-zlzma,6", "-C131072"]),
    ("deflate", &["-zdeflate"]),
    ("zstd", &["-zzstd,10", "-C65536"]),
    ("ztailpacking", &["-zlz4hc", "-C65536", "-Eztailpacking"]),
    (
        "fragments-dedupe",
        &["-zlz4hc", "-C65536", "-Efragments,dedupe"],
    ),
    ("48bit", &["-zlz4hc", "-E48bit"]),
    ("metabox-zD", &["-zlzma", "-C65536", "-m4096", "--zD"]),
    ("offset", &["--offset=8192"]),
    ("tar", &["--tar=f"]),
    ("preset-dense", &["--preset", "dense"]),
];

/// The image option matrix: `(name, mkfs options, needs upstream)`.
///
/// Entries with `needs upstream == false` are valid for both Debian's mkfs.erofs 1.5 and
/// upstream 1.8.6 (spellings checked against both `--help`/man pages and by building);
/// the rest need 1.8.6 (lzma/deflate/zstd, `-b`, fragments, dedupe, `all-fragments`,
/// multiple algorithms). `-zlz4hc,12` uses the level syntax both versions accept.
pub fn option_matrix() -> Vec<(&'static str, Vec<&'static str>, bool)> {
    vec![
        ("plain", vec![], false),
        ("lz4", vec!["-zlz4"], false),
        ("lz4hc12", vec!["-zlz4hc,12"], false),
        ("lz4hc_C64k", vec!["-zlz4hc", "-C65536"], false),
        ("lz4_ztailpacking", vec!["-zlz4", "-Eztailpacking"], false),
        ("lz4hc_legacy", vec!["-zlz4hc", "-Elegacy-compress"], false),
        ("chunk8k", vec!["--chunksize=8192"], false),
        (
            "chunk8k_blockmap",
            vec!["--chunksize=8192", "-Eforce-inode-blockmap"],
            false,
        ),
        (
            "chunk8k_indexes",
            vec!["--chunksize=8192", "-Eforce-chunk-indexes"],
            false,
        ),
        ("inode_extended", vec!["-Eforce-inode-extended"], false),
        ("noinline", vec!["-Enoinline_data"], false),
        ("lz4_ignore_mtime", vec!["-zlz4", "--ignore-mtime"], false),
        ("lzma", vec!["-zlzma"], true),
        ("deflate", vec!["-zdeflate"], true),
        ("zstd", vec!["-zzstd"], true),
        (
            "lzma_C64k_tail_frag",
            vec!["-zlzma", "-C65536", "-Eztailpacking,fragments"],
            true,
        ),
        ("lz4hc_allfrag", vec!["-zlz4hc", "-Eall-fragments"], true),
        ("deflate_dedupe", vec!["-zdeflate", "-Ededupe"], true),
        (
            "zstd_C64k_dedupe_frag",
            vec!["-zzstd", "-C65536", "-Ededupe", "-Efragments"],
            true,
        ),
        ("b1024", vec!["-b1024"], true),
        ("b1024_lz4", vec!["-b1024", "-zlz4"], true),
        ("b512", vec!["-b512"], true),
        (
            "b512_lzma_tail",
            vec!["-b512", "-zlzma", "-Eztailpacking"],
            true,
        ),
        ("noinline_caret", vec!["-E^inline_data"], true),
        ("no_xattr_filter", vec!["-E^xattr-name-filter"], true),
        (
            "mkfs_time_compact",
            vec!["-T1650000000", "--mkfs-time"],
            true,
        ),
        (
            "lz4hc_lzma_hints",
            vec!["-zlz4hc,12:lzma", "-C16384", COMPRESS_HINTS_ARG],
            true,
        ),
    ]
}

/// The options only the newest mkfs.erofs (1.9.x) has: `(name, mkfs options)`. Each turns on
/// one of the 2025 on-disk features (48-bit layout and encoded extents, dot-omitted
/// directories, the metabox, compressed directories, the metadata zone, inode fingerprints),
/// alone or combined with the older ones.
pub fn option_matrix_next() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("e48", vec!["-E48bit"]),
        ("e48_zstd_C128k", vec!["-E48bit", "-zzstd", "-C131072"]),
        (
            "e48_lz4hc_C64k_frag_dedupe",
            vec!["-E48bit", "-zlz4hc", "-C65536", "-Efragments,dedupe"],
        ),
        (
            "e48_lzma_ztail",
            vec!["-E48bit", "-zlzma", "-Eztailpacking"],
        ),
        ("e48_deflate_chunk", vec!["-E48bit", "--chunksize=8192"]),
        ("dot_omitted_lz4", vec!["-Edot-omitted", "-zlz4"]),
        ("metabox", vec!["-m4096"]),
        (
            "metabox_lz4hc_tail_frag",
            vec!["-m4096:lz4hc", "-zlz4hc", "-Eztailpacking,fragments"],
        ),
        ("zD_zstd", vec!["--zD", "-zzstd"]),
        ("MZ_lz4", vec!["--MZ", "-zlz4"]),
        ("digest", vec!["--xattr-inode-digest"]),
        (
            "kitchen_sink",
            vec![
                "-E48bit",
                "-Edot-omitted",
                "-m4096:zstd",
                "--zD",
                "-zzstd",
                "-C65536",
                "-Efragments,dedupe,ztailpacking",
            ],
        ),
    ]
}

/// Builds an image: `mkfs -U IMAGE_UUID OPTS OUT SRC` (no `-T`: real mtimes are wanted;
/// `SOURCE_DATE_EPOCH` is removed from the environment for the same reason).
/// [`COMPRESS_HINTS_ARG`] in `opts` is replaced by a hints file written next to `out`.
/// Fails with mkfs's output when mkfs fails.
pub fn build_image(mkfs: &Mkfs, opts: &[&str], src: &Path, out: &Path) -> io::Result<()> {
    let mut args: Vec<std::ffi::OsString> = vec![format!("-U{IMAGE_UUID}").into()];
    for &o in opts {
        if o == COMPRESS_HINTS_ARG {
            let hints = out.with_extension("hints");
            fs::write(&hints, COMPRESS_HINTS)?;
            let mut a = std::ffi::OsString::from("--compress-hints=");
            a.push(&hints);
            args.push(a);
        } else {
            args.push(o.into());
        }
    }
    args.push(out.into());
    args.push(src.into());
    if let Some(parent) = out.parent() {
        fs::create_dir_all(parent)?;
    }
    let _ = fs::remove_file(out);
    mkfs.run(&args).map(|_| ())
}

/// Debian's `/usr/bin/mkfs.erofs`, if installed and runnable.
pub fn mkfs_debian() -> Option<Mkfs> {
    static T: OnceLock<Option<Tool>> = OnceLock::new();
    T.get_or_init(|| probe(Path::new("/usr/bin/mkfs.erofs"), Flavor::Debian))
        .clone()
}

/// Upstream 1.8.6 `mkfs.erofs`, if it can be found (see the module docs).
pub fn mkfs_upstream() -> Option<Mkfs> {
    static T: OnceLock<Option<Tool>> = OnceLock::new();
    T.get_or_init(|| probe(&upstream_bin_dir()?.join("mkfs.erofs"), Flavor::Upstream))
        .clone()
}

/// Debian's `/usr/bin/fsck.erofs`, if installed and runnable.
pub fn fsck_debian() -> Option<Fsck> {
    static T: OnceLock<Option<Tool>> = OnceLock::new();
    T.get_or_init(|| probe(Path::new("/usr/bin/fsck.erofs"), Flavor::Debian))
        .clone()
}

/// Upstream 1.8.6 `fsck.erofs`, if it can be found.
pub fn fsck_upstream() -> Option<Fsck> {
    static T: OnceLock<Option<Tool>> = OnceLock::new();
    T.get_or_init(|| probe(&upstream_bin_dir()?.join("fsck.erofs"), Flavor::Upstream))
        .clone()
}

/// Upstream 1.8.6 `dump.erofs`, if it can be found.
pub fn dump_upstream() -> Option<Dump> {
    static T: OnceLock<Option<Tool>> = OnceLock::new();
    T.get_or_init(|| probe(&upstream_bin_dir()?.join("dump.erofs"), Flavor::Upstream))
        .clone()
}

/// The newest upstream `mkfs.erofs` (1.9.x), if it can be found (see the module docs).
pub fn mkfs_next() -> Option<Mkfs> {
    static T: OnceLock<Option<Tool>> = OnceLock::new();
    T.get_or_init(|| probe(&next_bin_dir()?.join("mkfs.erofs"), Flavor::Next))
        .clone()
}

/// The newest upstream `fsck.erofs` (1.9.x), if it can be found.
pub fn fsck_next() -> Option<Fsck> {
    static T: OnceLock<Option<Tool>> = OnceLock::new();
    T.get_or_init(|| probe(&next_bin_dir()?.join("fsck.erofs"), Flavor::Next))
        .clone()
}

/// The newest upstream `dump.erofs` (1.9.x), if it can be found.
pub fn dump_next() -> Option<Dump> {
    static T: OnceLock<Option<Tool>> = OnceLock::new();
    T.get_or_init(|| probe(&next_bin_dir()?.join("dump.erofs"), Flavor::Next))
        .clone()
}

/// Both `mkfs.erofs` builds that are available, Debian's first.
pub fn all_mkfs() -> Vec<Mkfs> {
    mkfs_debian().into_iter().chain(mkfs_upstream()).collect()
}

/// The workspace root (two levels above this crate's manifest directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The upstream tools' bin directory (holding `mkfs.erofs`), found as the module docs say.
pub fn upstream_bin_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| find_bin_dir("UPSTREAM_TOOLS_BIN", &[], ".cache/upstream-tools/bin"))
        .clone()
}

/// The newest upstream tools' bin directory (erofs-utils 1.9.x, squashfs-tools 4.7.x).
pub fn next_bin_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        find_bin_dir(
            "UPSTREAM_NEXT_BIN",
            &["--next"],
            ".cache/upstream-tools-next/bin",
        )
    })
    .clone()
}

/// A bin directory holding `mkfs.erofs`: see [`find_tool_dir`].
fn find_bin_dir(var: &str, args: &[&str], home_rel: &str) -> Option<PathBuf> {
    find_tool_dir(var, args, home_rel, &["mkfs.erofs"])
}

/// A bin directory holding every one of `tools`: from the environment
/// variable `var`, from the last line `<workspace>/../shared/tools/upstream-tools
/// ARGS` prints (which installs or builds them once per machine), or at
/// `~/HOME_REL`.
pub fn find_tool_dir(var: &str, args: &[&str], home_rel: &str, tools: &[&str]) -> Option<PathBuf> {
    let complete = |d: &Path| tools.iter().all(|t| d.join(t).is_file());
    if let Some(d) = std::env::var_os(var).map(PathBuf::from) {
        if complete(&d) {
            return Some(d);
        }
    }
    let script = workspace_root().join("../shared/tools/upstream-tools");
    if script.is_file() {
        if let Ok(out) = Command::new("bash")
            .arg(&script)
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
        {
            if out.status.success() {
                let text = String::from_utf8_lossy(&out.stdout);
                if let Some(line) = text.lines().rev().find(|l| !l.trim().is_empty()) {
                    let d = PathBuf::from(line.trim());
                    if complete(&d) {
                        return Some(d);
                    }
                }
            }
        }
    }
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    let d = home.join(home_rel);
    complete(&d).then_some(d)
}

/// Checks that `path` runs and finds its version: `-V` where supported (1.8.x prints
/// `mkfs.erofs (erofs-utils) 1.8.6`; fsck 1.5 prints `fsck.erofs 1.5`), else the banner of a
/// tiny build (mkfs 1.5 prints `mkfs.erofs 1.5` first).
fn probe(path: &Path, flavor: Flavor) -> Option<Tool> {
    if !path.is_file() {
        return None;
    }
    let run = |args: &[&std::ffi::OsStr]| -> Option<String> {
        let out = Command::new(path)
            .args(args)
            .env_remove("SOURCE_DATE_EPOCH")
            .stdin(Stdio::null())
            .output()
            .ok()?;
        Some(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    };
    let version_of = |text: &str| -> Option<String> {
        let first = text
            .lines()
            .find(|l| l.contains(".erofs") && !l.contains("invalid"))?;
        let v = first.split_whitespace().last()?;
        v.chars().next()?.is_ascii_digit().then(|| v.to_string())
    };
    let mut version = run(&["-V".as_ref()]).and_then(|t| version_of(&t));
    if version.is_none() && path.file_name().is_some_and(|n| n == "mkfs.erofs") {
        let tmp = crate::TempDir::new("ferrofs-mkfs-probe").ok()?;
        let src = tmp.path().join("src");
        fs::create_dir(&src).ok()?;
        let img = tmp.path().join("probe.img");
        version = run(&[img.as_os_str(), src.as_os_str()]).and_then(|t| version_of(&t));
    }
    Some(Tool {
        path: path.to_path_buf(),
        version: version?,
        flavor,
    })
}

/// The newest upstream tools' `name` (e.g. `veritysetup`, `fsverity`), if
/// it is installed there.
pub fn next_tool(name: &str) -> Option<PathBuf> {
    next_bin_dir().map(|d| d.join(name)).filter(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_versions() {
        if let Some(m) = mkfs_debian() {
            assert!(m.version.starts_with("1."), "{m:?}");
        }
        if let Some(f) = fsck_debian() {
            assert!(f.version.starts_with("1."), "{f:?}");
        }
        if let Some(m) = mkfs_upstream() {
            assert!(m.version.starts_with("1."), "{m:?}");
        }
        if let Some(m) = mkfs_next() {
            assert!(m.version.starts_with("1.9"), "{m:?}");
        }
    }
}
