//! dm-verity through Linux 7.2's own target (the user-mode kernel and the
//! VM; this machine's kernel has none): an image from `mkfs --verity` and
//! one given a tree by `ferrofs verity`, opened with `veritysetup open`
//! and with a plain `dmsetup` table made from ferrofs's JSON summary,
//! mount and read as `ferrofs export` writes them (GNU tar of the mount
//! has the SHA-256 of the export); a flipped byte of file data makes
//! reading the mount fail with EIO (and `ferrofs fsck --verity` names the
//! block); a flipped byte of the hash tree does too (at the mount, when
//! the block covers the superblock).

use std::fs;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::kernels::Kernel;
use ferrofs_testkit::tools::next_tool;
use ferrofs_testkit::verify::run_ok;
use ferrofs_testkit::{corpus, work_dir};

use crate::{FERROFS, TAR};

/// `ferrofs ARGS`, its standard output as JSON.
fn json(args: &[&str]) -> serde_json::Value {
    let out = run_ok(Command::new(FERROFS).args(args)).unwrap();
    serde_json::from_slice(&out).unwrap()
}

/// The dm-verity table of an image whose tree is appended at `v`'s
/// `hash_offset` behind a verity superblock, for device `dev`.
fn table(v: &serde_json::Value, dev: &str) -> String {
    let bs = v["data_block_size"].as_u64().unwrap();
    let blocks = v["data_blocks"].as_u64().unwrap();
    let hash_start = v["hash_offset"].as_u64().unwrap() / bs + 1;
    format!(
        "0 {} verity {} {dev} {dev} {bs} {bs} {blocks} {hash_start} {} {} {}",
        blocks * bs / 512,
        v["hash_type"],
        v["algorithm"].as_str().unwrap(),
        v["root_hash"].as_str().unwrap(),
        v["salt"].as_str().unwrap(),
    )
}

/// Flips one byte at `at` of a copy of `img` named `to`.
fn tamper(img: &Path, to: &Path, at: u64) {
    let mut b = fs::read(img).unwrap();
    b[at as usize] ^= 0x5a;
    fs::write(to, b).unwrap();
}

/// The image position of the first data byte of `path` in `img`.
fn data_pos(img: &Path, path: &str) -> u64 {
    let d = json(&["dump", "--json", "--path", path, &img.display().to_string()]);
    d["extents"][0]["map"]["pos"]
        .as_u64()
        .unwrap_or_else(|| panic!("no data position of {path}: {d}"))
}

