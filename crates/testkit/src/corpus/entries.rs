//! What the corner-case tree holds, one function per kind of entry:
//! regular and sparse files, duplicates, hard links, symlinks, special
//! files, odd names, a big and a deep directory, modes, owners, times,
//! xattrs and ACLs.

use super::*;

pub(super) fn regular_files(b: &mut Builder) -> io::Result<()> {
    b.dir("files")?;
    b.dir("files/text")?;
    b.dir("files/random")?;
    b.dir("files/mixed")?;
    for &size in FILE_SIZES {
        b.file(
            format!("files/text/t{size}"),
            &text_bytes(size as usize, size),
        )?;
        b.file(
            format!("files/random/r{size}"),
            &random_bytes(size as usize, size * 2 + 1),
        )?;
    }
    for &size in MIXED_SIZES {
        b.file(
            format!("files/mixed/m{size}"),
            &mixed_bytes(size as usize, size * 3 + 7),
        )?;
    }
    b.file("files/repeat_a", &vec![b'a'; (1 << 20) + 5])?;
    b.owner("files/text/t4097", 1000, 1000)?;
    b.owner("files/random/r65537", 100_000, 200_000)?;
    b.mode("files/random/r8193", 0o600)?;
    Ok(())
}

pub(super) fn sparse_files(b: &mut Builder) -> io::Result<()> {
    b.dir("sparse")?;
    let write =
        |b: &mut Builder, rel: &str, len: u64, islands: &[(u64, Vec<u8>)]| -> io::Result<()> {
            b.file(rel, b"")?;
            let f = OpenOptions::new().write(true).open(b.abs(Path::new(rel)))?;
            f.set_len(len)?;
            for (off, data) in islands {
                f.write_all_at(data, *off)?;
            }
            Ok(())
        };
    let end = b"the last bytes of the sparse file\n".to_vec();
    if b.opts.holes_10m {
        write(
            b,
            "sparse/holes_10m",
            SPARSE_SIZE,
            &[
                (0, text_bytes(5000, 11)),
                (3 << 20, random_bytes(70_000, 12)),
                (SPARSE_SIZE - end.len() as u64, end),
            ],
        )?;
    }
    write(
        b,
        "sparse/tail_only",
        (2 << 20) + 100,
        &[(
            (2 << 20) + 50,
            b"fifty bytes at the very end of a holey file.....\n".to_vec(),
        )],
    )?;
    write(
        b,
        "sparse/head_only",
        3 << 20,
        &[(0, random_bytes(65_536, 13))],
    )?;
    write(b, "sparse/all_hole", 256 << 10, &[])?;
    Ok(())
}

pub(super) fn duplicates(b: &mut Builder) -> io::Result<()> {
    for d in ["dup", "dup/a", "dup/b", "dup/c", "dup/c/deeper"] {
        b.dir(d)?;
    }
    let same = text_bytes(100_000, 77);
    b.file("dup/a/same.txt", &same)?;
    b.file("dup/b/same.txt", &same)?;
    b.file("dup/c/deeper/same.txt", &same)?;
    b.file("dup/text_prefix", &same[..5000])?;
    b.file("dup/zeros_64k", &vec![0u8; 65536])?;
    b.file("dup/c/zeros_64k_again", &vec![0u8; 65536])?;
    let rnd = random_bytes(200_000, 99);
    b.file("dup/random_200k", &rnd)?;
    b.file("dup/random_200k_prefix_70000", &rnd[..70_000])?;
    b.file("dup/random_200k_prefix_8192", &rnd[..8192])?;
    b.file("dup/b/random_200k_copy", &rnd)?;
    Ok(())
}

