//! `ferrofs ls`: lists a directory of an image as coreutils' `ls` lists
//! the same directory of the kernel's mount (`LC_ALL=C`: entries in byte
//! order, names as they are): `-l` with owner names, dates and aligned
//! columns, `-R`, `-d`, `-i` (the kernel's inode numbers), `-L`, `-n`;
//! `--json` prints the same entries, in the same order, with their whole
//! metadata as the kernel reports it (for scripts).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use anyhow::Result;
use ferrofs::format::inode::FileType;
use ferrofs::raw::{Inode, RawDirEntry};
use ferrofs::Image;

use crate::{out, ImageArgs};

mod json;

/// The options of `ferrofs ls`.
#[derive(clap::Args)]
pub(crate) struct LsArgs {
    #[command(flatten)]
    img: ImageArgs,
    /// Path inside the image (default: the root).
    path: Option<OsString>,
    /// Long format, as `ls -l`: mode, links, owner, group, size, date.
    #[arg(short = 'l')]
    long: bool,
    /// List subdirectories recursively.
    #[arg(short = 'R')]
    recursive: bool,
    /// List a directory itself, not its entries.
    #[arg(short = 'd')]
    directory: bool,
    /// Print each entry's inode number (as the kernel numbers it).
    #[arg(short = 'i')]
    inode: bool,
    /// Follow symbolic links: show what they point to.
    #[arg(short = 'L')]
    dereference: bool,
    /// Long format with numeric owners and groups.
    #[arg(short = 'n')]
    numeric: bool,
    /// Show entries whose names start with `.`, and `.` and `..`.
    #[arg(short = 'a')]
    all: bool,
    /// Show entries whose names start with `.`, but not `.` and `..`.
    #[arg(short = 'A')]
    almost_all: bool,
    /// Print the entries as a JSON array, one object each (path, name, type, mode, ino, nid,
    /// nlink, uid, gid, size, blocks, mtime, mtime_nsec, and rdev, target or xattrs where
    /// there are any); the entries and their order are those of the listing with the same
    /// options. A path, name, link target or xattr value that is not UTF-8 text is also
    /// given exactly, in hex (`path_hex`, `name_hex`, `target_hex`, `value_hex`)
    #[arg(long)]
    json: bool,
}

/// Deepest directory nesting `-R` descends (an image's paths end long
/// before; a damaged image may loop).
const MAX_DEPTH: usize = 4096;

/// `ferrofs ls`.
pub(crate) fn run(a: &LsArgs) -> Result<ExitCode> {
    let image = crate::open(&a.img)?;
    // JSON carries what -l shows: a symlink named is described, not
    // followed, unless -L.
    let long = a.long || a.numeric || a.json;
    let shown = a.path.clone().unwrap_or_else(|| ".".into());
    let p = a.path.clone().unwrap_or_default();
    let inode = named_inode(&image, a, p.as_bytes(), long)?;
    let mut lister = Lister {
        image: &image,
        args: a,
        long: long && !a.json,
        now: jiff::Timestamp::now(),
        tz: jiff::tz::TimeZone::try_system().unwrap_or(jiff::tz::TimeZone::UTC),
        names: HashMap::new(),
        groups: HashMap::new(),
        dangling: false,
        json_entries: 0,
    };
    let mut out = out::stdout();
    if a.json {
        out.write_all(b"[")?;
    }
    if !inode.is_dir() || a.directory {
        let mut row = lister.row(shown.as_bytes().to_vec(), &inode)?;
        row.path = p.as_bytes().to_vec();
        lister.print(&mut out, &[row], false)?;
    } else {
        let top = Dir {
            name: shown.as_bytes().to_vec(),
            path: p.as_bytes().to_vec(),
            inode,
            depth: 0,
        };
        lister.list_tree(&mut out, top)?;
    }
    if a.json {
        out.write_all(if lister.json_entries == 0 {
            b"]\n"
        } else {
            b"\n]\n"
        })?;
    }
    out.flush()?;
    Ok(match lister.dangling {
        true => ExitCode::from(1),
        false => ExitCode::SUCCESS,
    })
}

/// The inode `path` names on the command line. As ls: a symlink named
/// there is followed when its target is what is listed (no -l, no -d),
/// or with -L.
fn named_inode(image: &Image, a: &LsArgs, path: &[u8], long: bool) -> Result<Inode> {
    let follow = a.dereference || !(long || a.directory);
    match image.raw().lookup_path(path, follow) {
        Ok(i) => Ok(i),
        // A dangling symlink named without -L: the link itself.
        Err(_) if follow && !a.dereference => Ok(image.raw().lookup_path(path, false)?),
        Err(e) => Err(e.into()),
    }
}

