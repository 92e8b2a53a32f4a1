//! `--compress-hints` files, read as mkfs.erofs 1.9 reads them
//! (lib/compress_hints.c): per line, `<pcluster size> [<compressor
//! index>] <regex>`; the first line whose regex matches a file's path
//! (relative to the source, no leading `/`) decides its pcluster size and
//! compressor.
//!
//! The tokenizing is C's: the size is `atoi` of the first word (skipping
//! spaces and tabs), the next word is the compressor index when a third
//! part follows, and the regex is the rest of the line after the single
//! separator that ended the index (so further blanks, a trailing blank or
//! a `\r` are part of it). Lines starting with `#`, and empty lines, are
//! skipped. A size of 0 means "do not compress" (the file is stored flat);
//! a size that is not a multiple of the block size is warned about and the
//! line ignored (the file keeps the default size). A compressor index not
//! given with `-z`, a line without a regex, or a regex that does not
//! compile is an error.

use regex::bytes::Regex;

use crate::error::{BuildError, Result};
use crate::options::compress::Hint;
use crate::util::cnum::atoi;

/// A parsed `--compress-hints` file: per line, `<pcluster size>
/// [<compressor index>] <regex>`; the first line whose regex matches a
/// file's path (relative to the source, no leading `/`) decides its
/// pcluster size (0: stored uncompressed) and compressor.
#[derive(Debug, Default)]
pub struct Hints {
    /// The lines in file order (first match wins).
    pub hints: Vec<Hint>,
    /// Lines ignored, with mkfs.erofs's reason, for the user.
    pub warnings: Vec<String>,
}

impl Hints {
    /// Reads a hints file, as mkfs.erofs 1.9 does, for an image of
    /// `block_size`-byte blocks built with `compressors` `-z` compressors.
    /// A size that is not a multiple of the block size is a warning (the
    /// line is ignored); an unknown compressor index, a line without a
    /// regex or a regex that does not compile is an error.
    pub fn parse(text: &[u8], compressors: usize, block_size: u64) -> Result<Hints> {
        parse(text, compressors, block_size)
    }
}

/// C `strtok` over one line: the next token after `*pos`, skipping
/// leading delimiters; `*pos` moves past the delimiter that ended it.
fn strtok<'a>(line: &'a [u8], pos: &mut usize, delims: &[u8]) -> Option<&'a [u8]> {
    let start = *pos
        + line
            .get(*pos..)?
            .iter()
            .take_while(|b| delims.contains(b))
            .count();
    if start >= line.len() {
        *pos = line.len();
        return None;
    }
    let len = line[start..]
        .iter()
        .take_while(|b| !delims.contains(b))
        .count();
    let end = start + len;
    // strtok writes a NUL over the delimiter and resumes after it.
    *pos = (end + 1).min(line.len());
    Some(&line[start..end])
}

/// See [`Hints::parse`].
fn parse(text: &[u8], compressors: usize, block_size: u64) -> Result<Hints> {
    let mut out = Hints::default();
    for (n, line) in text.split_inclusive(|b| *b == b'\n').enumerate() {
        let n = n + 1;
        if line.first().is_none_or(|b| *b == b'#' || *b == b'\n') {
            continue;
        }
        let mut pos = 0;
        let size = strtok(line, &mut pos, b"\t ").map_or(0, atoi);
        let mut alg = strtok(line, &mut pos, b"\n\t ");
        let mut pattern = strtok(line, &mut pos, b"\n");
        if pattern.is_none() {
            (pattern, alg) = (alg, None);
        }
        let Some(pattern) = pattern.filter(|p| !p.is_empty()) else {
            return Err(BuildError::Option(format!(
                "compress hints line {n}: cannot find a match pattern"
            )));
        };
        let compressor = match alg.filter(|a| !a.is_empty()) {
            None => 0,
            Some(a) => {
                let i = atoi(a) as usize;
                if i >= compressors {
                    return Err(BuildError::Option(format!(
                        "compress hints line {n}: invalid compressing configuration {:?} \
                         (-z gives {compressors})",
                        String::from_utf8_lossy(a)
                    )));
                }
                i
            }
        };
        let size = u64::from(size);
        if !size.is_multiple_of(block_size) {
            out.warnings.push(format!(
                "compress hints line {n}: invalid physical clustersize {size} \
                 (not a multiple of the block size {block_size}), line ignored"
            ));
            continue;
        }
        let re = std::str::from_utf8(pattern).map_err(|_| {
            BuildError::Option(format!("compress hints line {n}: regex is not UTF-8"))
        })?;
        let regex = Regex::new(re)
            .map_err(|e| BuildError::Option(format!("compress hints line {n}: {e}")))?;
        out.hints.push(Hint {
            pcluster_bytes: size,
            compressor,
            regex,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Hint {
        let h = parse(text.as_bytes(), 2, 4096).unwrap();
        assert_eq!(h.hints.len(), 1, "{text:?}");
        h.hints.into_iter().next().unwrap()
    }

    #[test]
    fn fields_are_split_as_strtok_splits_them() {
        let h = one("16384 1 ^dir/.*\n");
        assert_eq!((h.pcluster_bytes, h.compressor), (16384, 1));
        assert_eq!(h.regex.as_str(), "^dir/.*");
        // Two parts: the second is the regex, compressor 0.
        let h = one("  8192\t\\.txt$\n");
        assert_eq!((h.pcluster_bytes, h.compressor), (8192, 0));
        assert_eq!(h.regex.as_str(), "\\.txt$");
        // The regex is the rest of the line: inner and trailing blanks stay.
        assert_eq!(one("4096 0 a b \n").regex.as_str(), "a b ");
        assert_eq!(one("4096 0 x\r\n").regex.as_str(), "x\r");
        // A last line without a newline.
        assert_eq!(one("4096 1 end").regex.as_str(), "end");
        // atoi: a non-number is 0 (the size and the compressor here),
        // digits stop at the first non-digit.
        assert_eq!(one("8192k 1 y\n").pcluster_bytes, 8192);
        let h = one("k16 junk x\n");
        assert_eq!((h.pcluster_bytes, h.compressor), (0, 0));
        assert_eq!(h.regex.as_str(), "x");
    }

    #[test]
    fn zero_odd_sizes_comments_and_errors() {
        let h = parse(b"# c\n\n0 .*\\.jpg$\n6000 0 .*\n4096 0 .*\n", 1, 4096).unwrap();
        assert_eq!(h.hints.len(), 2);
        assert_eq!(h.hints[0].pcluster_bytes, 0);
        assert_eq!(h.hints[1].pcluster_bytes, 4096);
        assert_eq!(h.warnings.len(), 1);
        assert!(h.warnings[0].contains("line 4") && h.warnings[0].contains("6000"));
        assert!(parse(b"4096 2 .*\n", 2, 4096).is_err());
        assert!(parse(b"4096 -1 .*\n", 2, 4096).is_err());
        assert!(parse(b"4096\n", 2, 4096).is_err());
        assert!(parse(b"   \n", 2, 4096).is_err());
        assert!(parse(b"4096 0 (\n", 2, 4096).is_err());
    }
}