pub(super) fn hardlinks(b: &mut Builder) -> io::Result<()> {
    for d in ["links", "links/a", "links/b", "links/c", "links/c/sub"] {
        b.dir(d)?;
    }
    b.file("links/a/h1", &text_bytes(50_000, 5))?;
    b.owner("links/a/h1", 1000, 1000)?;
    b.mode("links/a/h1", 0o640)?;
    b.xattr("links/a/h1", "user.linked", b"one inode, three names")?;
    b.hardlink("links/a/h1", "links/b/h2")?;
    b.hardlink("links/a/h1", "links/c/sub/h3")?;
    b.file("links/a/pair1", &random_bytes(3000, 6))?;
    b.hardlink("links/a/pair1", "links/a/pair2")?;
    b.file("links/empty1", b"")?;
    b.hardlink("links/empty1", "links/b/empty2")?;
    b.symlink(b"../files/text/t1", "links/sym1")?;
    b.hardlink("links/sym1", "links/sym2")?;
    Ok(())
}

pub(super) fn symlinks(b: &mut Builder) -> io::Result<()> {
    b.dir("symlinks")?;
    b.symlink(b"a", "symlinks/short")?;
    b.symlink(b"../files/text/t4097", "symlinks/relative")?;
    let mut long = b"../".to_vec();
    while long.len() < 333 {
        long.extend_from_slice(b"long-component/");
    }
    long.truncate(333);
    b.symlink(&long, "symlinks/long_333")?;
    let mut max = Vec::new();
    let mut i = 0;
    while max.len() < 4095 {
        max.extend_from_slice(format!("segment{i:03}/").as_bytes());
        i += 1;
    }
    max.truncate(4095);
    b.symlink(&max, "symlinks/max_4095")?;
    b.symlink(b"does/not/exist", "symlinks/dangling")?;
    b.symlink(b"/etc/passwd", "symlinks/absolute")?;
    b.symlink(b"/", "symlinks/slash")?;
    b.symlink(b".", "symlinks/dot")?;
    b.symlink(b"..", "symlinks/dotdot")?;
    b.symlink(b"loop", "symlinks/loop")?;
    b.symlink(b"../files", "symlinks/to_dir")?;
    b.symlink(b"target-\xff\xfe-not-utf8", "symlinks/non_utf8_target")?;
    b.symlink("Ziel-ünïcödé-名前".as_bytes(), "symlinks/unicode_target")?;
    b.owner("symlinks/short", 100_000, 200_000)?;
    b.owner("symlinks/absolute", 1000, 1000)?;
    b.xattr("symlinks/short", "trusted.symlink", b"xattr on a symlink")?;
    b.time("symlinks/short", 4_102_444_800, 500);
    Ok(())
}

pub(super) fn specials(b: &mut Builder) -> io::Result<()> {
    b.dir("special")?;
    b.node("special/fifo", libc::S_IFIFO | 0o644, 0)?;
    b.node("special/fifo_private", libc::S_IFIFO | 0o600, 0)?;
    b.owner("special/fifo_private", 1234, 5678)?;
    b.hardlink("special/fifo", "special/fifo_link")?;
    b.xattr("special/fifo", "trusted.fifo", b"xattr on a fifo")?;
    b.node("special/socket", libc::S_IFSOCK | 0o755, 0)?;
    if b.privileged {
        b.node(
            "special/chr_null",
            libc::S_IFCHR | 0o666,
            libc::makedev(1, 3),
        )?;
        b.node(
            "special/blk_sdb1",
            libc::S_IFBLK | 0o660,
            libc::makedev(8, 17),
        )?;
        b.owner("special/blk_sdb1", 0, 6)?;
        b.node(
            "special/chr_max",
            libc::S_IFCHR | 0o600,
            libc::makedev(4095, 1_048_575),
        )?;
        b.node(
            "special/blk_zero",
            libc::S_IFBLK | 0o600,
            libc::makedev(0, 0),
        )?;
    }
    Ok(())
}