/// A directory to list.
struct Dir {
    /// The name it is shown by.
    name: Vec<u8>,
    /// Its path in the image.
    path: Vec<u8>,
    inode: Inode,
    /// How far below the directory named on the command line.
    depth: usize,
}

/// One line of the listing.
struct Row {
    /// The inode shown (with `-L`, a link's target).
    inode: Inode,
    /// Its path in the image (`--json`).
    path: Vec<u8>,
    ino: u64,
    /// Type and permission characters, and `+` for an ACL.
    mode: String,
    acl: bool,
    nlink: u64,
    owner: String,
    group: String,
    size: Size,
    date: String,
    name: Vec<u8>,
    target: Option<Vec<u8>>,
    /// 512-byte blocks, as `st_blocks`.
    blocks: u64,
    /// `-L` of a dangling link: printed as question marks.
    unknown: bool,
}

enum Size {
    Bytes(u64),
    Device(u32, u32),
}

struct Lister<'a> {
    image: &'a Image,
    args: &'a LsArgs,
    long: bool,
    now: jiff::Timestamp,
    tz: jiff::tz::TimeZone,
    names: HashMap<u32, String>,
    groups: HashMap<u32, String>,
    /// A `-L` link's target was missing (the exit status is 1).
    dangling: bool,
    /// Entries printed so far by `--json`.
    json_entries: u64,
}

