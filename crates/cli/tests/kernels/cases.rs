//! The matrix's cases: each an image (with its devices), or several
//! mounts stacked, the shell that mounts it on /mnt/m, and the digest of
//! the archive GNU tar must write of it: `ferrofs export --no-sparse` of
//! the image, or, for stacks of mounts (overlayfs, composefs), GNU tar of
//! the same stack under this machine's kernel.

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
    /// Several mounts stacked (or an image with devices), not one image.
    pub stack: bool,
}

/// The pinned-image test's option sets (`BLOB` is the blob's path) and
/// the two other presets.
fn pinned() -> Vec<(&'static str, &'static [&'static str])> {
    let mut v = tools::PINNED_OPTION_SETS.to_vec();
    v.push(("preset-fast", &["--preset", "fast"]));
    v.push(("preset-balanced", &["--preset", "balanced"]));
    v
}

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
    // Sparse pclusters: LI_HOLE heads (Linux 7.2 reads holes, older
    // kernels the pcluster of zeros) and empty extent records.
    ("lz4-sparse", &["-zlz4hc", "-C65536", "-Esparse"]),
    (
        "lz4-sparse-48bit-frag",
        &["-zlz4", "-E48bit", "-Esparse,fragments,dedupe"],
    ),
    (
        "lzma-sparse-tail",
        &["-zlzma", "-C131072", "-Esparse,ztailpacking"],
    ),
    (
        "deflate-sparse-legacy",
        &["-zdeflate", "-Esparse,legacy-compress"],
    ),
    (
        "zstd-sparse-48bit",
        &["-zzstd", "-C65536", "-E48bit", "-Esparse"],
    ),
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
        stack: blob.is_some(),
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
    // The real tree's images take most of the VM's time: the whole matrix
    // runs them (scripts/kernel-matrix.sh), the test suite does not.
    let full = std::env::var_os("FERROFS_KERNEL_MATRIX").is_some_and(|v| v == "full");
    match real_tree() {
        Some(r) if full => trees.push(("real", r)),
        Some(_) => println!(
            "the real tree's images are left out (FERROFS_KERNEL_MATRIX=full, or \
             scripts/kernel-matrix.sh, adds them)"
        ),
        None => println!(
            "no real tree: /usr/lib/python3.11, /usr/share/perl5 and /usr/share/doc are missing"
        ),
    }
    let mut cases = Vec::new();
    for (tree, src) in &trees {
        for &(name, opts) in pinned().iter().chain(MORE) {
            if *tree == "real" && !REAL.contains(&name) {
                continue;
            }
            let img = work.join(format!("{tree}-{name}.img"));
            let blob = work.join(format!("{tree}-{name}.blob"));
            let args: Vec<String> = opts
                .iter()
                .map(|o| o.replace("BLOB", &blob.display().to_string()))
                .collect();
            let input = if name == "tar" { &tar } else { src };
            mkfs(&args, &img, input);
            let offset = (name == "offset").then_some(8192);
            let blob = (name == "chunks-blobdev").then_some(blob.as_path());
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
    cases.extend(composite(work, &trees[0].1, &tar));
    let _ = fs::remove_file(&tar);
    cases
}

/// Three layer trees for overlayfs and rebuild mode: a base, a layer with
/// whiteouts (0:0 character devices), an opaque directory and changed
/// files, and a third over both.
const LAYERS: &str = r#"
mkdir -p l1/etc l1/usr/bin l1/opaque/sub l1/gone/deep
echo hello > l1/etc/hosts
for i in $(seq 3000); do echo "line $i"; done > l1/usr/bin/tool
ln l1/usr/bin/tool l1/usr/bin/tool-link
ln -s ../usr/bin/tool l1/etc/tool-sym
echo old > l1/opaque/a; echo old > l1/opaque/sub/b
echo x > l1/gone/deep/f; echo kept > l1/keep
head -c 300000 /dev/urandom > l1/big
truncate -s 3M l1/sparse; echo middle | dd of=l1/sparse bs=1 seek=1500000 conv=notrunc status=none
setfattr -n user.note -v base l1/etc/hosts
mkdir -p l2/opaque l2/etc l2/newdir
mknod l2/gone c 0 0
setfattr -n trusted.overlay.opaque -v y l2/opaque
echo new > l2/opaque/c
echo changed > l2/etc/hosts; chmod 600 l2/etc/hosts
head -c 100000 /dev/urandom > l2/newdir/x
mkdir -p l3/usr/bin
echo rewritten > l3/keep; chmod 640 l3/keep
for i in $(seq 5000); do echo "new $i"; done > l3/usr/bin/new-tool
for l in l1 l2 l3; do find $l -exec touch -h -d @1700000000 {} +; done
"#;

/// The digest of GNU tar of what `mount` (then `cleanup`) shows under
/// this machine's kernel: the oracle of the cases made of several mounts.
fn host_digest(mount: &str, cleanup: &str) -> String {
    let script = format!(
        "mkdir -p /mnt/m && ( {mount} ) >/dev/null && {{ {TAR} -C /mnt/m -cf - . 2>/dev/null | \
         sha256sum | cut -c1-64; umount /mnt/m; }}; {cleanup}",
        TAR = crate::TAR
    );
    let out = Command::new("sh").arg("-c").arg(script).output().unwrap();
    let d = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(d.len(), 64, "host mount failed: {mount}");
    d
}

/// Overlayfs over three layer images, a rebuild-mode image with the
/// layers as its devices, an image grown by `--incremental`, a tar index
/// with its archive appended, and a composefs image through overlayfs.
fn composite(work: &Path, corner: &Path, tar: &Path) -> Vec<Case> {
    run_ok(
        Command::new("bash")
            .args(["-e", "-c", LAYERS])
            .current_dir(work),
    )
    .unwrap();
    let p = |n: &str| work.join(n);
    let mut layers = Vec::new();
    for (l, opts) in [
        ("l1", vec![]),
        ("l2", vec!["-zlz4hc"]),
        ("l3", vec!["-zlz4"]),
    ] {
        let img = p(&format!("{l}.img"));
        let args: Vec<String> = opts.iter().map(|s| s.to_string()).collect();
        mkfs(&args, &img, &p(l));
        layers.push(img);
    }
    let codecs_of = |imgs: &[PathBuf]| {
        let mut c: Vec<String> = imgs.iter().flat_map(|i| codecs(i, &[])).collect();
        c.sort();
        c.dedup();
        c
    };
    let mut cases = Vec::new();
    // overlayfs over the three layers
    let mut mount = String::new();
    for (k, l) in layers.iter().enumerate() {
        mount.push_str(&format!(
            "mkdir -p /mnt/l{k} && mount -t erofs -o ro,loop {} /mnt/l{k} && ",
            l.display()
        ));
    }
    mount.push_str("mount -t overlay overlay -o ro,lowerdir=/mnt/l2:/mnt/l1:/mnt/l0 /mnt/m");
    let cleanup = "umount /mnt/l0 /mnt/l1 /mnt/l2 2>/dev/null".to_string();
    cases.push(Case {
        name: "overlayfs of 3 layers".into(),
        codecs: codecs_of(&layers),
        digest: host_digest(&mount, &cleanup),
        stack: true,
        mount,
        cleanup,
    });
    // rebuild mode: the layers are the image's devices
    let merged = p("merged.img");
    let paths: Vec<&Path> = layers.iter().map(PathBuf::as_path).collect();
    run_ok(
        Command::new(FERROFS)
            .args(["mkfs", "--quiet"])
            .arg(&merged)
            .args(&paths),
    )
    .unwrap();
    let devs: Vec<String> = layers
        .iter()
        .enumerate()
        .map(|(k, l)| format!("D{k}=$(losetup -f --show -r {}) && ", l.display()))
        .collect();
    let mount = format!(
        "{}mount -t erofs -o ro,loop,device=$D0,device=$D1,device=$D2 {} /mnt/m",
        devs.concat(),
        merged.display()
    );
    let cleanup = "for d in $D0 $D1 $D2; do losetup -d $d; done; D0= D1= D2=".to_string();
    let extra: Vec<String> = layers
        .iter()
        .map(|l| format!("--device={}", l.display()))
        .collect();
    cases.push(Case {
        name: "rebuild mode, layers as devices".into(),
        codecs: codecs_of(&layers),
        digest: sha256_hex(&export(&merged, &extra)),
        stack: true,
        mount,
        cleanup,
    });
    // --incremental: l1 grown by l2's and l3's files, one run each
    let inc = p("incremental.img");
    let src = p("inc-src");
    run_ok(Command::new("cp").arg("-a").arg(p("l1")).arg(&src)).unwrap();
    mkfs(&["-zlz4hc".to_string()], &inc, &src);
    for l in ["l2/newdir", "l3/usr/bin/new-tool"] {
        let to = src.join(
            Path::new(l)
                .strip_prefix(l.split('/').next().unwrap())
                .unwrap(),
        );
        run_ok(Command::new("cp").arg("-a").arg(p(l)).arg(&to)).unwrap();
        fs::remove_file(src.join("keep")).ok();
        mkfs(
            &["-zlz4hc".to_string(), "--incremental".to_string()],
            &inc,
            &src,
        );
    }
    cases.push(case("incremental, two runs".into(), &inc, None, None));
    // a tar index with its archive appended
    let idx = p("index.img");
    run_ok(
        Command::new(FERROFS)
            .args(["mkfs", "--quiet", "--tar=i", "--aufs"])
            .arg(&idx)
            .arg(tar),
    )
    .unwrap();
    let layer = p("index-and-tar.img");
    let mut bytes = fs::read(&idx).unwrap();
    bytes.extend(fs::read(tar).unwrap());
    fs::write(&layer, bytes).unwrap();
    cases.push(case("tar index + archive".into(), &layer, None, None));
    // composefs: metadata image over its object store
    let cfs = p("corner.cfs");
    let store = p("store");
    run_ok(
        Command::new(FERROFS)
            .arg("mkcomposefs")
            .arg(format!("--digest-store={}", store.display()))
            .arg(corner)
            .arg(&cfs),
    )
    .unwrap();
    let mount = format!(
        "mkdir -p /mnt/meta && mount -t erofs -o ro,loop {} /mnt/meta && mount -t overlay overlay \
         -o ro,metacopy=on,redirect_dir=on,lowerdir=/mnt/meta::{} /mnt/m",
        cfs.display(),
        store.display()
    );
    let cleanup = "umount /mnt/meta 2>/dev/null".to_string();
    cases.push(Case {
        name: "composefs over its object store".into(),
        codecs: Vec::new(),
        digest: host_digest(&mount, &cleanup),
        stack: true,
        mount,
        cleanup,
    });
    cases
}