pub(super) fn names(b: &mut Builder) -> io::Result<()> {
    b.dir("names")?;
    let max = b.opts.max_name_len.clamp(10, 255);
    let mut ascii_max = b"n255-".to_vec();
    while ascii_max.len() < max {
        ascii_max.push(b'a' + (ascii_max.len() % 26) as u8);
    }
    // Two-byte characters up to the limit (plus one ASCII byte when the limit is odd).
    let mut utf8_max = "é".repeat(max / 2).into_bytes();
    if max % 2 == 1 {
        utf8_max.push(b'x');
    }
    let mut dir_name = ascii_max.clone();
    dir_name[0] = b'd';
    let names: Vec<Vec<u8>> = vec![
        ascii_max,
        utf8_max,
        "ünïcödé 名前 🦀".as_bytes().to_vec(),
        b"bad-\xff\xfe-\xc3(-bytes".to_vec(),
        b"\x80".to_vec(),
        b"!bang".to_vec(),
        b"-dash".to_vec(),
        b"#hash".to_vec(),
        b" leading space".to_vec(),
        b"trailing space ".to_vec(),
        b"tab\there".to_vec(),
        b"new\nline".to_vec(),
        b"back\\slash".to_vec(),
        b"quote\"s'".to_vec(),
        b"*star?".to_vec(),
        b".hidden".to_vec(),
        b"..dots".to_vec(),
        b"...".to_vec(),
        b"UPPER".to_vec(),
        b"upper".to_vec(),
        b"a".to_vec(),
    ];
    for name in &names {
        let mut rel = b"names/".to_vec();
        rel.extend_from_slice(name);
        b.file(bpath(&rel), name)?;
    }
    // A directory with a longest name, with a file inside.
    let mut dir = b"names/".to_vec();
    dir.extend_from_slice(&dir_name);
    b.dir(bpath(&dir))?;
    dir.extend_from_slice(b"/inside");
    b.file(bpath(&dir), b"in a directory with a 255-byte name\n")?;
    Ok(())
}

pub(super) fn big_dir(b: &mut Builder) -> io::Result<()> {
    b.dir(BIG_DIR)?;
    b.time(BIG_DIR, 1_650_000_000, 0);
    for i in 0..BIG_DIR_ENTRIES {
        let fill = (b'a' + (i % 26) as u8) as char;
        let name = format!("e{i:04}-{}", fill.to_string().repeat((i * 37) % 200));
        let rel = format!("{BIG_DIR}/{name}");
        if i % 600 == 599 {
            b.dir(&rel)?;
            b.file(format!("{rel}/inner"), format!("inner {i}\n").as_bytes())?;
            b.time(format!("{rel}/inner"), 1_650_000_000, 0);
        } else {
            let content = if i % 7 == 0 {
                String::new()
            } else {
                format!("entry {i}\n").repeat(i % 5 + 1)
            };
            b.file(&rel, content.as_bytes())?;
        }
        b.time(&rel, 1_650_000_000, 0);
    }
    Ok(())
}

pub(super) fn deep(b: &mut Builder) -> io::Result<()> {
    let mut rel = PathBuf::from("deep");
    b.dir(&rel)?;
    for level in 1..=DEEP_LEVELS {
        rel.push(format!("d{level:02}"));
        b.dir(&rel)?;
    }
    rel.push("leaf");
    b.file(&rel, b"forty levels down\n")?;
    Ok(())
}

pub(super) fn modes(b: &mut Builder) -> io::Result<()> {
    b.dir("modes")?;
    let files: &[(&str, u32, u32, u32)] = &[
        ("setuid", 0o4755, 0, 0),
        ("setuid_other", 0o4750, 100_000, 200_000),
        ("setgid", 0o2755, 0, 50),
        ("all_special", 0o7777, 1000, 1000),
        ("zero", 0o000, 0, 0),
        ("all", 0o777, 0, 0),
        ("odd", 0o421, 0, 0),
        ("sticky_file", 0o1644, 0, 0),
    ];
    for &(name, mode, uid, gid) in files {
        let rel = format!("modes/{name}");
        b.file(&rel, format!("mode {mode:o}\n").as_bytes())?;
        b.owner(&rel, uid, gid)?; // chown clears setuid/setgid, so chmod after
        b.mode(&rel, mode)?;
    }
    let mut dirs: Vec<(&str, u32)> = vec![
        ("setgid_dir", 0o2775),
        ("sticky_dir", 0o1777),
        ("dir_0555", 0o555),
        ("dir_0700", 0o700),
    ];
    if b.privileged {
        dirs.push(("dir_0000", 0o000));
    }
    for (name, mode) in dirs {
        let rel = format!("modes/{name}");
        b.dir(&rel)?;
        b.file(format!("{rel}/inside"), b"inside\n")?;
        b.mode(&rel, mode)?;
    }
    Ok(())
}

