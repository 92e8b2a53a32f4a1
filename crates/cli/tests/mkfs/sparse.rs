//! `-E sparse`: runs of zeros in compressed files (the source's holes,
//! written zeros, a GNU tar's sparse members) become sparse pclusters:
//! LI_HOLE lcluster heads naming a shared pcluster of zeros, or empty
//! extent records in 48-bit images. For every codec, the images read back
//! equal to their source through this machine's kernel (which decodes the
//! pcluster of zeros; Linux 7.2 reads the holes as holes: the kernel
//! matrix checks it), through `ferrofs`, its FUSE mount and fsck.erofs
//! 1.9.4;
//! `extract` punches the holes; the summary says which kernels read them
//! as holes; `--base` reuses them byte for byte and `--incremental` adds
//! to such an image.

use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::compare::{self, CompareOptions};
use ferrofs_testkit::fuse::FuseMount;
use ferrofs_testkit::mount::{can_mount, LoopMount};
use ferrofs_testkit::tools;
use ferrofs_testkit::verify::run_ok;
use ferrofs_testkit::work_dir;

use crate::FERROFS;

/// Text that compresses (a few KiB per call, varied by `seed`).
fn text(n: usize, seed: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(n + 64);
    let mut k = seed;
    while v.len() < n {
        k = k.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        v.extend_from_slice(
            format!("line {} of the sparse tree: {}\n", v.len(), k >> 16).as_bytes(),
        );
    }
    v.truncate(n);
    v
}

/// A tree of files with holes and zeros of every kind.
fn make_tree(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    // A disk image: 64 MiB with data islands at unaligned offsets.
    let mut f = fs::File::create(dir.join("disk.img")).unwrap();
    f.set_len(64 << 20).unwrap();
    for (k, off) in [0u64, 12_345, 20 << 20, (40 << 20) + 777, (64 << 20) - 3000]
        .into_iter()
        .enumerate()
    {
        let d = text(200_000.min(((64 << 20) - off) as usize), k as u32);
        f.seek(SeekFrom::Start(off)).unwrap();
        f.write_all(&d).unwrap();
    }
    drop(f);
    // Zeros written out, between text, and at the end.
    let mut z = vec![0u8; 3 << 20];
    z.extend(text(30_000, 7));
    z.extend(vec![0u8; 2 << 20]);
    z.push(b'x');
    z.extend(vec![0u8; 100_000]);
    fs::write(dir.join("zeros.bin"), &z).unwrap();
    // Holes only, zeros only, and a file that is not sparse at all.
    fs::File::create(dir.join("hole-only"))
        .unwrap()
        .set_len(5 << 20)
        .unwrap();
    fs::write(dir.join("zero-only"), vec![0u8; 1 << 20]).unwrap();
    fs::write(dir.join("plain.txt"), text(50_000, 3)).unwrap();
}

/// `ferrofs mkfs --json` of `src` into `img`.
fn build(img: &Path, src: &Path, opts: &[&str]) -> serde_json::Value {
    let out = run_ok(
        Command::new(FERROFS)
            .args(["mkfs", "--json"])
            .args(opts)
            .arg(img)
            .arg(src),
    )
    .unwrap();
    serde_json::from_slice(&out).unwrap()
}

