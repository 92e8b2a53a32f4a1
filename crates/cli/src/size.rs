//! Byte counts on the command line: `4096`, `64K`, `16M`, `1G` (also
//! `64KiB`, `64k`), the same spelling for every option that takes bytes.

/// `s` as bytes.
pub(crate) fn parse_u64(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        Some('T' | 't') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| format!("invalid size {s:?} (a number of bytes, or with K, M, G or T)"))
}

/// `s` as bytes, for an in-memory amount.
pub(crate) fn parse(s: &str) -> Result<usize, String> {
    let n = parse_u64(s)?;
    usize::try_from(n).map_err(|_| format!("size {s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse("8M"), Ok(8 << 20));
        assert_eq!(parse("512k"), Ok(512 << 10));
        assert_eq!(parse("4096"), Ok(4096));
        assert_eq!(parse_u64("64KiB"), Ok(65536));
        assert_eq!(parse_u64("1G"), Ok(1 << 30));
        assert!(parse("lots").is_err());
        assert!(parse("").is_err());
        assert!(parse_u64("99999999999999999999T").is_err());
        assert!(parse_u64("16777216T").is_err());
    }
}
