//! Unit tests of the tar reader: field parsing, and hostile archives.

// Tests index what they built themselves; a panic is a failed test.
#![allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

use super::fields::*;
use super::*;

mod units {
    use super::*;

    #[test]
    fn numbers_octal_and_base256() {
        assert_eq!(number(b"0000644\0"), Some(0o644));
        assert_eq!(number(b"   644 \0"), Some(0o644));
        assert_eq!(number(b"\0\0\0\0"), Some(0));
        assert_eq!(number(b"0009"), None);
        let mut f = [0u8; 12];
        f[0] = 0x80;
        f[11] = 0x01;
        f[10] = 0x02;
        assert_eq!(number(&f), Some(0x0201));
        assert_eq!(number(&[0xff; 12]), Some(-1));
        assert_eq!(
            number(&[0x80, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            None
        );
    }

    #[test]
    fn pax_records_parse_and_reject() {
        let r = pax_records(b"30 mtime=1700000000.123456789\n20 SCHILY.xattr.a=b\n").unwrap();
        assert_eq!(r[0].0, "mtime");
        assert_eq!(parse_time(&r[0].1), Some((1_700_000_000, 123_456_789)));
        assert_eq!(r[1], ("SCHILY.xattr.a".to_string(), b"b".to_vec()));
        assert!(pax_records(b"99 path=x\n").is_err());
        assert!(pax_records(b"5 a\n").is_err());
        assert_eq!(parse_time(b"-1.5"), Some((-2, 500_000_000)));
        assert_eq!(parse_time(b"-0.000000001"), Some((-1, 999_999_999)));
        assert_eq!(parse_time(b"-3"), Some((-3, 0)));
        // GNU tar drops trailing zeros of the fraction.
        assert_eq!(
            parse_time(b"1795350172.78441241"),
            Some((1_795_350_172, 784_412_410))
        );
    }

    #[test]
    fn paths_normalize_and_refuse_dotdot() {
        assert_eq!(
            normalize(b"./a//b/./c/").unwrap(),
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        assert!(normalize(b"a/../b").is_none());
        assert_eq!(normalize(b"/").unwrap().len(), 0);
    }

    #[test]
    fn acl_text_to_xattr() {
        let (v, mask) =
            acl_xattr(b"user::rw-,group::r--,other::r--,user:alice:rwx:1234,mask::rwx").unwrap();
        assert_eq!(mask, Some(7));
        let mut want = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in [
            (1u16, 6u16, u32::MAX),
            (2, 7, 1234),
            (4, 4, u32::MAX),
            (0x10, 7, u32::MAX),
            (0x20, 4, u32::MAX),
        ] {
            want.extend_from_slice(&tag.to_le_bytes());
            want.extend_from_slice(&perm.to_le_bytes());
            want.extend_from_slice(&id.to_le_bytes());
        }
        assert_eq!(v, want);
        assert!(acl_xattr(b"user:alice:rwx").is_err());
        assert!(acl_xattr(b"user::rwz").is_err());
    }

    #[test]
    fn base64_and_url() {
        assert_eq!(base64(b"aGVsbG8=").unwrap(), b"hello");
        assert_eq!(url_decode(b"user.a%3Db"), b"user.a=b");
    }
}

mod hostile {
    use super::*;

    fn header(name: &str, size: u64, typeflag: u8, link: &str) -> Vec<u8> {
        let mut h = vec![0u8; BLOCK];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[100..107].copy_from_slice(b"0000644");
        h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
        h[136..147].copy_from_slice(b"14000000000");
        h[156] = typeflag;
        h[157..157 + link.len()].copy_from_slice(link.as_bytes());
        h[257..263].copy_from_slice(b"ustar\0");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        h
    }

    /// A PAX record with its self-including length.
    fn rec(k: &str, v: &str) -> String {
        let body = format!(" {k}={v}\n");
        let mut n = body.len() + 1;
        while format!("{n}").len() + body.len() != n {
            n += 1;
        }
        format!("{n}{body}")
    }

    fn entry(v: &mut Vec<u8>, h: Vec<u8>, data: &[u8]) {
        v.extend(h);
        v.extend_from_slice(data);
        v.resize(v.len().div_ceil(BLOCK) * BLOCK, 0);
    }

    /// Thousands of mutated archives: every one is read or refused, none
    /// panics or allocates by an unchecked size.
    #[test]
    fn mutated_archives_never_panic() {
        let mut good = Vec::new();
        let pax = [
            rec("path", "dir/long-x"),
            rec("mtime", "1700000000.5"),
            rec("SCHILY.xattr.user.a", "b"),
        ]
        .concat();
        let pax = pax.as_bytes();
        entry(&mut good, header("p", pax.len() as u64, b'x', ""), pax);
        entry(&mut good, header("ignored", 5, b'0', ""), b"hello");
        entry(&mut good, header("dir/", 0, b'5', ""), b"");
        entry(&mut good, header("dir/l", 0, b'1', "dir/long-x"), b"");
        entry(&mut good, header("dir/s", 0, b'2', "long-x"), b"");
        let map = b"1\n0\n3\n";
        let mut sparse = map.to_vec();
        sparse.resize(BLOCK, 0);
        sparse.extend_from_slice(b"abc");
        let spax = [
            rec("GNU.sparse.major", "1"),
            rec("GNU.sparse.minor", "0"),
            rec("GNU.sparse.name", "sp"),
            rec("GNU.sparse.realsize", "9"),
        ]
        .concat();
        let spax = spax.as_bytes();
        entry(&mut good, header("p2", spax.len() as u64, b'x', ""), spax);
        entry(
            &mut good,
            header("x", sparse.len() as u64, b'0', ""),
            &sparse,
        );
        good.extend(vec![0u8; 2 * BLOCK]);
        let dir = std::env::temp_dir().join(format!("ferrofs-tar-hostile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.tar");
        std::fs::write(&path, &good).unwrap();
        let opts = BuildOptions::default();
        let tree = scan(
            &TarInput::Path(path.clone()),
            &opts,
            TarOptions::default(),
            (&dir, None),
        )
        .expect("the unmutated archive reads");
        assert!(tree.inodes.len() >= 5);
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..10_000 {
            let mut m = good.clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() % m.len() as u64) as usize;
                m[at] = match next() % 4 {
                    0 => 0,
                    1 => 0xff,
                    2 => b'7',
                    _ => next() as u8,
                };
            }
            if next() % 8 == 0 {
                m.truncate((next() % m.len() as u64) as usize);
            }
            std::fs::write(&path, &m).unwrap();
            let _ = scan(
                &TarInput::Path(path.clone()),
                &opts,
                TarOptions::default(),
                (&dir, None),
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
