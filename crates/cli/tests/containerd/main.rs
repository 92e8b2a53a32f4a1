//! ferrofs as containerd's `mkfs.erofs` (issue 33): a private containerd
//! 2.1 with the EROFS snapshotter and the EROFS differ runs `mkfs.erofs`
//! from its `PATH`, a logging wrapper that execs ferrofs (or, for
//! comparison, upstream erofs-utils 1.9.4: the same test, a parameter).
//!
//! A three-layer OCI image made with umoci (files, a directory tree, a
//! hard link pair, a symlink, user.* xattrs (umoci 0.6 leaves trusted.*
//! out of its layers), modes and owners; then
//! whiteouts of a file and a directory, new and modified files; then a
//! hand-made layer making a directory opaque) is imported with `ctr images
//! import --snapshotter erofs`: every layer goes through the differ's
//! `mkfs.erofs --tar=f --aufs ...`. A container lists and hashes its whole
//! tree with a static busybox, which must equal the listing of `umoci
//! unpack`'s rootfs; a host mount of the image's snapshot must equal that
//! rootfs with xattrs and times too.
//!
//! Then the Commit fallback: a container deletes, creates and modifies
//! files, its snapshot is committed (the snapshotter runs `mkfs.erofs
//! --quiet -Enoinline_data LAYER UPPERDIR` on the overlay upper dir), and a
//! container on a snapshot prepared on top of the committed one must see
//! the changes and no whiteout (`c?????????`); every directory of the
//! committed layer that holds a whiteout must carry the overlayfs marker
//! that tells overlayfs to filter it (`trusted.overlay.origin` or
//! `trusted.overlay.opaque`), as upstream's directory build adds.
//!
//! Without root, overlayfs and erofs mounts, the containers tools, umoci,
//! python3 or busybox the tests print `skipped: REASON`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::containerd::{self, Containerd};
use ferrofs_testkit::process::sh;
use ferrofs_testkit::tools;

mod convert;

/// The binary under test.
const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

/// The image's name in containerd.
const IMAGE: &str = "ferrofs.test/ctd:v3";

/// Top-level names the runtime makes (mount points), left out of listings.
const RUNTIME_DIRS: [&str; 4] = ["dev", "proc", "sys", "run"];

/// Applets linked to busybox in the image's /bin.
const APPLETS: &str = "sh find stat sha256sum ls readlink cat rm mkdir echo ln chmod sort";

/// Makes the layout `L` (tag `v3` only) in the current directory and
/// `umoci unpack`s it into `X` (the expected tree). `$BUSYBOX` is the
/// static busybox to put in /bin. Fixed times make umoci's layers the same
/// on every run: umoci puts a directory into a layer only when its
/// metadata changed, so a directory whose entries changed within the
/// second of the previous layer would otherwise be left implicit.
const MAKE_IMAGE: &str = r#"
umoci init --layout L
umoci new --image L:base
umoci unpack --image L:base B >/dev/null
R=B/rootfs
mkdir -p $R/bin $R/data/sub/deep $R/gone/deep $R/opq/inner $R/shared
cp "$BUSYBOX" $R/bin/busybox
for a in $APPLETS; do ln -s busybox $R/bin/$a; done
echo hello > $R/data/a
ln $R/data/a $R/data/a-link
ln -s a $R/data/a-sym
ln -s ../no/such/target $R/data/dangling
seq 1 30000 > $R/data/big
head -c 70000 /dev/zero > $R/data/zeros
echo b > $R/data/sub/b
echo c > $R/data/sub/deep/c
setfattr -n user.note -v base $R/data/a
setfattr -n user.empty $R/data/sub/b
setfattr -n user.dir -v d $R/data/sub
chmod 4755 $R/data/big
chmod 1777 $R/shared
chown 1000:1001 $R/data/sub/deep/c
echo x > $R/gone/deep/f
echo del > $R/data/delme
echo o > $R/opq/old
echo o2 > $R/opq/inner/old2
find $R -exec touch -h -d @1600000000 {} +
umoci repack --image L:base B
umoci unpack --image L:base C >/dev/null
R=C/rootfs
rm -rf $R/gone $R/data/delme
echo changed >> $R/data/sub/b
setfattr -n user.note -v v2 $R/data/sub/b
echo c2 > $R/data/c
chmod 640 $R/data/c
mkdir -p $R/newdir
echo x > $R/newdir/x
touch -d @1700000000 $R $R/data $R/data/sub $R/newdir
umoci repack --image L:v2 C
python3 - <<'PY'
import io, tarfile
def add(t, name, kind=tarfile.REGTYPE, data=b"", mode=0o644):
    i = tarfile.TarInfo(name); i.type = kind; i.mtime = 1700000000
    i.mode = mode; i.size = len(data)
    t.addfile(i, io.BytesIO(data) if data else None)
