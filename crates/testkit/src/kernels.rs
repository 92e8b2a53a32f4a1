//! The kernels a check can run under: this machine's own, Linux 7.2 as a
//! user-mode kernel (`kernel-run`, from `upstream-tools --kernel`: LZ4-only
//! EROFS, loop, overlayfs, FUSE, dm-verity), and Linux 7.2 in a qemu
//! virtual machine (`scripts/kernel-vm.sh`: Debian's stock kernel, every
//! codec, dm-verity, ext4 with fs-verity).
//!
//! Each runs a shell script as root with this machine's files visible
//! read-only and the given directories writable, and returns its output,
//! exit status and (for the 7.2 kernels) the kernel's log. The VM boots
//! with `/` shared over 9p; the script runs in a chroot of it, so the
//! same binaries and tools run inside. [`Kernel::available`] says, for a
//! kernel that cannot run here, why.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One kernel to run scripts under.
#[derive(Clone, Debug)]
pub enum Kernel {
    /// The kernel this machine runs.
    Host,
    /// Linux 7.2 as a user-mode kernel: the `kernel-run` script.
    UserMode(PathBuf),
    /// Linux 7.2 in a qemu VM: the directory holding `vmlinuz` and
    /// `initramfs.cpio.gz`.
    Vm(PathBuf),
}

/// What a script printed and how it ended.
#[derive(Clone, Debug)]
pub struct KernelOutput {
    /// Its exit status (-1 when it did not finish).
    pub status: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The kernel's log (empty for the host's, whose log holds more than
    /// the script's).
    pub log: String,
}

impl KernelOutput {
    /// The kernel's log lines about EROFS, overlayfs, dm-verity, loop and
    /// fs-verity (what explains a refusal).
    pub fn fs_log(&self) -> Vec<String> {
        let keys = [
            "erofs",
            "overlay",
            "verity",
            "loop",
            "device-mapper",
            "EXT4",
        ];
        self.log
            .lines()
            .filter(|l| keys.iter().any(|k| l.contains(k)))
            .map(|l| l.trim().to_string())
            .collect()
    }
}

/// The longest a VM may run one script.
const VM_DEADLINE: Duration = Duration::from_secs(1500);

impl Kernel {
    /// Every kernel, each either ready or with the reason it cannot run
    /// here.
    pub fn available() -> Vec<Result<Kernel, String>> {
        vec![Ok(Kernel::Host), Self::user_mode(), Self::vm()]
    }

    /// A short name for tables: `host`, `7.2-uml`, `7.2-vm`.
    pub fn name(&self) -> &'static str {
        match self {
            Kernel::Host => "host",
            Kernel::UserMode(_) => "7.2-uml",
            Kernel::Vm(_) => "7.2-vm",
        }
    }

    /// Whether its EROFS decodes `codec` (`lz4`, `lzma`, `deflate`,
    /// `zstd`).
    pub fn has_codec(&self, codec: &str) -> bool {
        match self {
            Kernel::UserMode(_) => codec == "lz4",
            _ => true,
        }
    }

    /// User-mode Linux 7.2, from `$UPSTREAM_KERNEL_BIN` or
    /// `upstream-tools --kernel`.
    pub fn user_mode() -> Result<Kernel, String> {
        if !crate::is_root() {
            return Err("not root".into());
        }
        crate::tools::find_tool_dir(
            "UPSTREAM_KERNEL_BIN",
            &["--kernel"],
            ".cache/upstream-kernel/bin",
            &["kernel-run"],
        )
        .map(|d| Kernel::UserMode(d.join("kernel-run")))
        .ok_or_else(|| {
            "user-mode Linux 7.2 is not installed (upstream-tools --kernel; needs patchelf)".into()
        })
    }

    /// The Linux 7.2 VM, from `$FERROFS_VM_DIR` or `~/.cache/ferrofs-vm`,
    /// made there by `scripts/kernel-vm.sh` (run once per process when
    /// it is missing), with qemu on PATH.
    pub fn vm() -> Result<Kernel, String> {
        if !crate::is_root() {
            return Err("not root".into());
        }
        static SETUP: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
        let dir = SETUP.get_or_init(vm_dir).clone()?;
        if Command::new("qemu-system-x86_64")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| !s.success())
            .unwrap_or(true)
        {
            return Err(
                "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)".into(),
            );
        }
        Ok(Kernel::Vm(dir))
    }

    /// Runs `script` with `sh` as root under this kernel, in the current
    /// directory, with `rw` writable (everything else of this machine
    /// read-only under the 7.2 kernels; /tmp, /run and /mnt are fresh
    /// tmpfs there).
    pub fn run(&self, script: &str, rw: &[&Path]) -> io::Result<KernelOutput> {
        match self {
            Kernel::Host => {
                let out = Command::new("sh").arg("-c").arg(script).output()?;
                Ok(KernelOutput {
                    status: out.status.code().unwrap_or(-1),
                    stdout: out.stdout,
                    stderr: out.stderr,
                    log: String::new(),
                })
            }
            Kernel::UserMode(run) => {
                let mut cmd = Command::new(run);
                for d in rw {
                    cmd.arg("--rw").arg(d);
                }
                // kernel-run prints the log on failure; a marker line asks
                // for it on success too.
                let wrapped = format!("{script}\nst=$?\ndmesg >&2 2>/dev/null\nexit $st");
                let out = cmd.arg("--").arg("sh").arg("-c").arg(wrapped).output()?;
                let (stderr, log) = split_log(&out.stderr);
                Ok(KernelOutput {
                    status: out.status.code().unwrap_or(-1),
                    stdout: out.stdout,
                    stderr,
                    log,
                })
            }
            Kernel::Vm(dir) => {
                // A boot that never reaches the script (no status written)
                // is tried once more before its console is reported.
                let first = run_vm(dir, script, rw)?;
                if first.status >= 0 {
                    return Ok(first);
                }
                eprintln!(
                    "kernels: the VM did not run the script; booting once more. Its console: {}",
                    first
                        .log
                        .lines()
                        .rev()
                        .take(5)
                        .collect::<Vec<_>>()
                        .join(" | ")
                );
                run_vm(dir, script, rw)
            }
        }
    }
}

