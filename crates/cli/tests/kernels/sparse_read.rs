//! Sparse pclusters as Linux 7.2 reads them (patched images): a
//! full-index HEAD with `Z_EROFS_LI_HOLE`, a big pcluster whose first
//! NONHEAD has a CBLKCNT of 0 blocks, and `-E sparse`'s own holes with
//! their pcluster of zeros overwritten, read as zeros through `ferrofs
//! cat`, and so under both 7.2 kernels; the
//! HOLE bit on the ztailpacking tail, or on a HEAD that does not start
//! its lcluster (7.2 then reads the extent before it as zeros too), is
//! refused by `ferrofs fsck` and reads fail. What this machine's 6.18 makes of each image is printed
//! (docs/support.md quotes it): it decodes the pcluster at the stored
//! address.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::kernels::Kernel;
use ferrofs_testkit::verify::run_ok;
use ferrofs_testkit::work_dir;

use crate::cases::sha256_hex;
use crate::FERROFS;

/// The JSON `dump --path /f` prints of `img`.
fn dump(img: &Path) -> serde_json::Value {
    let out = run_ok(
        Command::new(FERROFS)
            .args(["dump", "--json", "--path", "/f"])
            .arg(img),
    )
    .unwrap();
    serde_json::from_slice(&out).unwrap()
}

/// Byte position of `/f`'s `k`th full index entry (after its inode, no
/// xattrs, the map header and its reserved word).
fn entry_at(img: &Path, k: u64) -> usize {
    let d = dump(img);
    assert_eq!(d["compression"]["index"], "full", "{d}");
    assert_eq!(d["xattr_icount"], 0);
    let inode = if d["extended"] == true { 64 } else { 32 };
    (d["position"].as_u64().unwrap() + inode + 16 + 8 * k) as usize
}

/// Builds `/f` of `data` with `opts`, then applies `patch` to a copy.
fn patched(
    w: &Path,
    name: &str,
    data: &[u8],
    opts: &[&str],
    patch: impl Fn(&Path, &mut Vec<u8>),
) -> PathBuf {
    let tree = w.join(format!("{name}.tree"));
    fs::create_dir_all(&tree).unwrap();
    fs::write(tree.join("f"), data).unwrap();
    let img = w.join(format!("{name}.img"));
    run_ok(
        Command::new(FERROFS)
            .args(["mkfs", "--quiet"])
            .args(opts)
            .arg(&img)
            .arg(&tree),
    )
    .unwrap();
    let mut b = fs::read(&img).unwrap();
    patch(&img, &mut b);
    fs::write(&img, b).unwrap();
    img
}

fn text(len: usize) -> Vec<u8> {
    let words = [
        "alpha ", "beta ", "gamma ", "delta ", "epsilon ", "zeta ", "eta ",
    ];
    let mut x = 7u64;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(words[(x % 7) as usize].as_bytes());
    }
    out.truncate(len);
    out
}

/// `ferrofs fsck` of `img` must find it damaged, saying `why`.
fn refused(img: &Path, name: &str, why: &str, failures: &mut Vec<String>) {
    let fsck = Command::new(FERROFS).arg("fsck").arg(img).output().unwrap();
    let msg =
        String::from_utf8_lossy(&fsck.stdout).to_string() + &String::from_utf8_lossy(&fsck.stderr);
    let line = msg.lines().find(|l| l.contains(why)).unwrap_or("");
    println!("{name}: ferrofs fsck exit {:?}: {line}", fsck.status.code());
    if fsck.status.code() != Some(1) || line.is_empty() {
        failures.push(format!("{name}: fsck: {msg}"));
    }
}