with tarfile.open("layer3.tar", "w", format=tarfile.PAX_FORMAT) as t:
    add(t, "./", tarfile.DIRTYPE, mode=0o755)
    add(t, "opq/", tarfile.DIRTYPE, mode=0o750)
    add(t, "opq/.wh..wh..opq")
    add(t, "opq/fresh", data=b"fresh\n")
PY
umoci raw add-layer --image L:v2 --tag v3 layer3.tar
umoci rm --image L:base
umoci rm --image L:v2
umoci gc --layout L
umoci unpack --image L:v3 X >/dev/null
tar -C L -cf image.tar .
"#;

/// What the Commit-fallback container does (run by busybox sh), and the
/// same done to a copy of the expected tree on the host.
const CHANGES: &str = r#"
rm /data/a-link /data/sub/b
rm -rf /opq /data/sub/deep
echo n > /data/new
ln /data/new /data/new-link
mkdir -p /made/deep
echo z > /made/deep/z
echo more >> /data/c
chmod 600 /data/a
"#;

/// The listing script (busybox sh, run at the tree's root): one line per
/// entry `S|path|rawmode|uid|gid|size|nlink|ino`, then `H|path|sha256`
/// for regular files and `L|path|target` for symlinks.
const LIST: &str = r#"
cd /
find / -xdev -exec stat -c 'S|%n|%f|%u|%g|%s|%h|%i' {} +
find / -xdev -type f -exec sha256sum {} + | while read -r h p; do echo "H|$p|$h"; done
find / -xdev -type l | while read -r p; do echo "L|$p|$(readlink "$p")"; done
echo 'E|end|'
"#;

/// One listed entry.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Entry {
    /// The raw st_mode (type and permission bits).
    mode: u32,
    uid: u32,
    gid: u32,
    /// Size and link count, for non-directories.
    size_nlink: Option<(u64, u64)>,
    ino: u64,
    sha256: Option<String>,
    target: Option<String>,
}

/// A parsed listing: entries by path, and the hard link groups.
#[derive(Debug, PartialEq, Eq)]
struct Listing {
    entries: BTreeMap<String, Entry>,
    groups: BTreeSet<Vec<String>>,
}

/// What differs between `expected` and [`LIST`] run in a container of
/// `what` (`ctr run --rm --runc-root RUNC_ROOT FROM... ID`), or why the
/// container gave no listing.
fn container_differences(
    ctd: &Containerd,
    (runc_root, from, id): (&str, &[&str], &str),
    what: &str,
    expected: &Listing,
) -> Vec<String> {
    let mut run = vec!["--rm", "--runc-root", runc_root];
    run.extend_from_slice(from);
    run.push(id);
    match container_listing(ctd, &run) {
        Ok(got) => listing_differences(what, expected, &got),
        Err(e) => vec![format!("container of {what}: {e}")],
    }
}

/// [`LIST`] run in a container (`ctr run RUN... /bin/sh -c LIST`), parsed.
/// `ctr run` has lost the tail of a container's output once in CI (the
/// last `L|` line missing: the task exits as soon as it has written it),
/// so a listing without its closing `E|` line is taken again, three runs
/// at most.
fn container_listing(ctd: &Containerd, run: &[&str]) -> Result<Listing, String> {
    let mut args = vec!["run"];
    args.extend_from_slice(run);
    args.extend_from_slice(&["/bin/sh", "-c", LIST]);
    let mut tail = String::new();
    for _ in 0..3 {
        let text = ctd.ctr(&args)?;
        if text.lines().any(|l| l == "E|end|") {
            return parse_listing(&text);
        }
        let lines: Vec<&str> = text.lines().collect();
        tail = lines[lines.len().saturating_sub(3)..].join("\n");
    }
    Err(format!(
        "ctr {}: the container's listing was cut short three times, ending: {tail}",
        run.join(" ")
    ))
}