/// The VM's directory, set up by `scripts/kernel-vm.sh` when it is not
/// there yet.
fn vm_dir() -> Result<PathBuf, String> {
    let dir = std::env::var_os("FERROFS_VM_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/ferrofs-vm")))
        .ok_or("no FERROFS_VM_DIR and no HOME")?;
    let ready = |d: &Path| d.join("vmlinuz").is_file() && d.join("initramfs.cpio.gz").is_file();
    if ready(&dir) {
        return Ok(dir);
    }
    let script = crate::tools::workspace_root().join("scripts/kernel-vm.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if out.status.success() && ready(&dir) {
        Ok(dir)
    } else {
        Err(format!(
            "no Linux 7.2 VM: scripts/kernel-vm.sh failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Splits kernel-run's stderr into the script's own and the kernel log
/// the wrapper appended (lines starting `[   t.tttttt]`).
fn split_log(stderr: &[u8]) -> (Vec<u8>, String) {
    let text = String::from_utf8_lossy(stderr);
    let mut own = String::new();
    let mut log = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('[')
            && t.find(']')
                .is_some_and(|i| t[1..i].trim().parse::<f64>().is_ok())
        {
            log.push_str(line);
            log.push('\n');
        } else {
            own.push_str(line);
            own.push('\n');
        }
    }
    (own.into_bytes(), log)
}

/// Quotes `s` for `sh`.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn run_vm(dir: &Path, script: &str, rw: &[&Path]) -> io::Result<KernelOutput> {
    let ctl = crate::TempDir::new("ferrofs-vm-ctl")?;
    let ctl_path = ctl.path().canonicalize()?;
    let cwd = std::env::current_dir()?;
    let mut cmd_sh = String::from("# written by ferrofs_testkit::kernels\n");
    for (k, v) in std::env::vars() {
        if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !k.is_empty() {
            cmd_sh.push_str(&format!("export {k}={}\n", quote(&v)));
        }
    }
    cmd_sh.push_str(&format!(
        "cd {} || exit 125\n",
        quote(&cwd.to_string_lossy())
    ));
    cmd_sh.push_str(script);
    cmd_sh.push('\n');
    std::fs::write(ctl_path.join("cmd.sh"), cmd_sh)?;
    let mut rw_paths = Vec::new();
    for d in rw {
        rw_paths.push(d.canonicalize()?);
    }
    let mut append = format!(
        "console=ttyS0 quiet panic=-1 ferrofs.ctl={}",
        ctl_path.display()
    );
    if !rw_paths.is_empty() {
        let list: Vec<String> = rw_paths.iter().map(|p| p.display().to_string()).collect();
        append.push_str(&format!(" ferrofs.rw={}", list.join(",")));
    }
    let mut qemu = Command::new("qemu-system-x86_64");
    qemu.args(["-accel", "tcg", "-cpu", "max", "-m", "3072", "-smp", "2"])
        .args([
            "-display",
            "none",
            "-monitor",
            "none",
            "-no-reboot",
            "-nodefaults",
        ])
        .args(["-serial", "stdio"])
        .arg("-kernel")
        .arg(dir.join("vmlinuz"))
        .arg("-initrd")
        .arg(dir.join("initramfs.cpio.gz"))
        .arg("-append")
        .arg(&append)
        .arg("-virtfs")
        .arg("local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap")
        .arg("-virtfs")
        .arg(format!(
            "local,path={},mount_tag=ctl,security_model=none,multidevs=remap",
            ctl_path.display()
        ));
    for (i, p) in rw_paths.iter().enumerate() {
        qemu.arg("-virtfs").arg(format!(
            "local,path={},mount_tag=rw{},security_model=passthrough,multidevs=remap",
            p.display(),
            i + 1
        ));
    }
    let console = ctl_path.join("console");
    let mut child = qemu
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&console)?)
        .stderr(Stdio::null())
        .spawn()?;
    let start = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if start.elapsed() > VM_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let read = |n: &str| std::fs::read(ctl_path.join(n)).unwrap_or_default();
    let status = String::from_utf8_lossy(&read("status"))
        .trim()
        .parse()
        .unwrap_or(-1);
    let mut log = String::from_utf8_lossy(&read("dmesg")).into_owned();
    if log.is_empty() {
        // It did not get as far as the script's end: the console says why.
        log = String::from_utf8_lossy(&read("console")).into_owned();
    }
    Ok(KernelOutput {
        status,
        stdout: read("stdout"),
        stderr: read("stderr"),
        log,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_log_lines_are_told_from_the_scripts() {
        let (own, log) = split_log(b"mount: bad\n[    1.234567] erofs (device loop0): no\n[x] y\n");
        assert_eq!(own, b"mount: bad\n[x] y\n");
        assert_eq!(log, "[    1.234567] erofs (device loop0): no\n");
        assert_eq!(quote("a'b"), "'a'\\''b'");
    }
}