#[test]
fn dm_verity_of_the_7_2_kernels_checks_ferrofs_trees() {
    if !ferrofs_testkit::is_root() {
        println!("skipped: not root");
        return;
    }
    let Some(vs) = next_tool("veritysetup") else {
        println!("skipped: no veritysetup (../shared/tools/upstream-tools --next)");
        return;
    };
    let kernels = crate::ready(vec![Kernel::user_mode(), Kernel::vm()]);
    if kernels.is_empty() {
        println!("skipped: no Linux 7.2 kernel here");
        return;
    }
    let dmsetup = ["/usr/sbin/dmsetup", "/sbin/dmsetup"]
        .into_iter()
        .find(|p| Path::new(p).is_file());
    let w = work_dir!("kernel_verity");
    let tree = w.join("tree");
    corpus::make_corner_tree(&tree).unwrap();
    // (name, image, summary of its tree)
    let built = w.join("built.img");
    let s = json(&[
        "mkfs",
        "--quiet",
        "--json",
        "-zlz4hc",
        "-C65536",
        "--verity",
        &built.display().to_string(),
        &tree.display().to_string(),
    ]);
    let later = w.join("later.img");
    run_ok(
        Command::new(FERROFS)
            .args(["mkfs", "--quiet", "-zlz4"])
            .arg(&later)
            .arg(&tree),
    )
    .unwrap();
    let s2 = json(&["verity", "--json", &later.display().to_string()]);
    let mut images = vec![("mkfs-verity", built.clone(), s["verity"].clone())];
    let v2 = if s2["verity"].is_object() {
        s2["verity"].clone()
    } else {
        s2.clone()
    };
    images.push(("ferrofs-verity", later, v2));
    let expect = crate::cases::sha256_hex(
        &run_ok(
            Command::new(FERROFS)
                .args(["export", "--no-sparse"])
                .arg(&built),
        )
        .unwrap(),
    );
    // Tampered copies: a file's first data byte, a hash block's byte.
    let v = &images[0].2;
    let bad_data = w.join("bad-data.img");
    tamper(&built, &bad_data, data_pos(&built, "/files/random/r65537"));
    let bad_hash = w.join("bad-hash.img");
    let tree_at = v["hash_offset"].as_u64().unwrap() + v["data_block_size"].as_u64().unwrap();
    tamper(&built, &bad_hash, tree_at + 40);
    let out = w.join("out");
    fs::create_dir_all(&out).unwrap();
    let o = out.display();
    let mut script = String::from("set +e\nmkdir -p /mnt/m\n");
    for (name, img, v) in &images {
        let root = v["root_hash"].as_str().unwrap();
        let off = v["hash_offset"].as_u64().unwrap();
        let i = img.display();
        script.push_str(&format!(
            "L=$(losetup -f --show -r {i})\n\
             {vs} open $L v-{name} $L {root} --hash-offset={off} 2>{o}/{name}.vs.err && \
             mount -t erofs -o ro /dev/mapper/v-{name} /mnt/m && \
             {{ {TAR} -C /mnt/m -cf - . 2>/dev/null | sha256sum | cut -c1-64 >{o}/{name}.vs.sum; }}\n\
             umount /mnt/m 2>/dev/null; {vs} close v-{name}\n",
            vs = vs.display()
        ));
        if let Some(dm) = dmsetup {
            script.push_str(&format!(
                "{dm} create d-{name} -r --table \"{t}\" 2>{o}/{name}.dm.err && \
                 {dm} mknodes d-{name} && \
                 mount -t erofs -o ro /dev/mapper/d-{name} /mnt/m && \
                 {{ {TAR} -C /mnt/m -cf - . 2>/dev/null | sha256sum | cut -c1-64 >{o}/{name}.dm.sum; }}\n\
                 umount /mnt/m 2>/dev/null; {dm} remove d-{name}\n",
                t = table(v, "$L"),
            ));
        }
        script.push_str("losetup -d $L\n");
    }
    let root = v["root_hash"].as_str().unwrap();
    let off = v["hash_offset"].as_u64().unwrap();
    for (name, img) in [("bad-data", &bad_data), ("bad-hash", &bad_hash)] {
        script.push_str(&format!(
            "L=$(losetup -f --show -r {i})\n\
             {vs} open $L t-{name} $L {root} --hash-offset={off} && \
             mount -t erofs -o ro /dev/mapper/t-{name} /mnt/m && \
             {{ {TAR} -C /mnt/m -cf - . 2>{o}/{name}.err; echo $? >{o}/{name}.status; }} | cat >/dev/null\n\
             [ -f {o}/{name}.status ] || echo mount >{o}/{name}.status\n\
             umount /mnt/m 2>/dev/null; {vs} close t-{name}; losetup -d $L\n",
            i = img.display(),
            vs = vs.display()
        ));
    }
    let mut failures = Vec::new();
    for k in &kernels {
        crate::clear(&out);
        let run = k.run(&script, &[&out]).unwrap();
        let text = |n: &str| crate::text_of(&out, n);
        let mut ways = vec!["vs"];
        if dmsetup.is_some() {
            ways.push("dm");
        }
        for (name, _, _) in &images {
            for way in &ways {
                let ok = text(&format!("{name}.{way}.sum")) == expect;
                println!(
                    "{}: {name} opened with {}: {}",
                    k.name(),
                    if *way == "vs" {
                        "veritysetup"
                    } else {
                        "dmsetup"
                    },
                    if ok { "equal" } else { "FAILED" }
                );
                if !ok {
                    failures.push(format!(
                        "{} {name} {way}: digest {:?}, {} / log: {:?}",
                        k.name(),
                        text(&format!("{name}.{way}.sum")),
                        text(&format!("{name}.{way}.err")),
                        run.fs_log()
                    ));
                }
            }
        }
        for name in ["bad-data", "bad-hash"] {
            let st = text(&format!("{name}.status"));
            let err = text(&format!("{name}.err"));
            println!("{}: {name}: status {st}: {err}", k.name());
            if st == "0" || (st != "mount" && !err.contains("Input/output error")) {
                failures.push(format!("{} {name}: read through ({st}): {err}", k.name()));
            }
        }
    }
    // ferrofs names the block too.
    let out = Command::new(FERROFS)
        .args(["fsck", "--verity", root])
        .arg(&bad_data)
        .output()
        .unwrap();
    let msg =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    if out.status.success() || !msg.contains("block") {
        failures.push(format!("fsck --verity of the tampered image: {msg}"));
    }
    ferrofs_testkit::tmp::finish(&w, &failures);
}
