//! fs-verity through Linux 7.2 in the VM (this machine's kernel and the
//! user-mode one have none): on an ext4 made with the verity feature,
//! the kernel's measure of every regular file of the corner tree and (in
//! the full matrix) of a real tree (`FS_IOC_MEASURE_VERITY`, by
//! `fsverity measure`) is what
//! `ferrofs digest` prints; a composefs image from `ferrofs mkcomposefs
//! --digest-store` mounts through overlayfs with `verity=require`, its
//! objects' verity enabled, and reads as it does here without verity
//! (and so does mount.composefs 1.0.8 `-o verity` of it); an object
//! replaced by other bytes (verity enabled on them) or without verity is
//! refused by the kernel (EIO) when its file is read.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofs_testkit::kernels::Kernel;
use ferrofs_testkit::tools::next_tool;
use ferrofs_testkit::verify::run_ok;
use ferrofs_testkit::{corpus, work_dir, LoopMount};

use crate::{FERROFS, TAR};

/// Regular files under `root` by relative path (UTF-8 names without a
/// newline, which the script's line-per-file list holds; not the corner
/// tree's thousands of one-line files in `bigdir`: each `fsverity enable`
/// is a process, slow under emulation).
fn regular_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(root.join(&rel)).unwrap().flatten() {
            let r = rel.join(e.file_name());
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(r);
            } else if ft.is_file()
                && r.to_str().is_some_and(|t| !t.contains('\n'))
                && !r.starts_with("bigdir")
            {
                out.push(r);
            }
        }
    }
    out.sort();
    out
}

/// `ferrofs digest` of each of `files` under `root`.
fn digests(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut cmd = Command::new(FERROFS);
    cmd.args(["digest", "--json"]);
    for f in files {
        cmd.arg(root.join(f));
    }
    let v: serde_json::Value = serde_json::from_slice(&run_ok(&mut cmd).unwrap()).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x["digest"].as_str().unwrap().to_string())
        .collect()
}

/// Quotes for `sh`.
fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

