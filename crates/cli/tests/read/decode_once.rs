//! `ferrofs fsck` and `ferrofs extract` decode every compressed pcluster of
//! the reference images once (the packed inode's, the metabox's and
//! compressed directories' included), counted against `ferrofs dump`'s
//! statistics, and give the same reports and trees on one thread and on
//! three. No root needed.

use std::path::{Path, PathBuf};

use ferrofs_testkit::verify;

use crate::FERROFS;

fn images() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let mut v: Vec<PathBuf> = [dir.clone(), dir.join("v19")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "erofs"))
        .collect();
    v.sort();
    v
}

#[test]
fn fsck_and_extract_decode_each_pcluster_of_the_reference_images_once() {
    let work = std::env::temp_dir().join(format!("ferrofs-decode-once-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let mut failures = Vec::new();
    for img in images() {
        let name = img.file_name().unwrap().to_string_lossy().into_owned();
        let fsck = verify::run_ok(
            std::process::Command::new(FERROFS)
                .args(["fsck", "--json"])
                .arg(&img),
        );
        let out = work.join(&name);
        let extract = verify::run_ok(
            std::process::Command::new(FERROFS)
                // Owners need root; the counters do not.
                .args(["extract", "--json", "--no-owners"])
                .arg(&img)
                .arg(&out),
        );
        match (fsck, extract) {
            (Ok(f), Ok(x)) => failures.extend(
                verify::decoded_once(Path::new(FERROFS), &img, &f, Some(&x))
                    .into_iter()
                    .map(|e| format!("{name}: {e}")),
            ),
            (Err(e), _) | (_, Err(e)) => failures.push(format!("{name}: {e}")),
        }
        let _ = std::fs::remove_dir_all(&out);
        failures.extend(verify::same_for_any_thread_count(
            Path::new(FERROFS),
            &name,
            &img,
            &work,
        ));
    }
    let _ = std::fs::remove_dir_all(&work);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
