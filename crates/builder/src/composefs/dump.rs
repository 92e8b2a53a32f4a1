//! The composefs dump format (`composefs-info dump`, `mkcomposefs
//! --from-file`), read as mkcomposefs 1.0.8 reads it. One line per file:
//! `PATH SIZE MODE NLINK UID GID RDEV MTIME PAYLOAD CONTENT DIGEST
//! [XATTR...]`, fields escaped with `\\ \n \r \t \xHH`, `-` for an absent
//! optional field, `@MODE` marking a hard link whose PAYLOAD is the target
//! path. The input is untrusted: every number is checked, sizes are
//! bounded, and each error names its line.

use std::io::{BufRead, BufReader, Read};

use super::node::{valid_type, AddError, Node, Tree, S_IFBLK, S_IFCHR, S_IFLNK};
use super::walk::PAYLOAD_MAX;
use crate::error::{BuildError, Result};

/// Largest inline content a dump may give a file.
const CONTENT_MAX: usize = 5000;
/// Longest xattr part of a line.
const XATTRS_MAX: usize = u16::MAX as usize;
/// Longest line read (a 64 KiB xattr part plus escaped fixed fields).
const LINE_MAX: u64 = 1 << 20;

/// A hard link waiting for the whole tree: the link and its target path.
struct Fixup {
    node: usize,
    target: Option<Vec<u8>>,
    line: u64,
}

/// Parses a whole dump into a tree.
pub(crate) fn parse(input: impl Read) -> Result<Tree> {
    let mut r = BufReader::with_capacity(1 << 16, input);
    let mut tree: Option<Tree> = None;
    let mut fixups = Vec::new();
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        buf.clear();
        let n = (&mut r)
            .take(LINE_MAX)
            .read_until(b'\n', &mut buf)
            .map_err(BuildError::io("dump file"))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let line = match buf.strip_suffix(b"\n") {
            Some(l) => l,
            None if n as u64 == LINE_MAX => {
                return Err(dump_err(line_no, "line too long"));
            }
            None => &buf[..],
        };
        parse_line(&mut tree, &mut fixups, line, line_no).map_err(|r| dump_err(line_no, r))?;
    }
    let mut tree = tree.ok_or_else(|| dump_err(line_no, "no files in dump file"))?;
    // Resolved last line first, as mkcomposefs does.
    for f in fixups.into_iter().rev() {
        let target = f
            .target
            .ok_or_else(|| dump_err(f.line, "no target path for the hardlink"))?;
        let t = lookup_path(&tree, &target).ok_or_else(|| {
            dump_err(
                f.line,
                format!(
                    "no target at {} for hardlink",
                    String::from_utf8_lossy(&target)
                ),
            )
        })?;
        if t == f.node {
            return Err(dump_err(f.line, "self-referential hardlink"));
        }
        // mkcomposefs 1.0.8 links to a directory too, which makes an image
        // whose tree reaches that directory twice (a loop for a reader).
        if tree.node(t).is_dir() {
            return Err(dump_err(
                f.line,
                format!(
                    "the hardlink's target {} is a directory",
                    String::from_utf8_lossy(&target)
                ),
            ));
        }
        tree.node_mut(f.node).link_to = Some(t);
    }
    Ok(tree)
}

fn dump_err(line: u64, reason: impl Into<String>) -> BuildError {
    BuildError::input(format!("dump file, line {line}"), reason)
}

/// Splits off the text up to `sep` (all of it when absent).
fn split<'a>(rest: &mut &'a [u8], sep: u8) -> &'a [u8] {
    match rest.iter().position(|&b| b == sep) {
        Some(i) => {
            let (head, tail) = rest.split_at(i);
            *rest = &tail[1..];
            head
        }
        None => std::mem::take(rest),
    }
}

/// A C string's view of bytes: up to the first NUL.
fn c_str(mut v: Vec<u8>) -> Vec<u8> {
    if let Some(i) = v.iter().position(|&b| b == 0) {
        v.truncate(i);
    }
    v
}

