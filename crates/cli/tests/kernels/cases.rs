//! The matrix's cases: each an image (with its devices), the shell that
//! mounts it on /mnt/m, and the archive `ferrofs export --no-sparse`
//! writes of it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::verify::run_ok;
use ferrofs_testkit::{corpus, tools};

use crate::FERROFS;

/// One image to mount under every kernel.
pub struct Case {
    pub name: String,
    /// The codecs it uses (`superblock.algorithms` of `ferrofs dump`).
    pub codecs: Vec<String>,
    /// Shell that mounts it read-only on /mnt/m.
    pub mount: String,
    /// Shell run after the unmount (detaching loop devices).
    pub cleanup: String,
    /// The SHA-256 (hex) of `ferrofs export --no-sparse` of it.
    pub digest: String,
}

/// The pinned-image test's option sets; `BLOB` is the blob's path.
const PINNED: &[(&str, &[&str])] = &[
    ("plain", &[]),
    ("block-1k", &["-b", "1024"]),
    ("chunks-blobdev", &["--chunksize=8192", "--blobdev=BLOB"]),
    ("lz4", &["-zlz4"]),
    ("lz4hc", &["-zlz4hc,12", "-C65536"]),
    ("lzma", &["-zlzma,6", "-C131072"]),
    ("deflate", &["-zdeflate"]),
    ("zstd", &["-zzstd,10", "-C65536"]),
    ("ztailpacking", &["-zlz4hc", "-C65536", "-Eztailpacking"]),
    (
        "fragments-dedupe",
        &["-zlz4hc", "-C65536", "-Efragments,dedupe"],
    ),
    ("48bit", &["-zlz4hc", "-E48bit"]),
    ("metabox-zD", &["-zlzma", "-C65536", "-m4096", "--zD"]),
    ("offset", &["--offset=8192"]),
    ("tar", &["--tar=f"]),
    ("preset-dense", &["--preset", "dense"]),
    ("preset-fast", &["--preset", "fast"]),
    ("preset-balanced", &["--preset", "balanced"]),
];

/// More of the 2025 format, and the lz4-only sets the user-mode kernel
/// can check.
const MORE: &[(&str, &[&str])] = &[
    ("lz4-all-fragments", &["-zlz4hc", "-Eall-fragments"]),
    (
        "lz4-frag-dedupe-tail",
        &["-zlz4hc", "-C65536", "-Efragments,dedupe,ztailpacking"],
    ),
    (
        "lz4-48bit-zD-metabox",
        &["-zlz4hc", "-E48bit", "-m4096", "--zD"],
    ),
    ("dot-omitted", &["-zlz4", "-Edot-omitted"]),
    ("inode-digest", &["-zlz4hc", "--xattr-inode-digest"]),
    ("noinline", &["-Enoinline_data"]),
    (
        "kitchen-sink",
        &[
            "-E48bit",
            "-Edot-omitted",
            "-m4096:zstd",
            "--zD",
            "-zzstd",
            "-C65536",
            "-Efragments,dedupe,ztailpacking",
        ],
    ),
];

/// The sets built of the real tree too.
const REAL: &[&str] = &[
    "lz4hc",
    "lzma",
    "preset-dense",
    "lz4-frag-dedupe-tail",
    "48bit",
];

/// The sets mkfs.erofs 1.9.4 builds.
const UPSTREAM: &[(&str, &[&str])] = &[
    ("upstream-lz4hc-tail", &["-zlz4hc", "-Eztailpacking"]),
    (
        "upstream-lzma-frag-dedupe",
        &["-zlzma", "-C131072", "-Efragments,dedupe,ztailpacking"],
    ),
    ("upstream-48bit-zstd", &["-E48bit", "-zzstd", "-C65536"]),
    (
        "upstream-metabox-zD",
        &["-zlz4hc", "-m4096", "--zD", "-Efragments"],
    ),
];

/// A real tree on every Debian 12 machine: Python's standard library
/// (59 MB), else perl's modules or the documentation.
fn real_tree() -> Option<PathBuf> {
    ["/usr/lib/python3.11", "/usr/share/perl5", "/usr/share/doc"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_dir())
}

