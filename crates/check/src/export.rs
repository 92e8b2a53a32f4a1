//! An image (or one of its directories) as a POSIX (PAX) tar stream, as
//! GNU tar writes the kernel's mount of it with `--format=pax
//! --sort=name --numeric-owner --xattrs --xattrs-include='*'
//! --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime`
//! from inside the directory (`-C DIR .`): the same bytes. Entries in name
//! order, a directory before what it holds; an extended header
//! (`./DIR/PaxHeaders/NAME`) before an entry that needs one (nanoseconds
//! of its mtime, a name or link target over 100 bytes or not ASCII, an owner or size
//! past ustar's fields, xattrs as `SCHILY.xattr.NAME`, inline ones first
//! as the kernel lists them); hard links of regular files and symlinks as
//! links to the first name, without xattrs (hard-linked fifos and devices
//! whole under each name, as GNU tar writes them);
//! sockets left out, as GNU tar leaves them out; two zero blocks and
//! padding to a 10240-byte record at the end.
//!
//! A file the image stores with holes (null chunks, hole extents) is a
//! PAX 1.0 sparse member, as GNU tar `--sparse` writes one: records
//! `GNU.sparse.major=1`, `minor=0`, `name` and `realsize` first, the
//! header named `DIR/GNUSparseFile.0/NAME` (GNU tar puts its process id
//! where we put 0; readers ignore that name), and the data a decimal map
//! of the data regions (ending with `SIZE 0`) padded to a block, then
//! the regions' bytes. Which bytes are holes is the image's choice, not
//! a scan for zeros. With `sparse: false` such files go out whole, as
//! GNU tar writes them without `--sparse`.
//!
//! The walk has no recursion, a depth limit and a visited set: a hostile
//! image's directory loop is an error, not a hang.

use std::collections::{HashMap, HashSet};
use std::io::Write;

use ferrofs::format::inode::FileType;
use ferrofs::format::Nid;
use ferrofs::raw::Inode;
use ferrofs::Image;

/// What went wrong exporting, and where.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The image could not be read at `path`.
    #[error("{}: {source}", show(path))]
    Read {
        path: Vec<u8>,
        #[source]
        source: ferrofs::Error,
    },
    /// A directory reached twice (a loop) or nested too deep.
    #[error("{}: {why}", show(path))]
    Tree { path: Vec<u8>, why: String },
    /// The output could not be written.
    #[error("writing the tar stream: {0}")]
    Write(#[from] std::io::Error),
}

fn show(path: &[u8]) -> String {
    format!("/{}", String::from_utf8_lossy(path))
}

/// What was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct ExportStats {
    pub entries: u64,
    pub file_bytes: u64,
    pub tar_bytes: u64,
    pub sockets_skipped: u64,
    /// Files written as sparse members.
    pub sparse_files: u64,
}

/// How to export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportOptions {
    /// Files with holes as sparse members (`true`, the default) or
    /// whole.
    pub sparse: bool,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions { sparse: true }
    }
}

const BLOCK: usize = 512;
const RECORD: u64 = 10240;
/// Deepest nesting exported.
const MAX_DEPTH: usize = 2048;

/// Counts what goes out.
struct Out<'a> {
    w: &'a mut dyn Write,
    n: u64,
}

impl Out<'_> {
    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.w.write_all(b)?;
        self.n += b.len() as u64;
        Ok(())
    }

    fn pad(&mut self) -> std::io::Result<()> {
        let r = (self.n % BLOCK as u64) as usize;
        if r != 0 {
            self.put(&[0u8; BLOCK][..BLOCK - r])?;
        }
        Ok(())
    }
}

/// A ustar numeric field: octal, zero-padded to `width - 1` digits and a
/// NUL; `None` when the value does not fit.
fn octal(v: u64, width: usize) -> Option<Vec<u8>> {
    let s = format!("{v:0w$o}", w = width - 1);
    (s.len() == width - 1).then(|| {
        let mut b = s.into_bytes();
        b.push(0);
        b
    })
}