fn hex(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// Undoes the dump's escapes.
pub(crate) fn unescape(s: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len());
    let mut it = s.iter().copied();
    while let Some(c) = it.next() {
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let e = it.next().ok_or("no character after escape")?;
        out.push(match e {
            b'\\' => b'\\',
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'x' => {
                let (Some(a), Some(b)) = (it.next(), it.next()) else {
                    return Err("no hex characters after hex escape".into());
                };
                match (hex(a), hex(b)) {
                    (Some(a), Some(b)) => (a << 4) | b,
                    _ => return Err("invalid hex characters after hex escape".into()),
                }
            }
            other => return Err(format!("unsupported escape type {}", char::from(other))),
        });
    }
    Ok(out)
}

/// An optional field: `None` for `-`.
fn optional(s: &[u8]) -> Result<Option<Vec<u8>>, String> {
    if s == b"-" {
        return Ok(None);
    }
    unescape(s).map(Some)
}

/// `strtoull` as mkcomposefs uses it: leading blanks and a sign allowed,
/// at least one digit, nothing after; an overflow saturates.
pub(crate) fn parse_int(s: &[u8], base: u32) -> Result<u64, String> {
    let bad = || format!("invalid integer {}", String::from_utf8_lossy(s));
    let mut t = s;
    while let [c, rest @ ..] = t {
        if matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
            t = rest;
        } else {
            break;
        }
    }
    let neg = match t {
        [b'-', rest @ ..] => {
            t = rest;
            true
        }
        [b'+', rest @ ..] => {
            t = rest;
            false
        }
        _ => false,
    };
    if t.is_empty() {
        return Err(bad());
    }
    let mut v: Option<u64> = Some(0);
    for &c in t {
        let d = char::from(c).to_digit(base).ok_or_else(bad)?;
        v = v
            .and_then(|v| v.checked_mul(u64::from(base)))
            .and_then(|v| v.checked_add(u64::from(d)));
    }
    Ok(match v {
        None => u64::MAX,
        Some(v) if neg => v.wrapping_neg(),
        Some(v) => v,
    })
}

/// The node at `path` (leading and repeated slashes ignored).
fn lookup_path(tree: &Tree, path: &[u8]) -> Option<usize> {
    let mut at = 0;
    for comp in path.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
        at = tree.lookup(at, comp)?;
    }
    Some(at)
}

/// The directory a new path goes in, and its last component.
fn lookup_parent<'p>(tree: &Tree, path: &'p [u8]) -> Option<(usize, &'p [u8])> {
    let mut at = 0;
    let mut rest = path;
    loop {
        while let [b'/', r @ ..] = rest {
            rest = r;
        }
        let end = rest.iter().position(|&b| b == b'/');
        let Some(end) = end else {
            return Some((at, rest));
        };
        at = tree.lookup(at, &rest[..end])?;
        rest = &rest[end..];
    }
}

/// Puts a new node at `path`: the root for `/`.
fn add_node(tree: &mut Option<Tree>, path: &[u8], node: Node) -> Result<usize, String> {
    let shown = String::from_utf8_lossy(path);
    if path == b"/" {
        if !node.is_dir() {
            return Err("root must be a directory".into());
        }
        if tree.is_some() {
            return Err("can't have multiple roots".into());
        }
        *tree = Some(Tree::new(node));
        return Ok(0);
    }
    let t = tree.as_mut().ok_or("root node not present")?;
    let (parent, name) =
        lookup_parent(t, path).ok_or_else(|| format!("parent directory missing for {shown}"))?;
    if !t.node(parent).is_dir() {
        return Err(format!("parent must be a directory for {shown}"));
    }
    if name == b"." || name == b".." {
        return Err(format!("invalid . or .. in path: {shown}"));
    }
    t.add_child(parent, name, node).map_err(|e| match e {
        AddError::Exists => format!("path {shown} already exists"),
        other => format!("can't add child: {other}"),
    })
}

/// The eleven fixed fields and the xattrs after them.
fn fields(mut line: &[u8]) -> ([&[u8]; 11], &[u8]) {
    let mut f: [&[u8]; 11] = [&[]; 11];
    for slot in &mut f {
        *slot = split(&mut line, b' ');
    }
    (f, line)
}

