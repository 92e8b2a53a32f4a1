//! The text form of read traces (`ferrofs mount --trace`, `mkfs
//! --profile`, `dump --profile`): one read per line, in the order reads
//! arrived, as `PATH<TAB>OFFSET<TAB>LENGTH`; a line with only a path means
//! the whole file. Paths are relative to the image root; a backslash,
//! tab, newline or other control byte in a path is written as `\\`, `\t`,
//! `\n` or `\xHH`. Blank lines and lines starting with `#` are comments.

/// One traced read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRead {
    pub path: Vec<u8>,
    /// `None`: the whole file.
    pub range: Option<(u64, u64)>,
}

/// A path with its control bytes escaped.
pub fn escape_path(path: &[u8]) -> String {
    let mut s = String::with_capacity(path.len());
    for chunk in path.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => s.push_str("\\\\"),
                '\t' => s.push_str("\\t"),
                '\n' => s.push_str("\\n"),
                c if (c as u32) < 0x20 || c == '\u{7f}' => {
                    s.push_str(&format!("\\x{:02x}", c as u32))
                }
                c => s.push(c),
            }
        }
        for &b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

fn unescape_path(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut it = s.bytes();
    while let Some(c) = it.next() {
        if c != b'\\' {
            out.push(c);
            continue;
        }
        match it.next()? {
            b'\\' => out.push(b'\\'),
            b't' => out.push(b'\t'),
            b'n' => out.push(b'\n'),
            b'x' => {
                let h = [it.next()?, it.next()?];
                let h = std::str::from_utf8(&h).ok()?;
                out.push(u8::from_str_radix(h, 16).ok()?);
            }
            _ => return None,
        }
    }
    Some(out)
}

/// The union of byte ranges `(start, end)`: sorted, overlapping and
/// touching ones joined.
pub fn merge_ranges(mut r: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    r.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(r.len());
    for (a, b) in r {
        match out.last_mut() {
            Some(l) if a <= l.1 => l.1 = l.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// A trace line for one read.
pub fn format_read(path: &[u8], offset: u64, len: u64) -> String {
    format!("{}\t{offset}\t{len}\n", escape_path(path))
}

/// Parses one line; `Ok(None)` for blank and comment lines.
pub fn parse_line(line: &str) -> Result<Option<TraceRead>, String> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.trim().is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let mut f = line.split('\t');
    let p = f.next().unwrap_or_default();
    let path = unescape_path(p.trim_start_matches('/')).ok_or("bad escape in path")?;
    let range = match (f.next(), f.next(), f.next()) {
        (None, _, _) => None,
        (Some(o), Some(l), None) => {
            let o = o.trim().parse::<u64>().map_err(|_| "bad offset")?;
            let l = l.trim().parse::<u64>().map_err(|_| "bad length")?;
            Some((o, l))
        }
        _ => return Err("expected PATH, or PATH<TAB>OFFSET<TAB>LENGTH".into()),
    };
    Ok(Some(TraceRead { path, range }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let odd = b"dir/a\tb\nc\\d\x01\xff.txt".to_vec();
        let line = format_read(&odd, 4096, 100);
        assert_eq!(line.matches('\t').count(), 2);
        let r = parse_line(line.trim_end_matches('\n')).unwrap().unwrap();
        assert_eq!(r.path, odd);
        assert_eq!(r.range, Some((4096, 100)));
        assert_eq!(
            parse_line("/usr/bin/python3").unwrap().unwrap(),
            TraceRead {
                path: b"usr/bin/python3".to_vec(),
                range: None
            }
        );
        assert_eq!(parse_line("# comment").unwrap(), None);
        assert!(parse_line("a\tx\t1").is_err());
        assert!(parse_line("a\\q").is_err());
    }
}
