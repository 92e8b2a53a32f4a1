//! `ferrofs mount`: serve an image through FUSE until unmounted or signalled.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

#[derive(clap::Args)]
pub struct MountArgs {
    /// The EROFS image: a file, or an http:// or https:// URL.
    image: PathBuf,
    /// Where to mount it (an existing directory).
    mountpoint: PathBuf,
    /// The image starts this many bytes into the file (`mkfs --offset`).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    offset: u64,
    /// Extra device (blob) files or URLs, in device-table order; without
    /// them, extra devices are expected concatenated to the image.
    #[arg(long = "device", value_name = "PATH")]
    devices: Vec<PathBuf>,
    #[command(flatten)]
    remote: crate::source::RemoteArgs,
    /// Stay in the foreground (default: detach once mounted).
    #[arg(short = 'f', long)]
    foreground: bool,
    /// FUSE worker threads.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Byte budget of the decoded-pcluster cache (e.g. 64M).
    #[arg(long, default_value = "64M", value_parser = parse_size)]
    cache_size: usize,
    /// Mount options: allow_other.
    #[arg(short = 'o', value_name = "OPTS")]
    options: Vec<String>,
    /// Do not prefetch. By default decoded data goes into the kernel's page
    /// cache in the background: the small files after the one being read
    /// in a listed directory, and the whole pcluster a small read decoded.
    #[arg(long)]
    no_prefetch: bool,
    /// Most file bytes prefetched per directory.
    #[arg(long, default_value = "16M", value_parser = parse_size)]
    prefetch_size: usize,
    /// Append every read (path, offset, length, in arrival order) to this
    /// file, for `mkfs --profile` and `dump --profile`.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

/// `123`, `64K`, `16M`, `1G` as bytes.
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let (num, mul) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| format!("invalid size {s:?}"))
}

/// Undoes the octal escapes (`\040` for a space…) of a mountinfo field.
fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut k = 0;
    while k < b.len() {
        let oct = b
            .get(k + 1..k + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match oct {
            Some(d) if b[k] == b'\\' => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                k += 4;
            }
            _ => {
                out.push(b[k]);
                k += 1;
            }
        }
    }
    out
}

/// The device number (`major:minor`) of what is mounted exactly at
/// `mountpoint`, if anything is.
fn mounted_dev(mountpoint: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let canon = mountpoint.canonicalize().ok()?;
    let target = canon.as_os_str().as_bytes();
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        let hit = f.get(4).map(|p| unescape(p)).as_deref() == Some(target);
        hit.then(|| f.get(2).map(|d| d.to_string())).flatten()
    })
}

/// Whether something is mounted exactly at `mountpoint`.
fn is_mounted(mountpoint: &Path) -> bool {
    mounted_dev(mountpoint).is_some()
}

/// Environment that bounds glibc's malloc for the daemon: one arena
/// (per-thread arenas keep the freed buffers of each worker: 79 MB peak
/// RSS for 16 MiB of random 4 KiB reads with a 16 MiB cache, 23 MB with
/// these) and allocations of 64 KiB and up served by mmap, so freed
/// pcluster buffers go back to the system.
const MALLOC_ENV: [(&str, &str); 2] = [
    ("MALLOC_ARENA_MAX", "1"),
    ("MALLOC_MMAP_THRESHOLD_", "65536"),
];

/// Restarts the process with [`MALLOC_ENV`] unless it is already set
/// (glibc reads it once, at start). Returns only if that fails.
fn tune_malloc() {
    use std::os::unix::process::CommandExt;
    if std::env::var_os(MALLOC_ENV[0].0).is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut cmd = Command::new(exe);
    cmd.args(std::env::args_os().skip(1));
    for (k, v) in MALLOC_ENV {
        cmd.env(k, v);
    }
    let _ = cmd.exec();
}