#[test]
fn hole_pclusters_read_as_zeros_as_linux_7_2_reads_them() {
    if !ferrofs_testkit::is_root() {
        println!("skipped: not root");
        return;
    }
    let w = work_dir!("kernel_sparse_read");
    let data = text(300_000);
    let mut failures = Vec::new();
    // (name, image, what 7.2 reads)
    let mut cases: Vec<(&str, PathBuf, Option<Vec<u8>>)> = Vec::new();

    // 1. LI_HOLE on the first extent's HEAD (1-block pclusters).
    let img = patched(
        &w,
        "li-hole",
        &data,
        &["-zlz4hc", "-C4096", "-Elegacy-compress"],
        |img, b| {
            let at = entry_at(img, 0);
            assert_eq!(b[at] & 3, 1, "HEAD1 expected at lcluster 0");
            b[at + 1] |= 0x40;
        },
    );
    let d = dump(&img);
    let len = d["extents"][0]["len"].as_u64().unwrap();
    let mut want = data.clone();
    want[..len as usize].fill(0);
    if d["extents"][0]["map"]["type"] != "hole" {
        failures.push(format!("li-hole: dump shows {}", d["extents"][0]));
    }
    cases.push(("li-hole", img, Some(want)));

    // 1b. LI_HOLE on a HEAD inside its lcluster (the second extent's):
    // refused (7.2 would read the first extent as zeros too).
    let img = patched(
        &w,
        "li-hole-inside",
        &data,
        &["-zlz4hc", "-C4096", "-Elegacy-compress"],
        |img, b| {
            let d = dump(img);
            let la = d["extents"][1]["logical"].as_u64().unwrap();
            assert_ne!(la % 4096, 0, "the second extent starts inside an lcluster");
            let at = entry_at(img, la / 4096);
            assert_eq!(b[at] & 3, 1, "HEAD1 expected");
            b[at + 1] |= 0x40;
        },
    );
    refused(&img, "li-hole-inside", "does not start", &mut failures);
    cases.push(("li-hole-inside", img, None));

    // 2. A CBLKCNT of 0 on the first NONHEAD of a big pcluster.
    let img = patched(
        &w,
        "cblkcnt-0",
        &data,
        &["-zlz4hc", "-C16384", "-Elegacy-compress"],
        |img, b| {
            let d = dump(img);
            let ex = d["extents"].as_array().unwrap();
            let e = ex
                .iter()
                .find(|e| {
                    e["map"]["plen"].as_u64().unwrap_or(0) > 4096
                        && e["logical"].as_u64().unwrap() > 0
                })
                .expect("a big pcluster");
            let lcn = e["logical"].as_u64().unwrap() / 4096 + 1;
            let at = entry_at(img, lcn);
            assert_eq!(b[at] & 3, 2, "NONHEAD expected at lcluster {lcn}");
            assert_eq!(b[at + 5] & 0x08, 0x08, "CBLKCNT expected at lcluster {lcn}");
            b[at + 4] = 0;
            b[at + 5] = 0x08;
        },
    );
    let d = dump(&img);
    let hole = d["extents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["map"]["type"] == "hole")
        .cloned();
    match hole {
        Some(h) => {
            let (la, len) = (h["logical"].as_u64().unwrap(), h["len"].as_u64().unwrap());
            let mut want = data.clone();
            want[la as usize..(la + len) as usize].fill(0);
            cases.push(("cblkcnt-0", img, Some(want)));
        }
        None => failures.push(format!("cblkcnt-0: no hole in {}", d["extents"])),
    }

    // 3. LI_HOLE on the tail-packed last pcluster: refused.
    let img = patched(
        &w,
        "tail-hole",
        &data[..30_000],
        &["-zlz4hc", "-C4096", "-Elegacy-compress", "-Eztailpacking"],
        |img, b| {
            let d = dump(img);
            let ex = d["extents"].as_array().unwrap();
            let last = ex.last().unwrap();
            assert_eq!(last["map"]["inline"], true, "{last}");
            let lcn = last["logical"].as_u64().unwrap() / 4096;
            let at = entry_at(img, lcn);
            b[at + 1] |= 0x40;
        },
    );
    refused(&img, "tail-hole", "HOLE", &mut failures);
    cases.push(("tail-hole", img, None));

    // 4. Written by `-E sparse` (LI_HOLE with a partial reference to the
    // shared pcluster of zeros), that pcluster then overwritten with a
    // data pcluster: 7.2 still reads zeros (it reads no pcluster for a
    // hole), 6.18 decodes what is there.
    let mut sparse = data[..100_000].to_vec();
    sparse.extend(vec![0u8; 100_000]);
    sparse.extend_from_slice(&data[100_000..200_000]);
    let img = patched(
        &w,
        "written",
        &sparse,
        &["-zlz4hc", "-C4096", "-Esparse"],
        |img, b| {
            let d = dump(img);
            let ex = d["extents"].as_array().unwrap();
            let hole = ex
                .iter()
                .find(|e| e["map"]["type"] == "hole")
                .expect("a hole");
            let at = entry_at(img, hole["logical"].as_u64().unwrap() / 4096);
            assert_eq!(b[at + 1] & 0xc0, 0xc0, "LI_HOLE and PARTIAL_REF expected");
            let zero = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize * 4096;
            let data = ex[0]["map"]["pos"].as_u64().unwrap() as usize;
            let block = b[data..data + 4096].to_vec();
            b[zero..zero + 4096].copy_from_slice(&block);
        },
    );
    cases.push(("written", img, Some(sparse)));

    // ferrofs reads the holes as zeros and fsck passes those images.
    for (name, img, want) in &cases {
        if let Some(want) = want {
            let got =
                run_ok(Command::new(FERROFS).args(["cat"]).arg(img).arg("/f")).unwrap_or_default();
            if &got != want {
                failures.push(format!(
                    "{name}: ferrofs cat differs from the file with its hole"
                ));
            }
            if let Err(e) = run_ok(Command::new(FERROFS).arg("fsck").arg(img)) {
                failures.push(format!("{name}: fsck: {e}"));
            }
        }
    }
    // Each kernel's reading: the digest of /f, or the error.
    let out = w.join("out");
    fs::create_dir_all(&out).unwrap();
    let mut script = String::from("set +e\nmkdir -p /mnt/m\n");
    for (name, img, _) in &cases {
        let o = out.display();
        script.push_str(&format!(
            "if mount -t erofs -o ro,loop {i} /mnt/m 2>{o}/{name}.err; then \
             sha256sum /mnt/m/f 2>>{o}/{name}.err | cut -c1-64 >{o}/{name}.sum; umount /mnt/m; fi\n",
            i = img.display()
        ));
    }
    let original = sha256_hex(&data);
    for k in crate::ready(Kernel::available()) {
        crate::clear(&out);
        k.run(&script, &[&out]).unwrap();
        for (name, _, want) in &cases {
            let read = |n: &str| crate::text_of(&out, n);
            let sum = read(&format!("{name}.sum"));
            let verdict = if want.as_ref().is_some_and(|w| sha256_hex(w) == sum) {
                "zeros in the hole".to_string()
            } else if sum == original
                || (*name == "tail-hole" && sum == sha256_hex(&data[..30_000]))
            {
                "the stored pcluster's data".to_string()
            } else if sum.len() == 64 && sum != sha256_hex(b"") {
                "other bytes".to_string()
            } else {
                format!(
                    "an error: {}",
                    read(&format!("{name}.err")).lines().last().unwrap_or("")
                )
            };
            println!("{}: {name}: {verdict}", k.name());
            let is_72 = !matches!(k, Kernel::Host);
            if is_72 && want.is_some() && verdict != "zeros in the hole" {
                failures.push(format!("{} {name}: {verdict}", k.name()));
            }
        }
    }
    ferrofs_testkit::tmp::finish(&w, &failures);
}
