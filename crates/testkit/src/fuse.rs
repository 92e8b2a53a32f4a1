//! `ferrofs mount -f` daemons for tests: start one on an image (a path or
//! a URL), wait for the mount, unmount and reap it (also on drop).

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether something is mounted exactly at `dir`.
pub fn mounted(dir: &Path) -> bool {
    let d = dir.canonicalize().unwrap().to_string_lossy().into_owned();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(d.as_str()))
}

/// A foreground `ferrofs mount -f` that is unmounted and reaped on drop.
pub struct FuseMount {
    /// The daemon.
    pub child: Child,
    /// The mountpoint.
    pub dir: PathBuf,
}

impl FuseMount {
    /// Runs `FERROFS mount -f EXTRA IMAGE DIR` (creating DIR) and waits up
    /// to 20 s for the mount to appear. `image` is a path or a URL.
    pub fn new(ferrofs: &Path, image: &OsStr, dir: &Path, extra: &[&str]) -> FuseMount {
        fs::create_dir_all(dir).unwrap();
        let child = Command::new(ferrofs)
            .arg("mount")
            .arg("-f")
            .args(extra)
            .arg(image)
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut m = FuseMount {
            child,
            dir: dir.to_path_buf(),
        };
        let start = Instant::now();
        while !mounted(dir) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{} not mounted",
                dir.display()
            );
            if let Some(st) = m.child.try_wait().unwrap() {
                panic!(
                    "the mount daemon exited ({st}) before mounting {}",
                    dir.display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        m
    }

    /// The daemon's peak resident set (VmHWM), KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        let s = fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// Unmounts (fusermount3 -u, else umount) and checks the daemon
    /// exits successfully within 20 s.
    pub fn unmount(mut self) {
        // fusermount3 (fuse3) when installed, else umount (we are root).
        let ok = match Command::new("fusermount3")
            .arg("-u")
            .arg(&self.dir)
            .status()
        {
            Ok(st) => st.success(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Command::new("umount")
                .arg(&self.dir)
                .status()
                .unwrap()
                .success(),
            Err(e) => panic!("fusermount3: {e}"),
        };
        assert!(ok, "unmounting {} failed", self.dir.display());
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                assert!(st.success(), "daemon exited with {st}");
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "daemon did not exit after unmount"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::mem::forget(self);
    }
}

impl Drop for FuseMount {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
