//! ferrofs-trace: the text form of read traces. `ferrofs mount --trace`
//! records them; `mkfs --profile` lays an image out by them and `dump
//! --profile` replays them against an image.
//!
//! One read per line, in the order reads arrived, as
//! `PATH<TAB>OFFSET<TAB>LENGTH`; a line with only a path means the whole
//! file. Paths are relative to the image root; a backslash, tab, newline or
//! other control byte in a path is written as `\\`, `\t`, `\n` or `\xHH`.
//! Blank lines and lines starting with `#` are comments.
//!
//! ```
//! let line = ferrofs_trace::format_read(b"usr/lib/a\tb.so", 4096, 512);
//! assert_eq!(line, "usr/lib/a\\tb.so\t4096\t512\n");
//! let reads = ferrofs_trace::parse(&line).unwrap();
//! assert_eq!(reads[0].path, b"usr/lib/a\tb.so");
//! assert_eq!(reads[0].range, Some((4096, 512)));
//! ```

#![forbid(unsafe_code)]

use thiserror::Error;

/// A line of a trace that does not parse.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

/// One traced read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRead {
    /// The file read, relative to the image root (no leading `/`).
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

/// Parses a whole trace: its reads in order, or the first bad line.
pub fn parse(text: &str) -> Result<Vec<TraceRead>, ParseError> {
    let mut reads = Vec::new();
    for (n, line) in text.lines().enumerate() {
        match parse_line(line) {
            Ok(Some(r)) => reads.push(r),
            Ok(None) => {}
            Err(reason) => {
                return Err(ParseError {
                    line: n.saturating_add(1),
                    reason,
                })
            }
        }
    }
    Ok(reads)
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

    #[test]
    fn whole_traces_name_the_bad_line() {
        let reads = parse("# header\n\na\t0\t10\r\nb\n").unwrap();
        assert_eq!(reads.len(), 2);
        assert_eq!(reads[1].range, None);
        let e = parse("a\t0\t10\nb\t1\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(
            e.to_string(),
            "line 2: expected PATH, or PATH<TAB>OFFSET<TAB>LENGTH"
        );
    }
}