pub(super) fn owners(b: &mut Builder) -> io::Result<()> {
    b.dir("owners")?;
    let ids: &[(&str, u32, u32)] = &[
        ("u0", 0, 0),
        ("u1000", 1000, 1000),
        ("u65534", 65534, 65534),
        ("u65535", 65535, 65535),
        ("u65536", 65536, 65536),
        ("big", 100_000, 200_000),
        ("big_uid_only", 100_000, 0),
        ("big_gid_only", 0, 200_000),
        ("max", 4_294_967_294, 4_294_967_294),
    ];
    for &(name, uid, gid) in ids {
        let rel = format!("owners/{name}");
        b.file(&rel, name.as_bytes())?;
        b.owner(&rel, uid, gid)?;
    }
    b.dir("owners/dir_big")?;
    b.file("owners/dir_big/f", b"f")?;
    b.owner("owners/dir_big", 100_000, 200_000)?;
    b.owner("owners/dir_big/f", 1000, 1000)?;
    Ok(())
}

pub(super) fn times(b: &mut Builder) -> io::Result<()> {
    b.dir("times")?;
    let t: &[(&str, i64, u32)] = &[
        ("before_1970", -315_619_200, 123_456_789),
        ("minus_one", -1, 999_999_999),
        ("epoch", 0, 0),
        ("y2038_max", 2_147_483_647, 0),
        ("y2038_plus", 2_147_483_648, 1),
        ("y2100", 4_102_444_800, 0),
        ("two_pow_32", 4_294_967_296, 5),
        ("nsec_max", 1_700_000_000, 999_999_999),
        ("nsec_one", 1_700_000_000, 1),
        ("whole_second", 1_700_000_000, 0),
    ];
    for &(name, s, ns) in t {
        let rel = format!("times/{name}");
        b.file(&rel, name.as_bytes())?;
        b.time(&rel, s, ns);
    }
    b.dir("times/dir_before_1970")?;
    b.file("times/dir_before_1970/f", b"f")?;
    b.time("times/dir_before_1970", -86_400 * 365 * 20, 7);
    b.dir("times/dir_2100")?;
    b.time("times/dir_2100", 4_102_444_800, 999_999_999);
    b.node("times/fifo_1969", libc::S_IFIFO | 0o644, 0)?;
    b.time("times/fifo_1969", -100, 100);
    b.symlink(b"epoch", "times/symlink_2106")?;
    b.time("times/symlink_2106", 4_294_967_296, 4);
    Ok(())
}

