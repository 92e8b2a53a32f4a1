//! Unit tests of the dump reader: its number and escape rules, and that no
//! damaged dump makes the writer panic (thousands of random mutations of a
//! dump that exercises every field).

use super::dump::{parse_int, unescape};
use super::{build_composefs, CfsOptions, CfsSource};

#[test]
fn numbers_read_as_strtoull_reads_them() {
    assert_eq!(parse_int(b"755", 8), Ok(0o755));
    assert_eq!(parse_int(b"+12", 10), Ok(12));
    assert_eq!(parse_int(b"\t7", 10), Ok(7));
    assert_eq!(parse_int(b"-1", 10), Ok(u64::MAX));
    assert_eq!(parse_int(b"99999999999999999999999", 10), Ok(u64::MAX));
    for bad in [&b""[..], b"-", b"8", b"1x", b" ", b"0x10"] {
        assert!(parse_int(bad, 8).is_err(), "{bad:?}");
    }
}

#[test]
fn escapes() {
    assert_eq!(unescape(br"a\x20b\\\n\t\r"), Ok(b"a b\\\n\t\r".to_vec()));
    for bad in [&br"\"[..], br"\x", br"\x1", br"\xzz", br"\q"] {
        assert!(unescape(bad).is_err(), "{bad:?}");
    }
}

const DUMP: &str = "/ 4096 40755 2 0 0 0 1000.0 - - - user.a=1 security.selinux=ctx
/big 8796093022209 100644 1 0 0 0 1000.0 ab/cdef - 0001020304050607080900010203040506070809000102030405060708090001
/inline 5 100644 1 0 0 0 1000.0 - hello -
/link 3 120777 1 0 0 0 1000.0 abc - -
/hl 0 @100644 0 0 0 0 0.0 /inline - -
/dev 7 20644 1 0 0 1234 1000.0 - - -
/wo 0 20000 1 0 0 0 1000.0 - - -
/d 4096 40755 2 70000 70000 0 5.123 - - - trusted.overlay.x=\\x00\\x01 user.b=with\\x20space
/d/f 100 100644 70000 1 2 0 1000.999999999 xx/yy - -
/d/hl3 0 @100644 0 0 0 0 0.0 /d/f - -
";

/// A hard link to a directory (an empty target path is the root) is
/// refused naming its line: the image would reach the directory twice.
/// (Found by the composefs_dump fuzz target.)
#[test]
fn hardlinks_to_directories_are_refused() {
    let opts = CfsOptions::default();
    let root = "/ 4096 40755 2 0 0 0 0.0 - - -\n";
    for (rest, target, line) in [
        (
            "/d 4096 40755 2 0 0 0 0.0 - - -\n/h 0 @100644 2 0 0 0 0.0 /d - -\n",
            "/d",
            3,
        ),
        ("/h 6 @100644 2 10ty\n", "", 2),
    ] {
        let dump = format!("{root}{rest}");
        let e = build_composefs(CfsSource::Dump(Box::new(dump.as_bytes())), &opts)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let want = format!("line {line}: the hardlink's target {target} is a directory");
        assert!(e.contains(&want), "{dump:?}: {e}");
    }
}

#[test]
fn damaged_dumps_never_panic() {
    let opts = CfsOptions {
        max_version: 1,
        ..CfsOptions::default()
    };
    let base = DUMP.as_bytes();
    assert!(build_composefs(CfsSource::Dump(Box::new(base)), &opts).is_ok());
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const ALPHABET: &[u8] = b" \n/@-.=\\x0123456789abcdef";
    for _ in 0..4000 {
        let mut d = base.to_vec();
        for _ in 0..(1 + next() % 4) {
            let at = (next() as usize) % d.len();
            match next() % 3 {
                0 => d[at] = ALPHABET[(next() as usize) % ALPHABET.len()],
                1 => {
                    d.remove(at);
                }
                _ => d.insert(at, ALPHABET[(next() as usize) % ALPHABET.len()]),
            }
        }
        // Either result is fine; a panic fails the test.
        let _ = build_composefs(CfsSource::Dump(Box::new(d.as_slice())), &opts);
    }
}
