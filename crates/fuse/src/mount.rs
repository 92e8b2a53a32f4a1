//! Mounting an image: the checks, detaching into a daemon, the FUSE
//! session, and unmounting on SIGINT, SIGTERM or SIGHUP or when the mount
//! goes away (`umount`, `fusermount3 -u`).

use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use ferrofs::Image;
use thiserror::Error;

use crate::mountinfo::{is_mounted, mounted_dev};
use crate::ErofsFuse;

/// Set in the environment of the daemon a detaching [`mount`] starts: the
/// [`mount`] call in that process serves in the foreground.
const DAEMON_ENV: &str = "FERROFS_MOUNT_DAEMON";

/// Environment that bounds glibc's malloc for the daemon: one arena
/// (per-thread arenas keep the freed buffers of each worker: 79 MB peak
/// RSS for 16 MiB of random 4 KiB reads with a 16 MiB cache, 23 MB with
/// these) and allocations of 64 KiB and up served by mmap, so freed
/// pcluster buffers go back to the system.
const MALLOC_ENV: [(&str, &str); 2] = [
    ("MALLOC_ARENA_MAX", "1"),
    ("MALLOC_MMAP_THRESHOLD_", "65536"),
];

/// How long a mount may take to appear.
const MOUNT_WAIT: Duration = Duration::from_secs(20);

/// Most bytes of the daemon's stderr kept for its error (the last ones).
const DAEMON_OUTPUT_MAX: usize = 16 << 10;

/// How an image is served.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Serve from the calling process until unmounted; `false` detaches
    /// (see [`mount`]).
    pub foreground: bool,
    /// FUSE worker threads (at least one is used).
    pub threads: usize,
    /// Users other than the one mounting may see the files (`-o
    /// allow_other`).
    pub allow_other: bool,
    /// Push decoded data into the kernel's page cache in the background,
    /// at most this many file bytes per listed directory; `None`: off.
    pub prefetch: Option<u64>,
    /// Append every read served to this file as a trace (the format of
    /// `ferrofs_trace`). Prefetch and kernel readahead are off then, so
    /// the trace shows what was read.
    pub trace: Option<PathBuf>,
    /// The mount's source as `/proc/mounts` and `mount` show it (the
    /// image's path or URL); `None`, or a name with a comma or backslash
    /// (which FUSE option strings cannot carry), shows `ferrofs`.
    pub source: Option<String>,
    /// Serve a composefs image as overlayfs does over this object store
    /// (`--basedir`): metacopy files read their redirect's object,
    /// whiteouts and overlayfs's private xattrs are hidden, escaped ones
    /// shown unescaped. Prefetch is off then (the image holds no data).
    pub objects: Option<PathBuf>,
    /// With [`MountOptions::objects`]: check each object's fs-verity
    /// digest against its metacopy xattr before serving a byte of it.
    pub verify_objects: bool,
}

impl Default for MountOptions {
    /// Detached, 4 threads, 16 MiB of prefetch per directory, no trace,
    /// source shown as `ferrofs`.
    fn default() -> Self {
        Self {
            foreground: false,
            threads: 4,
            allow_other: false,
            prefetch: Some(16 << 20),
            trace: None,
            source: None,
            objects: None,
            verify_objects: false,
        }
    }
}

