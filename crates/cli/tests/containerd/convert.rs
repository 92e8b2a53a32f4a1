//! containerd 2.4.2 runs what `ferrofs convert` makes (issue 59): the same
//! three-layer umoci image pushed to the CNCF registry with skopeo,
//! converted from the registry to the registry (raw and `+zstd`) and into
//! a layer content cache with dm-verity sidecars (which `veritysetup
//! verify` accepts); containerd pulls each with its EROFS snapshotter and
//! runs a container on it whose listing equals umoci's unpack, takes the
//! tar image's layers from the cache, and never runs mkfs.erofs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::containerd::{self, Containerd};
use ferrofs_testkit::process::sh;
use ferrofs_testkit::tools;

use super::{busybox, container_differences, list_host_tree, make_image, mkfs_calls, FERROFS};

/// Why the containerd 2.4 test of `ferrofs convert` cannot run here.
fn convert_skip_reason() -> Option<String> {
    if let Err(why) = ferrofs_testkit::can_mount() {
        return Some(why);
    }
    if containerd::containerd_next_bin_dir().is_none() {
        return Some("containerd 2.4 is not installed (upstream-tools --containerd-next)".into());
    }
    if ferrofs_testkit::registry::registry_bin_dir().is_none() {
        return Some("the CNCF registry is not installed (upstream-tools --registry)".into());
    }
    if busybox().is_none() {
        return Some("no static busybox (Debian package busybox-static)".into());
    }
    for tool in ["python3", "setfattr", "chroot", "skopeo"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map_or(true, |o| !o.status.success())
        {
            return Some(format!("{tool} is not installed"));
        }
    }
    None
}

