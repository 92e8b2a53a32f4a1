//! Page-cache sharing (Linux 7.0's `inode_share`, Debian's 7.2 built with
//! `CONFIG_EROFS_FS_PAGE_CACHE_SHARE`): two images holding the same 8 MiB
//! file among different ones, built with `--xattr-inode-digest`, mounted
//! in the VM with `inode_share,domain_id=…`: reading the file from one
//! image puts its pages in the page cache of the other's file too
//! (`fincore`), where without the option it stays uncached; the files
//! read equal either way. The user-mode kernel's verdict is printed.

use std::fs;
use std::path::Path;
use std::process::Command;

use ferrofs_testkit::corpus;
use ferrofs_testkit::kernels::Kernel;
use ferrofs_testkit::verify::run_ok;
use ferrofs_testkit::work_dir;

use crate::FERROFS;

const BIG: u64 = 8 << 20;

/// The script: both images mounted with `opts`, A's big file read, then
/// how many bytes of B's are cached, into `out/NAME`.
fn step(name: &str, opts: &str, a: &Path, b: &Path, out: &Path) -> String {
    let o = out.display();
    format!(
        "mkdir -p /mnt/a /mnt/b\n\
         if mount -t erofs -o ro,loop{opts} {a} /mnt/a 2>{o}/{name}.err && \
            mount -t erofs -o ro,loop{opts} {b} /mnt/b 2>>{o}/{name}.err; then\n\
           fincore --bytes --noheadings --output RES /mnt/b/big.bin >{o}/{name}.before\n\
           cat /mnt/a/big.bin >/dev/null\n\
           fincore --bytes --noheadings --output RES /mnt/b/big.bin >{o}/{name}.after\n\
           cmp /mnt/a/big.bin /mnt/b/big.bin; echo $? >{o}/{name}.cmp\n\
         else echo mount >{o}/{name}.cmp; fi\n\
         umount /mnt/a /mnt/b 2>/dev/null\n\
         echo 3 >/proc/sys/vm/drop_caches\n",
        a = a.display(),
        b = b.display(),
    )
}

#[test]
fn inode_share_shares_page_cache_between_images() {
    if !ferrofs_testkit::is_root() {
        println!("skipped: not root");
        return;
    }
    let w = work_dir!("kernel_ishare");
    let big = corpus::random_bytes(BIG as usize, 77);
    let mut imgs = Vec::new();
    for (name, other) in [("a", "only in a\n"), ("b", "only in b, longer\n")] {
        let t = w.join(name);
        fs::create_dir_all(&t).unwrap();
        fs::write(t.join("big.bin"), &big).unwrap();
        fs::write(t.join(format!("{name}.txt")), other).unwrap();
        let img = w.join(format!("{name}.img"));
        run_ok(
            Command::new(FERROFS)
                .args([
                    "mkfs",
                    "--quiet",
                    "-zlz4hc",
                    "-C65536",
                    "--xattr-inode-digest",
                ])
                .arg(&img)
                .arg(&t),
        )
        .unwrap();
        imgs.push(img);
    }
    let out = w.join("out");
    fs::create_dir_all(&out).unwrap();
    let script = step(
        "shared",
        ",inode_share,domain_id=ferrofs",
        &imgs[0],
        &imgs[1],
        &out,
    ) + &step("plain", "", &imgs[0], &imgs[1], &out);
    let mut failures = Vec::new();
    for k in crate::ready(vec![Kernel::vm(), Kernel::user_mode()]) {
        crate::clear(&out);
        let run = k.run(&script, &[&out]).unwrap();
        let text = |n: &str| crate::text_of(&out, n);
        let num = |n: &str| text(n).parse::<u64>().unwrap_or(u64::MAX);
        let (shared, plain) = (num("shared.after"), num("plain.after"));
        println!(
            "{}: B's file cached after reading A's: {} bytes with inode_share, {} without; \
             mount with inode_share: {}",
            k.name(),
            shared,
            plain,
            if text("shared.cmp") == "mount" {
                format!("refused: {}", text("shared.err"))
            } else {
                "ok".into()
            }
        );
        // The VM's kernel has the option: it must share. The user-mode
        // kernel's build is only reported.
        if matches!(k, Kernel::Vm(_)) {
            if text("shared.cmp") != "0" || text("plain.cmp") != "0" {
                failures.push(format!(
                    "{}: reads differ or mount failed: {} / {} / {:?}",
                    k.name(),
                    text("shared.cmp"),
                    text("shared.err"),
                    run.fs_log()
                ));
            }
            if shared < BIG || plain != 0 || num("shared.before") != 0 {
                failures.push(format!(
                    "{}: cached bytes of B's file: {} before and {shared} after with \
                     inode_share, {plain} without",
                    k.name(),
                    text("shared.before")
                ));
            }
        }
    }
    ferrofs_testkit::tmp::finish(&w, &failures);
}