/// Parses [`LIST`]'s output, leaving out the runtime's mount points.
fn parse_listing(text: &str) -> Result<Listing, String> {
    let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
    let skip = |p: &str| {
        let top = p.trim_start_matches('/').split('/').next().unwrap_or("");
        RUNTIME_DIRS.contains(&top)
    };
    for line in text.lines().filter(|l| !l.is_empty()) {
        let f: Vec<&str> = line.split('|').collect();
        let bad = || format!("bad listing line {line:?}");
        if f.len() < 3 || skip(f[1]) {
            continue;
        }
        match f[0] {
            "S" if f.len() == 8 => {
                let mode = u32::from_str_radix(f[2], 16).map_err(|_| bad())?;
                let num = |s: &str| s.parse::<u64>().map_err(|_| bad());
                let is_dir = mode & 0o170000 == 0o040000;
                entries.insert(
                    f[1].to_string(),
                    Entry {
                        mode,
                        uid: num(f[3])? as u32,
                        gid: num(f[4])? as u32,
                        size_nlink: (!is_dir).then_some((num(f[5])?, num(f[6])?)),
                        ino: num(f[7])?,
                        ..Entry::default()
                    },
                );
            }
            "H" => entries.entry(f[1].to_string()).or_default().sha256 = Some(f[2].to_string()),
            "L" => entries.entry(f[1].to_string()).or_default().target = Some(f[2..].join("|")),
            "E" => {}
            _ => return Err(bad()),
        }
    }
    let mut by_ino: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (p, e) in &entries {
        if e.size_nlink.is_some_and(|(_, n)| n > 1) {
            by_ino.entry(e.ino).or_default().push(p.clone());
        }
    }
    let groups = by_ino.into_values().collect();
    for e in entries.values_mut() {
        e.ino = 0;
    }
    Ok(Listing { entries, groups })
}

/// The differences between two listings, one line each.
fn listing_differences(what: &str, expected: &Listing, actual: &Listing) -> Vec<String> {
    let mut out = Vec::new();
    let paths: BTreeSet<&String> = expected
        .entries
        .keys()
        .chain(actual.entries.keys())
        .collect();
    for p in paths {
        match (expected.entries.get(p), actual.entries.get(p)) {
            (Some(e), Some(a)) if e != a => {
                out.push(format!("{what}: {p}: expected {e:?}, got {a:?}"))
            }
            (Some(_), None) => out.push(format!("{what}: {p}: missing")),
            (None, Some(a)) => {
                let kind = if a.mode & 0o170000 == 0o020000 {
                    " (a character device: a whiteout showing through?)"
                } else {
                    ""
                };
                out.push(format!("{what}: {p}: unexpected entry {a:?}{kind}"))
            }
            _ => {}
        }
    }
    if expected.groups != actual.groups {
        out.push(format!(
            "{what}: hard link groups: expected {:?}, got {:?}",
            expected.groups, actual.groups
        ));
    }
    out
}

/// [`LIST`] run on a host tree holding the image's busybox (chroot).
fn list_host_tree(root: &Path) -> Result<Listing, String> {
    let out = Command::new("chroot")
        .arg(root)
        .args(["/bin/sh", "-c", LIST])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "chroot {} listing: {}: {}",
            root.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    parse_listing(&String::from_utf8_lossy(&out.stdout))
}

/// Which mkfs.erofs containerd runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Maker {
    Ferrofs,
    Upstream,
}