/// `ferrofs convert` of the three-layer image, from a registry to the
/// registry (raw and zstd) and into a layer content cache; containerd 2.4
/// pulls each with the EROFS snapshotter and differ and runs a container
/// on it, which must see the tree `umoci unpack` makes, without ever
/// running mkfs.erofs (EROFS layers are copied, cache hits mounted).
fn check_converted(work: &Path) -> Vec<String> {
    use ferrofs_testkit::registry::{Access, CncfRegistry};
    let bin = containerd::containerd_next_bin_dir().expect("containerd 2.4");
    let mut failures = Vec::new();
    make_image(work, &bin);
    let expected = list_host_tree(&work.join("X/rootfs")).expect("listing the expected tree");
    let reg_dir = work.join("registry");
    fs::create_dir_all(&reg_dir).unwrap();
    let reg = CncfRegistry::start(
        &ferrofs_testkit::registry::registry_bin_dir().unwrap(),
        &reg_dir,
        Access::Open,
    );
    let base = format!("{}/ferrofs/ctd", reg.addr);
    sh(&format!(
        "skopeo copy --dest-tls-verify=false oci:'{}':v3 docker://{base}:v3",
        work.join("L").display()
    ))
    .expect("skopeo copy into the registry");
    let cache = work.join("cache");
    for (tag, extra) in [
        (
            "raw",
            vec!["--layer-cache", cache.to_str().unwrap(), "--verity"],
        ),
        ("zstd", vec!["--erofs", "zstd"]),
    ] {
        let out = Command::new(FERROFS)
            .args([
                "convert",
                &format!("docker://{base}:v3"),
                &format!("docker://{base}:{tag}"),
            ])
            .args(["-zlz4hc", "--json"])
            .args(&extra)
            .output()
            .unwrap();
        if !out.status.success() {
            failures.push(format!(
                "convert {tag}: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
            return failures;
        }
    }
    // Three layers in the cache, each with its sidecar, which veritysetup
    // accepts when it is there.
    let cached: Vec<PathBuf> = walk_files(&cache)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "erofs"))
        .collect();
    if cached.len() != 3 {
        failures.push(format!("layer cache: expected 3 blobs, found {cached:?}"));
    }
    let veritysetup = tools::next_tool("veritysetup");
    for blob in &cached {
        let side = PathBuf::from(format!("{}.dmverity", blob.display()));
        let meta: serde_json::Value = match fs::read(&side).map(|d| serde_json::from_slice(&d)) {
            Ok(Ok(v)) => v,
            _ => {
                failures.push(format!(
                    "layer cache: {} has no sidecar JSON",
                    blob.display()
                ));
                continue;
            }
        };
        let (Some(root), Some(off)) = (meta["roothash"].as_str(), meta["hashoffset"].as_u64())
        else {
            failures.push(format!("layer cache: bad sidecar {meta}"));
            continue;
        };
        if off % 4096 != 0 {
            failures.push(format!(
                "layer cache: hash offset {off} is not 4096-aligned"
            ));
        }
        if let Some(v) = &veritysetup {
            let b = blob.to_string_lossy();
            if let Err(e) = sh(&format!(
                "'{}' verify --hash-offset={off} '{b}' '{b}' {root}",
                v.display()
            )) {
                failures.push(format!("layer cache: veritysetup verify: {e}"));
            }
        }
    }

    // containerd 2.4: mkfs.erofs on its PATH logs and fails, so any
    // conversion on its side shows.
    let mkfs_dir = work.join("nomkfs");
    fs::create_dir_all(&mkfs_dir).unwrap();
    let log = work.join("mkfs.log");
    // Its own probe (`mkfs.erofs --help`, which the differ needs to load)
    // is answered by ferrofs's drop-in.
    let real = work.join("real-mkfs");
    fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(FERROFS, real.join("mkfs.erofs")).unwrap();
    fs::write(
        mkfs_dir.join("mkfs.erofs"),
        format!(
            "#!/bin/sh\n[ \"$1\" = --help ] && exec '{}' --help\nprintf '%s\\n' \"$*\" >> '{}'\nexit 1\n",
            real.join("mkfs.erofs").display(),
            log.display()
        ),
    )
    .unwrap();
    sh(&format!("chmod 755 '{}'/mkfs.erofs", mkfs_dir.display())).unwrap();
    let extra = format!(
        "[plugins.\"io.containerd.snapshotter.v1.erofs\"]\n  layer_content_caches = [\"{}\"]\n  dmverity_mode = \"off\"\n",
        cache.display()
    );
    let mut ctd = match Containerd::start_with(&work.join("ctd"), &bin, &mkfs_dir, &extra) {
        Ok(c) => c,
        Err(e) => {
            failures.push(e);
            return failures;
        }
    };
    let runc_root = ctd.runc_root().to_string_lossy().into_owned();
    for (tag, what) in [
        ("raw", "EROFS layers"),
        ("zstd", "zstd EROFS layers"),
        ("v3", "tar layers served from the layer cache"),
    ] {
        let image = format!("{base}:{tag}");
        if let Err(e) = ctd.ctr(&[
            "images",
            "pull",
            "--plain-http",
            "--snapshotter",
            "erofs",
            &image,
        ]) {
            failures.push(format!("pull {what}: {e}\ncontainerd: {}", ctd.log_tail()));
            continue;
        }
        let id = format!("list-{tag}");
        failures.extend(container_differences(
            &ctd,
            (&runc_root, &["--snapshotter", "erofs", &image], &id),
            what,
            &expected,
        ));
        println!("containerd 2.4 ran a container of {what}");
    }
    // Every snapshot of the tar image came from the cache.
    let snaps = ctd
        .ctr(&["snapshots", "--snapshotter", "erofs", "ls"])
        .unwrap_or_default();
    let mut from_cache = 0;
    for key in snaps
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
    {
        let info = ctd
            .ctr(&["snapshots", "--snapshotter", "erofs", "info", key])
            .unwrap_or_default();
        if info.contains("\"cache\"") && info.contains(cache.to_str().unwrap()) {
            from_cache += 1;
        }
    }
    if from_cache != 3 {
        failures.push(format!(
            "layer cache: {from_cache} snapshots name a cache blob, expected 3:\n{snaps}"
        ));
    }
    let calls = mkfs_calls(&log);
    if !calls.is_empty() {
        failures.push(format!("containerd ran mkfs.erofs: {calls:#?}"));
    }
    ctd.stop();
    failures
}

/// Every file under `dir`.
fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn converted_images_run_in_containerd_2_4() {
    if let Some(why) = convert_skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let work = ferrofs_testkit::work_dir!("containerd_convert");
    let failures = check_converted(&work);
    containerd::unmount_under(&work);
    ferrofs_testkit::tmp::finish(&work, &failures);
}
