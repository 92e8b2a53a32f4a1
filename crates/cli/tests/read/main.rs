//! The reading side of the `ferrofs` binary (fsck, extract, dump, ls, cat)
//! on images by the reference mkfs.erofs (1.5, 1.8.6, 1.9.4) and on damaged
//! or unusual images, with the kernel's EROFS driver as the oracle where it
//! can mount them. One test binary; each module is one area. Tests that need
//! root or the kernel print `skipped: REASON` without them.

/// The binary under test.
const FERROFS: &str = env!("CARGO_BIN_EXE_ferrofs");

/// The corner tree with a symlink `link` -> `target` added, built by
/// `ferrofs mkfs --quiet ARGS` in the fresh work directory `name`: its
/// image, and the directory. `None` (said why) where the kernel cannot
/// mount it to compare.
fn corner_image(
    name: &str,
    args: &[&str],
    (link, target): (&str, &str),
) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    if let Err(why) = ferrofs_testkit::mount::can_mount() {
        println!("skipped: {why}");
        return None;
    }
    let w = ferrofs_testkit::work_dir!(name);
    let src = w.join("tree");
    ferrofs_testkit::corpus::make_corner_tree(&src).unwrap();
    std::os::unix::fs::symlink(target, src.join(link)).unwrap();
    let img = w.join("corner.img");
    let o = std::process::Command::new(FERROFS)
        .args(["mkfs", "--quiet"])
        .args(args)
        .arg(&img)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some((img, w))
}

mod closed_pipe;
mod composefs;
mod decode_once;
mod dump_v19;
mod export;
mod extract_batches;
mod extract_path;
mod extract_xattrs;
mod fixtures_v19;
mod fsck_warnings;
mod hostile_findings;
mod kernel_refused;
mod ls_json;
mod manual;
mod remote_errors;
mod unsupported_features;
mod upstream_images;
mod user_errors;
mod verity;
mod verity_tamper;
