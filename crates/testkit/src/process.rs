//! Running a command under test with a time limit, capturing its output.

use std::io::{self, Read};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// What a finished (or killed) command produced.
#[derive(Debug)]
pub struct Outcome {
    /// Exit status; `None` when the command was killed for exceeding its time limit.
    pub status: Option<ExitStatus>,
    /// Everything written to stdout.
    pub stdout: Vec<u8>,
    /// Everything written to stderr.
    pub stderr: Vec<u8>,
    /// Wall time until exit (or until killed).
    pub elapsed: Duration,
}

impl Outcome {
    /// Exited with status 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// `exit status: 1`, `killed after 60s (time limit)`, ... for messages.
    pub fn describe_status(&self) -> String {
        match self.status {
            Some(s) => s.to_string(),
            None => format!("killed after {:.0?} (time limit)", self.elapsed),
        }
    }

    /// The last `max` bytes of stderr, lossily decoded and trimmed (for messages).
    pub fn stderr_tail(&self, max: usize) -> String {
        let start = self.stderr.len().saturating_sub(max);
        String::from_utf8_lossy(&self.stderr[start..])
            .trim()
            .to_string()
    }
}

/// Runs `cmd` with stdin from `/dev/null`, capturing stdout and stderr; kills it (SIGKILL)
/// when it runs longer than `limit`. Fails only when the command cannot be started.
pub fn run_with_timeout(cmd: &mut Command, limit: Duration) -> io::Result<Outcome> {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let out_reader = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_reader = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let r = child.wait();
        let _ = tx.send(());
        r
    });
    let status = match rx.recv_timeout(limit) {
        Ok(()) => Some(waiter.join().expect("waiter thread")?),
        Err(_) => {
            // SAFETY: kill has no memory-safety preconditions. pid is our child; should it exit
            // at this very moment its pid is reaped but not yet reused, a race accepted here.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
            let _ = waiter.join();
            None
        }
    };
    let elapsed = start.elapsed();
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    Ok(Outcome {
        status,
        stdout,
        stderr,
        elapsed,
    })
}

/// Sends signal `sig` (`"TERM"`, `"INT"`, `"HUP"` or `"KILL"`) to process `pid`; returns once
/// the signal is pending on it.
pub fn send_signal(pid: u32, sig: &str) -> io::Result<()> {
    let n = match sig {
        "TERM" => libc::SIGTERM,
        "INT" => libc::SIGINT,
        "HUP" => libc::SIGHUP,
        "KILL" => libc::SIGKILL,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown signal {sig}"),
            ))
        }
    };
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(pid as libc::pid_t, n) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Spawns a server `cmd` in a process group of its own (so that it and
/// its children are stopped together), stdout and stderr both into `log`.
pub fn spawn_logged(cmd: &mut Command, log: &std::path::Path) -> std::process::Child {
    let out = std::fs::File::create(log).unwrap();
    let err = out.try_clone().unwrap();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err));
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    cmd.spawn().unwrap()
}

/// Whether process `pid` itself holds a TCP socket listening on `port`
/// (from `/proc/net/tcp*` and the process's descriptors). A connect that
/// succeeds proves only that *someone* listens there: a server whose port
/// was taken between our probe and its bind exits, and the port answers
/// for whoever took it.
pub fn listens_on(pid: u32, port: u16) -> bool {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let lport = local
                .rsplit(':')
                .next()
                .and_then(|h| u16::from_str_radix(h, 16).ok());
            if *state == "0A" && lport == Some(port) {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|l| inodes.iter().any(|i| l.as_os_str() == i.as_str()))
    })
}

/// Runs `script` with `bash -e -o pipefail -c`; its stdout, or an error
/// naming the script, its exit status and its stderr.
pub fn sh(script: &str) -> Result<String, String> {
    let out = Command::new("bash")
        .args(["-e", "-o", "pipefail", "-c", script])
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{script}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listens_on_names_the_process_holding_the_port() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(listens_on(std::process::id(), port));
        drop(l);
        assert!(!listens_on(std::process::id(), port));
        // Someone else's listener is not ours.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(!listens_on(1, port));
    }

    #[test]
    fn captures_and_times_out() {
        let o = run_with_timeout(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(o.stdout, b"out\n");
        assert_eq!(o.stderr, b"err\n");
        assert_eq!(o.status.unwrap().code(), Some(3));
        let o =
            run_with_timeout(Command::new("sleep").arg("10"), Duration::from_millis(200)).unwrap();
        assert!(o.status.is_none());
        assert!(o.elapsed < Duration::from_secs(5));
    }
}
