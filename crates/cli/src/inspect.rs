//! The reading subcommands: `fsck`, `extract`, `ls`, `cat` and `dump` of
//! an image (a file or a URL), with their progress and printing.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use ferrofs::format::Nid;
use serde_json::Value;

use crate::{hotrecord, open, out, progress, ImageArgs};

/// How the commands that read every file's data run their data pass.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct DataArgs {
    /// Threads reading and decoding file data (default: every core).
    /// Output and exit status are the same for any number.
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    jobs: Option<usize>,
    /// Most bytes of file data held in memory at once (each stored cluster
    /// is read and decoded once, in the order the image stores them).
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = crate::size::parse)]
    memory: usize,
}

impl DataArgs {
    fn jobs(&self) -> usize {
        self.jobs
            .filter(|&j| j > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// fsck's exit status when a remote image changed while it was read.
pub(crate) const FSCK_CHANGED: u8 = 3;

/// What fsck says (on stderr) when the object of a URL changed while it
/// was read: the reads mixed two versions, so the check judged neither.
fn changed_while_read(change: &ferrofs_remote::RemoteError) -> ExitCode {
    eprintln!(
        "ferrofs: {change}: the image changed while it was being read, so this check \
         says nothing about either version; run it again"
    );
    ExitCode::from(FSCK_CHANGED)
}

/// `ferrofs fsck`: checks every inode (and with data, every byte); exit 1
/// when a problem was found, 2 when a URL's server failed a read (the
/// check is incomplete, not the image damaged), 3 ([`FSCK_CHANGED`]) when
/// a URL's object changed while it was read.
pub(crate) fn fsck(
    img: &ImageArgs,
    no_data: bool,
    data: &DataArgs,
    json: bool,
) -> Result<ExitCode> {
    let image = match open(img) {
        Ok(image) => image,
        Err(e) => {
            if let Some(change) = crate::source::remote_change() {
                return Ok(changed_while_read(&change));
            }
            // Damage found at open (what Linux refuses to mount) is damage:
            // exit 1. A file that is no image, or a short copy, stays 2.
            let damaged = e.downcast_ref::<ferrofs::Error>().is_some_and(|r| {
                matches!(
                    r,
                    ferrofs::Error::Corrupt { .. }
                        | ferrofs::Error::Format { .. }
                        | ferrofs::Error::Codec { .. }
                )
            });
            if damaged {
                eprintln!("ferrofs: {e:#}");
                return Ok(ExitCode::from(1));
            }
            return Err(e);
        }
    };
    let pb = progress(None);
    let tick = |inodes: u64, bytes: u64| {
        pb.set_position(bytes);
        pb.set_message(format!("{inodes} inodes"));
    };
    let report = ferrofs_check::fsck::check(
        &image,
        ferrofs_check::fsck::Options {
            read_data: !no_data,
            jobs: data.jobs(),
            memory: data.memory as u64,
        },
        Some(&tick),
    );
    pb.finish_and_clear();
    // Problems found then are the change's, not the image's.
    if let Some(change) = crate::source::remote_change() {
        return Ok(changed_while_read(&change));
    }
    // Nor are reads the server failed (a timeout, a dropped connection):
    // the check is incomplete, as for any unreadable image.
    if let Some(why) = crate::source::remote_failure() {
        anyhow::bail!("{why}: the image could not be read whole, so the check is incomplete");
    }
    let mut report = report;
    // The image was opened for this command: every decode since is its own
    // (the long xattr prefixes and the metabox's first blocks at open too).
    let st = image.cache_stats();
    report.pclusters_decoded = st.decodes;
    report.bytes_decoded = st.decoded_bytes;
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
            "{}: {} inodes ({} dirs, {} files, {} symlinks, {} special), {} bytes read, {} of {} pclusters decoded ({} cached), {} problems, {} warnings",
            img.image.display(),
            report.inodes,
            report.directories,
            report.files,
            report.symlinks,
            report.special,
            report.data_bytes,
            report.pclusters_decoded,
            report.pclusters,
            report.pclusters_cached,
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

/// `ferrofs extract`: the image's tree into `dir`; exit 1 when an owner or
/// xattr could not be restored. `owners` is (`--owners`, `--no-owners`).
pub(crate) fn extract(
    img: &ImageArgs,
    dir: &Path,
    (owners, no_owners): (bool, bool),
    no_xattrs: bool,
    data: &DataArgs,
    json: bool,
) -> Result<ExitCode> {
    let image = open(img)?;
    let mut opts = ferrofs_check::extract::Options::default();
    opts.owners = (opts.owners || owners) && !no_owners;
    opts.xattrs = !no_xattrs;
    opts.jobs = data.jobs();
    opts.memory = data.memory as u64;
    // An interrupted extraction stops between clusters and says what it
    // finished (the second signal kills as usual).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .and_then(|_| signal_hook::flag::register(sig, stop.clone()))
            .context("installing signal handlers")?;
    }
    opts.cancel = Some(stop);
    ferrofs_check::extract::raise_open_file_limit();
    let pb = progress(None);
    let tick = |bytes: u64| pb.set_position(bytes);
    let res = ferrofs_check::extract::extract(&image, dir, opts, Some(&tick));
    pb.finish_and_clear();
    let mut s = res?;
    // As for fsck: every decode since the image was opened.
    let st = image.cache_stats();
    s.pclusters_decoded = st.decodes;
    s.bytes_decoded = st.decoded_bytes;
    if json {
        let mut out = out::stdout();
        writeln!(out, "{}", serde_json::to_string_pretty(&s)?)?;
        out.flush()?;
    } else {
        report_not_restored(&s.not_restored);
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

/// Lines printed for each kind of refusal (same attribute, same reason)
/// before the rest are counted instead: one image can hold thousands of
/// files with an xattr the target refuses.
const SAME_REFUSALS_SHOWN: usize = 5;

/// Prints what extract could not restore, the first few of each kind by
/// path and then how many more of that kind there were.
fn report_not_restored(list: &[ferrofs_check::extract::NotRestored]) {
    let mut kinds: Vec<((String, String), usize)> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for n in list {
        let key = (n.what.to_string(), n.reason.to_string());
        let k = *index.entry(key.clone()).or_insert_with(|| {
            kinds.push((key, 0));
            kinds.len() - 1
        });
        kinds[k].1 += 1;
        if kinds[k].1 <= SAME_REFUSALS_SHOWN {
            eprintln!("ferrofs: {}: {} not restored: {}", n.path, n.what, n.reason);
        }
    }
    for ((what, reason), count) in kinds {
        if count > SAME_REFUSALS_SHOWN {
            let more = count - SAME_REFUSALS_SHOWN;
            eprintln!("ferrofs: ... and {more} more files whose {what} was not restored: {reason}");
        }
    }
}

/// `ferrofs cat`: a file's bytes to standard output.
pub(crate) fn cat(img: &ImageArgs, path: &OsString) -> Result<ExitCode> {
    let image = open(img)?;
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

/// `ferrofs dump`: the superblock and statistics, one inode (by path or
/// nid), or a trace replayed on the image (`--profile`).
pub(crate) fn dump(
    img: &ImageArgs,
    (path, nid, profile): (Option<OsString>, Option<u64>, Option<PathBuf>),
    readahead: usize,
    json: bool,
) -> Result<ExitCode> {
    let image = open(img)?;
    let v = if let Some(t) = profile {
        let reads = hotrecord::read_trace(&t)?;
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

/// `rwxr-xr-x` of a mode (setuid, setgid and sticky as `s`/`S`, `t`/`T`).
pub(crate) fn mode_string(mode: u16) -> String {
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
