//! The `ferrofs` command: argument parsing, progress and printing over the
//! reader and check libraries. No format logic lives here.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

mod bench;
mod diff;
mod dropin;
mod mkfs;
mod mount;
mod out;
mod rebuild;
mod source;
mod summary;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use ferrofs::format::inode::FileType;
use ferrofs::format::Nid;
use ferrofs::{Image, OpenOptions};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

#[derive(Parser)]
#[command(
    name = "ferrofs",
    version,
    about = "Read, check and extract EROFS images"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct ImageArgs {
    /// The EROFS image: a file, or an http:// or https:// URL (read with
    /// range requests, fetching only what is needed).
    image: PathBuf,
    /// Extra device (blob) files or URLs, in device-table order; without
    /// them, extra devices are expected concatenated to the image.
    #[arg(long = "device", value_name = "PATH")]
    devices: Vec<PathBuf>,
    /// The image starts this many bytes into the file (`mkfs --offset`).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    offset: u64,
    #[command(flatten)]
    remote: source::RemoteArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Build an EROFS image from a directory tree.
    Mkfs(Box<mkfs::MkfsArgs>),
    /// Mount an image read-only through FUSE.
    Mount(mount::MountArgs),
    /// Build, mount and measure images against mkfs.erofs and mksquashfs
    /// (runs python3 -m ferrofs_bench; `ferrofs bench --help` lists its options).
    #[command(disable_help_flag = true)]
    Bench {
        /// Arguments for the benchmark runner.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Check every inode, directory entry and pcluster of an image. Exit
    /// status 1 on damage (what makes the kernel return wrong data or
    /// errors); warnings (a link count other than the entries naming the
    /// inode) are printed but leave it 0.
    Fsck {
        #[command(flatten)]
        img: ImageArgs,
        /// Check metadata only; do not decode file data.
        #[arg(long)]
        no_data: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Extract the image's tree into DIR (empty or absent). An xattr or
    /// owner the target refuses is reported (path, name, reason) and the
    /// extraction goes on; the exit status is then 1 (2: extraction failed).
    Extract {
        #[command(flatten)]
        img: ImageArgs,
        /// Target directory.
        dir: PathBuf,
        /// Do not restore owners (default: restore when running as root).
        #[arg(long, overrides_with = "owners")]
        no_owners: bool,
        /// Restore owners even when not running as root (what the target
        /// refuses is reported).
        #[arg(long, overrides_with = "no_owners")]
        owners: bool,
        /// Do not restore extended attributes (as tar's and fsck.erofs's
        /// --no-xattrs).
        #[arg(long, overrides_with = "xattrs")]
        no_xattrs: bool,
        /// Restore extended attributes (the default).
        #[arg(long, overrides_with = "no_xattrs")]
        xattrs: bool,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List a directory (or show one entry).
    Ls {
        #[command(flatten)]
        img: ImageArgs,
        /// Path inside the image (default: the root).
        path: Option<OsString>,
        /// Long format: mode, links, owner, size, mtime, nid.
        #[arg(short = 'l')]
        long: bool,
    },
    /// Write a file's contents to standard output.
    Cat {
        #[command(flatten)]
        img: ImageArgs,
        /// Path inside the image.
        path: OsString,
    },
    /// Show what changed between two images: paths added, removed and
    /// changed (and what about them), and how many image blocks differ on
    /// disk. Exit status 0 when the trees are the same, 1 when not.
    Diff {
        /// The earlier image.
        old: PathBuf,
        /// The later image.
        new: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Describe the superblock, one inode, or whole-image statistics.
    Dump {
        #[command(flatten)]
        img: ImageArgs,
        /// Show the inode at this path.
        #[arg(long, conflicts_with = "nid")]
        path: Option<OsString>,
        /// Show the inode with this nid.
        #[arg(long)]
        nid: Option<u64>,
        /// Report what a cold replay of this trace touches: device blocks,
        /// pclusters, runs, decoded vs requested bytes.
        #[arg(long, value_name = "TRACE", conflicts_with_all = ["nid", "path"])]
        profile: Option<PathBuf>,
        /// With --profile: widen every read by the kernel's read-around,
        /// half of BYTES before and half after (e.g. 128K, the kernel's
        /// default readahead), to count what a kernel mount reads.
        #[arg(long, value_name = "BYTES", requires = "profile", default_value = "0", value_parser = mount::parse_size)]
        readahead: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn open(args: &ImageArgs) -> Result<Image> {
    source::open_image(
        &args.image,
        &args.devices,
        args.offset,
        &args.remote,
        OpenOptions::default(),
    )
}

fn progress(len_hint: Option<u64>) -> ProgressBar {
    let pb = ProgressBar::new(len_hint.unwrap_or(0));
    pb.set_style(
        ProgressStyle::with_template("{spinner} {elapsed} {binary_bytes} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb
}

fn main() -> ExitCode {
    if dropin::invoked_as_mkfs() {
        return dropin::main();
    }
    let cli = Cli::parse();
    out::finish("ferrofs", run(cli), 2)
}

/// An error and its causes on one line, `what: why: ...`, leaving out a
/// cause whose text the message already carries (the library errors
/// quote their source).
pub(crate) fn report(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Mkfs(a) => mkfs::mkfs(&a),
        Command::Diff { old, new, json } => diff::run(&old, &new, json),
        Command::Mount(a) => mount::run(&a),
        Command::Bench { args } => Ok(ExitCode::from(u8::try_from(bench::run(args)?).unwrap_or(1))),
        Command::Fsck { img, no_data, json } => {
            let image = open(&img)?;
            let pb = progress(None);
            let tick = |inodes: u64, bytes: u64| {
                pb.set_position(bytes);
                pb.set_message(format!("{inodes} inodes"));
            };
            let report = ferrofs_check::fsck::check(
                &image,
                ferrofs_check::fsck::Options {
                    read_data: !no_data,
                },
                Some(&tick),
            );
            pb.finish_and_clear();
            let mut out = out::stdout();
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                let warnings = report.warnings.iter().map(|p| ("warning: ", p));
                for (kind, p) in report.problems.iter().map(|p| ("", p)).chain(warnings) {
                    match p.nid {
                        Some(n) => writeln!(out, "{kind}{} (nid {n}): {}", p.path, p.message)?,
                        None => writeln!(out, "{kind}{}: {}", p.path, p.message)?,
                    }
                }
                writeln!(
                    out,
                    "{}: {} inodes ({} dirs, {} files, {} symlinks, {} special), {} bytes read, {} pclusters decoded, {} problems, {} warnings",
                    img.image.display(),
                    report.inodes,
                    report.directories,
                    report.files,
                    report.symlinks,
                    report.special,
                    report.data_bytes,
                    report.pclusters_decoded,
                    report.problems.len(),
                    report.warnings.len()
                )?;
            }
            out.flush()?;
            Ok(if report.is_clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Extract {
            img,
            dir,
            no_owners,
            owners,
            no_xattrs,
            xattrs: _,
            json,
        } => {
            let image = open(&img)?;
            let mut opts = ferrofs_check::extract::Options::default();
            opts.owners = (opts.owners || owners) && !no_owners;
            opts.xattrs = !no_xattrs;
            let pb = progress(None);
            let tick = |bytes: u64| pb.set_position(bytes);
            let res = ferrofs_check::extract::extract(&image, &dir, opts, Some(&tick));
            pb.finish_and_clear();
            let s = res?;
            if json {
                let mut out = out::stdout();
                writeln!(out, "{}", serde_json::to_string_pretty(&s)?)?;
                out.flush()?;
            } else {
                for n in &s.not_restored {
                    eprintln!("ferrofs: {}: {} not restored: {}", n.path, n.what, n.reason);
                }
                let refused = if s.not_restored.is_empty() {
                    String::new()
                } else {
                    let xattrs = s
                        .not_restored
                        .iter()
                        .filter(|n| matches!(n.what, ferrofs_check::extract::Attribute::Xattr(_)))
                        .count();
                    let owners = s.not_restored.len() - xattrs;
                    format!("; NOT restored: {xattrs} xattrs, {owners} owners")
                };
                eprintln!(
                    "extracted {} dirs, {} files, {} symlinks, {} hard links, {} special, {} bytes, {} xattrs into {}{refused}",
                    s.dirs, s.files, s.symlinks, s.hardlinks, s.special, s.bytes, s.xattrs, dir.display()
                );
            }
            Ok(if s.not_restored.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Ls { img, path, long } => {
            let image = open(&img)?;
            let p = path.unwrap_or_default();
            let inode = image.raw().lookup_path(p.as_bytes(), true)?;
            let mut out = out::stdout();
            if !inode.is_dir() {
                print_entry(&image, &mut out, p.as_bytes(), &inode, long)?;
                out.flush()?;
                return Ok(ExitCode::SUCCESS);
            }
            for e in image.raw().read_dir(&inode)? {
                if e.is_dot() {
                    continue;
                }
                let child = image.raw().inode(e.nid)?;
                print_entry(&image, &mut out, &e.name, &child, long)?;
            }
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cat { img, path } => {
            let image = open(&img)?;
            let inode = image.raw().lookup_path(path.as_bytes(), true)?;
            if inode.is_dir() {
                bail!("{}: is a directory", path.to_string_lossy());
            }
            let file = image.raw().open(inode)?;
            let mut out = io::stdout().lock();
            let mut buf = vec![0u8; 1 << 20];
            let mut pos = 0u64;
            loop {
                let n = file.read_at(&mut buf, pos)?;
                if n == 0 {
                    break;
                }
                out.write_all(&buf[..n])?;
                pos += n as u64;
            }
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Dump {
            img,
            path,
            nid,
            profile,
            readahead,
            json,
        } => {
            let image = open(&img)?;
            let v = if let Some(t) = profile {
                let text = std::fs::read_to_string(&t)
                    .with_context(|| format!("--profile {}", t.display()))?;
                let mut reads = Vec::new();
                for (n, line) in text.lines().enumerate() {
                    if let Some(r) = ferrofs::format::trace::parse_line(line)
                        .map_err(|e| anyhow::anyhow!("{}: line {}: {e}", t.display(), n + 1))?
                    {
                        reads.push(r);
                    }
                }
                ferrofs_check::dump::profile(&image, &reads, readahead as u64)
            } else if let Some(p) = path {
                let inode = image.raw().lookup_path(p.as_bytes(), false)?;
                ferrofs_check::dump::inode(&image, &inode)
            } else if let Some(n) = nid {
                let inode = image.raw().inode(Nid(n))?;
                ferrofs_check::dump::inode(&image, &inode)
            } else {
                serde_json::json!({
                    "superblock": ferrofs_check::dump::superblock(&image),
                    "statistics": ferrofs_check::dump::statistics(&image),
                })
            };
            let mut out = out::stdout();
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                print_text(&mut out, &v, 0)?;
            }
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_entry(
    image: &Image,
    out: &mut impl Write,
    name: &[u8],
    inode: &ferrofs::raw::Inode,
    long: bool,
) -> Result<()> {
    let shown = String::from_utf8_lossy(name);
    if !long {
        writeln!(out, "{shown}")?;
        return Ok(());
    }
    let t = match inode.file_type() {
        FileType::Regular => '-',
        FileType::Directory => 'd',
        FileType::Symlink => 'l',
        FileType::CharDevice => 'c',
        FileType::BlockDevice => 'b',
        FileType::Fifo => 'p',
        FileType::Socket => 's',
    };
    let size = match inode.file_type() {
        FileType::CharDevice | FileType::BlockDevice => {
            format!("{},{}", inode.rdev().0, inode.rdev().1)
        }
        _ => inode.size().to_string(),
    };
    let target = if inode.is_symlink() {
        format!(
            " -> {}",
            String::from_utf8_lossy(&image.raw().read_link(inode)?)
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "{t}{} {:>3} {:>6} {:>6} {:>10} {}.{:09} {:>8} {shown}{target}",
        mode_string(inode.mode()),
        inode.nlink(),
        inode.uid(),
        inode.gid(),
        size,
        inode.mtime(),
        inode.mtime_nsec(),
        inode.nid().0,
    )?;
    Ok(())
}

fn mode_string(mode: u16) -> String {
    let mut s = String::with_capacity(9);
    for (i, c) in ['r', 'w', 'x', 'r', 'w', 'x', 'r', 'w', 'x']
        .iter()
        .enumerate()
    {
        let bit = 1u16 << (8 - i);
        s.push(if mode & bit != 0 { *c } else { '-' });
    }
    let mut b = s.into_bytes();
    if mode & 0o4000 != 0 {
        b[2] = if b[2] == b'x' { b's' } else { b'S' };
    }
    if mode & 0o2000 != 0 {
        b[5] = if b[5] == b'x' { b's' } else { b'S' };
    }
    if mode & 0o1000 != 0 {
        b[8] = if b[8] == b'x' { b't' } else { b'T' };
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// The dump as indented `key: value` lines. An array of objects becomes a
/// list of `-` items; an item whose values are all scalars (an extent
/// record) fits on one line.
fn print_text(out: &mut impl Write, v: &Value, indent: usize) -> io::Result<()> {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) => {
            for (k, val) in m {
                match val {
                    Value::Object(_) => {
                        writeln!(out, "{pad}{k}:")?;
                        print_text(out, val, indent + 2)?;
                    }
                    Value::Array(a) if a.iter().any(|x| x.is_object()) => {
                        writeln!(out, "{pad}{k}:")?;
                        for item in a {
                            match item {
                                Value::Object(f)
                                    if f.values().all(|x| !x.is_object() && !x.is_array()) =>
                                {
                                    let line: Vec<String> = f
                                        .iter()
                                        .map(|(k, x)| format!("{k} {}", scalar(x)))
                                        .collect();
                                    writeln!(out, "{pad}  - {}", line.join(", "))?;
                                }
                                _ => {
                                    writeln!(out, "{pad}  -")?;
                                    print_text(out, item, indent + 4)?;
                                }
                            }
                        }
                    }
                    _ => writeln!(out, "{pad}{k}: {}", scalar(val))?,
                }
            }
        }
        other => writeln!(out, "{pad}{}", scalar(other))?,
    }
    Ok(())
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(", "),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}
