//! ferrofs-verity against the reference tools: `veritysetup` accepts the
//! trees built here byte for byte, the trees it makes verify here, and
//! `fsverity digest` prints the digests computed here. Skipped, saying
//! so, when the upstream tools (`upstream-tools --next`) are absent.

use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::tools::next_tool;
use ferrofs_testkit::TempDir;
use ferrofs_verity::dm::{self, HashType, Params, Verified};
use ferrofs_verity::{fsverity, parse_hex, to_hex, Algorithm};

const SALT: &str = "5eed0123456789abcdef00112233445566778899aabbccddeeff0011223344aa";
const UUID: &str = "0badc0de-1234-4321-8888-0123456789ab";

fn tool(name: &str) -> Option<PathBuf> {
    let t = next_tool(name);
    if t.is_none() {
        eprintln!("skipped: no upstream {name} (run ../shared/tools/upstream-tools --next)");
    }
    t
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run tool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed: {text}");
    text
}

/// Pseudo-random bytes (xorshift), the same on every run.
fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn uuid_bytes() -> [u8; 16] {
    parse_hex("uuid", &UUID.replace('-', ""))
        .unwrap()
        .try_into()
        .unwrap()
}

fn params(dbs: u32, blocks: u64, alg: Algorithm) -> Params {
    let mut p = Params::new(dbs, blocks, parse_hex("salt", SALT).unwrap());
    p.algorithm = alg;
    p.uuid = uuid_bytes();
    p
}

/// The hash file veritysetup writes: superblock, padding to a hash
/// block, the tree.
fn hash_file(p: &Params, tree: &dm::Tree) -> Vec<u8> {
    tree.hash_area(p, 0, true).unwrap()
}

fn root_of(text: &str) -> String {
    let line = text.lines().find(|l| l.starts_with("Root hash:")).unwrap();
    line.split_whitespace().last().unwrap().to_string()
}

const CASES: &[(u32, u64, Algorithm)] = &[
    (4096, 1, Algorithm::Sha256),
    (4096, 2, Algorithm::Sha256),
    (4096, 128, Algorithm::Sha256),
    (4096, 129, Algorithm::Sha256),
    (4096, 300, Algorithm::Sha512),
    (512, 1, Algorithm::Sha256),
    (512, 9, Algorithm::Sha256),
    (512, 1000, Algorithm::Sha256),
    (512, 70, Algorithm::Sha512),
];

/// Both hash types: veritysetup's default (`--format=1`) and Chrome OS's
/// (`--format=0`, the salt after each block).
#[test]
fn trees_equal_veritysetup_format_byte_for_byte() {
    let Some(vs) = tool("veritysetup") else {
        return;
    };
    let tmp = TempDir::new("verity-format").unwrap();
    let types = [HashType::Normal, HashType::ChromeOs];
    for (i, &(dbs, blocks, alg, ht)) in CASES
        .iter()
        .flat_map(|&(d, b, a)| types.map(|t| (d, b, a, t)))
        .collect::<Vec<_>>()
        .iter()
        .enumerate()
    {
        let bytes = data(dbs as usize * blocks as usize, i as u64 + 7);
        let d = tmp.path().join(format!("d{i}"));
        let h = tmp.path().join(format!("h{i}"));
        std::fs::write(&d, &bytes).unwrap();
        let out = run(Command::new(&vs)
            .arg("format")
            .args([&d, &h])
            .arg(format!("--format={}", ht.number()))
            .arg(format!("--data-block-size={dbs}"))
            .arg(format!("--hash={alg}"))
            .arg(format!("--salt={SALT}"))
            .arg(format!("--uuid={UUID}")));
        let mut p = params(dbs, blocks, alg);
        p.hash_type = ht;
        let tree = dm::build_with_threads(&bytes, &p, 3).unwrap();
        assert_eq!(to_hex(&tree.root), root_of(&out), "case {i}");
        let theirs = std::fs::read(&h).unwrap();
        assert!(
            theirs == hash_file(&p, &tree),
            "case {i}: hash files differ"
        );
        // And theirs verifies here.
        let v = Verified::open(&bytes, &theirs[..], 4096, p, &tree.root).unwrap();
        v.verify_all().unwrap();
    }
}

/// Writes `bytes` padded to `dbs`, then the superblock and tree, as
/// `ferrofs verity` appends them; the hash offset.
fn appended(path: &Path, bytes: &[u8], p: &Params, tree: &dm::Tree) -> u64 {
    let mut file = bytes.to_vec();
    file.resize(p.data_len().unwrap() as usize, 0);
    let off = file.len() as u64;
    file.extend_from_slice(&tree.hash_area(p, off, true).unwrap());
    std::fs::write(path, file).unwrap();
    off
}