fn codecs(img: &Path, extra: &[String]) -> Vec<String> {
    let out = Command::new(FERROFS)
        .args(["dump", "--json"])
        .args(extra)
        .arg(img)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["superblock"]["algorithms"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn sha256_hex(b: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

fn export(img: &Path, extra: &[String]) -> Vec<u8> {
    let out = run_ok(
        Command::new(FERROFS)
            .args(["export", "--no-sparse"])
            .args(extra)
            .arg(img),
    );
    out.unwrap_or_else(|e| panic!("export {}: {e}", img.display()))
}

/// A case for `img`, mounted with its blob or offset where it has one.
fn case(name: String, img: &Path, blob: Option<&Path>, offset: Option<u64>) -> Case {
    let mut extra = Vec::new();
    let (mut mount, mut cleanup) = (String::new(), String::new());
    let i = img.display();
    match (blob, offset) {
        (Some(b), _) => {
            extra.push(format!("--device={}", b.display()));
            mount = format!(
                "B=$(losetup -f --show -r {b}) && mount -t erofs -o ro,loop,device=$B {i} /mnt/m",
                b = b.display()
            );
            cleanup = "[ -n \"$B\" ] && losetup -d $B; B=".into();
        }
        (None, Some(off)) => {
            extra.push(format!("--offset={off}"));
            mount = format!("mount -t erofs -o ro,loop,offset={off} {i} /mnt/m");
        }
        (None, None) => mount.push_str(&format!("mount -t erofs -o ro,loop {i} /mnt/m")),
    }
    Case {
        codecs: codecs(img, &extra),
        digest: sha256_hex(&export(img, &extra)),
        name,
        mount,
        cleanup,
    }
}

fn mkfs(args: &[String], img: &Path, src: &Path) {
    run_ok(
        Command::new(FERROFS)
            .args(["mkfs", "--quiet"])
            .args(args)
            .arg(img)
            .arg(src)
            .env_remove("SOURCE_DATE_EPOCH"),
    )
    .unwrap_or_else(|e| panic!("mkfs {args:?}: {e}"));
}

/// Builds every case's image into `work`.
pub fn build_all(work: &Path) -> Vec<Case> {
    let corner = work.join("corner");
    corpus::make_corner_tree(&corner).unwrap();
    let tar = work.join("corner.tar");
    run_ok(
        Command::new("tar")
            .args(["--sort=name", "--format=pax", "--numeric-owner", "--xattrs"])
            .args(["--xattrs-include=*", "-cf"])
            .arg(&tar)
            .arg("-C")
            .arg(&corner)
            .arg("."),
    )
    .unwrap();
    let mut trees: Vec<(&str, PathBuf)> = vec![("corner", corner)];
    if let Some(r) = real_tree() {
        trees.push(("real", r));
    } else {
        println!("no real tree: /usr/share/perl5 and /usr/share/doc are missing");
    }
    let mut cases = Vec::new();
    for (tree, src) in &trees {
        for (name, opts) in PINNED.iter().chain(MORE) {
            if *tree == "real" && !REAL.contains(name) {
                continue;
            }
            let img = work.join(format!("{tree}-{name}.img"));
            let blob = work.join(format!("{tree}-{name}.blob"));
            let args: Vec<String> = opts
                .iter()
                .map(|o| o.replace("BLOB", &blob.display().to_string()))
                .collect();
            let input = if *name == "tar" { &tar } else { src };
            mkfs(&args, &img, input);
            let offset = (*name == "offset").then_some(8192);
            let blob = (*name == "chunks-blobdev").then_some(blob.as_path());
            cases.push(case(format!("{tree} {name}"), &img, blob, offset));
        }
    }
    match tools::mkfs_next() {
        Some(m) => {
            for (tree, src) in &trees {
                for (name, opts) in UPSTREAM {
                    let img = work.join(format!("{tree}-{name}.img"));
                    tools::build_image(&m, opts, src, &img).unwrap();
                    cases.push(case(format!("{tree} {name}"), &img, None, None));
                }
            }
        }
        None => println!("no mkfs.erofs 1.9.x: its images are left out (upstream-tools --next)"),
    }
    let _ = fs::remove_file(&tar);
    cases
}
