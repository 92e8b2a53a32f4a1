//! An image with an incompatible feature bit ferrofs does not know is
//! refused as *unsupported*, naming the bits, not as corrupt; damage stays
//! "corrupt". The images are testdata's reference images with the
//! superblock patched (and its CRC32C recomputed, so only the feature bits
//! differ).

use std::path::Path;
use std::process::{Command, Output};

use ferrofs_format::superblock::{checksum_len, compute_checksum};
use ferrofs_format::{BlockSize, SUPERBLOCK_OFFSET};
use ferrofs_testkit::tools;

use crate::FERROFS;
use ferrofs_testkit::work_dir;
/// `feature_incompat` in the superblock.
const INCOMPAT_AT: usize = SUPERBLOCK_OFFSET as usize + 0x50;

/// Recomputes the superblock checksum of a 4 KiB-block image.
fn fix_crc(bytes: &mut [u8]) {
    let start = SUPERBLOCK_OFFSET as usize;
    let len = checksum_len(BlockSize::from_bits(12).unwrap());
    let crc = compute_checksum(&bytes[start..start + len]);
    bytes[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

fn with_incompat(bytes: &[u8], extra: u32) -> Vec<u8> {
    let mut b = bytes.to_vec();
    let old = u32::from_le_bytes(b[INCOMPAT_AT..INCOMPAT_AT + 4].try_into().unwrap());
    b[INCOMPAT_AT..INCOMPAT_AT + 4].copy_from_slice(&(old | extra).to_le_bytes());
    fix_crc(&mut b);
    b
}

fn ferrofs(args: &[&str], img: &Path) -> Output {
    Command::new(FERROFS).args(args).arg(img).output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn unknown_incompat_bits_are_unsupported_not_corrupt() {
    let w = work_dir!("incompat_bits");
    let root = tools::workspace_root().join("testdata");
    for name in ["v19/e48.erofs", "v19/kitchen-sink.erofs", "v19/MZ.erofs"] {
        let orig = std::fs::read(root.join(name)).unwrap();
        // The untouched image is clean.
        let clean = w.join("clean.erofs");
        std::fs::write(&clean, &orig).unwrap();
        let o = ferrofs(&["fsck", "--no-data"], &clean);
        assert!(o.status.success(), "{name}: {}", text(&o));

        for (bits, names) in [
            (0x200u32, &["0x200"][..]),
            (0x8000_0400, &["0x400", "0x80000000"][..]),
        ] {
            let img = w.join(format!("{}-{bits:x}.erofs", name.replace('/', "-")));
            std::fs::write(&img, with_incompat(&orig, bits)).unwrap();
            for cmd in [&["fsck"][..], &["dump"], &["ls"]] {
                let o = ferrofs(cmd, &img);
                let t = text(&o);
                assert_eq!(o.status.code(), Some(2), "{name} {cmd:?}: {t}");
                assert!(t.contains("unsupported:"), "{name} {cmd:?}: {t}");
                assert!(!t.contains("corrupt"), "{name} {cmd:?}: {t}");
                for n in names {
                    assert!(t.contains(n), "{name} {cmd:?}: {n} not named: {t}");
                }
                // The known bits of the image are not called unknown.
                assert!(!t.contains("unknown 0x80,"), "{name}: {t}");
            }
            // The library says the same, and does not call it damage.
            let e = ferrofs::Image::open_path(&img).unwrap_err();
            assert!(
                matches!(e, ferrofs::Error::Unsupported { .. }),
                "{name}: {e:?}"
            );
            assert!(!e.is_corruption(), "{name}: {e}");
            assert_eq!(
                std::io::Error::from(e).kind(),
                std::io::ErrorKind::Unsupported
            );
        }

        // Damage elsewhere stays corrupt: a superblock byte changed without
        // the checksum,
        let mut b = orig.clone();
        b[SUPERBLOCK_OFFSET as usize + 0x30] ^= 0xff; // a UUID byte
        let img = w.join("badcrc.erofs");
        std::fs::write(&img, &b).unwrap();
        let o = ferrofs(&["fsck"], &img);
        let t = text(&o);
        // Damage found at open is damage: fsck's exit status 1.
        assert_eq!(o.status.code(), Some(1), "{name}: {t}");
        assert!(
            t.contains("corrupt") && t.contains("checksum"),
            "{name}: {t}"
        );
        assert!(!t.contains("unsupported:"), "{name}: {t}");
        // the same unknown bit without the checksum fixed (a flipped bit,
        // as the kernel sees it: the checksum is checked first),
        let mut b = orig.clone();
        b[INCOMPAT_AT + 1] |= 0x02; // 0x200
        let img = w.join("flipped.erofs");
        std::fs::write(&img, &b).unwrap();
        let t = text(&ferrofs(&["fsck"], &img));
        assert!(
            t.contains("corrupt") && t.contains("checksum"),
            "{name}: {t}"
        );
        assert!(!t.contains("unsupported:"), "{name}: {t}");
        // a bad magic (checksum fixed),
        let mut b = orig.clone();
        b[SUPERBLOCK_OFFSET as usize] ^= 1;
        let img = w.join("badmagic.erofs");
        std::fs::write(&img, &b).unwrap();
        let t = text(&ferrofs(&["fsck"], &img));
        assert!(
            t.contains("not an EROFS image (no superblock magic at byte 1024)"),
            "{name}: {t}"
        );
        // and a metabox image whose metabox nid has bit 63 (the kernel
        // refuses it as invalid), with the checksum fixed.
        if name.contains("kitchen") {
            let mut b = orig.clone();
            b[SUPERBLOCK_OFFSET as usize + 128 + 7] |= 0x80;
            fix_crc(&mut b);
            let img = w.join("badmetabox.erofs");
            std::fs::write(&img, &b).unwrap();
            let o = ferrofs(&["fsck"], &img);
            let t = text(&o);
            assert_eq!(o.status.code(), Some(1), "{name}: {t}");
            assert!(
                t.contains("corrupt") && t.contains("metabox"),
                "{name}: {t}"
            );
        }
    }
}

/// Damage past the superblock in an image that is otherwise supported is
/// reported by fsck as corrupt (exit 1), never as unsupported.
#[test]
fn damaged_inode_is_corrupt() {
    let w = work_dir!("incompat_damage");
    let src = tools::workspace_root().join("testdata/v19/e48.erofs");
    let orig = std::fs::read(&src).unwrap();
    let img0 = w.join("orig.erofs");
    std::fs::write(&img0, &orig).unwrap();
    // The inode of /small.txt: its mode becomes a file type that does not
    // exist (0o170000).
    let out = Command::new(FERROFS)
        .args(["dump", "--json", "--path", "/small.txt"])
        .arg(&img0)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pos = v["position"].as_u64().unwrap() as usize;
    let mut b = orig.clone();
    b[pos + 5] |= 0xf0; // i_mode high byte: S_IFMT bits all set
    fix_crc(&mut b); // (the inode lies in block 0, under the checksum)
    let img = w.join("badmode.erofs");
    std::fs::write(&img, &b).unwrap();
    let o = ferrofs(&["fsck"], &img);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("small.txt") && t.contains("corrupt"), "{t}");
    assert!(!t.contains("unsupported:"), "{t}");
}