impl Lister<'_> {
    /// Lists directory `top` and, with `-R`, every directory below it,
    /// depth-first in name order, as ls -R goes.
    fn list_tree(&mut self, out: &mut impl Write, top: Dir) -> Result<()> {
        let mut todo = vec![top];
        let mut seen = HashSet::new();
        let mut first = true;
        while let Some(dir) = todo.pop() {
            if !seen.insert(dir.inode.nid()) {
                continue;
            }
            if self.args.recursive && !self.args.json {
                if !first {
                    writeln!(out)?;
                }
                out.write_all(&dir.name)?;
                writeln!(out, ":")?;
            }
            first = false;
            let subdirs = self.list_dir(out, &dir)?;
            todo.extend(subdirs.into_iter().rev());
        }
        Ok(())
    }

    /// Lists the entries of `dir` that are shown; returns the
    /// subdirectories `-R` lists next.
    fn list_dir(&mut self, out: &mut impl Write, dir: &Dir) -> Result<Vec<Dir>> {
        let a = self.args;
        let mut rows = Vec::new();
        let mut subdirs = Vec::new();
        for e in self.entries(&dir.inode)? {
            let hidden = e.name.starts_with(b".");
            if e.is_dot() && !a.all || hidden && !(a.all || a.almost_all) {
                continue;
            }
            let (child, dangling) = self.entry_inode(dir, &e)?;
            if a.recursive && child.is_dir() && !e.is_dot() && dir.depth < MAX_DEPTH {
                subdirs.push(Dir {
                    name: join(&dir.name, &e.name),
                    path: join(&dir.path, &e.name),
                    inode: child.clone(),
                    depth: dir.depth + 1,
                });
            }
            let mut row = self.row(e.name.clone(), &child)?;
            row.path = join(&dir.path, &e.name);
            row.unknown = dangling;
            rows.push(row);
        }
        self.print(out, &rows, true)?;
        Ok(subdirs)
    }

    /// The entries of directory `dir`, with a `.` made (from `..`) for
    /// `-a` where the image stores none.
    fn entries(&self, dir: &Inode) -> Result<Vec<RawDirEntry>> {
        let mut entries = self.image.raw().read_dir(dir)?;
        if self.args.all && !entries.iter().any(|e| e.name == b".") {
            // A directory stored without "." (48-bit images) still has one.
            if let Some(e) = entries.iter().find(|e| e.name == b"..") {
                let mut dot = e.clone();
                dot.name = b".".to_vec();
                dot.nid = dir.nid();
                entries.insert(0, dot);
            }
        }
        Ok(entries)
    }

    /// The inode entry `e` of `dir` shows: with `-L`, what a symlink
    /// points to. A dangling link is reported as ls reports it (an error
    /// here, a line of question marks in the listing) and shown itself,
    /// with `true`.
    fn entry_inode(&mut self, dir: &Dir, e: &RawDirEntry) -> Result<(Inode, bool)> {
        let child = self.image.raw().inode(e.nid)?;
        if !(self.args.dereference && child.is_symlink()) {
            return Ok((child, false));
        }
        if let Ok(target) = self
            .image
            .raw()
            .lookup_path(&join(&dir.path, &e.name), true)
        {
            return Ok((target, false));
        }
        // Named as ls names it: bare when listing the default ".".
        let shown = match (&self.args.path, dir.depth) {
            (None, 0) => e.name.clone(),
            _ => join(&dir.name, &e.name),
        };
        eprintln!(
            "ferrofs: cannot access '{}': No such file or directory",
            String::from_utf8_lossy(&shown)
        );
        self.dangling = true;
        Ok((child, true))
    }

    fn row(&mut self, name: Vec<u8>, inode: &Inode) -> Result<Row> {
        let ino = self.image.superblock().kernel_ino(inode.nid());
        if !self.long {
            return Ok(Row {
                inode: inode.clone(),
                path: Vec::new(),
                ino,
                mode: String::new(),
                acl: false,
                nlink: 0,
                owner: String::new(),
                group: String::new(),
                size: Size::Bytes(0),
                date: String::new(),
                name,
                target: None,
                blocks: 0,
                unknown: false,
            });
        }
        let t = match inode.file_type() {
            FileType::Regular => '-',
            FileType::Directory => 'd',
            FileType::Symlink => 'l',
            FileType::CharDevice => 'c',
            FileType::BlockDevice => 'b',
            FileType::Fifo => 'p',
            FileType::Socket => 's',
        };
        let size = match inode.file_type() {
            FileType::CharDevice | FileType::BlockDevice => {
                Size::Device(inode.rdev().0, inode.rdev().1)
            }
            _ => Size::Bytes(inode.size()),
        };
        let target = if inode.is_symlink() {
            Some(self.image.raw().read_link(inode)?)
        } else {
            None
        };
        let numeric = self.args.numeric;
        let owner = id_name(&mut self.names, inode.uid(), numeric, |id| {
            nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(id))
                .ok()
                .flatten()
                .map(|u| u.name)
        });
        let group = id_name(&mut self.groups, inode.gid(), numeric, |id| {
            nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(id))
                .ok()
                .flatten()
                .map(|g| g.name)
        });
        Ok(Row {
            inode: inode.clone(),
            path: Vec::new(),
            ino,
            mode: format!("{t}{}", mode_string(inode.mode())),
            acl: has_acl(self.image, inode)?,
            nlink: u64::from(inode.nlink()),
            owner,
            group,
            size,
            date: self.date(inode.mtime(), inode.mtime_nsec()),
            name,
            target,
            blocks: inode.st_blocks(self.image.superblock().blkszbits),
            unknown: false,
        })
    }

    /// `Nov 27 17:58` for the last six months, else `Nov 27  2025`, in
    /// the local time zone, as ls prints it.
    fn date(&self, sec: i64, nsec: u32) -> String {
        let Ok(when) = jiff::Timestamp::new(sec, nsec.min(999_999_999) as i32) else {
            return sec.to_string();
        };
        // ls's six months: half of a Gregorian year.
        let half_year = jiff::SignedDuration::from_secs(31_556_952 / 2);
        let recent = self
            .now
            .checked_sub(half_year)
            .is_ok_and(|ago| ago < when && when < self.now);
        let z = when.to_zoned(self.tz.clone());
        let f = if recent { "%b %e %H:%M" } else { "%b %e  %Y" };
        z.strftime(f).to_string()
    }

    fn print(&mut self, out: &mut impl Write, rows: &[Row], total: bool) -> Result<()> {
        if self.args.json {
            for r in rows {
                let v = json::entry(self.image, r)?;
                out.write_all(if self.json_entries == 0 {
                    b"\n"
                } else {
                    b",\n"
                })?;
                serde_json::to_writer(&mut *out, &v)?;
                self.json_entries += 1;
            }
            return Ok(());
        }
        let w = |f: &dyn Fn(&Row) -> usize| rows.iter().map(f).max().unwrap_or(0);
        let ino_w = if self.args.inode {
            w(&|r| r.ino.to_string().len())
        } else {
            0
        };
        if !self.long {
            for r in rows {
                if self.args.inode {
                    write!(out, "{:>ino_w$} ", r.ino)?;
                }
                out.write_all(&r.name)?;
                writeln!(out)?;
            }
            return Ok(());
        }
        if total {
            let blocks: u64 = rows.iter().filter(|r| !r.unknown).map(|r| r.blocks).sum();
            writeln!(out, "total {}", blocks.div_ceil(2))?;
        }
        let any_acl = rows.iter().any(|r| r.acl);
        let nlink_w = w(&|r| r.nlink.to_string().len());
        let owner_w = w(&|r| r.owner.len());
        let group_w = w(&|r| r.group.len());
        let major_w = w(&|r| match r.size {
            Size::Device(m, _) => m.to_string().len(),
            Size::Bytes(_) => 0,
        });
        let minor_w = w(&|r| match r.size {
            Size::Device(_, m) => m.to_string().len(),
            Size::Bytes(_) => 0,
        });
        let size_w = w(&|r| match r.size {
            Size::Bytes(n) => n.to_string().len(),
            Size::Device(..) => major_w + 2 + minor_w,
        });
        let date_w = w(&|r| r.date.len());
        for r in rows {
            if self.args.inode {
                write!(out, "{:>ino_w$} ", r.ino)?;
            }
            if r.unknown {
                let q = if any_acl { "?" } else { "" };
                write!(
                    out,
                    "{}?????????{q} {:>nlink_w$} {:<owner_w$} {:<group_w$} {:>size_w$} {:>date_w$} ",
                    &r.mode[..1],
                    "?",
                    "?",
                    "?",
                    "?",
                    "?"
                )?;
                out.write_all(&r.name)?;
                writeln!(out)?;
                continue;
            }
            let acl = match (any_acl, r.acl) {
                (false, _) => "",
                (true, true) => "+",
                (true, false) => " ",
            };
            write!(
                out,
                "{}{acl} {:>nlink_w$} {} {} ",
                r.mode,
                r.nlink,
                aligned(&r.owner, owner_w),
                aligned(&r.group, group_w)
            )?;
            match r.size {
                Size::Bytes(n) => write!(out, "{n:>size_w$}")?,
                Size::Device(major, minor) => {
                    let mw = size_w - 2 - minor_w;
                    write!(out, "{major:>mw$}, {minor:>minor_w$}")?
                }
            }
            write!(out, " {} ", r.date)?;
            out.write_all(&r.name)?;
            if let Some(t) = &r.target {
                out.write_all(b" -> ")?;
                out.write_all(t)?;
            }
            writeln!(out)?;
        }
        Ok(())
    }
}

