//! The kernel matrix: images of the corner tree and (with
//! `FERROFS_KERNEL_MATRIX=full`, as `scripts/kernel-matrix.sh` runs it)
//! of a real tree (this machine's /usr/lib/python3.11), built over the
//! option sets of the pinned-image test and the 2025 format's, and
//! mkfs.erofs 1.9.4's images of the same trees, are mounted by every
//! kernel available (this machine's, Linux 7.2 as a user-mode kernel
//! and Linux 7.2 in a VM: `ferrofs_testkit::kernels`), and GNU tar of
//! each mount must have the SHA-256 of `ferrofs export --no-sparse` of
//! the image (which the export tests prove byte-identical to GNU tar of
//! this kernel's mount, metadata included). One boot per kernel runs
//! every case.
//!
//! Prints one table, option set × kernel → equal / differs / refused,
//! with the kernel's log line for anything but "equal"; every cell must
//! be "equal" but those of a kernel that lacks the image's codec (the
//! user-mode kernel has LZ4 only). `FERROFS_KERNEL_TABLE`
//! names a file to write the table to as well. Kernels that cannot run
//! here are skipped with the reason.

mod cases;
mod fsverity;
mod ishare;
mod sparse_read;
mod verity;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use ferrofs_testkit::kernels::{Kernel, KernelOutput};
use ferrofs_testkit::work_dir;

use cases::Case;

const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

/// GNU tar as `ferrofs export` writes (see crates/check/src/export.rs).
pub(crate) const TAR: &str =
    "tar --sort=name --format=pax --numeric-owner --xattrs --xattrs-include='*' \
     --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime";

/// The kernels of `list` that can run here; the others are skipped with
/// the reason printed.
pub(crate) fn ready(list: Vec<Result<Kernel, String>>) -> Vec<Kernel> {
    list.into_iter()
        .filter_map(|k| k.map_err(|why| println!("kernel skipped: {why}")).ok())
        .collect()
}

/// Empties the shared output directory `out` for the next kernel's run.
pub(crate) fn clear(out: &Path) {
    for f in fs::read_dir(out).unwrap().flatten() {
        fs::remove_file(f.path()).unwrap();
    }
}

/// The trimmed text of `out/name` ("" when the script did not write it).
pub(crate) fn text_of(out: &Path, name: &str) -> String {
    String::from_utf8_lossy(&fs::read(out.join(name)).unwrap_or_default())
        .trim()
        .to_string()
}

/// What one kernel made of one case.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Cell {
    Equal,
    Differs(String),
    Refused(String),
}

impl Cell {
    fn word(&self) -> &'static str {
        match self {
            Cell::Equal => "equal",
            Cell::Differs(_) => "differs",
            Cell::Refused(_) => "refused",
        }
    }
}

/// The script that mounts every case in turn under one kernel, hashes
/// GNU tar of the mount (writing the archive to `out/N.tar` only when its
/// hash is not the expected one: writes through 9p are slow in the VM),
/// and keeps the kernel's new log lines in `out/N.log`.
fn script(cases: &[Case], picked: &[usize], out: &Path) -> String {
    let mut s = String::from("set +e\nmkdir -p /mnt/m\n");
    for &i in picked {
        let c = &cases[i];
        let o = out.display();
        s.push_str(&format!(
            "n=$(dmesg 2>/dev/null | wc -l)\n\
             if ( {mount} ) >{o}/{i}.mount 2>&1; then\n\
               d=$( {{ {TAR} -C /mnt/m -cf - . 2>{o}/{i}.tarerr; echo $? >{o}/{i}.tarst; }} | sha256sum | cut -c1-64)\n\
               echo \"$(cat {o}/{i}.tarst) $d\" >{o}/{i}.status\n\
               if [ \"$d\" != {want} ]; then {TAR} -C /mnt/m -cf {o}/{i}.tar . 2>{o}/{i}.tarerr; fi\n\
               umount /mnt/m\n\
             else echo mount >{o}/{i}.status; fi\n\
             {cleanup}\n\
             dmesg 2>/dev/null | tail -n +$((n + 1)) >{o}/{i}.log\n",
            mount = c.mount,
            cleanup = c.cleanup,
            want = c.digest,
        ));
    }
    s
}

/// The cases kernel `k` runs: all of them, but for the VM outside the
/// full matrix (`FERROFS_KERNEL_MATRIX=full`), where emulation makes each
/// slow: there only what the user-mode 7.2 cannot read (codecs other than
/// LZ4) and the stacks of mounts.
fn picked(k: &Kernel, cases: &[Case]) -> Vec<usize> {
    let full = std::env::var_os("FERROFS_KERNEL_MATRIX").is_some_and(|v| v == "full");
    (0..cases.len())
        .filter(|&i| {
            let c = &cases[i];
            full || !matches!(k, Kernel::Vm(_)) || c.stack || c.codecs.iter().any(|x| x != "lz4")
        })
        .collect()
}

