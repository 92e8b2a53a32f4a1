//! Kernel loop mounts of EROFS images (the oracle the tests compare against),
//! overlayfs mounts of their trees, and loop devices for extra devices.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

/// A read-only loop mount of an EROFS image on a fresh temporary mountpoint; unmounted (and
/// the mountpoint removed) on drop.
#[derive(Debug)]
pub struct LoopMount {
    dir: PathBuf,
    mounted: bool,
}

impl LoopMount {
    /// Runs `mount -t erofs -o loop,ro[,EXTRA...] IMAGE DIR` on a new directory under
    /// [`std::env::temp_dir`].
    pub fn new(image: &Path, extra_opts: &[&str]) -> io::Result<LoopMount> {
        let mut opts = String::from("loop,ro");
        for o in extra_opts {
            opts.push(',');
            opts.push_str(o);
        }
        Self::mount("erofs", image, &opts)
    }

    /// A read-only overlayfs mount of the directories `lowers` (the
    /// first is the top layer), as `mount -t overlay -o lowerdir=A:B:...`.
    pub fn overlay(lowers: &[&Path]) -> io::Result<LoopMount> {
        let dirs: Vec<String> = lowers.iter().map(|l| l.display().to_string()).collect();
        let opts = format!("ro,lowerdir={}", dirs.join(":"));
        Self::mount("overlay", Path::new("overlay"), &opts)
    }

    /// A composefs image's overlay mount, as `mount.composefs` makes it
    /// without fs-verity: the mounted EROFS image `metadata` as the one
    /// layer over the data-only layer `objects` (kernel 6.5 and later).
    pub fn composefs(metadata: &Path, objects: &Path) -> io::Result<LoopMount> {
        let opts = format!(
            "ro,metacopy=on,redirect_dir=on,lowerdir={}::{}",
            metadata.display(),
            objects.display()
        );
        Self::mount("overlay", Path::new("composefs"), &opts)
    }

    fn mount(fstype: &str, image: &Path, opts: &str) -> io::Result<LoopMount> {
        let tmp = crate::TempDir::new("ferrofs-mnt")?;
        let mut keep = tmp;
        keep.keep(); // the mountpoint is removed by LoopMount's drop, after unmounting
        let dir = keep.path().to_path_buf();
        let out = Command::new("mount")
            .args(["-t", fstype, "-o", opts])
            .arg(image)
            .arg(&dir)
            .stdin(Stdio::null())
            .output();
        let fail = |msg: String| {
            let _ = fs::remove_dir(&dir);
            Err(io::Error::other(format!(
                "mount -t {fstype} -o {opts} {}: {msg}",
                image.display()
            )))
        };
        match out {
            Err(e) => fail(e.to_string()),
            Ok(o) if !o.status.success() => {
                let mut msg = String::from_utf8_lossy(&o.stderr).trim().to_string();
                if let Some(k) = last_kernel_erofs_message() {
                    msg.push_str(&format!(" (kernel: {k})"));
                }
                fail(msg)
            }
            Ok(_) => Ok(LoopMount { dir, mounted: true }),
        }
    }

    /// The mountpoint.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Unmounts now (also done by drop); reports the failure, if any.
    pub fn unmount(mut self) -> io::Result<()> {
        self.do_unmount()
    }

    fn do_unmount(&mut self) -> io::Result<()> {
        if !self.mounted {
            return Ok(());
        }
        let umount = |args: &[&str]| {
            Command::new("umount")
                .args(args)
                .arg(&self.dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        let mut ok = false;
        for attempt in 0..5 {
            if umount(&[]) {
                ok = true;
                break;
            }
            sleep(Duration::from_millis(100 << attempt));
        }
        if !ok {
            ok = umount(&["-l"]);
        }
        if !ok {
            return Err(io::Error::other(format!(
                "cannot unmount {}",
                self.dir.display()
            )));
        }
        self.mounted = false;
        fs::remove_dir(&self.dir)
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let _ = self.do_unmount();
    }
}

/// A read-only loop device over a file (for `-o device=` of images with
/// extra devices), detached on drop.
pub struct LoopDev(pub String);

impl LoopDev {
    /// Runs `losetup -f --show -r FILE`.
    pub fn new(file: &Path) -> Result<Self, String> {
        let out = crate::verify::run_ok(
            Command::new("losetup")
                .args(["-f", "--show", "-r"])
                .arg(file),
        )?;
        Ok(Self(String::from_utf8_lossy(&out).trim().to_string()))
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// The last `erofs` line of the kernel log, if readable (helps explain mount failures).
fn last_kernel_erofs_message() -> Option<String> {
    let out = Command::new("dmesg")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .rev()
        .find(|l| l.contains("erofs"))
        .map(|l| l.trim().to_string())
}

/// Whether loop-mounting EROFS images can work here: root, the erofs filesystem (built in or
/// loadable), loop devices and the `mount` tool. `Err` carries the reason to print as
/// `skipped: REASON`.
pub fn can_mount() -> Result<(), String> {
    if !crate::is_root() {
        return Err("not running as root (loop mounts need it)".into());
    }
    let has_erofs = || {
        fs::read_to_string("/proc/filesystems")
            .map(|s| s.lines().any(|l| l.trim_end().ends_with("erofs")))
            .unwrap_or(false)
    };
    if !has_erofs() {
        let _ = Command::new("modprobe")
            .arg("erofs")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !has_erofs() {
            return Err(
                "the kernel has no erofs filesystem (not in /proc/filesystems, modprobe failed)"
                    .into(),
            );
        }
    }
    if !Path::new("/dev/loop-control").exists() {
        let _ = Command::new("modprobe")
            .arg("loop")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !Path::new("/dev/loop-control").exists() {
            return Err("no loop device support (/dev/loop-control missing)".into());
        }
    }
    match Command::new("mount")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("cannot run mount: {e}")),
    }
}