/// An owner or group in a column `w` wide: names to the left, numbers (no
/// name known) to the right, as ls aligns them.
fn aligned(id: &str, w: usize) -> String {
    if id.bytes().all(|c| c.is_ascii_digit()) {
        format!("{id:>w$}")
    } else {
        format!("{id:<w$}")
    }
}

/// `dir/name`.
fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = dir.to_vec();
    if !path.is_empty() && !path.ends_with(b"/") {
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

/// The name of user or group `id` (looked up once), or the number.
fn id_name(
    cache: &mut HashMap<u32, String>,
    id: u32,
    numeric: bool,
    lookup: impl Fn(u32) -> Option<String>,
) -> String {
    if numeric {
        return id.to_string();
    }
    cache
        .entry(id)
        .or_insert_with(|| lookup(id).unwrap_or_else(|| id.to_string()))
        .clone()
}

/// Whether ls would mark the inode with `+`: an access ACL beyond the
/// three entries the mode bits say, or any default ACL.
fn has_acl(image: &Image, inode: &Inode) -> Result<bool> {
    if inode.xattr_icount() == 0 {
        return Ok(false);
    }
    let raw = image.raw();
    // The xattr value: a 4-byte version, then 8 bytes per entry.
    let entries = |v: &[u8]| v.len().saturating_sub(4) / 8;
    if let Some(v) = raw.xattr(inode, b"system.posix_acl_access")? {
        if entries(&v) > 3 {
            return Ok(true);
        }
    }
    if inode.is_dir() {
        if let Some(v) = raw.xattr(inode, b"system.posix_acl_default")? {
            return Ok(entries(&v) > 0);
        }
    }
    Ok(false)
}

/// `rwxr-xr-x` of a mode (setuid, setgid and sticky as `s`/`S`, `t`/`T`).
pub(crate) fn mode_string(mode: u16) -> String {
    let mut s = String::with_capacity(9);
    for (i, c) in ['r', 'w', 'x', 'r', 'w', 'x', 'r', 'w', 'x']
        .iter()
        .enumerate()
    {
        let bit = 1u16 << (8 - i);
        s.push(if mode & bit != 0 { *c } else { '-' });
    }
    let mut b = s.into_bytes();
    if mode & 0o4000 != 0 {
        b[2] = if b[2] == b'x' { b's' } else { b'S' };
    }
    if mode & 0o2000 != 0 {
        b[5] = if b[5] == b'x' { b's' } else { b'S' };
    }
    if mode & 0o1000 != 0 {
        b[8] = if b[8] == b'x' { b't' } else { b'T' };
    }
    String::from_utf8_lossy(&b).into_owned()
}