/// The kernel log line that explains a failure best: one of EROFS's own,
/// else one about overlayfs, dm-verity or an error; else the last line
/// of `fallback` (the command's own message).
fn reason(log: &str, fallback: &str) -> String {
    let find = |keys: &[&str]| {
        log.lines()
            .find(|l| {
                let l = l.to_ascii_lowercase();
                keys.iter().any(|k| l.contains(k))
            })
            .map(|l| l.trim().to_string())
    };
    find(&["erofs"])
        .or_else(|| find(&["overlay", "verity", "device-mapper", "error", "i/o"]))
        .unwrap_or_else(|| fallback.trim().lines().last().unwrap_or("").to_string())
}

fn judge(case: &Case, i: usize, out: &Path, run: &KernelOutput) -> Cell {
    let read = |ext: &str| fs::read(out.join(format!("{i}.{ext}"))).unwrap_or_default();
    let text = |ext: &str| String::from_utf8_lossy(&read(ext)).into_owned();
    let log = text("log");
    let log = if log.trim().is_empty() {
        run.fs_log().join("\n")
    } else {
        log
    };
    let status = text("status");
    let mut words = status.split_whitespace();
    match (words.next(), words.next()) {
        (Some("0" | "1"), Some(d)) if d == case.digest => Cell::Equal,
        (Some("0" | "1"), Some(_)) => Cell::Differs(format!(
            "{} (archive in {})",
            reason(&log, &text("tarerr")),
            out.join(format!("{i}.tar")).display()
        )),
        (Some("mount"), _) => Cell::Refused(reason(&log, &text("mount"))),
        (None, _) => Cell::Refused(format!(
            "did not run (status {}): {}",
            run.status,
            reason(&run.log, &String::from_utf8_lossy(&run.stderr))
        )),
        (Some(st), _) => Cell::Differs(format!("tar exit {st}: {}", text("tarerr").trim())),
    }
}

#[test]
fn every_kernel_reads_every_image_as_export_writes_it() {
    if !ferrofs_testkit::is_root() {
        println!("skipped: not root (loop mounts, the corner tree)");
        return;
    }
    let work = work_dir!("kernel_matrix");
    let cases = cases::build_all(&work);
    let mut table: BTreeMap<String, Vec<(String, Cell)>> = BTreeMap::new();
    let mut kernels = Vec::new();
    let mut failures = Vec::new();
    let ready = ready(Kernel::available());
    // The kernels run side by side (the user-mode kernel takes one core,
    // the VM's emulation the rest).
    let runs: Vec<(PathBuf, KernelOutput)> = std::thread::scope(|scope| {
        let handles: Vec<_> = ready
            .iter()
            .map(|k| {
                let (work, cases) = (&work, &cases);
                scope.spawn(move || {
                    let out = work.join(format!("out-{}", k.name()));
                    fs::create_dir_all(&out).unwrap();
                    let start = std::time::Instant::now();
                    let picked = picked(k, cases);
                    let run = k.run(&script(cases, &picked, &out), &[&out]).unwrap();
                    println!(
                        "{}: {} cases in {:.1} s",
                        k.name(),
                        picked.len(),
                        start.elapsed().as_secs_f64()
                    );
                    (out, run)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (k, (out, run)) in ready.iter().zip(&runs) {
        for i in picked(k, &cases) {
            let c = &cases[i];
            let cell = judge(c, i, out, run);
            let supported = c.codecs.iter().all(|x| k.has_codec(x));
            // A kernel without the codec may refuse the mount or fail
            // the reads; the table shows which.
            let ok = !supported || cell == Cell::Equal;
            if !ok {
                failures.push(format!("{} under {}: {cell:?}", c.name, k.name()));
            }
            table
                .entry(c.name.clone())
                .or_default()
                .push((k.name().to_string(), cell));
        }
        kernels.push(k.name());
    }
    let text = render(&kernels, &cases, &table);
    println!("{text}");
    if let Some(p) = std::env::var_os("FERROFS_KERNEL_TABLE") {
        fs::write(PathBuf::from(p), &text).unwrap();
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}

/// The table as Markdown, notes below it.
fn render(
    kernels: &[&str],
    cases: &[Case],
    table: &BTreeMap<String, Vec<(String, Cell)>>,
) -> String {
    let mut t = format!("| image | {} |\n|---|", kernels.join(" | "));
    for _ in kernels {
        t.push_str("---|");
    }
    t.push('\n');
    let mut notes = Vec::new();
    for c in cases {
        let row = table.get(&c.name).cloned().unwrap_or_default();
        t.push_str(&format!("| {} |", c.name));
        for k in kernels {
            let cell = row.iter().find(|(n, _)| n == k).map(|(_, c)| c.clone());
            match cell {
                Some(cell) => {
                    t.push_str(&format!(" {} |", cell.word()));
                    if let Cell::Differs(why) | Cell::Refused(why) = &cell {
                        notes.push(format!("- {} under {k}: {why}", c.name));
                    }
                }
                None => t.push_str(" - |"),
            }
        }
        t.push('\n');
    }
    if !notes.is_empty() {
        t.push('\n');
        t.push_str(&notes.join("\n"));
        t.push('\n');
    }
    t
}
