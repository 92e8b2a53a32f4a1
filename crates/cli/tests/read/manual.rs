//! The man pages in `docs/man/` and the completions in `docs/completions/`
//! are what the command generates from its current definitions
//! (`scripts/manual.sh` regenerates them), and every man page renders.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::FERROFS;

fn docs() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

#[test]
fn man_pages_and_completions_are_current() {
    let tmp = ferrofs_testkit::work_dir!("manual");
    let out = tmp.join("man");
    let st = Command::new(FERROFS)
        .arg("manpages")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    let mut failures = Vec::new();
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .map(|r| {
                r.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let (want, have) = (names(&out), names(&docs().join("man")));
    if want != have {
        failures.push(format!("docs/man has {have:?}, the command makes {want:?}"));
    }
    for n in &want {
        let fresh = fs::read(out.join(n)).unwrap();
        if fs::read(docs().join("man").join(n)).ok() != Some(fresh) {
            failures.push(format!("docs/man/{n} is not current"));
        }
    }
    for (shell, file) in [
        ("bash", "ferrofs.bash"),
        ("zsh", "_ferrofs"),
        ("fish", "ferrofs.fish"),
    ] {
        let o = Command::new(FERROFS)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(o.status.success());
        if fs::read(docs().join("completions").join(file)).ok() != Some(o.stdout) {
            failures.push(format!("docs/completions/{file} is not current"));
        }
    }
    if !failures.is_empty() {
        failures.push("run scripts/manual.sh and commit the result".into());
    }
    // Each page renders without warnings (where groff is installed).
    if Command::new("groff").arg("-v").output().is_ok() {
        for n in &want {
            let o = Command::new("groff")
                .args(["-man", "-Tutf8", "-ww", "-z"])
                .arg(out.join(n))
                .output()
                .unwrap();
            if !o.status.success() || !o.stderr.is_empty() {
                failures.push(format!(
                    "groff on {n}: {}",
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
        }
    } else {
        println!("rendering check skipped: groff is not installed");
    }
    ferrofs_testkit::tmp::finish(&tmp, &failures);
}
