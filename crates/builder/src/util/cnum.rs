//! C's number parsing (`atoi`, `strtol`), for the configuration files
//! mkfs.erofs and Android's tools read with it: leading blanks, an
//! optional sign, digits up to the first that is not one (none: 0), the
//! value wrapped to 64 bits as an unsigned conversion of the C result.

/// `strtoull(s, NULL, base)` for base 8, 10, 16, or 0 (`0x` hex, a
/// leading `0` octal, else decimal).
pub(crate) fn strtoul(s: &[u8], base: u32) -> u64 {
    let mut s = s
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        .map_or(&[][..], |i| &s[i..]);
    let neg = match s.first() {
        Some(b'-') => {
            s = &s[1..];
            true
        }
        Some(b'+') => {
            s = &s[1..];
            false
        }
        _ => false,
    };
    let hex_prefix =
        s.len() > 2 && s[0] == b'0' && matches!(s[1], b'x' | b'X') && s[2].is_ascii_hexdigit();
    let base = match base {
        0 if hex_prefix => 16,
        0 if s.first() == Some(&b'0') => 8,
        0 => 10,
        b => b,
    };
    if base == 16 && hex_prefix {
        s = &s[2..];
    }
    let mut v: u64 = 0;
    for d in s {
        let Some(d) = char::from(*d).to_digit(base) else {
            break;
        };
        v = v.wrapping_mul(u64::from(base)).wrapping_add(u64::from(d));
    }
    if neg {
        v.wrapping_neg()
    } else {
        v
    }
}

/// `atoi(s)` stored in an `unsigned int`.
pub(crate) fn atoi(s: &[u8]) -> u32 {
    strtoul(s, 10) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_c() {
        assert_eq!(atoi(b"  42abc"), 42);
        assert_eq!(atoi(b"k16"), 0);
        assert_eq!(atoi(b"-1"), u32::MAX);
        assert_eq!(strtoul(b"0755", 8), 0o755);
        assert_eq!(strtoul(b"04755\r", 8), 0o4755);
        assert_eq!(strtoul(b"0x2000", 0), 0x2000);
        assert_eq!(strtoul(b"010", 0), 8);
        assert_eq!(strtoul(b"8192", 0), 8192);
        assert_eq!(strtoul(b"0x", 0), 0);
    }
}
