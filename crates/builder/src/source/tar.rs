//! Reading a tar archive (ustar, GNU and PAX, including long names, PAX
//! xattrs and the GNU sparse formats) into a tree, without root: owners,
//! modes, times and device numbers come from the headers. File data is not
//! held in memory: a seekable archive is referenced in place, and data
//! read from a pipe is copied to an unlinked spool file beside the image.
//! A gzip, xz, lzma or lzip archive is decompressed on the way in (its data
//! then spooled, or written with the whole archive to a file the caller
//! names).
//! Every header field is checked; a bad archive is an error naming the
//! member and the reason.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufRead, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::content::{Content, Segment};
use crate::error::{BuildError, Result};
use crate::options::BuildOptions;
use crate::tree::{Inode, InodeId, Kind, Tree};

const BLOCK: usize = 512;
/// Largest PAX header or GNU long name accepted (they are held in memory).
const MAX_META: u64 = 1 << 20;
/// Most entries in one sparse map.
const MAX_SPARSE: usize = 1 << 20;

/// How the archive is read: its compression (mkfs.erofs's `--ungzip`,
/// `--unxz`) and how overlayfs metadata in it is treated (`--aufs`,
/// `--ovlfs-strip`).
#[derive(Clone, Debug, Default)]
pub struct TarOptions {
    /// The compression the archive may have; an archive that turns out
    /// not to be compressed is read as it is.
    pub compressed: Compressed,
    /// Where to write the decompressed archive too (`--ungzip=FILE`); file
    /// data is then read from there instead of a spool file.
    pub raw_copy: Option<PathBuf>,
    /// The root's mtime when the archive has no entry for it (the build
    /// time, as mkfs.erofs gives it).
    pub root_mtime: i64,
    /// aufs whiteouts become overlayfs ones: `.wh.NAME` a character device
    /// 0:0 named NAME, `.wh..wh..opq` the `trusted.overlay.opaque=y` xattr
    /// of its directory; other `.wh..wh.*` entries are aufs's own and left out.
    pub aufs: bool,
    /// Leave overlayfs metadata out: the whiteouts `--aufs` makes and the
    /// `trusted.overlay.opaque`/`trusted.overlay.origin` xattrs (character
    /// devices 0:0 stored in the archive stay, as with mkfs.erofs).
    pub ovlfs_strip: bool,
}

/// Compression of the archive stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compressed {
    /// Plain tar.
    #[default]
    No,
    /// gzip (one or more members).
    Gzip,
    /// xz, lzma ("alone") or lzip.
    Xz,
}

const OVL_OPAQUE: &[u8] = b"trusted.overlay.opaque";
const OVL_ORIGIN: &[u8] = b"trusted.overlay.origin";

/// Where the archive comes from.
pub enum TarInput {
    /// A file (referenced in place when it is a regular file).
    Path(PathBuf),
    /// Standard input.
    Stdin,
}

/// The archive being read: sequential access, plus where data ends up.
struct Src {
    r: Box<dyn Read>,
    pos: u64,
    /// The archive itself when it can be read at offsets.
    file: Option<Arc<File>>,
    /// Otherwise data is copied here.
    spool: Option<(Arc<File>, u64)>,
    name: String,
}

impl Src {
    fn err(&self, member: &str, reason: impl Into<String>) -> BuildError {
        let path = if member.is_empty() {
            PathBuf::from(&self.name)
        } else {
            PathBuf::from(format!("{}: {member}", self.name))
        };
        BuildError::Input {
            path,
            reason: reason.into(),
        }
    }

    fn io(&self) -> impl FnOnce(std::io::Error) -> BuildError + '_ {
        move |e| BuildError::Io {
            path: PathBuf::from(&self.name),
            source: e,
        }
    }

    /// Reads a whole block; `false` at a clean end of input.
    fn block(&mut self, b: &mut [u8; BLOCK]) -> Result<bool> {
        let mut got = 0;
        while got < BLOCK {
            match self.r.read(&mut b[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io()(e)),
            }
        }
        self.pos += got as u64;
        match got {
            0 => Ok(false),
            BLOCK => Ok(true),
            _ => Err(self.err("", "truncated archive (partial header block)")),
        }
    }

    fn exact(&mut self, buf: &mut [u8], member: &str) -> Result<()> {
        match self.r.read_exact(buf) {
            Ok(()) => {
                self.pos += buf.len() as u64;
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                Err(self.err(member, "truncated archive (data ends early)"))
            }
            Err(e) => Err(self.io()(e)),
        }
    }

    /// Skips `n` bytes.
    fn skip(&mut self, n: u64, member: &str) -> Result<()> {
        let copied =
            std::io::copy(&mut (&mut self.r).take(n), &mut std::io::sink()).map_err(|e| {
                BuildError::Io {
                    path: PathBuf::from(&self.name),
                    source: e,
                }
            })?;
        self.pos += copied;
        if copied != n {
            return Err(self.err(member, "truncated archive (data ends early)"));
        }
        Ok(())
    }

    fn padding(len: u64) -> u64 {
        len.div_ceil(BLOCK as u64) * BLOCK as u64 - len
    }

    /// Reads a small member body (long name, PAX records).
    fn small(&mut self, size: u64, member: &str) -> Result<Vec<u8>> {
        if size > MAX_META {
            return Err(self.err(
                member,
                format!("metadata entry of {size} bytes is too large"),
            ));
        }
        let mut v = vec![0u8; size as usize];
        self.exact(&mut v, member)?;
        self.skip(Self::padding(size), member)?;
        Ok(v)
    }

    /// Takes `size` bytes of file data (plus padding); returns the file
    /// they can be read from and their offset there.
    fn data(&mut self, size: u64, member: &str) -> Result<(Arc<File>, u64)> {
        let pad = Self::padding(size);
        if let Some(f) = self.file.clone() {
            let at = self.pos;
            self.skip(size + pad, member)?;
            return Ok((f, at));
        }
        let (spool, at) = match &self.spool {
            Some((f, len)) => (f.clone(), *len),
            None => return Err(self.err(member, "no place for file data")),
        };
        let mut buf = vec![0u8; size.min(1 << 20) as usize];
        let mut done = 0u64;
        while done < size {
            let n = (size - done).min(buf.len() as u64) as usize;
            self.exact(&mut buf[..n], member)?;
            spool
                .write_all_at(&buf[..n], at + done)
                .map_err(self.io())?;
            done += n as u64;
        }
        self.skip(pad, member)?;
        if let Some(s) = self.spool.as_mut() {
            s.1 += size;
        }
        Ok((spool, at))
    }
}