pub fn run(a: &MountArgs) -> Result<ExitCode> {
    tune_malloc();
    if !a.mountpoint.is_dir() {
        bail!(
            "{}: mount point does not exist or is not a directory",
            a.mountpoint.display()
        );
    }
    if is_mounted(&a.mountpoint) {
        bail!(
            "{}: something is already mounted there",
            a.mountpoint.display()
        );
    }
    if !Path::new("/dev/fuse").exists() {
        bail!("/dev/fuse is absent: FUSE is not available on this machine");
    }
    let mut allow_other = false;
    for o in a.options.iter().flat_map(|o| o.split(',')) {
        match o {
            "allow_other" => allow_other = true,
            "ro" | "" => {}
            other => bail!("-o {other}: unsupported mount option"),
        }
    }
    // Open the image first, so errors are reported before detaching.
    let opts = ferrofs::OpenOptions {
        cache_bytes: a.cache_size,
        // Prefetch stores what was decoded in the page cache, so decoding
        // a whole pcluster once beats decoding prefixes again and again.
        whole_extents: a.trace.is_none() && !a.no_prefetch,
        // The page cache keeps what the kernel reads.
        cache_whole_reads: false,
        ..Default::default()
    };
    let image = crate::source::open_image(&a.image, &a.devices, a.offset, &a.remote, opts)?;
    image
        .raw()
        .root()
        .with_context(|| a.image.display().to_string())?;
    // Extra devices neither given nor appended to the image: every read
    // of their data would fail (a rebuild's layers, a --blobdev blob).
    let bs = image.block_size().bytes();
    let end = image
        .devices()
        .iter()
        .map(|d| d.slot.uniaddr.saturating_add(d.slot.blocks));
    if a.devices.is_empty() && end.max().unwrap_or(0).saturating_mul(bs) > image.source_len() {
        anyhow::bail!(
            "{}: its data is on {} extra devices; give them with --device, in order",
            a.image.display(),
            image.devices().len()
        );
    }

    if !a.foreground {
        // Detach: run ourselves in the foreground as a child with no
        // terminal, in a process group of its own (so the terminal's ^C and
        // job control do not reach it), and return once the mount is there.
        let exe = std::env::current_exe().context("locating the ferrofs binary")?;
        let mut child = Command::new(exe)
            .args(std::env::args_os().skip(1))
            .arg("-f")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .context("starting the mount daemon")?;
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if is_mounted(&a.mountpoint) {
                return Ok(ExitCode::SUCCESS);
            }
            if let Ok(Some(status)) = child.try_wait() {
                bail!(
                    "the mount daemon exited ({status}) before mounting {}",
                    a.mountpoint.display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("{}: not mounted after 20 s", a.mountpoint.display());
    }

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let mut fs = ferrofs_fuse::ErofsFuse::new(image);
    if let Some(t) = &a.trace {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(t)
            .with_context(|| format!("--trace {}", t.display()))?;
        fs = fs.with_trace(f);
    } else if !a.no_prefetch {
        fs = fs.with_prefetch(a.prefetch_size as u64);
    }
    let cfg = ferrofs_fuse::config(a.threads, allow_other);
    let notifier = fs.notifier_cell();
    let session = fuser::spawn_mount(fs, &a.mountpoint, &cfg).with_context(|| {
        format!(
            "mounting {} on {}",
            a.image.display(),
            a.mountpoint.display()
        )
    })?;
    if let Some(cell) = notifier {
        let _ = cell.set(session.notifier());
    }
    // Wait for the kernel to show the mount, then until it goes away
    // (umount, fusermount3 -u) or a signal asks us to unmount.
    let start = Instant::now();
    while !is_mounted(&a.mountpoint) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Best effort: a 1 MiB readahead window (the FUSE default is 128 KiB)
    // lets sequential reads arrive as 1 MiB requests; needs root.
    // With --trace, no readahead at all: the trace shows what was read.
    if let Some(dev) = mounted_dev(&a.mountpoint) {
        let kb = if a.trace.is_some() { "0" } else { "1024" };
        let _ = std::fs::write(format!("/sys/class/bdi/{dev}/read_ahead_kb"), kb);
    }
    loop {
        if stop.load(Ordering::Relaxed) {
            session.umount_and_join().context("unmounting")?;
            return Ok(ExitCode::SUCCESS);
        }
        if !is_mounted(&a.mountpoint) {
            drop(session);
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_mountinfo_escapes() {
        assert_eq!(parse_size("8M"), Ok(8 << 20));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err());
        assert_eq!(unescape(r"/mnt/a\040b\134c"), b"/mnt/a b\\c");
        assert_eq!(unescape(r"/x\04"), b"/x\\04");
    }
}