/// (holes, pclusters, index kind) of `path` in `img`, as `dump` shows
/// them.
fn map_of(img: &Path, path: &str) -> (usize, usize, String) {
    let out = run_ok(
        Command::new(FERROFS)
            .args(["dump", "--json", "--path", path])
            .arg(img),
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    if let Some(t) = v["extent_table"]["entries"].as_array() {
        let holes = t.iter().filter(|e| e["plen"] == 0).count();
        return (holes, t.len() - holes, "extents".into());
    }
    let ex = v["extents"].as_array().cloned().unwrap_or_default();
    let holes = ex.iter().filter(|e| e["map"]["type"] == "hole").count();
    let index = v["compression"]["index"].as_str().unwrap_or("").to_string();
    (holes, ex.len() - holes, index)
}

fn kernel_view() -> CompareOptions {
    CompareOptions {
        compare_owner: false,
        compare_mtime: false,
        skip_root_mode_owner: true,
        compare_xattrs: false,
        ..CompareOptions::strict()
    }
}

/// The kernel's mount of `img` against `src` (the caller checked that
/// this machine can mount): each difference, or the mount's failure, a
/// failure named `what`.
fn kernel_compare(img: &Path, src: &Path, what: &str, failures: &mut Vec<String>) {
    match LoopMount::new(img, &[]) {
        Ok(m) => {
            for d in compare::compare_trees(src, m.path(), &kernel_view()) {
                failures.push(format!("{what}: kernel: {d}"));
            }
        }
        Err(e) => failures.push(format!("{what}: mount: {e}")),
    }
}

#[test]
fn sparse_pclusters_read_back_for_every_codec() {
    let work = work_dir!("sparse_pclusters");
    let src = work.join("tree");
    make_tree(&src);
    let mount = can_mount();
    if let Err(why) = &mount {
        println!("kernel comparison skipped: {why}");
    }
    let fuse = mount.is_ok() && Path::new("/dev/fuse").exists();
    let fsck = tools::fsck_next();
    if fsck.is_none() {
        println!("fsck.erofs 1.9.x not found: its check is skipped");
    }
    let mut failures = Vec::new();
    for z in ["-zlz4hc", "-zlzma", "-zdeflate", "-zzstd"] {
        for form in [
            &["-C65536", "-Esparse"][..],
            &["-E48bit", "-C65536", "-Esparse"],
            &["-Esparse,fragments,dedupe"],
            &["-Esparse,ztailpacking"],
        ] {
            let tag = format!("{z} {}", form.join(" "));
            let img = work.join("s.img");
            let opts: Vec<&str> = [z].iter().chain(form).copied().collect();
            let s = build(&img, &src, &opts);
            let bit48 = form.contains(&"-E48bit");
            // disk.img, zeros.bin, hole-only (not 48-bit: a file of holes
            // only takes no blocks there) and zero-only.
            let want = if bit48 { 3 } else { 4 };
            if s["sparse_files"] != want {
                failures.push(format!(
                    "{tag}: sparse_files {} (want {want})",
                    s["sparse_files"]
                ));
            }
            // The summary says Linux 7.2 for holes in lcluster indexes only.
            let sparse_holes = s["linux"]["sparse_holes"].as_str();
            if sparse_holes != (!bit48).then_some("7.2") {
                failures.push(format!("{tag}: linux {}", s["linux"]));
            }
            let (holes, pclusters, index) = map_of(&img, "/disk.img");
            let want_index = if bit48 { "extents" } else { "full" };
            if holes < 3 || pclusters == 0 || index != want_index {
                failures.push(format!(
                    "{tag}: /disk.img: {holes} holes, {pclusters} pclusters, {index}"
                ));
            }
            // Through ferrofs.
            if let Err(e) = run_ok(Command::new(FERROFS).arg("fsck").arg(&img)) {
                failures.push(format!("{tag}: fsck: {e}"));
            }
            let out = work.join("x");
            let _ = fs::remove_dir_all(&out);
            match run_ok(Command::new(FERROFS).arg("extract").arg(&img).arg(&out)) {
                Ok(_) => {
                    for d in compare::compare_trees(&src, &out, &kernel_view()) {
                        failures.push(format!("{tag}: extract: {d}"));
                    }
                    // The holes are punched, not written.
                    let m = fs::metadata(out.join("disk.img")).unwrap();
                    if m.blocks() * 512 > 4 << 20 {
                        failures.push(format!("{tag}: extract wrote {} blocks", m.blocks()));
                    }
                }
                Err(e) => failures.push(format!("{tag}: extract: {e}")),
            }
            // Through this machine's kernel.
            if mount.is_ok() {
                kernel_compare(&img, &src, &tag, &mut failures);
            }
            // Through the FUSE mount (two codecs are enough: it reads
            // through the same library as extract).
            if fuse && matches!(z, "-zlz4hc" | "-zlzma") {
                let dir = work.join("fuse");
                let m = FuseMount::new(Path::new(FERROFS), img.as_os_str(), &dir, &[]);
                for d in compare::compare_trees(&src, &dir, &kernel_view()) {
                    failures.push(format!("{tag}: FUSE: {d}"));
                }
                m.unmount();
            }
            // fsck.erofs 1.9.4 reads the pcluster of zeros (it knows no
            // LI_HOLE) and empty extent records as holes.
            if let Some(f) = &fsck {
                let x = work.join("fx");
                let _ = fs::remove_dir_all(&x);
                let arg = format!("--extract={}", x.display());
                match f.run(&[arg.as_str(), img.to_str().unwrap()]) {
                    Ok(_) => {
                        for name in ["disk.img", "zeros.bin", "zero-only", "plain.txt"] {
                            if fs::read(x.join(name)).ok() != fs::read(src.join(name)).ok() {
                                failures
                                    .push(format!("{tag}: fsck.erofs extracts {name} otherwise"));
                            }
                        }
                    }
                    Err(e) => failures.push(format!("{tag}: fsck.erofs: {e}")),
                }
            }
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

#[test]
fn sparse_pclusters_cost_no_blocks_and_leave_other_images_alone() {
    let work = work_dir!("sparse_sizes");
    let src = work.join("tree");
    make_tree(&src);
    let mut failures = Vec::new();
    let size = |p: &Path| fs::metadata(p).unwrap().len();
    let (a, b, c) = (work.join("a.img"), work.join("b.img"), work.join("c.img"));
    // In a 48-bit image, the holes take no blocks: the image holds about
    // the data's compressed bytes, where zeros compressed take a block
    // per extent and the source's holes a chunk table.
    build(&a, &src, &["-zlz4hc", "-C65536", "-E48bit"]);
    build(&b, &src, &["-zlz4hc", "-C65536", "-E48bit", "-Esparse"]);
    if size(&b) * 2 > size(&a) {
        failures.push(format!(
            "48-bit: {} bytes with -Esparse, {} without",
            size(&b),
            size(&a)
        ));
    }
    // -E nosparse, or no option at all, is the same image.
    build(
        &c,
        &src,
        &["-zlz4hc", "-C65536", "-E48bit", "-Esparse,nosparse"],
    );
    if fs::read(&a).unwrap() != fs::read(&c).unwrap() {
        failures.push("-E sparse,nosparse differs from no option".into());
    }
    // An 8 TiB file with one byte of data: in a 48-bit image one hole
    // record; in the classic layout, past the length whose full index is
    // made, chunk-based as without the option (not 16 GiB of index).
    let huge = work.join("huge");
    fs::create_dir_all(&huge).unwrap();
    let mut f = fs::File::create(huge.join("disk")).unwrap();
    f.set_len(8 << 40).unwrap();
    f.seek(SeekFrom::Start(5 << 40)).unwrap();
    f.write_all(b"x").unwrap();
    drop(f);
    for (opts, want) in [
        (
            &["-zlz4hc", "-E48bit", "-Esparse,ztailpacking"][..],
            "extents",
        ),
        (&["-zlz4hc", "-Esparse"], "chunks"),
    ] {
        let img = work.join("huge.img");
        let s = build(&img, &huge, opts);
        let out = run_ok(
            Command::new(FERROFS)
                .args(["dump", "--json", "--path", "/disk"])
                .arg(&img),
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let got = if v["extent_table"].is_object() {
            "extents"
        } else if v["chunks"].is_object() {
            "chunks"
        } else {
            "other"
        };
        // (The chunk form stores the data's chunk whole: its size is the
        // chunk plan's, as without the option.)
        if got != want || (want == "extents" && size(&img) > 1 << 20) {
            failures.push(format!("8 TiB {opts:?}: {got}, {} bytes: {s}", size(&img)));
        }
    }
    // Without -z the option is refused.
    let st = Command::new(FERROFS)
        .args(["mkfs", "--quiet", "-Esparse"])
        .arg(work.join("d.img"))
        .arg(&src)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&st.stderr);
    if st.status.success() || !err.contains("need -z") {
        failures.push(format!("-E sparse without -z: {err}"));
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

#[test]
fn base_and_incremental_keep_sparse_pclusters() {
    let work = work_dir!("sparse_base");
    let src = work.join("tree");
    make_tree(&src);
    let mut failures = Vec::new();
    for form in [
        &["-Esparse"][..],
        &["-E48bit", "-Esparse,ztailpacking"],
        &["-Esparse,fragments,dedupe"],
    ] {
        let tag = form.join(" ");
        let mut opts = vec!["-zlz4hc", "-C65536"];
        opts.extend(form);
        let old = work.join("old.img");
        build(&old, &src, &opts);
        // The same tree over the old image: every file reused, the same bytes.
        let new = work.join("new.img");
        let base = format!("--base={}", old.display());
        let mut with_base = opts.clone();
        with_base.push(&base);
        let s = build(&new, &src, &with_base);
        let files = s["base"]["reused_files"].as_u64().unwrap_or(0);
        // (A file whole in the packed inode, and one of holes only in a
        // 48-bit image, are not compressed on their own: not reused.)
        if files < 4 || fs::read(&old).unwrap() != fs::read(&new).unwrap() {
            failures.push(format!("{tag}: --base reused {files} files: {}", s["base"]));
        }
        // --incremental (which takes no fragments): a new sparse file and
        // a changed one over it.
        if tag.contains("fragments") {
            continue;
        }
        let src2 = work.join("tree2");
        let _ = fs::remove_dir_all(&src2);
        run_ok(
            Command::new("cp")
                .args(["-a", "--sparse=always"])
                .arg(&src)
                .arg(&src2),
        )
        .unwrap();
        let mut f = fs::File::create(src2.join("new-disk.img")).unwrap();
        f.set_len(30 << 20).unwrap();
        f.seek(SeekFrom::Start(10 << 20)).unwrap();
        f.write_all(&text(100_000, 9)).unwrap();
        drop(f);
        fs::OpenOptions::new()
            .append(true)
            .open(src2.join("zeros.bin"))
            .unwrap()
            .write_all(b"more")
            .unwrap();
        let mut inc = opts.clone();
        inc.push("--incremental");
        let s = build(&old, &src2, &inc);
        if s["sparse_files"].as_u64() != Some(2) {
            failures.push(format!("{tag}: --incremental: {s}"));
        }
        if let Err(e) = run_ok(Command::new(FERROFS).arg("fsck").arg(&old)) {
            failures.push(format!("{tag}: fsck after --incremental: {e}"));
        }
        let (holes, _, _) = map_of(&old, "/new-disk.img");
        if holes == 0 {
            failures.push(format!("{tag}: --incremental: the new file has no holes"));
        }
        match can_mount() {
            Ok(()) => kernel_compare(&old, &src2, &format!("{tag}: --incremental"), &mut failures),
            Err(why) => println!("kernel comparison skipped: {why}"),
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

#[test]
fn tar_sparse_members_become_sparse_pclusters() {
    let work = work_dir!("sparse_tar");
    let src = work.join("tree");
    make_tree(&src);
    let mut failures = Vec::new();
    let dir_img = work.join("dir.img");
    build(&dir_img, &src, &["-zlzma", "-C65536", "-Esparse"]);
    for format in ["gnu", "pax"] {
        let tar = work.join(format!("{format}.tar"));
        run_ok(
            Command::new("tar")
                .args(["--sparse", "--sort=name", &format!("--format={format}")])
                .arg("-C")
                .arg(&src)
                .arg("-cf")
                .arg(&tar)
                .arg("."),
        )
        .unwrap();
        let img = work.join(format!("{format}.img"));
        let out = run_ok(
            Command::new(FERROFS)
                .args(["mkfs", "--json", "-zlzma", "-C65536", "-Esparse", "--tar=f"])
                .arg(&img)
                .arg(&tar),
        )
        .unwrap();
        let s: serde_json::Value = serde_json::from_slice(&out).unwrap();
        if s["sparse_files"] != 4 {
            failures.push(format!("{format}: sparse_files {}", s["sparse_files"]));
        }
        // The same holes as the directory's image.
        for f in ["/disk.img", "/zeros.bin", "/hole-only"] {
            let (a, b) = (map_of(&dir_img, f), map_of(&img, f));
            if a != b {
                failures.push(format!("{format}: {f}: {b:?}, from the directory {a:?}"));
            }
        }
        match can_mount() {
            Ok(()) => kernel_compare(&img, &src, format, &mut failures),
            Err(why) => println!("kernel comparison skipped: {why}"),
        }
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}
