//! nginx serving a directory on a free 127.0.0.1 port, for tests of
//! images read by URL (a private configuration; Debian's `nginx-light`).

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The nginx binary, if installed.
pub fn nginx_bin() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// nginx serving `root` on a free 127.0.0.1 port; killed on drop. The
/// access log has one line per request: method, path, Range, status,
/// body bytes.
pub struct Nginx {
    child: Child,
    /// The port it listens on.
    pub port: u16,
    log: PathBuf,
}

impl Nginx {
    /// Starts nginx (`bin`) serving `root`, its files under `prefix`.
    pub fn start(bin: &Path, root: &Path, prefix: &Path) -> Nginx {
        fs::create_dir_all(prefix.join("tmp")).unwrap();
        let p = prefix.display();
        for attempt in 0.. {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let conf = format!(
                "daemon off;\nmaster_process off;\nworker_processes 1;\n{user}\
                 pid {p}/nginx.pid;\nerror_log {p}/error.log;\n\
                 events {{ worker_connections 64; }}\n\
                 http {{\n\
                   log_format ranges '$request_method $uri \"$http_range\" $status $body_bytes_sent';\n\
                   access_log {p}/access.log ranges;\n\
                   client_body_temp_path {p}/tmp/body; proxy_temp_path {p}/tmp/proxy;\n\
                   fastcgi_temp_path {p}/tmp/fcgi; uwsgi_temp_path {p}/tmp/uwsgi; scgi_temp_path {p}/tmp/scgi;\n\
                   default_type application/octet-stream;\n\
                   server {{ listen 127.0.0.1:{port}; root {root}; }}\n\
                 }}\n",
                user = if crate::is_root() { "user root;\n" } else { "" },
                root = root.display(),
            );
            fs::write(prefix.join("nginx.conf"), conf).unwrap();
            let mut child = Command::new(bin)
                .arg("-p")
                .arg(prefix)
                .arg("-c")
                .arg(prefix.join("nginx.conf"))
                .arg("-e")
                .arg(prefix.join("error.log"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap();
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                // Ours, not whoever else may hold the port now.
                if crate::process::listens_on(child.id(), port) {
                    return Nginx {
                        child,
                        port,
                        log: prefix.join("access.log"),
                    };
                }
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            // Someone took the port between our probe and nginx's bind.
            assert!(
                attempt < 3,
                "nginx did not start: {}",
                fs::read_to_string(prefix.join("error.log")).unwrap_or_default()
            );
        }
        unreachable!()
    }

    /// `http://127.0.0.1:PORT/NAME`.
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    /// The access log's lines so far.
    pub fn log(&self) -> Vec<String> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