/// Why an image could not be mounted or unmounted.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MountError {
    /// The mount point is missing or not a directory.
    #[error("{0}: mount point does not exist or is not a directory")]
    NotADirectory(PathBuf),
    /// Something is mounted on the mount point already.
    #[error("{0}: something is already mounted there")]
    AlreadyMounted(PathBuf),
    /// The kernel offers no FUSE.
    #[error("/dev/fuse is absent: FUSE is not available on this machine")]
    NoFuse,
    /// The image's root directory cannot be read.
    #[error(transparent)]
    Image(#[from] ferrofs::Error),
    /// The trace file cannot be opened for appending.
    #[error("trace file {path}: {source}")]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// SIGINT, SIGTERM or SIGHUP cannot be caught.
    #[error("installing signal handlers: {0}")]
    Signals(#[source] io::Error),
    /// The detached daemon cannot be started.
    #[error("starting the mount daemon: {0}")]
    Daemon(#[source] io::Error),
    /// The detached daemon ended before the mount appeared. Its last
    /// line on stderr (its error) ends the message.
    #[error(
        "the mount daemon exited ({status}) before mounting {path}{}",
        last_line(output).map(|l| format!(": {l}")).unwrap_or_default()
    )]
    DaemonExited {
        /// How it ended.
        status: ExitStatus,
        /// The mount point.
        path: PathBuf,
        /// What it wrote to stderr (its last 16 KiB), to be shown as it
        /// is: the reason it failed.
        output: String,
    },
    /// The FUSE session cannot be set up (mounting failed).
    #[error("mounting on {path}: {source}")]
    Session {
        /// The mount point.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// The mount did not appear within 20 seconds.
    #[error("{0}: not mounted after 20 s")]
    Timeout(PathBuf),
    /// Unmounting failed.
    #[error("unmounting {path}: {source}")]
    Unmount {
        /// The mount point.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
}

/// The last non-empty line of `text`, trimmed.
fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rev().find(|l| !l.is_empty())
}

/// Checks that `dir` can take a mount and that FUSE is there.
fn check_mount_point(dir: &Path) -> Result<(), MountError> {
    if !dir.is_dir() {
        return Err(MountError::NotADirectory(dir.to_path_buf()));
    }
    if is_mounted(dir) {
        return Err(MountError::AlreadyMounted(dir.to_path_buf()));
    }
    if !Path::new("/dev/fuse").exists() {
        return Err(MountError::NoFuse);
    }
    Ok(())
}

/// Whether this process serves the mount: asked to run in the foreground,
/// or it is the daemon a detaching [`mount`] started (work meant for the
/// serving process, like prefetching a remote image, starts only here).
pub fn serves_here(options: &MountOptions) -> bool {
    options.foreground || std::env::var_os(DAEMON_ENV).is_some()
}

/// What [`mount`] does first, for callers that want it before opening the
/// image: checks `dir` (so a bad mount point is reported before a slow
/// open) and, in the foreground, restarts the process once with glibc's
/// malloc bounded (`MALLOC_ARENA_MAX=1`, `MALLOC_MMAP_THRESHOLD_=65536`)
/// unless that is set already: glibc reads it only at start, so the restart
/// re-runs the program with the same arguments (and returns only if that
/// fails).
pub fn prepare(dir: &Path, options: &MountOptions) -> Result<(), MountError> {
    check_mount_point(dir)?;
    if serves_here(options) && std::env::var_os(MALLOC_ENV[0].0).is_none() {
        if let Ok(exe) = std::env::current_exe() {
            let _ = Command::new(exe)
                .args(std::env::args_os().skip(1))
                .envs(MALLOC_ENV)
                .exec();
        }
    }
    Ok(())
}

/// Mounts `image` on `dir` read-only and serves it until it is unmounted
/// (`umount`, `fusermount3 -u`) or SIGINT, SIGTERM or SIGHUP arrives, which
/// unmount it cleanly.
///
/// Without [`MountOptions::foreground`] the call detaches: it re-runs the
/// current program with the same arguments as a daemon (no terminal, a
/// process group of its own so the terminal's ^C does not reach it), whose
/// own `mount` call serves the image, and returns once the mount is there.
/// The program must therefore reach the same call again from its
/// arguments, as a command-line tool does. Errors in the image's root are
/// reported before detaching; a daemon that fails before its mount is
/// there is reported as [`MountError::DaemonExited`] with what it wrote to
/// stderr (a pipe to this process until it mounts, /dev/null after).
///
/// Installs signal handlers for the whole process (foreground only) and
/// calls [`prepare`].
pub fn mount(image: Image, dir: &Path, options: &MountOptions) -> Result<(), MountError> {
    prepare(dir, options)?;
    image.raw().root()?;
    if !serves_here(options) {
        return detach(dir);
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, stop.clone()).map_err(MountError::Signals)?;
    }
    let mounted = spawn(image, dir, options)?;
    if !options.foreground {
        // The daemon's stderr is a pipe to the process that started it,
        // which reads it until it closes (reporting it if the daemon
        // fails first) and then exits: from now on it goes nowhere.
        if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
            let _ = nix::unistd::dup2_stderr(&null);
        }
    }
    loop {
        if stop.load(Ordering::Relaxed) {
            return mounted.unmount();
        }
        if !mounted.is_mounted() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts the daemon and waits for its mount to appear, then for the
/// daemon to let go of its stderr (a pipe to this process, so nothing it
/// writes meets a closed pipe). A daemon that fails before mounting is
/// reported with what it wrote there.
fn detach(dir: &Path) -> Result<(), MountError> {
    let exe = std::env::current_exe().map_err(MountError::Daemon)?;
    let mut child = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(DAEMON_ENV, "1")
        .envs(MALLOC_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(MountError::Daemon)?;
    // The daemon's stderr, read until it closes (the daemon mounted and
    // let go of it, or ended), its last bytes sent back.
    let (tx, output) = mpsc::channel();
    if let Some(mut err) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match err.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        kept.extend_from_slice(&buf[..n]);
                        let excess = kept.len().saturating_sub(DAEMON_OUTPUT_MAX);
                        kept.drain(..excess);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(String::from_utf8_lossy(&kept).into_owned());
        });
    }
    let start = Instant::now();
    while start.elapsed() < MOUNT_WAIT {
        if is_mounted(dir) {
            // Served: wait (briefly) until the daemon has closed the pipe.
            let _ = output.recv_timeout(Duration::from_secs(5));
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(MountError::DaemonExited {
                status,
                path: dir.to_path_buf(),
                output: output
                    .recv_timeout(Duration::from_secs(1))
                    .unwrap_or_default(),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(MountError::Timeout(dir.to_path_buf()))
}

/// Mounts `image` on `dir`, served by worker threads of this process, and
/// returns once the mount is there: no detaching, no signal handling (for
/// tests and programs that embed a mount). [`MountOptions::foreground`] is
/// ignored.
pub fn spawn(image: Image, dir: &Path, options: &MountOptions) -> Result<Mounted, MountError> {
    check_mount_point(dir)?;
    let mut fs = ErofsFuse::new(image);
    if let Some(path) = &options.trace {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| MountError::Trace {
                path: path.clone(),
                source,
            })?;
        fs = fs.with_trace(f);
    } else if let (Some(budget), None) = (options.prefetch, &options.objects) {
        fs = fs.with_prefetch(budget);
    }
    if let Some(dir) = &options.objects {
        fs = fs.with_objects(dir.clone(), options.verify_objects);
    }
    let cfg = crate::config(options);
    let notifier = fs.notifier_cell();
    let session = fuser::spawn_mount(fs, dir, &cfg).map_err(|source| MountError::Session {
        path: dir.to_path_buf(),
        source,
    })?;
    if let Some(cell) = notifier {
        let _ = cell.set(session.notifier());
    }
    let mounted = Mounted {
        session,
        dir: dir.to_path_buf(),
    };
    let start = Instant::now();
    while !mounted.is_mounted() {
        if start.elapsed() >= MOUNT_WAIT {
            let _ = mounted.unmount();
            return Err(MountError::Timeout(dir.to_path_buf()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Best effort: a 1 MiB readahead window (the FUSE default is 128 KiB)
    // lets sequential reads arrive as 1 MiB requests; needs root. With a
    // trace, no readahead at all: the trace shows what was read.
    if let Some(dev) = mounted_dev(dir) {
        let kb = if options.trace.is_some() { "0" } else { "1024" };
        let _ = std::fs::write(format!("/sys/class/bdi/{dev}/read_ahead_kb"), kb);
    }
    Ok(mounted)
}

/// A mount served by this process ([`spawn`]). Dropping it unmounts too,
/// without reporting errors.
pub struct Mounted {
    session: fuser::BackgroundSession,
    dir: PathBuf,
}

impl Mounted {
    /// The mount point.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the mount is still there (not unmounted from outside).
    pub fn is_mounted(&self) -> bool {
        is_mounted(&self.dir)
    }

    /// Unmounts and waits for the worker threads to end.
    pub fn unmount(self) -> Result<(), MountError> {
        let Mounted { session, dir } = self;
        session
            .umount_and_join()
            .map_err(|source| MountError::Unmount { path: dir, source })
    }
}