/// Why the test cannot run here, if it cannot.
fn skip_reason(maker: Maker) -> Option<String> {
    if let Err(why) = ferrofs_testkit::can_mount() {
        return Some(why);
    }
    let has_fs = |name: &str| {
        fs::read_to_string("/proc/filesystems")
            .is_ok_and(|s| s.lines().any(|l| l.split_whitespace().last() == Some(name)))
    };
    if !has_fs("overlay") {
        let _ = Command::new("modprobe").arg("overlay").status();
        if !has_fs("overlay") {
            return Some("the kernel has no overlay filesystem".into());
        }
    }
    if containerd::containers_bin_dir().is_none() {
        return Some(
            "the containers tools are not installed (set UPSTREAM_CONTAINERS_BIN: upstream-tools --containers)"
                .into(),
        );
    }
    if busybox().is_none() {
        return Some("no static busybox (Debian package busybox-static)".into());
    }
    for tool in ["python3", "setfattr", "chroot"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map_or(true, |o| !o.status.success())
        {
            return Some(format!("{tool} is not installed"));
        }
    }
    if maker == Maker::Upstream && tools::mkfs_next().is_none() {
        return Some("upstream mkfs.erofs 1.9.x is not installed (UPSTREAM_NEXT_BIN)".into());
    }
    None
}

/// A statically linked busybox (Debian's busybox-static installs /bin/busybox).
fn busybox() -> Option<PathBuf> {
    ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| {
            Command::new("file")
                .arg(p)
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("statically linked"))
                || (p.is_file() && !Path::new("/usr/bin/file").exists())
        })
}

/// `WORK/mkfs/mkfs.erofs`: a wrapper that appends its arguments to
/// `WORK/mkfs.log` and execs the chosen mkfs.erofs (ferrofs through a
/// symlink named mkfs.erofs, its drop-in).
fn make_wrapper(work: &Path, maker: Maker) -> (PathBuf, PathBuf) {
    let dir = work.join("mkfs");
    let real_dir = work.join("real");
    fs::create_dir_all(&dir).unwrap();
    fs::create_dir_all(&real_dir).unwrap();
    let real = match maker {
        Maker::Ferrofs => {
            let link = real_dir.join("mkfs.erofs");
            std::os::unix::fs::symlink(FERROFS, &link).unwrap();
            link
        }
        Maker::Upstream => tools::mkfs_next().expect("upstream mkfs.erofs").path,
    };
    let log = work.join("mkfs.log");
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
        log.display(),
        real.display()
    );
    let wrapper = dir.join("mkfs.erofs");
    fs::write(&wrapper, script).unwrap();
    sh(&format!("chmod 755 '{}'", wrapper.display())).unwrap();
    (dir, log)
}

