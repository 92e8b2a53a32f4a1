//! SELinux labels from a `file_contexts` file (`--file-contexts`), looked
//! up as libselinux's file backend does: each line is `REGEX [TYPE]
//! CONTEXT`, the regex matches a whole path; the last matching line wins,
//! and lines without regex metacharacters (exact paths) win over any
//! regex; `TYPE` (`--`, `-d`, `-l`, `-c`, `-b`, `-p`, `-s`) limits a line
//! to one file type; `<<none>>` leaves the file unlabeled. The label
//! replaces any `security.selinux` the source has.

use std::path::Path;

use regex::bytes::Regex;

use crate::error::{BuildError, Result};
use crate::tree::Tree;

/// The xattr the label is stored as.
const SELINUX_XATTR: &[u8] = b"security.selinux";

/// A parsed `file_contexts`.
#[derive(Debug)]
pub struct FileContexts {
    /// Regex lines, then exact-path lines, each group in file order;
    /// looked up from the end.
    specs: Vec<Spec>,
}

#[derive(Debug)]
struct Spec {
    re: Regex,
    /// `st_mode & S_IFMT` the line is limited to.
    kind: Option<u16>,
    /// `None`: `<<none>>`.
    context: Option<Vec<u8>>,
}

impl FileContexts {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read(path).map_err(BuildError::io(path))?;
        Self::parse(&text, path)
    }

    /// Parses the text of a `file_contexts` (errors name `path` and the
    /// line).
    pub(crate) fn parse(text: &[u8], path: &Path) -> Result<Self> {
        let mut regexes = Vec::new();
        let mut exact = Vec::new();
        for (n, line) in text.split(|&b| b == b'\n').enumerate() {
            let line = String::from_utf8_lossy(line);
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: String| BuildError::input(path, format!("line {}: {why}", n + 1));
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (re, kind, context) = match fields[..] {
                [re, context] => (re, None, context),
                [re, kind, context] => (
                    re,
                    Some(file_kind(kind).ok_or_else(|| bad(format!("unknown file type {kind}")))?),
                    context,
                ),
                _ => return Err(bad("expected `REGEX [TYPE] CONTEXT`".into())),
            };
            // As libselinux compiles them: `.` matches any byte, newlines
            // and bytes that are not UTF-8 included.
            let compiled = Regex::new(&format!("(?s-u)^(?:{re})$"))
                .map_err(|e| bad(format!("regex {re}: {e}")))?;
            let spec = Spec {
                re: compiled,
                kind,
                context: (context != "<<none>>").then(|| context.as_bytes().to_vec()),
            };
            if has_meta_chars(re) {
                regexes.push(spec);
            } else {
                exact.push(spec);
            }
        }
        regexes.extend(exact);
        Ok(Self { specs: regexes })
    }

    /// The label of the file at `path` (absolute, as mounted) with
    /// `st_mode` `mode`, if it gets one.
    pub(crate) fn lookup(&self, path: &[u8], mode: u16) -> Option<&[u8]> {
        self.specs
            .iter()
            .rev()
            .find(|s| s.kind.is_none_or(|k| mode & 0o170000 == k) && s.re.is_match(path))
            .and_then(|s| s.context.as_deref())
    }

    /// Labels every inode of `tree` by its path under `base` (the mount
    /// point as [`crate::BuildOptions::mount_prefix`] gives it).
    pub(crate) fn apply(&self, tree: &mut Tree, base: &[u8]) {
        for ino in &mut tree.inodes {
            let path = match (base.is_empty(), ino.rel.is_empty()) {
                (true, true) => b"/".to_vec(),
                (_, true) => base.to_vec(),
                _ => [base, b"/", &ino.rel].concat(),
            };
            let label = self.lookup(&path, ino.mode()).map(<[u8]>::to_vec);
            ino.xattrs.retain(|(n, _)| n != SELINUX_XATTR);
            if let Some(l) = label {
                ino.xattrs.push((SELINUX_XATTR.to_vec(), l));
                ino.xattrs.sort();
            }
        }
    }
}

/// The `st_mode` type bits a `file_contexts` type field names.
fn file_kind(field: &str) -> Option<u16> {
    Some(match field {
        "--" => 0o100000,
        "-d" => 0o040000,
        "-l" => 0o120000,
        "-c" => 0o020000,
        "-b" => 0o060000,
        "-p" => 0o010000,
        "-s" => 0o140000,
        _ => return None,
    })
}

/// Whether a regex has metacharacters (else it names one exact path), as
/// libselinux decides it: a backslash escapes the next character.
fn has_meta_chars(re: &str) -> bool {
    let mut chars = re.chars();
    while let Some(c) = chars.next() {
        match c {
            '.' | '^' | '$' | '?' | '*' | '+' | '|' | '[' | '(' | '{' => return true,
            '\\' => {
                chars.next();
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fc(text: &str) -> FileContexts {
        FileContexts::parse(text.as_bytes(), Path::new("fc")).unwrap()
    }

    #[test]
    fn last_match_wins_and_exact_paths_win_over_regexes() {
        let f = fc("# comment\n\
                    /.* u:r:any:s0\n\
                    /a/b u:r:exact:s0\n\
                    /a(/.*)? u:r:a:s0\n\
                    /a/c\\.txt -- u:r:file:s0\n\
                    /a/c\\.txt -d u:r:dir:s0\n\
                    /n(/.*)? <<none>>\n");
        let file = 0o100644;
        let dir = 0o040755;
        assert_eq!(f.lookup(b"/x", file), Some(&b"u:r:any:s0"[..]));
        // Written before the later regex, still wins: no metacharacters.
        assert_eq!(f.lookup(b"/a/b", file), Some(&b"u:r:exact:s0"[..]));
        assert_eq!(f.lookup(b"/a/z", file), Some(&b"u:r:a:s0"[..]));
        assert_eq!(f.lookup(b"/a/c.txt", file), Some(&b"u:r:file:s0"[..]));
        assert_eq!(f.lookup(b"/a/c.txt", dir), Some(&b"u:r:dir:s0"[..]));
        // Anchored: a prefix does not match.
        assert_eq!(f.lookup(b"/a/c.txtx", file), Some(&b"u:r:a:s0"[..]));
        assert_eq!(f.lookup(b"/n/q", file), None);
        // Any byte is a character: a newline, bytes that are not UTF-8.
        assert_eq!(f.lookup(b"/new\nline", file), Some(&b"u:r:any:s0"[..]));
        assert_eq!(f.lookup(b"/\xff\xfe", file), Some(&b"u:r:any:s0"[..]));
        // A UTF-8 name in the file matches its bytes.
        let g = fc("/caf\u{e9} u:r:cafe:s0\n");
        assert_eq!(
            g.lookup("/caf\u{e9}".as_bytes(), file),
            Some(&b"u:r:cafe:s0"[..])
        );
    }

    #[test]
    fn bad_lines_name_the_line() {
        for (text, needle) in [
            ("/a\n", "line 1"),
            ("/a u:r:x:s0\n/b -q u:r:y:s0\n", "line 2: unknown file type"),
            ("/(a u:r:x:s0\n", "line 1: regex"),
        ] {
            let e = FileContexts::parse(text.as_bytes(), Path::new("fc")).unwrap_err();
            assert!(e.to_string().contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn metacharacters_as_libselinux_counts_them() {
        assert!(!has_meta_chars("/system/bin/sh"));
        assert!(!has_meta_chars("/a\\.b"));
        assert!(has_meta_chars("/a.b"));
        assert!(has_meta_chars("/a(/.*)?"));
    }
}
