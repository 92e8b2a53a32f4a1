//! A private containerd for tests: its own root, state directory, socket and
//! configuration in a work directory, the EROFS snapshotter and differ turned
//! on, `mkfs.erofs` taken from a directory put first on its `PATH`; stopped by
//! its pid on drop, with its shims, and everything mounted under its
//! directories unmounted, so nothing is left running or mounted.
//!
//! The containers tools (containerd, ctr, containerd-shim-runc-v2, runc,
//! umoci) are found, in order, from the `UPSTREAM_CONTAINERS_BIN`
//! environment variable, from the output of
//! `<workspace>/../shared/tools/upstream-tools --containers`, or at
//! `~/.cache/upstream-containers/bin`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::process::{run_with_timeout, send_signal};

/// The binaries a containers bin directory must hold.
pub const CONTAINERS_TOOLS: [&str; 5] = [
    "containerd",
    "ctr",
    "containerd-shim-runc-v2",
    "runc",
    "umoci",
];

/// Instances started by this process so far (each gets its own namespace).
static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// How long one `ctr` command may take.
const CTR_LIMIT: Duration = Duration::from_secs(120);

/// The containers tools' bin directory, found as the module docs say.
pub fn containers_bin_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        crate::tools::find_tool_dir(
            "UPSTREAM_CONTAINERS_BIN",
            &["--containers"],
            ".cache/upstream-containers/bin",
            &CONTAINERS_TOOLS,
        )
    })
    .clone()
}

/// The bin directory of containerd 2.4 (`upstream-tools
/// --containerd-next`: containerd, ctr, the shim, runc and umoci), from
/// `UPSTREAM_CONTAINERD_NEXT_BIN`, the script's output, or
/// `~/.cache/upstream-containerd-next/bin`.
pub fn containerd_next_bin_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        crate::tools::find_tool_dir(
            "UPSTREAM_CONTAINERD_NEXT_BIN",
            &["--containerd-next"],
            ".cache/upstream-containerd-next/bin",
            &CONTAINERS_TOOLS,
        )
    })
    .clone()
}

/// A running containerd (see the module docs).
pub struct Containerd {
    dir: PathBuf,
    child: Option<Child>,
    path_env: String,
    bin: PathBuf,
    namespace: String,
}

impl Containerd {
    /// Starts containerd with everything under `dir` (created), the tools of
    /// `bin` and `mkfs_dir` first on its `PATH` (so its `mkfs.erofs` is
    /// the one the snapshotter and the differ run), the EROFS differ
    /// unpacking for the EROFS snapshotter and first in the diff service;
    /// returns once it answers on its socket.
    pub fn start(dir: &Path, bin: &Path, mkfs_dir: &Path) -> Result<Containerd, String> {
        Self::start_with(dir, bin, mkfs_dir, "")
    }

    /// As [`Containerd::start`], with `extra` appended to the
    /// configuration (more plugin tables, e.g. the EROFS snapshotter's
    /// `layer_content_caches`).
    pub fn start_with(
        dir: &Path,
        bin: &Path,
        mkfs_dir: &Path,
        extra: &str,
    ) -> Result<Containerd, String> {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let d = dir.display();
        let config = format!(
            r#"version = 3
# CRI and NRI are not needed; NRI's socket (/var/run/nri/nri.sock) would
# be shared by instances running side by side.
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime", "io.containerd.nri.v1.nri"]
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{d}/ctd.sock"
[ttrpc]
  address = "{d}/ctd.sock.ttrpc"
[debug]
  address = "{d}/debug.sock"
  level = "info"
[plugins."io.containerd.service.v1.diff-service"]
  default = ["erofs", "walking"]
[plugins."io.containerd.differ.v1.erofs"]
  mkfs_options = []
[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "linux/amd64"
  snapshotter = "erofs"
  differ = "erofs"
{extra}"#
        );
        let config_path = dir.join("config.toml");
        fs::write(&config_path, config).map_err(|e| e.to_string())?;
        let path_env = format!(
            "{}:{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            mkfs_dir.display(),
            bin.display()
        );
        let log = fs::File::create(dir.join("containerd.log")).map_err(|e| e.to_string())?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(bin.join("containerd"))
            .arg("--config")
            .arg(&config_path)
            .env("PATH", &path_env)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("starting containerd: {e}"))?;
        let mut me = Containerd {
            dir: dir.to_path_buf(),
            child: Some(child),
            path_env,
            bin: bin.to_path_buf(),
            namespace: format!(
                "ferrofs-{}-{}",
                std::process::id(),
                STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
        };
        let start = Instant::now();
        loop {
            if me.socket().exists() && me.ctr(&["version"]).is_ok() {
                return Ok(me);
            }
            let exited = me.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || start.elapsed() > Duration::from_secs(30) {
                return Err(format!(
                    "containerd did not come up ({}): {}",
                    exited.map_or("no answer in 30s".to_string(), |s| s.to_string()),
                    me.log_tail()
                ));
            }
            sleep(Duration::from_millis(100));
        }
    }

    /// Its gRPC socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("ctd.sock")
    }