pub(super) fn xattrs(b: &mut Builder) -> io::Result<()> {
    b.dir("xattrs")?;
    b.file("xattrs/plain", b"plain\n")?;
    b.xattr("xattrs/plain", "user.a", b"1")?;
    b.xattr("xattrs/plain", "user.b", b"two")?;
    b.xattr("xattrs/plain", "user.c", b"three three")?;
    b.xattr("xattrs/plain", "trusted.t", b"secret")?;
    for i in 1..=6 {
        let rel = format!("xattrs/shared{i}");
        b.file(&rel, format!("shared {i}\n").as_bytes())?;
        b.xattr(&rel, "user.shared", b"common value shared by many files")?;
        b.xattr(&rel, "trusted.shared", b"also shared")?;
        b.xattr(&rel, "user.own", format!("own value {i}").as_bytes())?;
    }
    b.file("xattrs/empty_value", b"")?;
    b.xattr("xattrs/empty_value", "user.empty", b"")?;
    b.file("xattrs/long_value", b"long\n")?;
    b.xattr("xattrs/long_value", "user.long", &text_bytes(1031, 3))?;
    b.file("xattrs/binary_value", b"bin\n")?;
    let all: Vec<u8> = (0..=255u8).collect();
    b.xattr("xattrs/binary_value", "user.binary", &all)?;
    b.file("xattrs/long_name", b"name\n")?;
    let long_name = format!("user.{}", "n".repeat(250));
    b.xattr("xattrs/long_name", &long_name, b"long name")?;
    b.file("xattrs/many", b"many\n")?;
    for i in 0..24 {
        b.xattr(
            "xattrs/many",
            &format!("user.k{i:02}"),
            "v".repeat(i * 5).as_bytes(),
        )?;
    }
    b.dir("xattrs/dir")?;
    b.xattr("xattrs/dir", "user.dirattr", b"on a directory")?;
    b.xattr("xattrs/dir", "trusted.dir", b"trusted on a directory")?;
    b.xattr(
        "xattrs/dir",
        "user.shared",
        b"common value shared by many files",
    )?;
    b.file("xattrs/dir/child", b"child\n")?;
    b.file("xattrs/capability", b"#!/bin/true\n")?;
    b.mode("xattrs/capability", 0o755)?;
    // struct vfs_cap_data, revision 2: magic_etc, then {permitted, inheritable} x 2.
    // Permitted CAP_NET_BIND_SERVICE (bit 10), effective flag set.
    let mut cap = Vec::new();
    cap.extend_from_slice(&(0x0200_0000u32 | 1).to_le_bytes());
    cap.extend_from_slice(&(1u32 << 10).to_le_bytes());
    cap.extend_from_slice(&0u32.to_le_bytes());
    cap.extend_from_slice(&0u32.to_le_bytes());
    cap.extend_from_slice(&0u32.to_le_bytes());
    b.xattr("xattrs/capability", "security.capability", &cap)?;
    Ok(())
}

pub(super) fn acls(b: &mut Builder) -> io::Result<()> {
    b.dir("acl")?;
    b.file("acl/file", b"file with an access ACL\n")?;
    b.setfacl(&["-m", "u:1234:rwx,g:99:r-x"], "acl/file")?;
    b.dir("acl/dir")?;
    b.setfacl(&["-m", "u:1234:r-x"], "acl/dir")?;
    b.setfacl(&["-d", "-m", "u:1234:rwx,g:99:r-x"], "acl/dir")?;
    b.file("acl/dir/inherited_file", b"inherits the default ACL\n")?;
    b.dir("acl/dir/inherited_dir")?;
    // b.dir/b.file chmod'ed the children, which rewrote their ACL masks; that is fine (the
    // ACL stays, the kernel keeps mode and mask consistent).
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_are_deterministic() {
        assert_eq!(random_bytes(100, 1), random_bytes(100, 1));
        assert_ne!(random_bytes(100, 1), random_bytes(100, 2));
        assert_eq!(text_bytes(4097, 9).len(), 4097);
        assert_eq!(mixed_bytes(65537, 9).len(), 65537);
        assert!(text_bytes(200, 1).starts_with(b"000001 "));
    }

    #[test]
    fn tree_builds() {
        let t = crate::TempDir::new("ferrofs-corpus-test").unwrap();
        let root = t.path().join("tree");
        make_corner_tree(&root).unwrap();
        let m = fs::symlink_metadata(root.join("sparse/holes_10m")).unwrap();
        assert_eq!(m.len(), SPARSE_SIZE);
        assert_eq!(
            fs::read_dir(root.join(BIG_DIR)).unwrap().count(),
            BIG_DIR_ENTRIES
        );
        let target = fs::read_link(root.join("symlinks/max_4095")).unwrap();
        assert_eq!(target.as_os_str().len(), 4095);
        use std::os::unix::fs::MetadataExt;
        let t = fs::symlink_metadata(root.join("times/before_1970")).unwrap();
        assert_eq!((t.mtime(), t.mtime_nsec()), (-315_619_200, 123_456_789));
        let h = fs::symlink_metadata(root.join("links/c/sub/h3")).unwrap();
        assert_eq!(h.nlink(), 3);
    }
}
