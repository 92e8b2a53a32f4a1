//! `ferrofs fsck`: every inode, directory entry and (with data) every
//! pcluster of an image checked, with the kernel's own checks; the report,
//! and an exit status that says damage (1), an incomplete check (2) or an
//! image that changed while read by URL (3).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use crate::{open, out, progress, DataArgs, ImageArgs};

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
    (json, remote_stats): (bool, bool),
) -> Result<ExitCode> {
    let image = match open_for_check(img)? {
        Ok(image) => image,
        Err(code) => return Ok(code),
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
    if !no_data {
        check_unread_blocks(&mut report);
    }
    // The image was opened for this command: every decode since is its own
    // (the long xattr prefixes and the metabox's first blocks at open too).
    let st = image.cache_stats();
    report.pclusters_decoded = st.decodes;
    report.bytes_decoded = st.decoded_bytes;
    print_report(img, &report, json, remote_stats)?;
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Opens the image, or the exit code of an open that found the image
/// damaged (1, what Linux refuses to mount) or changed on its server (3).
/// A file that is no image, or a short copy, stays an error (2).
fn open_for_check(img: &ImageArgs) -> Result<std::result::Result<ferrofs::Image, ExitCode>> {
    let e = match open(img) {
        Ok(image) => return Ok(Ok(image)),
        Err(e) => e,
    };
    if let Some(change) = crate::source::remote_change() {
        return Ok(Err(changed_while_read(&change)));
    }
    let damaged = e.downcast_ref::<ferrofs::Error>().is_some_and(|r| {
        matches!(
            r,
            ferrofs::Error::Corrupt { .. }
                | ferrofs::Error::Format { .. }
                | ferrofs::Error::Codec { .. }
        ) || matches!(r, ferrofs::Error::Verity(v) if v.is_integrity())
    });
    if damaged {
        eprintln!("ferrofs: {}", crate::report(&e));
        return Ok(Err(ExitCode::from(1)));
    }
    Err(e)
}

/// The report on stdout (problems, warnings, the summary line; or JSON
/// with `remote` figures when asked), and a URL's request count on stderr.
fn print_report(
    img: &ImageArgs,
    report: &ferrofs_check::fsck::Report,
    json: bool,
    remote_stats: bool,
) -> Result<()> {
    let mut out = out::stdout();
    if json {
        match crate::source::remote_stats().filter(|_| remote_stats) {
            // What reading a URL's image cost: requests and body bytes.
            Some(st) => {
                let mut v = serde_json::to_value(report)?;
                if let Some(obj) = v.as_object_mut() {
                    let remote = serde_json::json!({ "requests": st.requests, "bytes": st.bytes });
                    obj.insert("remote".into(), remote);
                }
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            }
            None => writeln!(out, "{}", serde_json::to_string_pretty(report)?)?,
        }
    } else {
        let warnings = report.warnings.iter().map(|p| ("warning: ", p));
        for (kind, p) in report.problems.iter().map(|p| ("", p)).chain(warnings) {
            match p.nid {
                Some(n) => writeln!(out, "{kind}{} (nid {n}): {}", p.path, p.message)?,
                None => writeln!(out, "{kind}{}: {}", p.path, p.message)?,
            }
        }
        if let Some(n) = report.verity_unread_blocks {
            writeln!(
                out,
                "verity: every block the tree covers checked ({n} of them after the walk, which did not read them)"
            )?;
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
    if let Some(st) = crate::source::remote_stats().filter(|_| remote_stats && !json) {
        eprintln!(
            "{}: {} requests, {} bytes received",
            img.image.display(),
            st.requests,
            st.bytes
        );
    }
    Ok(())
}

/// With `--verity`: checks the blocks the tree covers that the walk did
/// not read (what `veritysetup verify` reads too), as a problem if one
/// does not match.
fn check_unread_blocks(report: &mut ferrofs_check::fsck::Report) {
    for v in crate::verified::opened() {
        match v.verify_rest() {
            Ok(n) => {
                let total = report.verity_unread_blocks.unwrap_or(0).saturating_add(n);
                report.verity_unread_blocks = Some(total);
            }
            Err(e) => report.problems.push(ferrofs_check::fsck::Problem {
                path: "(image)".into(),
                nid: None,
                message: format!("{e} (found checking the blocks the walk did not read)"),
            }),
        }
    }
}
