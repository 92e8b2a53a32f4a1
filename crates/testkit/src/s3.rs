//! SeaweedFS (`weed server -s3`) on 127.0.0.1, for tests of images in S3:
//! a temporary data directory, free ports, an identities file with one
//! read-write and one read-only identity (anonymous requests get 403), and
//! the process group stopped on drop.
//!
//! `weed` is found from `UPSTREAM_S3_BIN`, from what
//! `<workspace>/../shared/tools/upstream-tools --s3` prints (it builds it
//! once per machine), or at `~/.cache/upstream-s3/bin`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ferrofs_remote::s3::push::{PushOptions, Upload, Uploader};
use ferrofs_remote::s3::S3Options;

/// The directory holding `weed`, if it can be found (see the module docs).
pub fn weed_bin_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        crate::tools::find_tool_dir(
            "UPSTREAM_S3_BIN",
            &["--s3"],
            ".cache/upstream-s3/bin",
            &["weed"],
        )
    })
    .clone()
}

/// An identity of the server: access key and secret.
#[derive(Clone, Copy, Debug)]
pub struct Identity {
    pub access_key: &'static str,
    pub secret: &'static str,
}

/// May read, list and write (and create buckets).
pub const READ_WRITE: Identity = Identity {
    access_key: "FERROFSRWKEY0000",
    secret: "ferrofs-rw-secret-0123456789abcdef",
};
/// May read and list only.
pub const READ_ONLY: Identity = Identity {
    access_key: "FERROFSROKEY0000",
    secret: "ferrofs-ro-secret-0123456789abcdef",
};

/// A running `weed server -s3`; stopped (its process group) on drop.
pub struct Weed {
    child: Child,
    /// The S3 gateway's port.
    pub port: u16,
    log: PathBuf,
}

