//! `ferrofs extract`: an image's tree written into a directory, file data
//! read in the order the image stores it; what the target refused, summed
//! up.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::{open, out, progress, DataArgs, ImageArgs};

/// `ferrofs extract`: the image's tree (or the directory `path` of it)
/// into `dir`; exit 1 when an owner or
/// xattr could not be restored. `owners` is (`--owners`, `--no-owners`).
pub(crate) fn extract(
    img: &ImageArgs,
    (dir, path): (&Path, Option<&std::ffi::OsStr>),
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
    if let Some(p) = path {
        opts.path = std::os::unix::ffi::OsStrExt::as_bytes(p).to_vec();
    }
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
