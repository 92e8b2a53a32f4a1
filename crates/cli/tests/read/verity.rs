//! dm-verity and fs-verity through the `ferrofs` binary (#34): trees from
//! `mkfs --verity` and `ferrofs verity` pass `veritysetup verify`, trees
//! from `veritysetup format` check here (appended, hash file, no
//! superblock), one flipped byte anywhere (file data, metadata, the tree,
//! the verity superblock) or a wrong root hash fails fsck, cat and extract
//! with the integrity error naming the block, and `ferrofs digest` prints
//! what `fsverity digest` prints. Upstream tools missing: `skipped: ...`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ferrofs_testkit::tools::next_tool;
use ferrofs_testkit::work_dir;

use crate::FERROFS;

fn ferrofs(args: &[&str]) -> Output {
    Command::new(FERROFS).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn ok(args: &[&str]) -> String {
    let o = ferrofs(args);
    assert!(o.status.success(), "ferrofs {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn tool(name: &str) -> Option<PathBuf> {
    let t = next_tool(name);
    if t.is_none() {
        println!("skipped: no upstream {name} (run ../shared/tools/upstream-tools --next)");
    }
    t
}

/// A field of a `--json` line.
fn field(json: &str, path: &[&str]) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    for p in path {
        v = v[*p].take();
    }
    v
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A tree of `files` files of `size` pseudo-random bytes each, in `dir`.
pub(crate) fn tree(dir: &Path, files: u32, size: usize) -> PathBuf {
    let src = dir.join(format!("src-{files}-{size}"));
    fs::create_dir_all(src.join("sub")).unwrap();
    for k in 0..files {
        let bytes: Vec<u8> = (0..size as u32)
            .map(|i| (i.wrapping_mul(2654435761).wrapping_add(k * 77) >> 11) as u8)
            .collect();
        fs::write(src.join(format!("f{k}")), bytes).unwrap();
    }
    if files > 0 {
        fs::write(src.join("sub/small"), b"small and good\n").unwrap();
    }
    src
}

/// `mkfs --verity IMG SRC`: the image and its root hash.
pub(crate) fn mkfs_verity(img: &Path, src: &Path, extra: &[&str]) -> String {
    let mut args = vec!["mkfs", "--quiet", "--json", "--verity"];
    args.extend_from_slice(extra);
    args.extend([p(img), p(src)]);
    let out = ok(&args);
    field(&out, &["verity", "root_hash"])
        .as_str()
        .unwrap()
        .to_string()
}

fn veritysetup_verify(vs: &Path, data: &Path, hash: &Path, root: &str, offset: Option<u64>) {
    let mut cmd = Command::new(vs);
    cmd.arg("verify").args([data, hash]).arg(root);
    if let Some(o) = offset {
        cmd.arg(format!("--hash-offset={o}"));
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "veritysetup verify {} {} {root} {offset:?}: {}",
        data.display(),
        hash.display(),
        text(&out)
    );
}

#[test]
fn veritysetup_verify_accepts_ferrofs_trees() {
    let Some(vs) = tool("veritysetup") else {
        return;
    };
    let w = work_dir!("verity_accepts");
    // An empty tree (a one-block image), one block of data, and several sizes.
    for (files, size) in [(0u32, 0usize), (1, 100), (3, 200_000), (2, 1_500_000)] {
        let src = tree(&w, files, size);
        let img = w.join(format!("m{files}-{size}.img"));
        let root = mkfs_verity(&img, &src, &[]);
        let json = ok(&["verity", "--json", p(&img)]);
        // `ferrofs verity` on the built image replaces the tree with the same one.
        assert_eq!(
            field(&json, &["root_hash"]),
            root.as_str(),
            "{files}x{size}"
        );
        let off = field(&json, &["hash_offset"]).as_u64().unwrap();
        assert_eq!(off % 4096, 0);
        veritysetup_verify(&vs, &img, &img, &root, Some(off));
        ok(&["fsck", "--verity", &root, p(&img)]);
        // 512-byte data blocks and sha512, appended and in a hash file.
        let img512 = w.join(format!("b{files}-{size}.img"));
        fs::copy(&img, &img512).unwrap();
        let json = ok(&[
            "verity",
            "--json",
            "--data-block-size",
            "512",
            "--hash",
            "sha512",
            p(&img512),
        ]);
        let r512 = field(&json, &["root_hash"]).as_str().unwrap().to_string();
        assert_eq!(field(&json, &["algorithm"]), "sha512");
        let off = field(&json, &["hash_offset"]).as_u64().unwrap();
        veritysetup_verify(&vs, &img512, &img512, &r512, Some(off));
        assert!(ok(&["ls", "--verity", &r512, p(&img512), "/"]).contains("sub"));
        let hash = w.join(format!("h{files}-{size}"));
        let json = ok(&[
            "verity",
            "--json",
            "--data-block-size",
            "512",
            "--hash-file",
            p(&hash),
            p(&img),
        ]);
        let rh = field(&json, &["root_hash"]).as_str().unwrap().to_string();
        veritysetup_verify(&vs, &img, &hash, &rh, None);
        ok(&[
            "fsck",
            "--verity",
            &rh,
            "--verity-hash-file",
            p(&hash),
            p(&img),
        ]);
    }
}

#[test]
fn mkfs_verity_is_reproducible_and_takes_a_salt() {
    let w = work_dir!("verity_repro");
    let src = tree(&w, 2, 10_000);
    let (a, b, c) = (w.join("a.img"), w.join("b.img"), w.join("c.img"));
    let ra = mkfs_verity(&a, &src, &[]);
    let rb = mkfs_verity(&b, &src, &[]);
    assert_eq!(ra, rb);
    assert!(fs::read(&a).unwrap() == fs::read(&b).unwrap());
    let out = ok(&[
        "mkfs",
        "--quiet",
        "--json",
        "--verity",
        "--verity-salt",
        "00ff",
        p(&c),
        p(&src),
    ]);
    assert_eq!(field(&out, &["verity", "salt"]), "00ff");
    assert_ne!(field(&out, &["verity", "root_hash"]), ra.as_str());
    for key in [
        "root_hash",
        "hash_offset",
        "salt",
        "data_blocks",
        "algorithm",
    ] {
        assert!(!field(&out, &["verity", key]).is_null(), "{key}");
    }
    let o = ferrofs(&["mkfs", "--verity", "--verity-salt", "xyz", p(&c), p(&src)]);
    assert!(
        !o.status.success() && text(&o).contains("--verity-salt"),
        "{}",
        text(&o)
    );
}

/// `veritysetup format` output's root hash.
fn their_root(out: &Output) -> String {
    let t = text(out);
    assert!(out.status.success(), "{t}");
    let line = t.lines().find(|l| l.starts_with("Root hash:")).unwrap();
    line.split_whitespace().last().unwrap().to_string()
}

#[test]
fn veritysetup_trees_check_here() {
    let Some(vs) = tool("veritysetup") else {
        return;
    };
    let w = work_dir!("verity_theirs");
    let src = tree(&w, 2, 700_000);
    let img = w.join("plain.img");
    ok(&["mkfs", "--quiet", p(&img), p(&src)]);
    let len = fs::metadata(&img).unwrap().len();
    let blocks = (len / 4096).to_string();
    // Appended at a hash offset of our choosing, past a gap.
    let app = w.join("appended.img");
    fs::copy(&img, &app).unwrap();
    let off = len + 8192;
    let root = their_root(
        &Command::new(&vs)
            .arg("format")
            .args([&app, &app])
            .arg(format!("--hash-offset={off}"))
            .arg(format!("--data-blocks={blocks}"))
            .output()
            .unwrap(),
    );
    let off = off.to_string();
    ok(&[
        "fsck",
        "--verity",
        &root,
        "--verity-hash-offset",
        &off,
        p(&app),
    ]);
    // Without the offset the tree is not where ferrofs puts it: said so.
    let o = ferrofs(&["fsck", "--verity", &root, p(&app)]);
    assert!(
        !o.status.success() && text(&o).contains("--verity-hash-offset"),
        "{}",
        text(&o)
    );
    // A separate hash file, with and without a superblock.
    let hash = w.join("hash");
    let root = their_root(
        &Command::new(&vs)
            .arg("format")
            .args([&img, &hash])
            .output()
            .unwrap(),
    );
    ok(&[
        "fsck",
        "--verity",
        &root,
        "--verity-hash-file",
        p(&hash),
        p(&img),
    ]);
    let salt = "aabbccdd";
    let root = their_root(
        &Command::new(&vs)
            .arg("format")
            .args([&img, &hash])
            .arg("--no-superblock")
            .arg(format!("--salt={salt}"))
            .output()
            .unwrap(),
    );
    let args = [
        "--verity-hash-file",
        p(&hash),
        "--verity-no-superblock",
        "--verity-salt",
        salt,
    ];
    let mut fsck = vec!["fsck", "--verity", &root];
    fsck.extend(args);
    fsck.push(p(&img));
    ok(&fsck);
    // Appended without a superblock, right after the image: the data is
    // everything before the hash offset.
    let app2 = w.join("appended-nosb.img");
    fs::copy(&img, &app2).unwrap();
    let root2 = their_root(
        &Command::new(&vs)
            .arg("format")
            .args([&app2, &app2])
            .arg("--no-superblock")
            .arg(format!("--salt={salt}"))
            .arg(format!("--hash-offset={len}"))
            .arg(format!("--data-blocks={blocks}"))
            .output()
            .unwrap(),
    );
    let len_s = len.to_string();
    ok(&[
        "fsck",
        "--verity",
        &root2,
        "--verity-hash-offset",
        &len_s,
        "--verity-no-superblock",
        "--verity-salt",
        salt,
        p(&app2),
    ]);
    // The wrong salt: the root does not match.
    let i = fsck.iter().position(|a| *a == salt).unwrap();
    fsck[i] = "aabbccde";
    let o = ferrofs(&fsck);
    assert!(
        !o.status.success() && text(&o).contains("root hash does not match"),
        "{}",
        text(&o)
    );
}

/// Chrome OS's hash type (`veritysetup format --format=0`, the salt after
/// each block): its trees check here, with a superblock (which says the
/// type) and without one (`--verity-format 0`); `ferrofs verity --format
/// 0` writes trees `veritysetup verify` accepts; the other type's
/// parameters do not match.
#[test]
fn chrome_os_hash_type_both_ways() {
    let Some(vs) = tool("veritysetup") else {
        return;
    };
    let w = work_dir!("verity_format0");
    let src = tree(&w, 3, 900_000);
    let img = w.join("plain.img");
    ok(&["mkfs", "--quiet", p(&img), p(&src)]);
    let (hash, nosb) = (w.join("hash"), w.join("hash-nosb"));
    let salt = "0123456789abcdef";
    let format = |out: &Path, extra: &[&str]| {
        their_root(
            &Command::new(&vs)
                .args(["format", "--format=0", &format!("--salt={salt}")])
                .args(extra)
                .args([&img, &out.to_path_buf()])
                .output()
                .unwrap(),
        )
    };
    let root = format(&hash, &[]);
    ok(&[
        "fsck",
        "--verity",
        &root,
        "--verity-hash-file",
        p(&hash),
        p(&img),
    ]);
    let root = format(&nosb, &["--no-superblock"]);
    let nosb_args = |t: &'static str| {
        vec![
            "--verity-hash-file".to_string(),
            p(&nosb).to_string(),
            "--verity-no-superblock".into(),
            "--verity-salt".into(),
            salt.into(),
            "--verity-format".into(),
            t.into(),
        ]
    };
    let run = |t: &'static str| {
        let mut a = vec!["fsck".to_string(), "--verity".into(), root.clone()];
        a.extend(nosb_args(t));
        a.push(p(&img).into());
        ferrofs(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let o = run("0");
    assert!(o.status.success(), "{}", text(&o));
    let o = run("1");
    assert!(
        !o.status.success() && text(&o).contains("root hash does not match"),
        "{}",
        text(&o)
    );
    // Written here, accepted there.
    let ours = w.join("ours.img");
    fs::copy(&img, &ours).unwrap();
    let out = ok(&["verity", "--format", "0", "--json", p(&ours)]);
    let (root, off) = (field(&out, &["root_hash"]), field(&out, &["hash_offset"]));
    assert_eq!(field(&out, &["hash_type"]), 0, "{out}");
    let (root, off) = (root.as_str().unwrap().to_string(), off.as_u64().unwrap());
    veritysetup_verify(&vs, &ours, &ours, &root, Some(off));
    ok(&["fsck", "--verity", &root, p(&ours)]);
}

/// `fsck --verity` checks every block the tree covers, also those no file
/// uses (what `veritysetup verify` reads): a flipped byte in trailing
/// space the tree covers is found after the walk, named as such, and the
/// clean image reports how many such blocks it checked.
#[test]
fn fsck_checks_blocks_no_file_uses() {
    let Some(vs) = tool("veritysetup") else {
        return;
    };
    let w = work_dir!("verity_unread");
    let src = tree(&w, 2, 300_000);
    let img = w.join("padded.img");
    ok(&["mkfs", "--quiet", p(&img), p(&src)]);
    let len = fs::metadata(&img).unwrap().len();
    // 16 blocks after the image, covered by the tree, read by no walk.
    fs::OpenOptions::new()
        .write(true)
        .open(&img)
        .unwrap()
        .set_len(len + 65536)
        .unwrap();
    let hash = w.join("hash");
    let root = their_root(
        &Command::new(&vs)
            .arg("format")
            .args([&img, &hash])
            .output()
            .unwrap(),
    );
    let args = ["fsck", "--verity", &root, "--verity-hash-file", p(&hash)];
    let mut json = args.to_vec();
    json.extend(["--json", p(&img)]);
    let out = ok(&json);
    assert_eq!(field(&out, &["verity_unread_blocks"]), 16, "{out}");
    let mut bytes = fs::read(&img).unwrap();
    let at = len as usize + 40_000;
    bytes[at] ^= 0x55;
    fs::write(&img, &bytes).unwrap();
    let mut plain = args.to_vec();
    plain.push(p(&img));
    let o = ferrofs(&plain);
    let t = text(&o);
    let block = at / 4096;
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains(&format!("data block {block} ")) && t.contains("walk did not read"),
        "{t}"
    );
    // Without data (`--no-data`) only metadata is read: not checked then.
    let mut meta = args.to_vec();
    meta.extend(["--no-data", p(&img)]);
    ok(&meta);
}

/// `ferrofs verity` of a tar index layer with its archive appended
/// (`mkfs --tar=i`, then `cat`) covers the archive too, with 512-byte data
/// blocks: `veritysetup verify` accepts it, `fsck --verity` finds the tree
/// after the archive, and a byte flipped in the archive's file data is an
/// integrity error. An image at `--offset` gets a tree over the whole
/// file, which veritysetup and `fsck --offset --verity` accept.
#[test]
fn tar_index_layers_and_offset_images_get_trees() {
    let Some(vs) = tool("veritysetup") else {
        return;
    };
    let w = work_dir!("verity_tar_index");
    let src = tree(&w, 3, 200_000);
    let tar = w.join("layer.tar");
    let made = Command::new("tar")
        .arg("-C")
        .arg(&src)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(made.success());
    let idx = w.join("layer.idx");
    ok(&["mkfs", "--quiet", "--tar=i", p(&idx), p(&tar)]);
    let layer = w.join("layer.erofs");
    let mut bytes = fs::read(&idx).unwrap();
    let idx_len = bytes.len();
    bytes.extend(fs::read(&tar).unwrap());
    fs::write(&layer, &bytes).unwrap();
    let out = ok(&["verity", "--data-block-size", "512", "--json", p(&layer)]);
    let root = field(&out, &["root_hash"]).as_str().unwrap().to_string();
    let off = field(&out, &["hash_offset"]).as_u64().unwrap();
    assert!(off as usize > idx_len + 200_000, "{out}");
    veritysetup_verify(&vs, &layer, &layer, &root, Some(off));
    let clean = ok(&["fsck", "--verity", &root, p(&layer)]);
    assert!(clean.contains(" 0 problems"), "{clean}");
    // A byte of the first file's data, in the archive.
    let mut bytes = fs::read(&layer).unwrap();
    bytes[idx_len + 512 * 3 + 7] ^= 1;
    fs::write(&layer, &bytes).unwrap();
    let o = ferrofs(&["fsck", "--verity", &root, p(&layer)]);
    assert!(
        o.status.code() == Some(1) && text(&o).contains("does not match the verity hash tree"),
        "{}",
        text(&o)
    );
    // An image 8 KiB into its file.
    let img = w.join("at-offset.img");
    ok(&["mkfs", "--quiet", "--offset", "8192", p(&img), p(&src)]);
    let out = ok(&["verity", "--offset", "8192", "--json", p(&img)]);
    let root = field(&out, &["root_hash"]).as_str().unwrap().to_string();
    let off = field(&out, &["hash_offset"]).as_u64().unwrap();
    veritysetup_verify(&vs, &img, &img, &root, Some(off));
    ok(&["fsck", "--offset", "8192", "--verity", &root, p(&img)]);
}

#[test]
fn digest_prints_what_fsverity_prints() {
    let Some(fv) = tool("fsverity") else { return };
    let w = work_dir!("verity_digest");
    let mut files = Vec::new();
    for len in [0usize, 1, 4096, 4097, 1 << 20, 1_000_003] {
        let f = w.join(format!("f{len}"));
        fs::write(&f, (0..len).map(|i| (i % 251) as u8).collect::<Vec<_>>()).unwrap();
        files.push(f);
    }
    let img = w.join("an.img");
    mkfs_verity(&img, &tree(&w, 1, 5000), &[]);
    files.push(img);
    let names: Vec<&str> = files.iter().map(|f| p(f)).collect();
    let theirs = Command::new(&fv)
        .arg("digest")
        .args(&names)
        .output()
        .unwrap();
    assert!(theirs.status.success());
    let mut args = vec!["digest"];
    args.extend(&names);
    assert_eq!(ok(&args), String::from_utf8_lossy(&theirs.stdout));
    args.push("--json");
    let json: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
    assert_eq!(json.as_array().unwrap().len(), files.len());
    assert!(json[0]["digest"].as_str().unwrap().starts_with("sha256:"));
    let o = ferrofs(&["digest", p(&w.join("missing"))]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn diff_checks_both_images() {
    let w = work_dir!("verity_diff");
    let (a, b) = (w.join("a.img"), w.join("b.img"));
    let ra = mkfs_verity(&a, &tree(&w, 1, 9000), &[]);
    let rb = mkfs_verity(&b, &tree(&w, 2, 9000), &[]);
    let o = ferrofs(&[
        "diff",
        "--verity-old",
        &ra,
        "--verity-new",
        &rb,
        p(&a),
        p(&b),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("+ /f1"), "{}", text(&o));
    let o = ferrofs(&["diff", "--verity-old", &rb, p(&a), p(&b)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("root hash does not match"),
        "{}",
        text(&o)
    );
}

#[test]
fn an_image_at_an_offset_finds_its_tree() {
    let w = work_dir!("verity_offset");
    let img = w.join("o.img");
    let root = mkfs_verity(&img, &tree(&w, 1, 50_000), &["--offset", "10000"]);
    ok(&["fsck", "--offset", "10000", "--verity", &root, p(&img)]);
    let small = ok(&[
        "cat",
        "--offset",
        "10000",
        "--verity",
        &root,
        p(&img),
        "/sub/small",
    ]);
    assert_eq!(small, "small and good\n");
    // Extra devices would be read unverified: refused.
    let o = ferrofs(&["fsck", "--verity", &root, "--device", p(&img), p(&img)]);
    assert!(
        !o.status.success() && text(&o).contains("unverified"),
        "{}",
        text(&o)
    );
}

/// `ferrofs verity` killed (strace's SIGKILL) at the sync between the tree
/// and its superblock leaves an image with no verity superblock: nothing
/// finds a half tree, the image still reads, and a run again writes the
/// tree a clean run writes. Bytes after the image that are no tree are not
/// cut.
#[test]
fn an_interrupted_verity_run_leaves_no_tree_to_find() {
    let w = work_dir!("verity_killed");
    let img = w.join("k.img");
    ok(&["mkfs", "--quiet", p(&img), p(&tree(&w, 2, 300_000))]);
    let clean = w.join("clean.img");
    fs::copy(&img, &clean).unwrap();
    let json = ok(&["verity", "--json", p(&clean)]);
    let root = field(&json, &["root_hash"]).as_str().unwrap().to_string();
    let strace = Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "trace=fdatasync",
            "-e",
        ])
        .arg("inject=fdatasync:signal=KILL:when=1")
        .arg(FERROFS)
        .args(["verity", p(&img)])
        .output();
    let Ok(o) = strace else {
        println!("skipped: strace is not installed (it injects the kill)");
        return;
    };
    assert!(!o.status.success(), "not killed: {}", text(&o));
    // The tree is there, its superblock is not.
    let o = ferrofs(&["fsck", "--verity", &root, p(&img)]);
    assert!(
        !o.status.success() && text(&o).contains("no verity superblock"),
        "{}",
        text(&o)
    );
    ok(&["fsck", p(&img)]);
    ok(&["verity", p(&img)]);
    assert!(fs::read(&img).unwrap() == fs::read(&clean).unwrap());
    // A trailer that is no tree is refused, not cut.
    let mut bytes = fs::read(&clean).unwrap();
    let data_len = field(&json, &["hash_offset"]).as_u64().unwrap() as usize;
    bytes.truncate(data_len);
    bytes.extend_from_slice(b"someone's trailer");
    fs::write(&img, &bytes).unwrap();
    let o = ferrofs(&["verity", p(&img)]);
    assert!(
        !o.status.success() && text(&o).contains("not a verity tree"),
        "{}",
        text(&o)
    );
    assert!(fs::read(&img).unwrap() == bytes);
}