/// One `LEN KEY=VALUE\n` record (LEN counts the whole record).
fn record(key: &[u8], value: &[u8]) -> Vec<u8> {
    let body = 3 + key.len() + value.len(); // ' ', '=', '\n'
    let mut len = body + 1;
    while len != body + len.to_string().len() {
        len = body + len.to_string().len();
    }
    let mut r = format!("{len} ").into_bytes();
    r.extend_from_slice(key);
    r.push(b'=');
    r.extend_from_slice(value);
    r.push(b'\n');
    r
}

/// A ustar header block.
struct Header {
    name: Vec<u8>,
    mode: u32,
    uid: u64,
    gid: u64,
    size: u64,
    mtime: u64,
    typeflag: u8,
    link: Vec<u8>,
    dev: Option<(u32, u32)>,
}

impl Header {
    fn block(&self) -> [u8; BLOCK] {
        let mut b = [0u8; BLOCK];
        let put = |b: &mut [u8; BLOCK], at: usize, v: &[u8]| {
            let n = v.len().min(b.len() - at);
            b[at..at + n].copy_from_slice(&v[..n]);
        };
        put(&mut b, 0, &self.name[..self.name.len().min(100)]);
        put(
            &mut b,
            100,
            &octal(u64::from(self.mode), 8).unwrap_or_default(),
        );
        put(
            &mut b,
            108,
            &octal(self.uid, 8).unwrap_or_else(|| octal(0, 8).unwrap_or_default()),
        );
        put(
            &mut b,
            116,
            &octal(self.gid, 8).unwrap_or_else(|| octal(0, 8).unwrap_or_default()),
        );
        put(
            &mut b,
            124,
            &octal(self.size, 12).unwrap_or_else(|| octal(0, 12).unwrap_or_default()),
        );
        put(
            &mut b,
            136,
            &octal(self.mtime, 12).unwrap_or_else(|| octal(0, 12).unwrap_or_default()),
        );
        b[156] = self.typeflag;
        put(&mut b, 157, &self.link[..self.link.len().min(100)]);
        put(&mut b, 257, b"ustar\x0000");
        match self.dev {
            Some((ma, mi)) => {
                put(&mut b, 329, &octal(u64::from(ma), 8).unwrap_or_default());
                put(&mut b, 337, &octal(u64::from(mi), 8).unwrap_or_default());
            }
            None if self.typeflag != b'x' => {
                put(&mut b, 329, &octal(0, 8).unwrap_or_default());
                put(&mut b, 337, &octal(0, 8).unwrap_or_default());
            }
            None => {}
        }
        b[148..156].copy_from_slice(b"        ");
        let sum: u32 = b.iter().map(|&c| u32::from(c)).sum();
        let cs = format!("{sum:06o}\0 ");
        b[148..156].copy_from_slice(&cs.as_bytes()[..8]);
        b
    }
}

/// `%d/PaxHeaders/%f` of a member name (`./a/b` → `./a/PaxHeaders/b`,
/// `./` → `./PaxHeaders/.`).
fn pax_name(name: &[u8]) -> Vec<u8> {
    in_dir(name, b"PaxHeaders")
}

/// `%d/MID/%f` of a member name.
fn in_dir(name: &[u8], mid: &[u8]) -> Vec<u8> {
    let n = name.strip_suffix(b"/").unwrap_or(name);
    let (dir, base) = match n.iter().rposition(|&c| c == b'/') {
        Some(i) => (&n[..i], &n[i + 1..]),
        None => (&b"."[..], n),
    };
    let dir = if dir.is_empty() { &b"."[..] } else { dir };
    [dir, b"/", mid, b"/", base].concat()
}