#[test]
fn the_7_2_kernel_measures_what_ferrofs_digests() {
    if !ferrofs_testkit::is_root() {
        println!("skipped: not root");
        return;
    }
    let vm = match Kernel::vm() {
        Ok(k) => k,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let Some(fsverity) = next_tool("fsverity") else {
        println!("skipped: no fsverity (../shared/tools/upstream-tools --next)");
        return;
    };
    let w = work_dir!("kernel_fsverity");
    let corner = w.join("corner");
    corpus::make_corner_tree(&corner).unwrap();
    let mut trees = vec![("corner", corner.clone())];
    // A real tree too in the full matrix (each `fsverity enable` is a
    // process, slow under emulation: the test suite checks the corner tree).
    let full = std::env::var_os("FERROFS_KERNEL_MATRIX").is_some_and(|v| v == "full");
    if full && Path::new("/usr/share/perl5").is_dir() {
        trees.push(("perl5", PathBuf::from("/usr/share/perl5")));
    }
    let mount_composefs = next_tool("mount.composefs");
    let out = w.join("out");
    fs::create_dir_all(&out).unwrap();
    let (o, fv) = (q(&out), q(&fsverity));
    let mut script = format!(
        "set +e\nPATH=$PATH:/usr/sbin:/sbin\n\
         truncate -s 768M /tmp/e.img && mkfs.ext4 -q -O verity -b 4096 /tmp/e.img && \
         mkdir -p /mnt/e && mount -o loop /tmp/e.img /mnt/e || {{ echo no-ext4 >{o}/status; exit 0; }}\n"
    );
    let mut want: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, root) in &trees {
        let files = regular_files(root);
        let list: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        fs::write(out.join(format!("{name}.list")), list.join("\n") + "\n").unwrap();
        want.insert(name.to_string(), digests(root, &files));
        script.push_str(&format!(
            "cp -a {src} /mnt/e/{name}\n\
             while IFS= read -r f; do {fv} enable \"/mnt/e/{name}/$f\"; done <{o}/{name}.list 2>{o}/{name}.enable.err\n\
             (cd /mnt/e/{name} && tr '\\n' '\\0' <{o}/{name}.list | xargs -0 {fv} measure) | \
             cut -d' ' -f1 >{o}/{name}.measured\n",
            src = q(root),
        ));
    }
    // composefs: our image and store; verity required of the objects.
    let img = w.join("corner.cfs");
    let store = w.join("store");
    run_ok(
        Command::new(FERROFS)
            .arg("mkcomposefs")
            .arg(format!("--digest-store={}", store.display()))
            .arg(&corner)
            .arg(&img),
    )
    .unwrap();
    let expect = {
        let m = LoopMount::new(&img, &[]).unwrap();
        let ov = LoopMount::composefs(m.path(), &store).unwrap();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{TAR} -C {} -cf - . 2>/dev/null | sha256sum | cut -c1-64",
                q(ov.path())
            ))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // The object of a file with data, to tamper with.
    let victim = "files/random/r65537";
    let digest = &digests(&corner, &[PathBuf::from(victim)])[0];
    let hex = digest.trim_start_matches("sha256:");
    let obj = format!("{}/{}", &hex[..2], &hex[2..]);
    let ov_opts = "ro,metacopy=on,redirect_dir=on,verity=require,lowerdir=/mnt/meta::/mnt/e/store";
    script.push_str(&format!(
        "cp -a {store} /mnt/e/store\n\
         find /mnt/e/store -type f | while IFS= read -r f; do {fv} enable \"$f\" 2>>{o}/enable.err; done\n\
         mkdir -p /mnt/meta /mnt/c\n\
         mount -t erofs -o ro,loop {img} /mnt/meta\n\
         mount -t overlay overlay -o {ov_opts} /mnt/c 2>{o}/cfs.err && \
         {{ {TAR} -C /mnt/c -cf - . 2>/dev/null | sha256sum | cut -c1-64 >{o}/cfs.sum; umount /mnt/c; }}\n\
         {mc} -o basedir=/mnt/e/store,verity {img} /mnt/c 2>{o}/mc.err && \
         {{ {TAR} -C /mnt/c -cf - . 2>/dev/null | sha256sum | cut -c1-64 >{o}/mc.sum; umount /mnt/c; }}\n\
         rm -f /mnt/e/store/{obj}; printf 'other bytes' >/mnt/e/store/{obj}; {fv} enable /mnt/e/store/{obj}\n\
         mount -t overlay overlay -o {ov_opts} /mnt/c && \
         {{ cat /mnt/c/{victim} >/dev/null 2>{o}/tampered.err; echo $? >{o}/tampered.status; umount /mnt/c; }}\n\
         {mc} -o basedir=/mnt/e/store,verity {img} /mnt/c && \
         {{ cat /mnt/c/{victim} >/dev/null 2>{o}/mc-tampered.err; echo $? >{o}/mc-tampered.status; umount /mnt/c; }}\n\
         rm -f /mnt/e/store/{obj}; cp {store}/{obj} /mnt/e/store/{obj}\n\
         mount -t overlay overlay -o {ov_opts} /mnt/c && \
         {{ cat /mnt/c/{victim} >/dev/null 2>{o}/noverity.err; echo $? >{o}/noverity.status; umount /mnt/c; }}\n\
         umount /mnt/meta; umount /mnt/e\n\
         echo done >{o}/status\n",
        store = q(&store),
        img = q(&img),
        mc = mount_composefs.as_deref().map(q).unwrap_or_else(|| "false".into()),
    ));
    let run = vm.run(&script, &[&out]).unwrap();
    let text = |n: &str| crate::text_of(&out, n);
    let mut failures = Vec::new();
    if text("status") != "done" {
        failures.push(format!(
            "the VM's script did not finish ({}): {:?}",
            text("status"),
            run.fs_log()
        ));
    }
    for (name, digests) in &want {
        let got: Vec<String> = text(&format!("{name}.measured"))
            .lines()
            .map(str::to_string)
            .collect();
        let same = got.iter().zip(digests).filter(|(a, b)| a == b).count();
        println!(
            "{name}: {same} of {} files measured as ferrofs digests them",
            digests.len()
        );
        if got != *digests {
            failures.push(format!("{name}: {same} of {} digests equal", digests.len()));
        }
    }
    let cfs = text("cfs.sum");
    println!(
        "composefs with verity=require: {}",
        if cfs == expect { "equal" } else { "differs" }
    );
    if cfs != expect {
        failures.push(format!(
            "composefs with verity=require: {cfs:?} / {}",
            text("cfs.err")
        ));
    }
    if mount_composefs.is_some() {
        let mc = text("mc.sum");
        println!(
            "mount.composefs -o verity: {}",
            if mc == expect { "equal" } else { "differs" }
        );
        if mc != expect {
            failures.push(format!(
                "mount.composefs -o verity: {mc:?} / {}",
                text("mc.err")
            ));
        }
    } else {
        println!("mount.composefs left out: not installed (upstream-tools --next)");
    }
    let cases: &[&str] = if mount_composefs.is_some() {
        &["tampered", "noverity", "mc-tampered"]
    } else {
        &["tampered", "noverity"]
    };
    for &case in cases {
        let (st, err) = (
            text(&format!("{case}.status")),
            text(&format!("{case}.err")),
        );
        println!("{case} object: cat exit {st}: {err}");
        if st == "0" || !err.contains("Input/output error") {
            failures.push(format!("{case} object read: exit {st:?}: {err}"));
        }
    }
    ferrofs_testkit::tmp::finish(&w, &failures);
}
