//! `ferrofs push`: upload a finished image to S3 (`s3://BUCKET/KEY`),
//! atomically: the object appears whole or not at all; an interrupted or
//! failed multipart upload is aborted, leaving no parts behind.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ferrofs_remote::s3::push::{PushOptions, Pushed, Uploader};
use ferrofs_remote::RemoteError;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(clap::Args)]
pub struct PushArgs {
    /// The image file.
    image: PathBuf,
    /// Where it goes: s3://BUCKET/KEY.
    url: String,
    /// Bytes per part of a multipart upload (5M to 5G); an image of at
    /// most this size goes up in one PUT. Grown for an image that would
    /// need more than 10000 parts.
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = crate::size::parse_u64)]
    part_size: u64,
    /// Parts uploaded at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    parallel: usize,
    /// Sign the image's bytes as UNSIGNED-PAYLOAD (as curl --aws-sigv4
    /// does) instead of by their SHA-256: faster, but the server can no
    /// longer check every byte it stores against the signature (TLS still
    /// protects them in transit over https).
    #[arg(long)]
    unsigned_payload: bool,
    /// Print a JSON summary (bytes, parts, seconds, etag, and how many
    /// unfinished uploads of the key an interrupted push had left, which
    /// this one aborted).
    #[arg(long)]
    json: bool,
    /// Parts of any size (S3 wants 5 MiB at least; tests use small ones).
    #[arg(long, hide = true)]
    unchecked_part_size: bool,
    /// Milliseconds to wait before each part (tests interrupt uploads).
    #[arg(long, hide = true, default_value_t = 0)]
    part_delay_ms: u64,
    #[command(flatten)]
    s3: crate::source::S3Args,
}

pub fn run(a: &PushArgs) -> Result<ExitCode> {
    if !ferrofs_remote::is_s3(&a.url) {
        bail!("{}: expected s3://BUCKET/KEY", a.url);
    }
    if !a.unchecked_part_size && !((5 << 20)..=(5 << 30)).contains(&a.part_size) {
        bail!(
            "--part-size {}: S3 takes parts of 5 MiB to 5 GiB",
            a.part_size
        );
    }
    if a.parallel == 0 {
        bail!("--parallel 0: at least one part at a time");
    }
    let file = std::fs::File::open(&a.image)
        .with_context(|| format!("cannot open {}", a.image.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {}", a.image.display()))?;
    if !meta.is_file() {
        bail!("{}: not a regular file", a.image.display());
    }
    let len = meta.len();
    let target = a.s3.options().resolve(&a.url)?;
    let up = Uploader::new(
        target,
        PushOptions {
            part_size: a.part_size,
            parallel: a.parallel,
            part_delay: Duration::from_millis(a.part_delay_ms),
            unsigned_payload: a.unsigned_payload,
            ..PushOptions::default()
        },
    );
    let signals = stop_on_signals()?;
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if !std::io::stderr().is_terminal() {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    pb.set_style(
        ProgressStyle::with_template("{spinner} {elapsed} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} {wide_bar}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    // Uploads of this key a killed push left behind: reported, aborted.
    let abandoned = match up.abort_abandoned() {
        Ok(list) => list,
        // Keys that may put objects but not list uploads (or wrong keys,
        // which the push itself then reports): nothing to say here.
        Err(RemoteError::S3Denied(_)) => Vec::new(),
        Err(e) => {
            eprintln!("warning: {e}: unfinished uploads of this key were not looked for");
            Vec::new()
        }
    };
    for u in &abandoned {
        eprintln!(
            "warning: {}: aborted an unfinished upload of this key (id {}{}), left by an \
             interrupted push",
            a.url,
            u.upload_id,
            u.initiated
                .as_deref()
                .map(|t| format!(", started {t}"))
                .unwrap_or_default()
        );
    }
    let started = Instant::now();
    let res = up.push(&file, len, &|n| pb.inc(n), &signals.stop);
    pb.finish_and_clear();
    for id in signals.ids {
        signal_hook::low_level::unregister(id);
    }
    let secs = started.elapsed().as_secs_f64();
    let pushed = match res {
        Ok(p) => p,
        Err(RemoteError::Interrupted { url }) => {
            eprintln!("ferrofs: {url}: upload interrupted and aborted: nothing was published");
            // 128 + the signal, as a shell reports a process it ended.
            let term = signals.term.load(std::sync::atomic::Ordering::Relaxed);
            return Ok(ExitCode::from(if term { 143 } else { 130 }));
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!(
                "pushing {} (nothing was published)",
                a.image.display()
            )))
        }
    };
    print_pushed(a, &pushed, secs, abandoned.len())?;
    Ok(ExitCode::SUCCESS)
}

/// SIGINT and SIGTERM while an upload runs: they raise `stop` (the
/// upload is then aborted, exit status 130 or 143); a second signal ends
/// the process at once.
struct Signals {
    stop: Arc<AtomicBool>,
    /// The signal was SIGTERM.
    term: Arc<AtomicBool>,
    ids: Vec<signal_hook::SigId>,
}

fn stop_on_signals() -> Result<Signals> {
    let stop = Arc::new(AtomicBool::new(false));
    let term = Arc::new(AtomicBool::new(false));
    let mut signals = Vec::new();
    for (sig, status) in [
        (signal_hook::consts::SIGINT, 130),
        (signal_hook::consts::SIGTERM, 143),
    ] {
        let handle = |r: std::io::Result<signal_hook::SigId>| r.context("cannot handle signals");
        signals.push(handle(signal_hook::flag::register_conditional_shutdown(
            sig,
            status,
            stop.clone(),
        ))?);
        if sig == signal_hook::consts::SIGTERM {
            signals.push(handle(signal_hook::flag::register(sig, term.clone()))?);
        }
        signals.push(handle(signal_hook::flag::register(sig, stop.clone()))?);
    }
    Ok(Signals {
        stop,
        term,
        ids: signals,
    })
}

/// What was published: JSON with `--json`, else one line.
fn print_pushed(a: &PushArgs, pushed: &Pushed, secs: f64, aborted: usize) -> Result<()> {
    let mut out = crate::out::stdout();
    if a.json {
        let v = serde_json::json!({
            "url": a.url,
            "bytes": pushed.bytes,
            "parts": pushed.parts,
            "seconds": secs,
            "etag": pushed.etag,
            "aborted_uploads": aborted,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        let how = if pushed.parts == 0 {
            "one PUT".to_owned()
        } else {
            format!("{} parts", pushed.parts)
        };
        writeln!(
            out,
            "{}: {} bytes in {how}, {secs:.2} s{}",
            a.url,
            pushed.bytes,
            pushed
                .etag
                .as_deref()
                .map(|e| format!(", ETag {e}"))
                .unwrap_or_default()
        )?;
    }
    out.flush()?;
    Ok(())
}
