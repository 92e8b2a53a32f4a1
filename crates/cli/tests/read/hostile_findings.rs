//! Inputs `bench/hostile-sweep.py` found bugs with, kept in
//! testdata/hostile/: every reading command ends in an error or a result,
//! within bounds (1 GiB of address space, 60 s), never a panic or an
//! allocation failure.
//!
//! - `flat-size-2e53.cfs`: a composefs image whose long-named file has a
//!   size of 2^53 bytes in a FLAT_INLINE layout from block 0: fsck planned
//!   a read step per MiB of it and died allocating 4 GiB. Its blocks now
//!   fail the map as running past the image.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ferrofs_testkit::work_dir;

use crate::FERROFS;

#[test]
fn sweep_findings_end_in_errors_within_bounds() {
    let work = work_dir!("hostile_findings");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/hostile");
    let mut failures = Vec::new();
    let mut seen = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let input = e.unwrap().path();
        seen += 1;
        let out = work.join("out");
        let name = input.file_name().unwrap().to_string_lossy().into_owned();
        let inp = input.to_str().unwrap();
        let o = out.to_str().unwrap();
        for args in [
            vec!["fsck", inp],
            vec!["extract", inp, o],
            vec!["ls", "-lR", inp, "/"],
            vec!["dump", "--json", inp],
        ] {
            let _ = std::fs::remove_dir_all(&out);
            let r = Command::new("timeout")
                .arg(Duration::from_secs(60).as_secs().to_string())
                .args(["prlimit", "--as=1073741824", "--"])
                .arg(FERROFS)
                .args(&args)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&r.stderr);
            let code = r.status.code();
            let bug = err.contains("panicked")
                || err.contains("memory allocation")
                || !matches!(code, Some(0..=3));
            if bug {
                failures.push(format!("{name}: {}: exit {code:?}: {err}", args[0]));
            }
        }
    }
    assert!(seen > 0, "no inputs in {}", dir.display());
    let fsck = Command::new(FERROFS)
        .arg("fsck")
        .arg(dir.join("flat-size-2e53.cfs"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&fsck.stdout);
    if fsck.status.code() != Some(1) || !text.contains("run past the end of the image") {
        failures.push(format!(
            "flat-size-2e53.cfs: fsck: {:?}: {text}",
            fsck.status.code()
        ));
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}