/// Logged mkfs.erofs command lines.
fn mkfs_calls(log: &Path) -> Vec<String> {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Makes snapshot `key` on `parent` (`verb`: `view` or `prepare`) and
/// mounts it at `target` with the mount command that same `ctr` call
/// prints (`--target`). One call, not a second `ctr snapshots mounts`: a
/// snapshot no lease holds may be collected between two calls.
fn mount_snapshot(
    ctd: &Containerd,
    (verb, key, parent): (&str, &str, &str),
    target: &Path,
) -> Result<(), String> {
    fs::create_dir_all(target).map_err(|e| e.to_string())?;
    let t = target.to_string_lossy().into_owned();
    let args = [
        "snapshots",
        "--snapshotter",
        "erofs",
        verb,
        "--target",
        &t,
        key,
        parent,
    ];
    let line = ctd.ctr(&args)?;
    containerd::run_mount_command(line.trim()).map_err(|e| e.to_string())
}

fn umount(target: &Path) {
    containerd::unmount_under(target);
}

/// Runs [`MAKE_IMAGE`] in `work` with the umoci of `bin` and the
/// static busybox.
fn make_image(work: &Path, bin: &Path) {
    let busybox = busybox().expect("busybox");
    sh(&format!(
        "cd '{}' && export PATH='{}':$PATH BUSYBOX='{}' APPLETS='{APPLETS}' && {MAKE_IMAGE}",
        work.display(),
        bin.display(),
        busybox.display()
    ))
    .expect("making the image with umoci");
}

/// The checks of one run; the failures found.
fn check_with(maker: Maker, work: &Path) -> Vec<String> {
    let bin = containerd::containers_bin_dir().expect("containers tools");
    let mut failures = Vec::new();

    // The image: three layers, exported as an OCI archive.
    make_image(work, &bin);
    let expected = work.join("X/rootfs");
    let expected_listing = list_host_tree(&expected).expect("listing the expected tree");

    let (mkfs_dir, log) = make_wrapper(work, maker);
    let mut ctd = Containerd::start(&work.join("ctd"), &bin, &mkfs_dir).expect("containerd");
    let snaps = ctd.snapshotter_root().join("snapshots");
    let runc_root = ctd.runc_root().to_string_lossy().into_owned();

    // 1. The differ: every layer through mkfs.erofs --tar=f.
    let archive = work.join("image.tar").to_string_lossy().into_owned();
    if let Err(e) = ctd.ctr(&[
        "images",
        "import",
        "--snapshotter",
        "erofs",
        "--base-name",
        "ferrofs.test/ctd",
        &archive,
    ]) {
        failures.push(format!("import: {e}\ncontainerd: {}", ctd.log_tail()));
        return failures;
    }
    let calls = mkfs_calls(&log);
    let tar_calls: Vec<&String> = calls
        .iter()
        .filter(|c| c.starts_with("--tar=f --aufs --quiet -Enoinline_data -U "))
        .collect();
    let well_formed = tar_calls.iter().all(|c| {
        let f: Vec<&str> = c.split(' ').collect();
        f.len() == 7 && Path::new(f[6]).starts_with(&snaps) && f[6].ends_with("/layer.erofs")
    });
    if tar_calls.len() != 3 || calls.len() != 3 || !well_formed {
        failures.push(format!(
            "import: expected 3 calls `mkfs.erofs --tar=f --aufs --quiet -Enoinline_data -U UUID {}/N/layer.erofs`, got {calls:#?}",
            snaps.display()
        ));
    }
    println!("{maker:?}: import ran mkfs.erofs {} times", calls.len());

    // A container lists and hashes the image's tree.
    failures.extend(container_differences(
        &ctd,
        (&runc_root, &["--snapshotter", "erofs", IMAGE], "list1"),
        "image in a container",
        &expected_listing,
    ));

    // 2. The Commit fallback: a container changes files; its snapshot is
    // committed (mkfs.erofs on the overlay upper dir).
    let changes = format!("set -e\n{CHANGES}");
    if let Err(e) = ctd.ctr(&[
        "run",
        "--runc-root",
        &runc_root,
        "--snapshotter",
        "erofs",
        IMAGE,
        "changer",
        "/bin/sh",
        "-c",
        &changes,
    ]) {
        failures.push(format!("changing container: {e}"));
        return failures;
    }
    let info = ctd
        .ctr(&["snapshots", "--snapshotter", "erofs", "info", "changer"])
        .expect("snapshot info");
    let info: serde_json::Value = serde_json::from_str(&info).expect("snapshot info JSON");
    let image_top = info["Parent"].as_str().expect("a parent").to_string();

    // The image's snapshot mounted on the host: the rootfs with xattrs,
    // owners and times.
    let view = work.join("view");
    match mount_snapshot(&ctd, ("view", "view1", &image_top), &view) {
        Ok(()) => {
            let opts = CompareOptions {
                compare_nsec: false,
                skip_root_mtime: true,
                skip_root_mode_owner: true,
                compare_dir_nlink: false,
                ..CompareOptions::strict()
            };
            for d in compare::compare_trees(&expected, &view, &opts) {
                failures.push(format!("image snapshot on the host: {d}"));
            }
            umount(&view);
        }
        Err(e) => failures.push(format!("mounting the image's view: {e}")),
    }

    let before = mkfs_calls(&log).len();
    if let Err(e) = ctd.ctr(&[
        "snapshots",
        "--snapshotter",
        "erofs",
        "commit",
        "committed1",
        "changer",
    ]) {
        failures.push(format!("commit: {e}\ncontainerd: {}", ctd.log_tail()));
        return failures;
    }
    let calls = mkfs_calls(&log);
    let commit_calls = &calls[before..];
    let committed_dir = commit_calls.first().and_then(|c| {
        let f: Vec<&str> = c.split(' ').collect();
        let dir = Path::new(f.last()?).parent()?.to_path_buf();
        let ok = f.len() == 4
            && f[0] == "--quiet"
            && f[1] == "-Enoinline_data"
            && Path::new(f[2]) == dir.join("layer.erofs")
            && Path::new(f[3]) == dir.join("fs")
            && dir.starts_with(&snaps);
        ok.then_some(dir)
    });
    if commit_calls.len() != 1 || committed_dir.is_none() {
        failures.push(format!(
            "commit: expected one call `mkfs.erofs --quiet -Enoinline_data {0}/N/layer.erofs {0}/N/fs`, got {commit_calls:#?}",
            snaps.display()
        ));
    }
    println!("{maker:?}: commit ran {commit_calls:?}");

    // The changes made on the host to a copy of the expected tree.
    let expected2 = work.join("X2");
    sh(&format!(
        "cp -a '{}' '{}' && chroot '{}' /bin/sh -e -c '{CHANGES}'",
        expected.display(),
        expected2.display(),
        expected2.display()
    ))
    .expect("the changes on the host");
    let expected2_listing = list_host_tree(&expected2).expect("listing the changed tree");

    // A snapshot prepared on the committed one; a container on it.
    let top = work.join("top");
    match mount_snapshot(&ctd, ("prepare", "check1", "committed1"), &top) {
        Ok(()) => {
            let rootfs = top.to_string_lossy().into_owned();
            failures.extend(container_differences(
                &ctd,
                (&runc_root, &["--rootfs", &rootfs], "list2"),
                "committed snapshot in a container",
                &expected2_listing,
            ));
            // The deleted names stay deleted in the host's view too.
            for gone in ["data/a-link", "data/sub/b", "opq", "data/sub/deep"] {
                if fs::symlink_metadata(top.join(gone)).is_ok() {
                    failures.push(format!("committed snapshot: /{gone} shows through"));
                }
            }
            umount(&top);
        }
        Err(e) => failures.push(format!("mounting the committed snapshot: {e}")),
    }

    // The committed layer (mounted by the snapshotter at N/fs): every
    // directory holding a whiteout is marked for overlayfs.
    if let Some(dir) = committed_dir {
        let layer = dir.join("fs");
        let mounted = containerd::mounts_under(&dir).contains(&layer);
        let probe = if mounted {
            None
        } else {
            // Not mounted by the snapshotter (any more): mount it here.
            ferrofs_testkit::LoopMount::new(&dir.join("layer.erofs"), &[]).ok()
        };
        let root = probe
            .as_ref()
            .map_or(layer.clone(), |m| m.path().to_path_buf());
        failures.extend(whiteout_markers(&root));
    }

    ctd.stop();
    failures
}

/// Directories of the layer at `root` that hold a whiteout (a 0:0
/// character device) yet carry neither `trusted.overlay.origin` nor
/// `trusted.overlay.opaque`: overlayfs lists such a directory's whiteouts
/// as `c?????????` entries whenever the directory is not merged with a
/// lower one. Upstream's directory build marks them with an empty origin.
fn whiteout_markers(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut whiteouts = 0;
    let tree = match compare::list_tree(root) {
        Ok(t) => t,
        Err(e) => return vec![format!("listing the committed layer: {e}")],
    };
    let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
    for (rel, md) in &tree {
        if md.file_type().is_char_device() && md.rdev() == 0 {
            whiteouts += 1;
            dirs.insert(rel.parent().map(Path::to_path_buf).unwrap_or_default());
        }
    }
    if whiteouts == 0 {
        out.push("committed layer: no whiteouts at all (the deletions are lost)".into());
    }
    for d in dirs {
        let path = root.join(&d);
        let has = |name: &str| {
            ferrofs_testkit::xattr::get(&path, name)
                .ok()
                .flatten()
                .is_some()
        };
        if !has("trusted.overlay.origin") && !has("trusted.overlay.opaque") {
            out.push(format!(
                "committed layer: directory {} holds whiteouts but has no trusted.overlay.origin (nor opaque) xattr",
                compare::show_path(&d)
            ));
        }
    }
    out
}

fn run(maker: Maker, name: &str) {
    if let Some(why) = skip_reason(maker) {
        println!("skipped: {why}");
        return;
    }
    let work = ferrofs_testkit::work_dir!(name);
    let failures = check_with(maker, &work);
    // Nothing may stay mounted under the work directory.
    containerd::unmount_under(&work);
    ferrofs_testkit::tmp::finish(&work, &failures);
}

#[test]
fn containerd_with_ferrofs_mkfs() {
    run(Maker::Ferrofs, "containerd_ferrofs");
}

#[test]
fn containerd_with_upstream_mkfs() {
    run(Maker::Upstream, "containerd_upstream");
}