/// `n` ports free now (all bound at once, so distinct).
fn free_ports(n: usize) -> Vec<u16> {
    let ls: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    ls.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

impl Weed {
    /// Starts `weed` from `bin_dir` with its data and log under `dir`,
    /// waits until its S3 gateway answers and creates `bucket` with the
    /// read-write identity.
    pub fn start(bin_dir: &Path, dir: &Path, bucket: &str) -> Weed {
        let ids = dir.join("identities.json");
        let ident = |name: &str, i: Identity, actions: &str| {
            format!(
                r#"{{"name":"{name}","credentials":[{{"accessKey":"{}","secretKey":"{}"}}],"actions":[{actions}]}}"#,
                i.access_key, i.secret
            )
        };
        std::fs::write(
            &ids,
            format!(
                "{{\"identities\":[{},{}]}}\n",
                ident(
                    "rw",
                    READ_WRITE,
                    r#""Admin","Read","List","Tagging","Write""#
                ),
                ident("ro", READ_ONLY, r#""Read","List""#)
            ),
        )
        .unwrap();
        let data = dir.join("weed-data");
        std::fs::create_dir_all(&data).unwrap();
        let log = dir.join("weed.log");
        let mut last = String::new();
        for _attempt in 0..3 {
            let p = free_ports(8);
            let mut cmd = Command::new(bin_dir.join("weed"));
            cmd.arg("server")
                .arg("-ip=127.0.0.1")
                .arg(format!("-dir={}", data.display()))
                .arg(format!("-master.port={}", p[0]))
                .arg(format!("-master.port.grpc={}", p[1]))
                .arg(format!("-volume.port={}", p[2]))
                .arg(format!("-volume.port.grpc={}", p[3]))
                .arg(format!("-filer.port={}", p[4]))
                .arg(format!("-filer.port.grpc={}", p[5]))
                .arg("-s3")
                .arg(format!("-s3.port={}", p[6]))
                .arg(format!("-s3.port.grpc={}", p[7]))
                .arg("-s3.port.iceberg=0")
                .arg("-s3.port.lance=0")
                .arg(format!("-s3.config={}", ids.display()))
                // Virtual-hosted requests: BUCKET.localhost.
                .arg("-s3.domainName=localhost")
                .arg("-master.volumeSizeLimitMB=1024");
            let child = crate::process::spawn_logged(&mut cmd, &log);
            let mut weed = Weed {
                child,
                port: p[6],
                log: log.clone(),
            };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(90) {
                if weed.child.try_wait().unwrap().is_some() {
                    break;
                }
                // Ours, not another test's server that took the port.
                if crate::process::listens_on(weed.child.id(), weed.port) {
                    match weed
                        .uploader(&format!("s3://{bucket}/x"), READ_WRITE)
                        .create_bucket()
                    {
                        Ok(()) => return weed,
                        Err(e) => last = e.to_string(),
                    }
                }
                std::thread::sleep(Duration::from_millis(250));
            }
            last = format!("{last}\n{}", weed.log_text());
            drop(weed);
        }
        panic!("weed did not start: {last}");
    }

    /// The server's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `http://localhost:PORT`: the endpoint of virtual-hosted requests,
    /// whose host is `BUCKET.localhost` (see [`HostsEntry`]).
    pub fn named_endpoint(&self) -> String {
        format!("http://localhost:{}", self.port)
    }

    /// Sets `cmd`'s environment to reach this server as `who` (and
    /// nothing else of the caller's AWS settings).
    pub fn env(&self, cmd: &mut Command, who: Identity) {
        for v in [
            "AWS_PROFILE",
            "AWS_SESSION_TOKEN",
            "AWS_REGION",
            "AWS_DEFAULT_REGION",
            "AWS_ENDPOINT_URL_S3",
            "AWS_SHARED_CREDENTIALS_FILE",
        ] {
            cmd.env_remove(v);
        }
        cmd.env("AWS_ENDPOINT_URL", self.endpoint())
            .env("AWS_ACCESS_KEY_ID", who.access_key)
            .env("AWS_SECRET_ACCESS_KEY", who.secret);
    }

    /// Signed bucket and object operations on `url` as `who`.
    pub fn uploader(&self, url: &str, who: Identity) -> Uploader {
        let env = |n: &str| match n {
            "AWS_ACCESS_KEY_ID" => Some(who.access_key.to_owned()),
            "AWS_SECRET_ACCESS_KEY" => Some(who.secret.to_owned()),
            _ => None,
        };
        let t = S3Options {
            endpoint: Some(self.endpoint()),
            ..S3Options::default()
        }
        .resolve_with(url, &env)
        .unwrap();
        Uploader::new(t, PushOptions::default())
    }

    /// The unfinished multipart uploads of `bucket`.
    pub fn uploads(&self, bucket: &str) -> Vec<Upload> {
        self.uploader(&format!("s3://{bucket}/x"), READ_WRITE)
            .list_uploads()
            .unwrap()
    }

    /// Whether `url` (`s3://BUCKET/KEY`) exists.
    pub fn exists(&self, url: &str) -> bool {
        self.uploader(url, READ_WRITE).exists().unwrap()
    }
}

impl Drop for Weed {
    /// Kills the server outright: its data directory is thrown away, and
    /// SIGTERM costs 15 s or more (its volume server waits before it stops).
    fn drop(&mut self) {
        let pgid = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &pgid]).status();
        let _ = self.child.wait();
    }
}

/// A name made to resolve to 127.0.0.1 for a test (virtual-hosted S3
/// requests go to `BUCKET.localhost`, which glibc does not resolve by
/// itself): a line added to /etc/hosts when the name does not resolve
/// yet, removed again on drop. Needs root.
pub struct HostsEntry {
    line: Option<String>,
}

impl HostsEntry {
    /// Makes `name` resolve to 127.0.0.1; `None` when it cannot.
    pub fn add(name: &str) -> Option<HostsEntry> {
        use std::net::ToSocketAddrs;
        if (name, 80)
            .to_socket_addrs()
            .is_ok_and(|mut a| a.next().is_some())
        {
            return Some(HostsEntry { line: None });
        }
        let line = format!("127.0.0.1 {name} # ferrofs test {}", std::process::id());
        let mut hosts = std::fs::read_to_string("/etc/hosts").ok()?;
        if !hosts.ends_with('\n') && !hosts.is_empty() {
            hosts.push('\n');
        }
        hosts.push_str(&line);
        hosts.push('\n');
        std::fs::write("/etc/hosts", hosts).ok()?;
        Some(HostsEntry { line: Some(line) })
    }
}

impl Drop for HostsEntry {
    fn drop(&mut self) {
        let Some(line) = &self.line else { return };
        if let Ok(hosts) = std::fs::read_to_string("/etc/hosts") {
            let kept: String = hosts
                .lines()
                .filter(|l| l != line)
                .map(|l| format!("{l}\n"))
                .collect();
            let _ = std::fs::write("/etc/hosts", kept);
        }
    }
}