#[test]
fn veritysetup_verify_accepts_appended_trees() {
    let Some(vs) = tool("veritysetup") else {
        return;
    };
    let tmp = TempDir::new("verity-verify").unwrap();
    for (len, dbs) in [
        (1usize, 4096u32),
        (4096, 4096),
        (10_000, 4096),
        (700_001, 4096),
        (513, 512),
        (99_999, 512),
    ] {
        let bytes = data(len, len as u64);
        let blocks = (len as u64).div_ceil(u64::from(dbs));
        let mut p = params(dbs, blocks, Algorithm::Sha256);
        p.salt = Params::derived_salt(p.algorithm, &bytes[..len.min(4096)], len as u64);
        let tree = dm::build(&bytes, &p).unwrap();
        let img = tmp.path().join(format!("img{len}"));
        let off = appended(&img, &bytes, &p, &tree);
        run(Command::new(&vs)
            .arg("verify")
            .args([&img, &img])
            .arg(to_hex(&tree.root))
            .arg(format!("--hash-offset={off}")));
        // A flipped data byte: veritysetup refuses it too.
        let mut bad = std::fs::read(&img).unwrap();
        bad[len / 2] ^= 1;
        std::fs::write(&img, &bad).unwrap();
        let st = Command::new(&vs)
            .arg("verify")
            .args([&img, &img])
            .arg(to_hex(&tree.root))
            .arg(format!("--hash-offset={off}"))
            .output()
            .unwrap();
        assert!(!st.status.success(), "len {len}: tampered image verified");
    }
}

#[test]
fn veritysetup_trees_verify_here() {
    let Some(vs) = tool("veritysetup") else {
        return;
    };
    let tmp = TempDir::new("verity-theirs").unwrap();
    let bytes = data(4096 * 200, 3);
    // Appended with --hash-offset (their random salt and UUID).
    let img = tmp.path().join("img");
    let mut file = bytes.clone();
    file.resize(bytes.len() + 4096, 0xee);
    std::fs::write(&img, &file).unwrap();
    let off = bytes.len() as u64 + 4096;
    let out = run(Command::new(&vs)
        .arg("format")
        .args([&img, &img])
        .arg(format!("--hash-offset={off}"))
        .arg("--data-blocks=200"));
    let root = parse_hex("root", &root_of(&out)).unwrap();
    let whole = std::fs::read(&img).unwrap();
    let sb: [u8; 512] = whole[off as usize..off as usize + 512].try_into().unwrap();
    let p = Params::parse_superblock(&sb, off).unwrap();
    assert_eq!(p.data_blocks, 200);
    let start = dm::tree_offset(off, p.hash_block_size, true).unwrap();
    let v = Verified::open(&whole, &whole, start, p.clone(), &root).unwrap();
    v.verify_all().unwrap();
    let mut wrong = root.clone();
    wrong[0] ^= 1;
    let e = Verified::open(&whole, &whole, start, p.clone(), &wrong)
        .err()
        .unwrap();
    assert!(e.to_string().contains("root hash does not match"), "{e}");

    // A separate file without a superblock: the parameters come from us.
    let h = tmp.path().join("h");
    let d = tmp.path().join("d");
    std::fs::write(&d, &bytes).unwrap();
    let out = run(Command::new(&vs)
        .arg("format")
        .args([&d, &h])
        .arg("--no-superblock")
        .arg(format!("--salt={SALT}")));
    let root = parse_hex("root", &root_of(&out)).unwrap();
    let hash = std::fs::read(&h).unwrap();
    let p = params(4096, 200, Algorithm::Sha256);
    let v = Verified::open(&bytes, &hash, 0, p, &root).unwrap();
    v.verify_all().unwrap();
}

#[test]
fn fsverity_digest_equals_fsverity_tool() {
    let Some(fv) = tool("fsverity") else { return };
    let tmp = TempDir::new("fsverity").unwrap();
    for len in [
        0usize,
        1,
        4095,
        4096,
        4097,
        128 * 4096,
        128 * 4096 + 1,
        1 << 20,
        3_000_000,
    ] {
        let path = tmp.path().join(format!("f{len}"));
        let bytes = data(len, len as u64 + 1);
        std::fs::write(&path, &bytes).unwrap();
        let ours = fsverity::digest(&bytes[..]).unwrap();
        let theirs = run(Command::new(&fv).arg("digest").arg(&path));
        assert_eq!(theirs, format!("{ours} {}\n", path.display()), "len {len}");
    }
}
