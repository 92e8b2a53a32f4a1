//! `ferrofs mount`: serve an image through FUSE until unmounted or signalled.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

#[derive(clap::Args)]
pub struct MountArgs {
    /// The EROFS image file.
    image: PathBuf,
    /// Where to mount it (an existing directory).
    mountpoint: PathBuf,
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
}

fn parse_size(s: &str) -> Result<usize, String> {
    let (num, mul) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>()
        .map(|n| n * mul)
        .map_err(|_| format!("invalid size {s:?}"))
}

fn is_mounted(mountpoint: &Path) -> bool {
    let Ok(canon) = mountpoint.canonicalize() else {
        return false;
    };
    let target = canon.to_string_lossy().replace(' ', "\\040");
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|m| {
            m.lines()
                .any(|l| l.split(' ').nth(4) == Some(target.as_str()))
        })
        .unwrap_or(false)
}

pub fn run(a: &MountArgs) -> Result<ExitCode> {
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
    let file = std::fs::File::open(&a.image)
        .with_context(|| format!("cannot open {}", a.image.display()))?;
    let opts = ferrofs::OpenOptions {
        cache_bytes: a.cache_size,
        ..Default::default()
    };
    let image = ferrofs::Image::open_with(Box::new(file), opts)
        .with_context(|| a.image.display().to_string())?;
    image
        .root()
        .with_context(|| a.image.display().to_string())?;

    if !a.foreground {
        // Detach: run ourselves in the foreground as a child with no
        // terminal, and return once the mount is there.
        let exe = std::env::current_exe().context("locating the ferrofs binary")?;
        let mut child = Command::new(exe)
            .args(std::env::args_os().skip(1))
            .arg("-f")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
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
    let fs = ferrofs_fuse::ErofsFuse::new(image);
    let cfg = ferrofs_fuse::config(a.threads, allow_other);
    let session = fuser::spawn_mount(fs, &a.mountpoint, &cfg).with_context(|| {
        format!(
            "mounting {} on {}",
            a.image.display(),
            a.mountpoint.display()
        )
    })?;
    // Wait for the kernel to show the mount, then until it goes away
    // (umount, fusermount3 -u) or a signal asks us to unmount.
    let start = Instant::now();
    while !is_mounted(&a.mountpoint) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
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