/// The data regions `(offset, length)` of a file the image stores with
/// holes, ending with `(size, 0)` as GNU tar's map does; `None` when it
/// has none.
fn data_regions(
    file: &ferrofs::raw::InodeFile,
    size: u64,
    path: &[u8],
) -> Result<Option<Vec<(u64, u64)>>, ExportError> {
    let mut regions: Vec<(u64, u64)> = Vec::new();
    let mut holes = false;
    let mut pos = 0u64;
    for ext in file.extents() {
        let ext = ext.map_err(|e| ExportError::Read {
            path: path.to_vec(),
            source: e,
        })?;
        let end = ext.logical.saturating_add(ext.len).min(size);
        if ext.logical > pos || end <= pos {
            return Err(ExportError::Tree {
                path: path.to_vec(),
                why: format!("its extents do not cover byte {pos} once"),
            });
        }
        if matches!(ext.kind, ferrofs::map::ExtentKind::Hole) {
            holes = true;
        } else {
            match regions.last_mut() {
                Some((off, len)) if *off + *len == pos => *len += end - pos,
                _ => regions.push((pos, end - pos)),
            }
        }
        pos = end;
    }
    if !holes {
        return Ok(None);
    }
    regions.push((size, 0));
    Ok(Some(regions))
}

/// GNU tar's 1.0 sparse map: the count and each region's offset and
/// length, in decimal, one per line, padded to a block.
fn sparse_map(regions: &[(u64, u64)]) -> Vec<u8> {
    let mut m = format!("{}\n", regions.len());
    for (off, len) in regions {
        m.push_str(&format!("{off}\n{len}\n"));
    }
    let mut m = m.into_bytes();
    m.resize(m.len().div_ceil(BLOCK) * BLOCK, 0);
    m
}

