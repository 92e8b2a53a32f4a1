//! `docker://` references on the command line: the options that reach a
//! registry (platform, insecure hosts, credentials file), and an image
//! pulled into a temporary OCI layout with a progress bar per layer, which
//! the OCI-layout code then reads as it reads `oci:` sources.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use ferrofs_remote::registry::pull::{pull_layout, Pulled};
use ferrofs_remote::registry::{Platform, Reference, Registry, RegistryOptions};
use ferrofs_remote::HttpOptions;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How registries are reached.
#[derive(clap::Args, Clone, Default)]
pub struct RegistryArgs {
    /// For docker:// images: the platform chosen from an image index,
    /// OS/ARCH[/VARIANT] (default: this machine's, e.g. linux/amd64).
    #[arg(long, value_name = "OS/ARCH")]
    pub platform: Option<String>,
    /// Reach this registry (HOST[:PORT], as references name it) over plain
    /// HTTP; localhost and 127.0.0.1 always are. Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure: Vec<String>,
    /// Read registry credentials from FILE only (docker's config.json or
    /// containers' auth.json format); default: $REGISTRY_AUTH_FILE,
    /// containers' auth.json, then ~/.docker/config.json.
    #[arg(long, value_name = "FILE")]
    pub authfile: Option<PathBuf>,
}

impl RegistryArgs {
    /// The library's options.
    pub fn options(&self) -> RegistryOptions {
        RegistryOptions {
            http: HttpOptions::default(),
            insecure: self.insecure.clone(),
            auth_file: self.authfile.clone(),
        }
    }

    /// The platform asked for, or this machine's.
    pub fn platform(&self) -> Result<Platform> {
        match &self.platform {
            Some(p) => Platform::parse(p).map_err(anyhow::Error::msg),
            None => Ok(Platform::host()),
        }
    }
}

/// Whether a source argument is a registry reference.
pub fn is_docker(s: &str) -> bool {
    s.starts_with("docker://")
}

/// A directory removed (with everything in it) when dropped.
pub struct Scratch(pub PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A scratch directory beside `near` (a file about to be written, so
/// that large downloads land on its file system).
pub fn scratch_beside(near: &Path, what: &str) -> Result<Scratch> {
    let parent = match near.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let dir = parent.join(format!(".ferrofs-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating the scratch directory {}", dir.display()))?;
    Ok(Scratch(dir))
}

/// Pulls `reference` into an OCI layout at `dir`, showing a bar per
/// layer on a terminal. Returns the `oci:DIR:REF` spelling of it.
pub fn pull_into(reference: &str, args: &RegistryArgs, dir: &Path) -> Result<(String, Pulled)> {
    let r = Reference::parse(reference)?;
    let reg = Registry::connect(&r, &args.options())?;
    let platform = args.platform()?;
    let multi = MultiProgress::with_draw_target(if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let bars: Mutex<HashMap<String, ProgressBar>> = Mutex::new(HashMap::new());
    let style = ProgressStyle::with_template(
        "{prefix:.bold} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    let progress = |digest: &str, got: u64, total: u64| {
        let Ok(mut b) = bars.lock() else { return };
        let bar = b.entry(digest.to_owned()).or_insert_with(|| {
            let pb = multi.add(ProgressBar::new(total));
            pb.set_style(style.clone());
            let short = digest.strip_prefix("sha256:").unwrap_or(digest);
            pb.set_prefix(short.get(..12).unwrap_or(short).to_owned());
            pb
        });
        bar.set_position(got);
        if got >= total {
            bar.finish();
        }
    };
    let pulled = pull_layout(&reg, &r, &platform, dir, 4, &progress)
        .with_context(|| format!("pulling {r}"))?;
    multi.clear().ok();
    Ok((format!("oci:{}:{}", dir.display(), pulled.ref_name), pulled))
}