/// Parses a numeric header field: octal text, or base-256 when the top bit
/// of the first byte is set (negative when the first byte is 0xff).
fn number(field: &[u8]) -> Option<i64> {
    let first = *field.first()?;
    if first & 0x80 != 0 {
        let neg = first == 0xff;
        let mut v: i128 = i128::from(if neg { first } else { first & 0x7f });
        if neg {
            v -= 256;
        }
        for &b in &field[1..] {
            v = v.checked_mul(256)?.checked_add(i128::from(b))?;
        }
        return i64::try_from(v).ok();
    }
    let s: Vec<u8> = field
        .iter()
        .copied()
        .skip_while(|&c| c == b' ')
        .take_while(|&c| c != 0 && c != b' ')
        .collect();
    if s.is_empty() {
        return Some(0);
    }
    let mut v: i64 = 0;
    for c in s {
        if !(b'0'..=b'7').contains(&c) {
            return None;
        }
        v = v.checked_mul(8)?.checked_add(i64::from(c - b'0'))?;
    }
    Some(v)
}

fn cstr(field: &[u8]) -> &[u8] {
    let end = field.iter().position(|&c| c == 0).unwrap_or(field.len());
    &field[..end]
}

fn checksum_ok(h: &[u8; BLOCK]) -> bool {
    let Some(stored) = number(&h[148..156]) else {
        return false;
    };
    let (mut unsigned, mut signed) = (0i64, 0i64);
    for (i, &b) in h.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { b };
        unsigned += i64::from(b);
        signed += i64::from(b as i8);
    }
    stored == unsigned || stored == signed
}

/// PAX records `LEN KEY=VALUE\n`.
fn pax_records(data: &[u8]) -> std::result::Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        if rest.iter().all(|&c| c == 0) {
            break;
        }
        let sp = rest
            .iter()
            .position(|&c| c == b' ')
            .ok_or("PAX record without a length")?;
        let len: usize = std::str::from_utf8(&rest[..sp])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("bad PAX record length")?;
        if len <= sp + 1 || len > rest.len() || rest[len - 1] != b'\n' {
            return Err("bad PAX record length".into());
        }
        let rec = &rest[sp + 1..len - 1];
        let eq = rec
            .iter()
            .position(|&c| c == b'=')
            .ok_or("PAX record without '='")?;
        let key = String::from_utf8_lossy(&rec[..eq]).into_owned();
        out.push((key, rec[eq + 1..].to_vec()));
        rest = &rest[len..];
    }
    Ok(out)
}