/// Adds one line's file to the tree.
fn parse_line(
    tree: &mut Option<Tree>,
    fixups: &mut Vec<Fixup>,
    line: &[u8],
    line_no: u64,
) -> Result<(), String> {
    if let Some(at) = line.iter().position(|&b| b == 0) {
        return Err(format!("invalid embedded NUL character at position {at}"));
    }
    let (f, xattrs) = fields(line);
    let path = c_str(unescape(f[0])?);
    if path.is_empty() {
        return Err("invalid empty path".into());
    }
    let (hardlink, mode_field) = match f[2] {
        [b'@', rest @ ..] => (true, rest),
        m => (false, m),
    };
    // why: composefs keeps a 32-bit mode.
    #[allow(clippy::cast_possible_truncation)]
    let mode = parse_int(mode_field, 8)? as u32;
    if !valid_type(mode) {
        return Err(format!("invalid mode {mode:o}"));
    }
    let idx = add_node(tree, &path, Node::with_mode(mode))?;
    let t = tree.as_mut().ok_or("root node not present")?;
    if hardlink {
        if t.node(idx).is_dir() {
            return Err("directories can't be hardlinked".into());
        }
        let target = optional(f[8])?.map(c_str);
        fixups.push(Fixup {
            node: idx,
            target,
            line: line_no,
        });
        return Ok(());
    }
    fill_node(t.node_mut(idx), &f)?;
    if xattrs.len() > XATTRS_MAX {
        return Err("too many xattrs".into());
    }
    let mut rest = xattrs;
    while !rest.is_empty() {
        let x = split(&mut rest, b' ');
        let mut kv = x;
        let key = split(&mut kv, b'=');
        if key.len() == x.len() {
            return Err("missing = in xattr".into());
        }
        let key = c_str(unescape(key)?);
        let value = unescape(kv)?;
        t.node_mut(idx)
            .set_xattr(&key, &value)
            .map_err(|r| format!("can't set xattr: {r}"))?;
    }
    Ok(())
}

/// The fixed fields of a file that is not a hard link.
// why: composefs keeps 32-bit ids, link counts, device numbers and
// nanoseconds, and takes the seconds as a signed time.
#[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
fn fill_node(n: &mut Node, f: &[&[u8]; 11]) -> Result<(), String> {
    let size = parse_int(f[1], 10)?;
    let nlink = parse_int(f[3], 10)?;
    let uid = parse_int(f[4], 10)?;
    // mkcomposefs 1.0.8 reports a bad GID or RDEV only when UID is 0
    // (it tests the wrong variable); otherwise the field reads as 0.
    let lenient = |v: Result<u64, String>| match v {
        Err(e) if uid == 0 => Err(e),
        other => Ok(other.unwrap_or(0)),
    };
    let gid = lenient(parse_int(f[5], 10))?;
    let rdev = lenient(parse_int(f[6], 10))?;
    let mut mtime = f[7];
    let sec = parse_int(split(&mut mtime, b'.'), 10)?;
    let nsec = parse_int(mtime, 10)?;
    let payload = optional(f[8])?.map(c_str);
    let content = optional(f[9])?;
    if let Some(c) = &content {
        if c.len() as u64 != size {
            return Err(format!(
                "invalid content size {}, must match size {size}",
                c.len()
            ));
        }
    }
    let digest = optional(f[10])?.map(c_str);
    n.size = size;
    n.nlink = nlink as u32;
    n.uid = uid as u32;
    n.gid = gid as u32;
    if matches!(n.file_type(), S_IFCHR | S_IFBLK) {
        n.rdev = rdev as u32;
    }
    n.mtime_sec = sec as i64;
    n.mtime_nsec = nsec as u32;
    if n.file_type() == S_IFLNK {
        let target = payload.filter(|p| !p.is_empty() && p.len() <= PAYLOAD_MAX);
        let target = target.ok_or("invalid symlink")?;
        n.size = target.len() as u64;
        n.payload = Some(target);
    } else {
        if payload.as_ref().is_some_and(|p| p.len() > PAYLOAD_MAX) {
            return Err("invalid payload".into());
        }
        n.payload = payload;
        if let Some(c) = content {
            if c.len() > CONTENT_MAX {
                return Err(format!(
                    "inline content size {} exceeds maximum {CONTENT_MAX}",
                    c.len()
                ));
            }
            n.size = c.len() as u64;
            n.content = (!c.is_empty()).then_some(c);
        }
    }
    if let Some(d) = digest {
        n.digest = Some(parse_digest(&d).ok_or("invalid digest")?);
    }
    Ok(())
}

/// A digest given as 64 hex digits.
fn parse_digest(s: &[u8]) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        *o = (hex(pair[0])? << 4) | hex(pair[1])?;
    }
    Some(out)
}