    /// Its root directory.
    pub fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// The EROFS snapshotter's root (`snapshots/N/{fs,layer.erofs}` inside).
    pub fn snapshotter_root(&self) -> PathBuf {
        self.root().join("io.containerd.snapshotter.v1.erofs")
    }

    /// runc's state directory for `ctr run --runc-root` (containers of
    /// instances running side by side must not share runc's default root).
    pub fn runc_root(&self) -> PathBuf {
        self.dir.join("runc")
    }

    /// The containerd namespace of this instance's `ctr` commands.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The `PATH` containerd runs with.
    pub fn path_env(&self) -> &str {
        &self.path_env
    }

    /// The last 3000 bytes of containerd's log.
    pub fn log_tail(&self) -> String {
        let text = fs::read(self.dir.join("containerd.log")).unwrap_or_default();
        let start = text.len().saturating_sub(3000);
        String::from_utf8_lossy(&text[start..]).into_owned()
    }

    /// `ctr -a SOCKET -n NAMESPACE ARGS`: its stdout, or an error with its
    /// status and output.
    pub fn ctr<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Result<String, String> {
        let mut cmd = Command::new(self.bin.join("ctr"));
        cmd.arg("-a")
            .arg(self.socket())
            .args(["-n", &self.namespace])
            .args(args)
            .env("PATH", &self.path_env);
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        let out = run_with_timeout(&mut cmd, CTR_LIMIT)
            .map_err(|e| format!("ctr {}: {e}", shown.join(" ")))?;
        if out.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "ctr {}: {}: {}{}",
                shown.join(" "),
                out.describe_status(),
                String::from_utf8_lossy(&out.stdout),
                out.stderr_tail(4000)
            ))
        }
    }

    /// Stops everything: the shims this containerd started (SIGKILL), then
    /// containerd (SIGTERM, SIGKILL after 10 s), then unmounts whatever is
    /// still mounted under its directory, deepest first.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        for pid in shims_of(&self.socket()) {
            let _ = send_signal(pid, "KILL");
        }
        let _ = send_signal(child.id(), "TERM");
        let start = Instant::now();
        while child.try_wait().ok().flatten().is_none() {
            if start.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            sleep(Duration::from_millis(50));
        }
        unmount_under(&self.dir);
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Processes named containerd-shim* whose command line names `socket`
/// (each shim is started with `-address SOCKET`).
fn shims_of(socket: &Path) -> Vec<u32> {
    let want = socket.to_string_lossy().into_owned();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = fs::read(e.path().join("cmdline")).ok()?;
            let args: Vec<String> = cmdline
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let is_shim = args.first()?.contains("containerd-shim");
            (is_shim && args.contains(&want)).then_some(pid)
        })
        .collect()
}

/// The mount points under `dir` (from /proc/self/mountinfo), deepest first.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mount_path(p)))
        .filter(|p| p.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    points
}

/// Unmounts every mount point under `dir`, deepest first (lazily when a
/// plain unmount fails).
pub fn unmount_under(dir: &Path) {
    for _ in 0..3 {
        let points = mounts_under(dir);
        if points.is_empty() {
            return;
        }
        for p in points {
            let ok = Command::new("umount")
                .arg(&p)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                let _ = Command::new("umount")
                    .arg("-l")
                    .arg(&p)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mount_path(p: &str) -> String {
    let b = p.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let oct = std::str::from_utf8(&b[i + 1..i + 4]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(oct, 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs a `mount ...` command line as printed by `ctr snapshots mounts`
/// (through `sh -c`).
pub fn run_mount_command(line: &str) -> io::Result<()> {
    let out = Command::new("sh").args(["-c", line]).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{line}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_mountinfo_paths() {
        assert_eq!(unescape_mount_path(r"/a\040b"), "/a b");
        assert_eq!(unescape_mount_path("/plain"), "/plain");
        assert_eq!(unescape_mount_path(r"/end\"), r"/end\");
    }
}