fn base64(s: &[u8]) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for &c in s.iter().filter(|&&c| c != b'=' && c != b'\n') {
        acc = (acc << 6) | val(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

fn url_decode(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' && i + 2 < s.len() {
            if let Ok(v) = u8::from_str_radix(&String::from_utf8_lossy(&s[i + 1..i + 3]), 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

/// `SECONDS[.FRACTION]` (possibly negative) as seconds and nanoseconds.
fn parse_time(v: &[u8]) -> Option<(i64, u32)> {
    let s = std::str::from_utf8(v).ok()?.trim();
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    let sec: i64 = sec.parse().ok()?;
    let sec = if neg { -sec } else { sec };
    let mut ns = 0u32;
    for (i, c) in frac.bytes().take(9).enumerate() {
        if !c.is_ascii_digit() {
            return None;
        }
        ns += u32::from(c - b'0') * 10u32.pow(8 - i as u32);
    }
    if neg && ns > 0 {
        Some((sec - 1, 1_000_000_000 - ns))
    } else {
        Some((sec, ns))
    }
}

/// A POSIX.1e ACL in the text form tar writes (`SCHILY.acl.access`:
/// `user::rw-,user:1234:rwx,group::r--,mask::rwx,other::r--`, where a
/// named entry may carry its numeric id as a fourth field) as the binary
/// value of a `system.posix_acl_*` xattr, and the mask's permissions.
fn acl_xattr(text: &[u8]) -> std::result::Result<(Vec<u8>, Option<u16>), String> {
    let text = String::from_utf8_lossy(text);
    let mut entries: Vec<(u16, u32, u16)> = Vec::new();
    let mut mask = None;
    for e in text
        .split([',', '\n'])
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let f: Vec<&str> = e.split(':').collect();
        if f.len() < 3 {
            return Err(format!("bad ACL entry {e:?}"));
        }
        let perm = f[2].chars().try_fold(0u16, |p, c| match c {
            'r' => Ok(p | 4),
            'w' => Ok(p | 2),
            'x' => Ok(p | 1),
            '-' => Ok(p),
            _ => Err(format!("bad ACL permissions in {e:?}")),
        })?;
        let id = if f[1].is_empty() {
            None
        } else {
            let n = f.get(3).copied().unwrap_or(f[1]);
            Some(
                n.parse::<u32>()
                    .map_err(|_| format!("ACL entry {e:?} has no numeric id"))?,
            )
        };
        let (tag, id) = match (f[0], id) {
            ("user" | "u", None) => (0x01, u32::MAX),
            ("user" | "u", Some(i)) => (0x02, i),
            ("group" | "g", None) => (0x04, u32::MAX),
            ("group" | "g", Some(i)) => (0x08, i),
            ("mask" | "m", None) => {
                mask = Some(perm);
                (0x10, u32::MAX)
            }
            ("other" | "o", None) => (0x20, u32::MAX),
            _ => return Err(format!("bad ACL entry {e:?}")),
        };
        entries.push((tag, id, perm));
    }
    entries.sort();
    entries.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, id, perm) in entries {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    Ok((v, mask))
}

/// Path components, with `.` and empty ones dropped; `None` if `..` appears.
fn normalize(p: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for c in p.split(|&c| c == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return None,
            c => out.push(c.to_vec()),
        }
    }
    Some(out)
}

/// The extended header values that apply to the next entry.
#[derive(Default, Clone)]
struct Pax {
    path: Option<Vec<u8>>,
    linkpath: Option<Vec<u8>>,
    size: Option<u64>,
    uid: Option<u32>,
    gid: Option<u32>,
    mtime: Option<(i64, u32)>,
    devmajor: Option<u32>,
    devminor: Option<u32>,
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    sparse_major: Option<u64>,
    sparse_name: Option<Vec<u8>>,
    sparse_realsize: Option<u64>,
    sparse_map: Vec<u64>,
    /// The access ACL's mask permissions (they are the group bits of the
    /// mode on Linux).
    acl_mask: Option<u16>,
}

impl Pax {
    fn apply(&mut self, recs: Vec<(String, Vec<u8>)>) -> std::result::Result<(), String> {
        let bad = |k: &str| format!("bad PAX value for {k}");
        for (k, v) in recs {
            let u32v = |v: &[u8]| parse_u64(v).and_then(|x| u32::try_from(x).ok());
            match k.as_str() {
                "path" => self.path = Some(v),
                "linkpath" => self.linkpath = Some(v),
                "size" => self.size = Some(parse_u64(&v).ok_or_else(|| bad(&k))?),
                "uid" => self.uid = Some(u32v(&v).ok_or_else(|| bad(&k))?),
                "gid" => self.gid = Some(u32v(&v).ok_or_else(|| bad(&k))?),
                "mtime" => self.mtime = Some(parse_time(&v).ok_or_else(|| bad(&k))?),
                "SCHILY.devmajor" => self.devmajor = Some(u32v(&v).ok_or_else(|| bad(&k))?),
                "SCHILY.devminor" => self.devminor = Some(u32v(&v).ok_or_else(|| bad(&k))?),
                "GNU.sparse.major" => {
                    self.sparse_major = Some(parse_u64(&v).ok_or_else(|| bad(&k))?)
                }
                "GNU.sparse.name" => self.sparse_name = Some(v),
                "SCHILY.acl.access" | "SCHILY.acl.default" => {
                    let (value, mask) = acl_xattr(&v)?;
                    let name: &[u8] = if k.ends_with("access") {
                        self.acl_mask = mask;
                        b"system.posix_acl_access"
                    } else {
                        b"system.posix_acl_default"
                    };
                    if !self.xattrs.iter().any(|(n, _)| n == name) {
                        self.xattrs.push((name.to_vec(), value));
                    }
                }
                "GNU.sparse.realsize" | "GNU.sparse.size" => {
                    self.sparse_realsize = Some(parse_u64(&v).ok_or_else(|| bad(&k))?)
                }
                "GNU.sparse.offset" | "GNU.sparse.numbytes" => {
                    if self.sparse_map.len() >= 2 * MAX_SPARSE {
                        return Err("sparse map too long".into());
                    }
                    self.sparse_map.push(parse_u64(&v).ok_or_else(|| bad(&k))?);
                    self.sparse_major.get_or_insert(0);
                }
                "GNU.sparse.map" => {
                    for n in v.split(|&c| c == b',') {
                        if self.sparse_map.len() >= 2 * MAX_SPARSE {
                            return Err("sparse map too long".into());
                        }
                        self.sparse_map.push(parse_u64(n).ok_or_else(|| bad(&k))?);
                    }
                    self.sparse_major.get_or_insert(0);
                }
                _ => {
                    if let Some(name) = k.strip_prefix("SCHILY.xattr.") {
                        self.xattrs.retain(|(n, _)| n != name.as_bytes());
                        self.xattrs.push((name.as_bytes().to_vec(), v));
                    } else if let Some(name) = k.strip_prefix("LIBARCHIVE.xattr.") {
                        let name = url_decode(name.as_bytes());
                        let val = base64(&v).ok_or_else(|| bad(&k))?;
                        self.xattrs.retain(|(n, _)| *n != name);
                        self.xattrs.push((name, val));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Builds the tree while entries arrive.
struct Builder<'a> {
    tree: Tree,
    /// Children of each directory by name.
    children: HashMap<InodeId, HashMap<Vec<u8>, InodeId>>,
    opts: &'a BuildOptions,
    archive: String,
}

impl Builder<'_> {
    fn new_inode(&mut self, kind: Kind, rel: &[u8], parent: InodeId) -> InodeId {
        let id = self.tree.inodes.len();
        self.tree.inodes.push(Inode {
            kind,
            perm: 0o755,
            uid: 0,
            gid: 0,
            mtime: 0,
            mtime_nsec: 0,
            xattrs: Vec::new(),
            source: PathBuf::from(format!(
                "{}: {}",
                self.archive,
                String::from_utf8_lossy(rel)
            )),
            content: Content::Local,
            rel: rel.to_vec(),
            parent,
        });
        id
    }

    /// The directory at `comps`, created where missing as mkfs.erofs
    /// creates it: mode 0755 plus its parent's group and other write bits,
    /// the parent's owner and mtime.
    fn dir(&mut self, comps: &[Vec<u8>]) -> std::result::Result<InodeId, String> {
        let mut cur = self.tree.root;
        let mut rel = Vec::new();
        for c in comps {
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(c);
            let next = self.children.get(&cur).and_then(|m| m.get(c)).copied();
            cur = match next {
                Some(id) if self.tree.inodes[id].is_dir() => id,
                Some(_) => {
                    return Err(format!(
                        "{} is not a directory",
                        String::from_utf8_lossy(&rel)
                    ))
                }
                None => {
                    let id = self.new_inode(
                        Kind::Dir {
                            entries: Vec::new(),
                        },
                        &rel,
                        cur,
                    );
                    let p = &self.tree.inodes[cur];
                    let (perm, uid, gid) = (0o755 | (p.perm & 0o022), p.uid, p.gid);
                    let (mtime, nsec) = (p.mtime, p.mtime_nsec);
                    let d = &mut self.tree.inodes[id];
                    (d.perm, d.uid, d.gid, d.mtime, d.mtime_nsec) = (perm, uid, gid, mtime, nsec);
                    self.children.entry(cur).or_default().insert(c.clone(), id);
                    id
                }
            };
        }
        Ok(cur)
    }

    fn excluded(&self, rel: &[u8]) -> bool {
        let o = self.opts;
        let mut prefixes = Vec::new();
        for (i, &c) in rel.iter().enumerate() {
            if c == b'/' {
                prefixes.push(&rel[..i]);
            }
        }
        prefixes.push(rel);
        prefixes.iter().any(|p| {
            o.exclude_paths
                .iter()
                .any(|x| x.strip_prefix(b"/").unwrap_or(x) == *p)
                || o.exclude_regex.iter().any(|r| r.is_match(p))
        })
    }

    fn finish(mut self) -> Tree {
        for (dir, kids) in std::mem::take(&mut self.children) {
            let mut entries: Vec<(Vec<u8>, InodeId)> = kids.into_iter().collect();
            entries.sort();
            self.tree.inodes[dir].kind = Kind::Dir { entries };
        }
        self.tree
    }
}

/// An opened archive: its sequential reader, the file when it can be read
/// at offsets, and its name for messages.
type Opened = (Box<dyn Read>, Option<Arc<File>>, String);

fn open_input(input: &TarInput) -> Result<Opened> {
    match input {
        TarInput::Path(p) => {
            let f = File::open(p).map_err(BuildError::io(p))?;
            let meta = f.metadata().map_err(BuildError::io(p))?;
            let name = p.display().to_string();
            if meta.is_file() {
                let shared = Arc::new(f);
                let r = File::open(p).map_err(BuildError::io(p))?;
                Ok((
                    Box::new(std::io::BufReader::with_capacity(1 << 16, r)),
                    Some(shared),
                    name,
                ))
            } else {
                Ok((
                    Box::new(std::io::BufReader::with_capacity(1 << 16, f)),
                    None,
                    name,
                ))
            }
        }
        TarInput::Stdin => {
            use std::os::fd::AsFd;
            let name = "standard input".to_string();
            let fd = std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .map_err(BuildError::io(&name))?;
            let f = File::from(fd);
            let meta = f.metadata().map_err(BuildError::io(&name))?;
            if meta.is_file() {
                // Redirected from a file: read it at offsets from where it stands.
                let mut r = f.try_clone().map_err(BuildError::io(&name))?;
                let start = r.stream_position().map_err(BuildError::io(&name))?;
                if start != 0 {
                    return Err(BuildError::input(
                        &name,
                        "standard input is not at its start",
                    ));
                }
                r.seek(SeekFrom::Start(0)).map_err(BuildError::io(&name))?;
                Ok((
                    Box::new(std::io::BufReader::with_capacity(1 << 16, r)),
                    Some(Arc::new(f)),
                    name,
                ))
            } else {
                Ok((
                    Box::new(std::io::BufReader::with_capacity(1 << 16, f)),
                    None,
                    name,
                ))
            }
        }
    }
}

/// A reader that also writes what it reads to a file.
struct Tee<R> {
    r: R,
    out: File,
    path: PathBuf,
}

impl<R: Read> Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.r.read(buf)?;
        self.out
            .write_all(&buf[..n])
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))?;
        Ok(n)
    }
}

/// Whether the first bytes of a stream are a tar header.
fn looks_like_tar(head: &[u8]) -> bool {
    head.get(..BLOCK)
        .and_then(|h| <&[u8; BLOCK]>::try_from(h).ok())
        .is_some_and(|h| h.iter().any(|&b| b != 0) && checksum_ok(h))
}

/// Puts the decompressor `opts` asks for in front of the archive when its
/// first bytes show that compression (a plain archive is read as it is,
/// as mkfs.erofs does), and the copy to `opts.raw_copy` behind it.
/// Returns the reader and the file data can be read from at offsets.
fn filtered(opened: Opened, opts: &TarOptions, input: &TarInput) -> Result<Opened> {
    let (r, file, name) = opened;
    if opts.compressed == Compressed::No && opts.raw_copy.is_none() {
        return Ok((r, file, name));
    }
    let io = |e| BuildError::Io {
        path: PathBuf::from(&name),
        source: e,
    };
    let mut r = std::io::BufReader::with_capacity(1 << 16, r);
    let head = r.fill_buf().map_err(io)?;
    let lzip = head.starts_with(b"LZIP");
    let decode = match opts.compressed {
        Compressed::No => false,
        Compressed::Gzip => head.starts_with(&[0x1f, 0x8b]),
        Compressed::Xz => {
            head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) || lzip || !looks_like_tar(head)
        }
    };
    let r: Box<dyn Read> = match (decode, opts.compressed) {
        (true, Compressed::Gzip) => Box::new(flate2::bufread::MultiGzDecoder::new(r)),
        (true, Compressed::Xz) => {
            use liblzma::stream::{Stream, CONCATENATED};
            // liblzma's automatic choice covers .xz and .lzma; .lz has
            // its own decoder.
            let stream = if lzip {
                Stream::new_lzip_decoder(u64::MAX, CONCATENATED)
            } else {
                Stream::new_auto_decoder(u64::MAX, CONCATENATED)
            }
            .map_err(|e| BuildError::input(&name, format!("xz decoder: {e}")))?;
            Box::new(liblzma::bufread::XzDecoder::new_stream(r, stream))
        }
        _ => Box::new(r),
    };
    let Some(copy) = &opts.raw_copy else {
        // Decompressed data has no offsets to refer to: spool it.
        let file = if decode { None } else { file };
        return Ok((r, file, name));
    };
    if let (Ok(a), TarInput::Path(p)) = (fs::metadata(copy), input) {
        use std::os::unix::fs::MetadataExt;
        if let Ok(b) = fs::metadata(p) {
            if (a.dev(), a.ino()) == (b.dev(), b.ino()) {
                return Err(BuildError::input(
                    copy,
                    "is the archive itself: it would be overwritten while read",
                ));
            }
        }
    }
    let out = fs::File::create(copy).map_err(BuildError::io(copy))?;
    let data = fs::File::open(copy).map_err(BuildError::io(copy))?;
    let tee = Tee {
        r,
        out,
        path: copy.clone(),
    };
    Ok((
        Box::new(std::io::BufReader::with_capacity(1 << 20, tee)),
        Some(Arc::new(data)),
        name,
    ))
}

fn spool_file(dir: &Path) -> Result<File> {
    let path = dir.join(format!(".ferrofs-tar-{}.spool", std::process::id()));
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(BuildError::io(&path))?;
    fs::remove_file(&path).map_err(BuildError::io(&path))?;
    Ok(f)
}

/// Reads the archive into a tree. Data from a pipe is spooled to an
/// unlinked file in `spool_dir`.
pub fn scan(
    input: &TarInput,
    opts: &BuildOptions,
    tar_opts: TarOptions,
    spool_dir: &Path,
) -> Result<Tree> {
    let (r, file, name) = filtered(open_input(input)?, &tar_opts, input)?;
    let spool = if file.is_none() {
        Some((Arc::new(spool_file(spool_dir)?), 0))
    } else {
        None
    };
    let mut src = Src {
        r,
        pos: 0,
        file,
        spool,
        name: name.clone(),
    };
    let mut b = Builder {
        tree: Tree::default(),
        children: HashMap::new(),
        opts,
        archive: name,
    };
    let root = b.new_inode(
        Kind::Dir {
            entries: Vec::new(),
        },
        b"",
        0,
    );
    b.tree.root = root;
    // Unless the archive has an entry for it, the root is as mkfs.erofs
    // makes it: mode 0777, the build time.
    b.tree.inodes[root].perm = 0o777;
    b.tree.inodes[root].mtime = tar_opts.root_mtime;
    let mut global = Pax::default();
    let mut local = Pax::default();
    let mut long_name: Option<Vec<u8>> = None;
    let mut long_link: Option<Vec<u8>> = None;
    let mut h = [0u8; BLOCK];
    let mut zero_blocks = 0;
    // Directories holding whiteouts made from aufs ones get an (empty)
    // origin xattr, as mkfs.erofs gives them.
    let mut whiteout_dirs: Vec<InodeId> = Vec::new();
    loop {
        if !src.block(&mut h)? {
            break;
        }
        if h.iter().all(|&c| c == 0) {
            zero_blocks += 1;
            if zero_blocks == 2 {
                break;
            }
            continue;
        }
        zero_blocks = 0;
        let at = src.pos - BLOCK as u64;
        let raw_name = cstr(&h[0..100]).to_vec();
        let shown = String::from_utf8_lossy(&raw_name).into_owned();
        let member = if shown.is_empty() {
            format!("header at byte {at}")
        } else {
            shown
        };
        if !checksum_ok(&h) {
            return Err(src.err(&member, format!("header checksum mismatch at byte {at}")));
        }
        let field = |r: std::ops::Range<usize>, what: &str| {
            number(&h[r]).ok_or_else(|| format!("bad {what} field"))
        };
        let hdr_size = field(124..136, "size").map_err(|e| src.err(&member, e))?;
        let hdr_size = u64::try_from(hdr_size).map_err(|_| src.err(&member, "negative size"))?;
        let typeflag = h[156];
        let ustar = &h[257..263] == b"ustar\0";
        let gnu = &h[257..265] == b"ustar  \0";
        match typeflag {
            b'x' | b'g' => {
                let data = src.small(hdr_size, &member)?;
                let recs = pax_records(&data).map_err(|e| src.err(&member, e))?;
                let target = if typeflag == b'g' {
                    &mut global
                } else {
                    &mut local
                };
                target.apply(recs).map_err(|e| src.err(&member, e))?;
                continue;
            }
            b'L' | b'K' => {
                let data = src.small(hdr_size, &member)?;
                let v = cstr(&data).to_vec();
                if typeflag == b'L' {
                    long_name = Some(v);
                } else {
                    long_link = Some(v);
                }
                continue;
            }
            b'V' => {
                src.skip(hdr_size + Src::padding(hdr_size), &member)?;
                continue;
            }
            _ => {}
        }
        // The entry proper: extended values override the header's.
        let mut pax = global.clone();
        {
            let l = std::mem::take(&mut local);
            if l.path.is_some() {
                pax.path = l.path;
            }
            if l.linkpath.is_some() {
                pax.linkpath = l.linkpath;
            }
            pax.size = l.size.or(pax.size);
            pax.uid = l.uid.or(pax.uid);
            pax.gid = l.gid.or(pax.gid);
            pax.mtime = l.mtime.or(pax.mtime);
            pax.devmajor = l.devmajor.or(pax.devmajor);
            pax.devminor = l.devminor.or(pax.devminor);
            for (n, v) in l.xattrs {
                pax.xattrs.retain(|(m, _)| *m != n);
                pax.xattrs.push((n, v));
            }
            pax.sparse_major = l.sparse_major;
            pax.sparse_name = l.sparse_name;
            pax.sparse_realsize = l.sparse_realsize;
            pax.sparse_map = l.sparse_map;
            pax.acl_mask = l.acl_mask;
        }
        let mut path = raw_name.clone();
        if ustar {
            let prefix = cstr(&h[345..500]);
            if !prefix.is_empty() {
                path = [prefix, b"/", &raw_name].concat();
            }
        }
        if let Some(p) = long_name.take() {
            path = p;
        }
        if let Some(p) = pax.path.take() {
            path = p;
        }
        if let Some(p) = pax.sparse_name.take() {
            path = p;
        }
        let mut link = cstr(&h[157..257]).to_vec();
        if let Some(l) = long_link.take() {
            link = l;
        }
        if let Some(l) = pax.linkpath.take() {
            link = l;
        }
        let member = String::from_utf8_lossy(&path).into_owned();
        let size = pax.size.unwrap_or(hdr_size);
        let num = |r: std::ops::Range<usize>, what: &str| -> std::result::Result<i64, String> {
            number(&h[r]).ok_or_else(|| format!("bad {what} field"))
        };
        let mut mode = num(100..108, "mode").map_err(|e| src.err(&member, e))?;
        if let Some(m) = pax.acl_mask {
            mode = (mode & !0o070) | (i64::from(m) << 3);
        }
        let uid = match pax.uid {
            Some(u) => u,
            None => u32::try_from(num(108..116, "uid").map_err(|e| src.err(&member, e))?)
                .map_err(|_| src.err(&member, "uid out of range"))?,
        };
        let gid = match pax.gid {
            Some(g) => g,
            None => u32::try_from(num(116..124, "gid").map_err(|e| src.err(&member, e))?)
                .map_err(|_| src.err(&member, "gid out of range"))?,
        };
        let mtime = match pax.mtime {
            Some(t) => t,
            None => (num(136..148, "mtime").map_err(|e| src.err(&member, e))?, 0),
        };
        let Some(comps) = normalize(&path) else {
            return Err(src.err(&member, "path leaves the archive's root (`..`)"));
        };
        if comps.iter().any(|c| c.len() > ferrofs_format::NAME_MAX) {
            return Err(src.err(&member, "name longer than 255 bytes"));
        }
        let rel = comps.join(&b'/');
        let skip_data = |src: &mut Src, n: u64| src.skip(n + Src::padding(n), &member);
        if b.excluded(&rel) {
            skip_data(&mut src, size)?;
            continue;
        }
        let mut comps = comps;
        if tar_opts.ovlfs_strip {
            pax.xattrs
                .retain(|(n, _)| n != OVL_OPAQUE && n != OVL_ORIGIN);
        }
        if tar_opts.aufs {
            if comps.iter().any(|c| c.starts_with(b".wh..wh.")) {
                if comps.last().is_some_and(|c| c == b".wh..wh..opq") {
                    // The directory hides what lower layers hold.
                    let parents = &comps[..comps.len() - 1];
                    let dir = b.dir(parents).map_err(|e| src.err(&member, e))?;
                    if !tar_opts.ovlfs_strip {
                        let x = &mut b.tree.inodes[dir].xattrs;
                        x.retain(|(n, _)| n != OVL_OPAQUE);
                        x.push((OVL_OPAQUE.to_vec(), b"y".to_vec()));
                        x.sort();
                    }
                }
                skip_data(&mut src, size)?;
                continue;
            }
            if let Some(last) = comps.last_mut() {
                if let Some(hidden) = last.strip_prefix(b".wh.") {
                    if hidden.is_empty() {
                        return Err(src.err(&member, "whiteout without a name"));
                    }
                    *last = hidden.to_vec();
                    skip_data(&mut src, size)?;
                    if tar_opts.ovlfs_strip {
                        continue;
                    }
                    let Some((name, parents)) = comps.split_last() else {
                        continue;
                    };
                    let dir = b.dir(parents).map_err(|e| src.err(&member, e))?;
                    let rel = comps.join(&b'/');
                    let id = b.new_inode(Kind::CharDevice { major: 0, minor: 0 }, &rel, dir);
                    // Mode 0, as overlayfs and mkfs.erofs make whiteouts.
                    set_meta(&mut b.tree.inodes[id], 0, uid, gid, mtime, pax.xattrs);
                    b.children.entry(dir).or_default().insert(name.clone(), id);
                    whiteout_dirs.push(dir);
                    continue;
                }
            }
        }
        let kind = match typeflag {
            b'0' | 0 | b'7' | b'S' => None,
            b'1' => {
                // A hard link: another name for an earlier entry.
                skip_data(&mut src, size)?;
                let Some(t) = normalize(&link) else {
                    return Err(src.err(&member, "link target leaves the root (`..`)"));
                };
                let Some((last, parents)) = t.split_last() else {
                    return Err(src.err(&member, "hard link to the root"));
                };
                let mut cur = b.tree.root;
                for c in parents {
                    cur = b
                        .children
                        .get(&cur)
                        .and_then(|m| m.get(c))
                        .copied()
                        .ok_or_else(|| {
                            src.err(&member, "hard link target not in the archive before it")
                        })?;
                }
                let target = b
                    .children
                    .get(&cur)
                    .and_then(|m| m.get(last))
                    .copied()
                    .ok_or_else(|| {
                        src.err(
                            &member,
                            format!(
                                "hard link target {} not in the archive before it",
                                String::from_utf8_lossy(&link)
                            ),
                        )
                    })?;
                if b.tree.inodes[target].is_dir() {
                    return Err(src.err(&member, "hard link to a directory"));
                }
                let Some((name, parents)) = comps.split_last() else {
                    return Err(src.err(&member, "hard link named like the root"));
                };
                let dir = b.dir(parents).map_err(|e| src.err(&member, e))?;
                b.children
                    .entry(dir)
                    .or_default()
                    .insert(name.clone(), target);
                continue;
            }
            b'2' => Some(Kind::Symlink {
                target: link.clone(),
            }),
            b'3' | b'4' => {
                let major = match pax.devmajor {
                    Some(m) => m,
                    None => {
                        u32::try_from(num(329..337, "devmajor").map_err(|e| src.err(&member, e))?)
                            .unwrap_or(u32::MAX)
                    }
                };
                let minor = match pax.devminor {
                    Some(m) => m,
                    None => {
                        u32::try_from(num(337..345, "devminor").map_err(|e| src.err(&member, e))?)
                            .unwrap_or(u32::MAX)
                    }
                };
                if major >= 1 << 12 || minor >= 1 << 20 {
                    return Err(src.err(
                        &member,
                        format!("device number {major}:{minor} does not fit"),
                    ));
                }
                Some(if typeflag == b'3' {
                    Kind::CharDevice { major, minor }
                } else {
                    Kind::BlockDevice { major, minor }
                })
            }
            b'5' | b'D' => Some(Kind::Dir {
                entries: Vec::new(),
            }),
            b'6' => Some(Kind::Fifo),
            other => {
                return Err(src.err(
                    &member,
                    format!("unsupported entry type {:?}", other as char),
                ))
            }
        };
        let is_dir = matches!(kind, Some(Kind::Dir { .. }));
        if kind.is_some() {
            // Only regular files carry data; skip anything else's.
            skip_data(&mut src, size)?;
        }
        let kind = match kind {
            Some(k) => k,
            None => {
                // A regular file, maybe sparse.
                let mut map: Vec<(u64, u64)> = Vec::new();
                let mut real = size;
                let mut stored = size;
                if typeflag == b'S' && gnu {
                    let add =
                        |map: &mut Vec<(u64, u64)>, e: &[u8]| -> std::result::Result<(), &str> {
                            let off = number(&e[0..12]).and_then(|v| u64::try_from(v).ok());
                            let len = number(&e[12..24]).and_then(|v| u64::try_from(v).ok());
                            match (off, len) {
                                (Some(o), Some(l)) if e[0] != 0 => {
                                    if map.len() >= MAX_SPARSE {
                                        return Err("sparse map too long");
                                    }
                                    map.push((o, l));
                                    Ok(())
                                }
                                (Some(_), Some(_)) => Ok(()),
                                _ => Err("bad sparse map entry"),
                            }
                        };
                    for i in 0..4 {
                        add(&mut map, &h[386 + 24 * i..386 + 24 * (i + 1)])
                            .map_err(|e| src.err(&member, e))?;
                    }
                    real =
                        u64::try_from(num(483..495, "realsize").map_err(|e| src.err(&member, e))?)
                            .map_err(|_| src.err(&member, "bad realsize"))?;
                    let mut extended = h[482] != 0;
                    let mut e = [0u8; BLOCK];
                    while extended {
                        if !src.block(&mut e)? {
                            return Err(src.err(&member, "truncated sparse header"));
                        }
                        for i in 0..21 {
                            add(&mut map, &e[24 * i..24 * (i + 1)])
                                .map_err(|e| src.err(&member, e))?;
                        }
                        extended = e[504] != 0;
                    }
                } else if let Some(major) = pax.sparse_major {
                    real = pax
                        .sparse_realsize
                        .ok_or_else(|| src.err(&member, "sparse file without its size"))?;
                    if major == 1 {
                        // The map leads the data: decimal numbers, one per line.
                        let mut text = Vec::new();
                        let mut block = [0u8; BLOCK];
                        let mut lines_needed: Option<u64> = None;
                        let mut nums: Vec<u64> = Vec::new();
                        let mut used = 0u64;
                        while lines_needed.is_none_or(|n| (nums.len() as u64) < n) {
                            if !src.block(&mut block)? {
                                return Err(src.err(&member, "truncated sparse map"));
                            }
                            used += BLOCK as u64;
                            if used > MAX_META {
                                return Err(src.err(&member, "sparse map too long"));
                            }
                            text.extend_from_slice(&block);
                            nums.clear();
                            lines_needed = None;
                            let mut complete = 0;
                            for (i, &c) in text.iter().enumerate() {
                                if c == b'\n' {
                                    let line = &text[complete..i];
                                    complete = i + 1;
                                    let v = parse_u64(line)
                                        .ok_or_else(|| src.err(&member, "bad sparse map"))?;
                                    if lines_needed.is_none() {
                                        if v > MAX_SPARSE as u64 {
                                            return Err(src.err(&member, "sparse map too long"));
                                        }
                                        lines_needed = Some(2 * v);
                                    } else {
                                        nums.push(v);
                                        if lines_needed.is_some_and(|n| nums.len() as u64 == n) {
                                            break;
                                        }
                                    }
                                }
                            }
                        }
                        stored = size
                            .checked_sub(used)
                            .ok_or_else(|| src.err(&member, "sparse map larger than the entry"))?;
                        map = nums.chunks(2).map(|p| (p[0], p[1])).collect();
                    } else {
                        if pax.sparse_map.len() % 2 != 0 {
                            return Err(src.err(&member, "odd sparse map"));
                        }
                        map = pax.sparse_map.chunks(2).map(|p| (p[0], p[1])).collect();
                    }
                }
                let (file, base) = src.data(stored, &member)?;
                let mut segments = Vec::new();
                let mut ranges = Vec::new();
                let sparse = typeflag == b'S' || pax.sparse_major.is_some();
                if sparse {
                    let mut phys = 0u64;
                    let mut last_end = 0u64;
                    for &(off, len) in &map {
                        let end = off
                            .checked_add(len)
                            .filter(|&e| e <= real && off >= last_end)
                            .ok_or_else(|| {
                                src.err(&member, "sparse map out of order or beyond the file")
                            })?;
                        if len > 0 {
                            segments.push(Segment {
                                logical: off,
                                len,
                                physical: base + phys,
                            });
                            ranges.push((off, end));
                        }
                        phys = phys
                            .checked_add(len)
                            .filter(|&p| p <= stored)
                            .ok_or_else(|| src.err(&member, "sparse map larger than its data"))?;
                        last_end = end;
                    }
                } else if size > 0 {
                    segments.push(Segment {
                        logical: 0,
                        len: size,
                        physical: base,
                    });
                }
                let data = if sparse && !(ranges.len() == 1 && ranges[0] == (0, real)) {
                    Some(ranges)
                } else {
                    None
                };
                let kind = Kind::File { size: real, data };
                let Some((name, parents)) = comps.split_last() else {
                    return Err(src.err(&member, "a file named like the root"));
                };
                let dir = b.dir(parents).map_err(|e| src.err(&member, e))?;
                let id = b.new_inode(kind, &rel, dir);
                b.tree.inodes[id].content = Content::Archive {
                    archive: file,
                    segments: segments.into(),
                };
                set_meta(&mut b.tree.inodes[id], mode, uid, gid, mtime, pax.xattrs);
                b.children.entry(dir).or_default().insert(name.clone(), id);
                continue;
            }
        };
        // Directories keep their children when they appear again.
        let Some((name, parents)) = comps.split_last() else {
            if is_dir {
                let r = b.tree.root;
                set_meta(&mut b.tree.inodes[r], mode, uid, gid, mtime, pax.xattrs);
                continue;
            }
            return Err(src.err(&member, "only a directory can be the root"));
        };
        let dir = b.dir(parents).map_err(|e| src.err(&member, e))?;
        let existing = b.children.get(&dir).and_then(|m| m.get(name)).copied();
        let id = match existing {
            Some(id) if is_dir && b.tree.inodes[id].is_dir() => id,
            _ => {
                let id = b.new_inode(kind, &rel, dir);
                b.children.entry(dir).or_default().insert(name.clone(), id);
                id
            }
        };
        set_meta(&mut b.tree.inodes[id], mode, uid, gid, mtime, pax.xattrs);
    }
    if !tar_opts.ovlfs_strip {
        for dir in whiteout_dirs {
            let x = &mut b.tree.inodes[dir].xattrs;
            if !x.iter().any(|(n, _)| n == OVL_ORIGIN) {
                x.push((OVL_ORIGIN.to_vec(), Vec::new()));
                x.sort();
            }
        }
    }
    if src.file.is_none() || tar_opts.compressed != Compressed::No {
        // Read a stream to its end: a compressed one checks its CRC or
        // check field there (so a corrupt stream is an error, not a
        // tree with wrong bytes), a `=FILE` copy gets all of it, and the
        // writer of a pipe is not cut off.
        std::io::copy(&mut src.r, &mut std::io::sink()).map_err(src.io())?;
    }
    Ok(b.finish())
}

fn set_meta(
    ino: &mut Inode,
    mode: i64,
    uid: u32,
    gid: u32,
    mtime: (i64, u32),
    mut xattrs: Vec<(Vec<u8>, Vec<u8>)>,
) {
    ino.perm = (mode & 0o7777) as u16;
    ino.uid = uid;
    ino.gid = gid;
    ino.mtime = mtime.0;
    ino.mtime_nsec = mtime.1.min(999_999_999);
    xattrs.sort();
    ino.xattrs = xattrs;
}

#[cfg(test)]
mod tests {
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

#[cfg(test)]
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
            &dir,
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
                &dir,
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