/// A time as PAX writes it: seconds, a point and the fraction's digits
/// without trailing zeros (`-1.5` is half a second before -1 + 1).
fn pax_time(secs: i64, nsec: u32) -> String {
    if nsec == 0 {
        return secs.to_string();
    }
    let (whole, frac) = if secs < 0 {
        // secs + nsec/1e9 = -(|secs + 1| + (1e9 - nsec)/1e9)
        (
            format!("-{}", secs.saturating_add(1).unsigned_abs()),
            1_000_000_000 - nsec,
        )
    } else {
        (secs.to_string(), nsec)
    };
    let f = format!("{frac:09}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

/// Writes `inode`'s entry named `name` (with `link` for hard links);
/// returns whether it went out as a sparse member.
fn entry(
    out: &mut Out<'_>,
    image: &Image,
    name: &[u8],
    inode: &Inode,
    hard_link_to: Option<&[u8]>,
    path: &[u8],
    opts: &ExportOptions,
) -> Result<bool, ExportError> {
    let read = |e| ExportError::Read {
        path: path.to_vec(),
        source: e,
    };
    let raw = image.raw();
    let (typeflag, link, size, dev) = match (hard_link_to, inode.file_type()) {
        (Some(t), _) => (b'1', t.to_vec(), 0, None),
        (None, FileType::Directory) => (b'5', Vec::new(), 0, None),
        (None, FileType::Symlink) => (b'2', raw.read_link(inode).map_err(read)?, 0, None),
        (None, FileType::CharDevice) => (b'3', Vec::new(), 0, Some(inode.rdev())),
        (None, FileType::BlockDevice) => (b'4', Vec::new(), 0, Some(inode.rdev())),
        (None, FileType::Fifo) => (b'6', Vec::new(), 0, None),
        (None, _) => (b'0', Vec::new(), inode.size(), None),
    };
    let mtime = inode.mtime();
    let nsec = inode.mtime_nsec();
    let file = if typeflag == b'0' && size > 0 {
        Some(raw.open(inode.clone()).map_err(read)?)
    } else {
        None
    };
    let regions = match &file {
        Some(f) if opts.sparse => data_regions(f, size, path)?,
        _ => None,
    };
    let mut pax = Vec::new();
    let (header_name, size) = match &regions {
        Some(regions) => {
            pax.extend(record(b"GNU.sparse.major", b"1"));
            pax.extend(record(b"GNU.sparse.minor", b"0"));
            pax.extend(record(b"GNU.sparse.name", name));
            pax.extend(record(b"GNU.sparse.realsize", size.to_string().as_bytes()));
            let sparse_name = in_dir(name, b"GNUSparseFile.0");
            // GNU tar 1.34 cuts a long one to the header's 100 bytes and
            // records only one that is not ASCII.
            if !sparse_name.is_ascii() {
                pax.extend(record(b"path", &sparse_name));
            }
            let stored = regions
                .iter()
                .fold(sparse_map(regions).len() as u64, |n, r| {
                    n.saturating_add(r.1)
                });
            (sparse_name, stored)
        }
        None => {
            // Long or not ASCII: the exact bytes in a record.
            if name.len() > 100 || !name.is_ascii() {
                pax.extend(record(b"path", name));
            }
            (name.to_vec(), size)
        }
    };
    if link.len() > 100 {
        pax.extend(record(b"linkpath", &link));
    }
    let (uid, gid) = (u64::from(inode.uid()), u64::from(inode.gid()));
    if octal(uid, 8).is_none() {
        pax.extend(record(b"uid", uid.to_string().as_bytes()));
    }
    if octal(gid, 8).is_none() {
        pax.extend(record(b"gid", gid.to_string().as_bytes()));
    }
    if octal(size, 12).is_none() {
        pax.extend(record(b"size", size.to_string().as_bytes()));
    }
    if nsec != 0 || mtime < 0 {
        pax.extend(record(b"mtime", pax_time(mtime, nsec).as_bytes()));
    }
    // A hard link's header carries no xattrs (its first name's does).
    let mut xattrs = match hard_link_to {
        Some(_) => Vec::new(),
        None => raw.xattrs(inode).map_err(read)?,
    };
    // The kernel lists inline xattrs before shared ones.
    xattrs.sort_by_key(|x| x.shared);
    for x in xattrs {
        pax.extend(record(&[&b"SCHILY.xattr."[..], &x.name].concat(), &x.value));
    }
    let mtime_field = u64::try_from(mtime).unwrap_or(0);
    if !pax.is_empty() {
        let h = Header {
            name: pax_name(name),
            mode: 0o644,
            uid: 0,
            gid: 0,
            size: pax.len() as u64,
            mtime: mtime_field,
            typeflag: b'x',
            link: Vec::new(),
            dev: None,
        };
        out.put(&h.block())?;
        out.put(&pax)?;
        out.pad()?;
    }
    let h = Header {
        name: header_name,
        mode: u32::from(inode.permissions()),
        uid,
        gid,
        size,
        mtime: mtime_field,
        typeflag,
        link,
        dev,
    };
    out.put(&h.block())?;
    let Some(file) = file else {
        return Ok(false);
    };
    let whole = [(0, file.size())];
    let todo: &[(u64, u64)] = match &regions {
        Some(r) => {
            out.put(&sparse_map(r))?;
            r
        }
        None => &whole,
    };
    let mut buf = vec![0u8; 1 << 20];
    for &(start, len) in todo {
        let end = start.saturating_add(len);
        let mut at = start;
        while at < end {
            let want = usize::try_from((end - at).min(buf.len() as u64)).unwrap_or(buf.len());
            let chunk = buf.get_mut(..want).unwrap_or_default();
            let n = file.read_at(chunk, at).map_err(read)?;
            if n == 0 {
                return Err(ExportError::Tree {
                    path: path.to_vec(),
                    why: format!("its data ends at byte {at} of {}", file.size()),
                });
            }
            out.put(chunk.get(..n).unwrap_or_default())?;
            at += n as u64;
        }
    }
    out.pad()?;
    Ok(regions.is_some())
}

/// Writes the tree at `root` (`""` for the whole image) of `image` to
/// `w` as the module docs say.
pub fn export(
    image: &Image,
    root: &[u8],
    opts: &ExportOptions,
    w: &mut dyn Write,
) -> Result<ExportStats, ExportError> {
    let raw = image.raw();
    let err = |path: &[u8]| {
        let path = path.to_vec();
        move |e| ExportError::Read { path, source: e }
    };
    let top = raw.lookup_path(root, true).map_err(err(root))?;
    if !top.is_dir() {
        return Err(ExportError::Tree {
            path: root.to_vec(),
            why: "not a directory".into(),
        });
    }
    let mut out = Out { w, n: 0 };
    let mut stats = ExportStats::default();
    let mut links: HashMap<Nid, Vec<u8>> = HashMap::new();
    let mut seen: HashSet<Nid> = HashSet::from([top.nid()]);
    entry(&mut out, image, b"./", &top, None, root, opts)?;
    stats.entries += 1;
    // Frames: (tar name of the directory, image path, entries left in
    // reverse order).
    let mut stack: Vec<(Vec<u8>, Vec<u8>, Vec<ferrofs::raw::RawDirEntry>)> = Vec::new();
    let mut first = raw.read_dir(&top).map_err(err(root))?;
    first.retain(|e| !e.is_dot());
    first.reverse();
    stack.push((b".".to_vec(), root.to_vec(), first));
    while let Some(frame) = stack.last_mut() {
        let Some(e) = frame.2.pop() else {
            stack.pop();
            continue;
        };
        let name = [&frame.0[..], b"/", &e.name].concat();
        let path = crate::walk::join(&frame.1, &e.name);
        let inode = Inode::load(image, e.nid).map_err(err(&path))?;
        if inode.file_type() == FileType::Socket {
            stats.sockets_skipped += 1;
            continue;
        }
        if inode.is_dir() {
            if !seen.insert(e.nid) || stack.len() >= MAX_DEPTH {
                return Err(ExportError::Tree {
                    path,
                    why: "a directory reached twice or nested too deep".into(),
                });
            }
            let mut dname = name.clone();
            dname.push(b'/');
            entry(&mut out, image, &dname, &inode, None, &path, opts)?;
            stats.entries += 1;
            let mut kids = raw.read_dir(&inode).map_err(err(&path))?;
            kids.retain(|k| !k.is_dot());
            kids.reverse();
            stack.push((name, path, kids));
            continue;
        }
        // GNU tar writes links for regular files and symlinks only (a
        // hard-linked fifo or device goes out whole under each name).
        let linked = inode.nlink() > 1 && (inode.is_reg() || inode.is_symlink());
        match links.get(&e.nid) {
            Some(first) if linked => {
                let first = first.clone();
                entry(&mut out, image, &name, &inode, Some(&first), &path, opts)?;
            }
            _ => {
                if linked {
                    links.insert(e.nid, name.clone());
                }
                if entry(&mut out, image, &name, &inode, None, &path, opts)? {
                    stats.sparse_files += 1;
                }
                if inode.is_reg() {
                    stats.file_bytes += inode.size();
                }
            }
        }
        stats.entries += 1;
    }
    out.put(&[0u8; 2 * BLOCK])?;
    let rest = out.n % RECORD;
    if rest != 0 {
        let pad = vec![0u8; usize::try_from(RECORD - rest).unwrap_or(0)];
        out.put(&pad)?;
    }
    out.w.flush()?;
    stats.tar_bytes = out.n;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_count_their_own_length() {
        assert_eq!(record(b"mtime", b"1.5"), b"13 mtime=1.5\n");
        let r = record(b"path", &[b'a'; 90]);
        let len = String::from_utf8_lossy(&r)
            .split(' ')
            .next()
            .unwrap()
            .to_string();
        assert_eq!(r.len().to_string(), len);
        assert_eq!(pax_name(b"./"), b"./PaxHeaders/.");
        assert_eq!(pax_name(b"./dir/a"), b"./dir/PaxHeaders/a");
        assert_eq!(pax_name(b"./empty/"), b"./PaxHeaders/empty");
        assert_eq!(octal(0o755, 8).unwrap(), b"0000755\0");
        assert!(octal(1 << 33, 12).is_none());
        assert_eq!(pax_time(5, 500_000_000), "5.5");
        assert_eq!(pax_time(-315619200, 123456789), "-315619199.876543211");
        assert_eq!(pax_time(-1, 1), "-0.999999999");
        assert_eq!(pax_time(-100, 0), "-100");
    }
}
