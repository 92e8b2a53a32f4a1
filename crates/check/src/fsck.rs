//! fsck: walk every directory and inode, check the invariants the kernel
//! and mkfs rely on, and decode every byte of every file. Problems are
//! collected (by path and nid), never fatal to the walk.

use std::collections::HashMap;

use ferrofs::format::inode::FileType;
use ferrofs::format::Nid;
use ferrofs::map::ExtentKind;
use ferrofs::{raw::Inode, raw::InodeFile as File, Error, Image};
use serde::Serialize;

use crate::walk::{walk, Visit};

/// One problem found in an image.
#[derive(Clone, Debug, Serialize)]
pub struct Problem {
    pub path: String,
    pub nid: Option<u64>,
    pub message: String,
}

/// What fsck saw.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub inodes: u64,
    pub directories: u64,
    pub files: u64,
    pub symlinks: u64,
    pub special: u64,
    pub data_bytes: u64,
    pub extents: u64,
    pub pclusters_decoded: u64,
    /// Damage: what makes the kernel return wrong data or errors.
    pub problems: Vec<Problem>,
    /// Oddities the kernel reads the image through unharmed (a link count
    /// that is not the number of entries naming the inode).
    pub warnings: Vec<Problem>,
}

impl Report {
    /// No damage (warnings do not count).
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Options of a check.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Decode and read every byte of every file (the default).
    pub read_data: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self { read_data: true }
    }
}

fn show(path: &[u8]) -> String {
    if path.is_empty() {
        "/".to_string()
    } else {
        format!("/{}", String::from_utf8_lossy(path))
    }
}

struct Checker<'a> {
    image: &'a Image,
    opts: Options,
    report: Report,
    /// nid -> (links seen, nlink on disk, first path)
    links: HashMap<Nid, (u32, u32, Vec<u8>)>,
    subdirs: HashMap<Nid, (u32, u32, Vec<u8>)>,
    checked: std::collections::HashSet<Nid>,
    progress: Option<&'a dyn Fn(u64, u64)>,
}

impl Checker<'_> {
    fn problem(&mut self, path: &[u8], nid: Option<Nid>, message: impl Into<String>) {
        self.report.problems.push(Problem {
            path: show(path),
            nid: nid.map(|n| n.0),
            message: message.into(),
        });
    }

    fn warning(&mut self, path: &[u8], nid: Option<Nid>, message: impl Into<String>) {
        self.report.warnings.push(Problem {
            path: show(path),
            nid: nid.map(|n| n.0),
            message: message.into(),
        });
    }

    fn dir(
        &mut self,
        path: &[u8],
        inode: &Inode,
        entries: &[ferrofs::raw::RawDirEntry],
        parent: Nid,
    ) {
        let mut prev: Option<&[u8]> = None;
        let (mut dot, mut dotdot) = (false, false);
        let mut nsub = 0u32;
        for e in entries {
            if let Some(p) = prev {
                if p >= &e.name[..] {
                    self.problem(
                        path,
                        Some(inode.nid()),
                        format!(
                            "entries out of order: {:?} before {:?}",
                            String::from_utf8_lossy(p),
                            String::from_utf8_lossy(&e.name)
                        ),
                    );
                }
            }
            prev = Some(&e.name);
            if e.name.contains(&b'/') || e.name.contains(&0) {
                self.problem(
                    path,
                    Some(inode.nid()),
                    format!("bad name {:?}", String::from_utf8_lossy(&e.name)),
                );
            }
            match &e.name[..] {
                b"." => {
                    dot = true;
                    if e.nid != inode.nid() {
                        self.problem(
                            path,
                            Some(inode.nid()),
                            format!("'.' points to nid {}", e.nid),
                        );
                    }
                }
                b".." => {
                    dotdot = true;
                    if e.nid != parent {
                        self.problem(
                            path,
                            Some(inode.nid()),
                            format!("'..' points to nid {}, parent is {parent}", e.nid),
                        );
                    }
                }
                _ => {
                    if e.type_code == FileType::Directory.dirent_code() {
                        nsub += 1;
                    }
                }
            }
        }
        // A dot-omitted directory (48-bit images) stores no "." entry;
        // readers supply it.
        if dot == inode.dot_omitted() || !dotdot {
            let what = if dot && inode.dot_omitted() {
                "a '.' entry in a dot-omitted directory"
            } else {
                "missing '.' or '..'"
            };
            self.problem(path, Some(inode.nid()), what);
        }
        self.subdirs
            .insert(inode.nid(), (nsub + 2, inode.nlink(), path.to_vec()));
        self.report.directories += 1;
        self.inode(path, inode);
    }

    fn entry(&mut self, path: &[u8], entry: &ferrofs::raw::RawDirEntry, inode: &Inode) {
        if entry.file_type() != Some(inode.file_type()) {
            self.problem(
                path,
                Some(inode.nid()),
                format!(
                    "dirent type {} but inode is a {}",
                    entry.type_code,
                    inode.file_type().name()
                ),
            );
        }
        if inode.is_dir() {
            return; // checked when entered
        }
        let e = self
            .links
            .entry(inode.nid())
            .or_insert((0, inode.nlink(), path.to_vec()));
        e.0 += 1;
        if e.0 > 1 {
            return; // a hard link: data already checked
        }
        match inode.file_type() {
            FileType::Regular => self.report.files += 1,
            FileType::Symlink => self.report.symlinks += 1,
            _ => self.report.special += 1,
        }
        self.inode(path, inode);
    }

    fn inode(&mut self, path: &[u8], inode: &Inode) {
        if !self.checked.insert(inode.nid()) {
            return;
        }
        self.report.inodes += 1;
        if let Err(e) = self.image.raw().xattrs(inode) {
            self.problem(path, Some(inode.nid()), format!("xattrs: {e}"));
        } else if let Err(msg) = self.check_filter(inode) {
            self.problem(path, Some(inode.nid()), msg);
        }
        match inode.file_type() {
            FileType::Regular | FileType::Directory | FileType::Symlink => {}
            _ => return,
        }
        if inode.is_symlink() {
            if let Err(e) = self.image.raw().read_link(inode) {
                self.problem(path, Some(inode.nid()), format!("symlink: {e}"));
            }
        }
        if let Err(e) = self.data(inode) {
            self.problem(path, Some(inode.nid()), format!("data: {e}"));
        }
        if let Some(p) = self.progress {
            p(self.report.inodes, self.report.data_bytes);
        }
    }

    fn check_filter(&self, inode: &Inode) -> Result<(), String> {
        let Ok(Some(filter)) = self.image.raw().xattr_name_filter(inode) else {
            return Ok(());
        };
        for x in self.image.raw().xattrs(inode).unwrap_or_default() {
            if self.image.raw().xattr_filtered_out(filter, &x.name) {
                return Err(format!(
                    "xattr name filter hides {}",
                    String::from_utf8_lossy(&x.name)
                ));
            }
        }
        Ok(())
    }

    fn data(&mut self, inode: &Inode) -> Result<(), Error> {
        let file = self.image.raw().open(inode.clone())?;
        if !self.opts.read_data {
            return Ok(());
        }
        read_every_extent(&file, &mut self.report)?;
        let sb = self.image.superblock();
        if inode.is_reg() && sb.has_compat(ferrofs::format::superblock::compat::ISHARE_XATTRS) {
            if let Some(why) = crate::digest::check(self.image, inode)? {
                return Err(Error::Corrupt {
                    at: ferrofs::Location::nid(inode.nid().0),
                    what: why.into(),
                });
            }
        }
        Ok(())
    }
}

/// Reads every extent of a file whole (so every pcluster is decoded in
/// full and checked for its exact length).
pub fn read_every_extent(file: &File, report: &mut Report) -> Result<(), Error> {
    let mut buf = Vec::new();
    for ext in file.extents() {
        let ext = ext?;
        report.extents += 1;
        if ext.kind == ExtentKind::Hole {
            continue; // nothing stored, nothing to verify
        }
        if matches!(ext.kind, ExtentKind::Pcluster(_)) {
            report.pclusters_decoded += 1;
        }
        // Extents are at most 12 MiB (compressed) or a chunk / the whole
        // flat file; read big ones in 1 MiB steps.
        let mut pos = ext.logical;
        while pos < ext.end() {
            let step = if matches!(ext.kind, ExtentKind::Pcluster(_)) {
                ext.end() - pos
            } else {
                (ext.end() - pos).min(1 << 20)
            };
            buf.resize(step as usize, 0);
            let n = file.read_at(&mut buf, pos)?;
            if n as u64 != step {
                return Err(Error::Corrupt {
                    at: ferrofs::Location::nid(file.inode().nid().0).with_offset(pos),
                    what: "short read inside the file".into(),
                });
            }
            pos += step;
            report.data_bytes += step;
        }
    }
    Ok(())
}

/// Checks a whole image. `progress(inodes, bytes)` is called as it goes.
pub fn check(image: &Image, opts: Options, progress: Option<&dyn Fn(u64, u64)>) -> Report {
    let mut c = Checker {
        image,
        opts,
        report: Report::default(),
        links: HashMap::new(),
        subdirs: HashMap::new(),
        checked: Default::default(),
        progress,
    };
    walk(image, |v| match v {
        Visit::Dir {
            path,
            inode,
            entries,
            parent,
        } => c.dir(path, inode, entries, parent),
        Visit::Entry { path, entry, inode } => c.entry(path, entry, inode),
        Visit::Error { path, nid, error } => c.problem(path, nid, error.to_string()),
    });
    // The kernel reports i_nlink as it is on disk and relies on it for
    // nothing else: writers that copy the source's count (of a file whose
    // other links were left out) make images it reads correctly.
    for (nid, (seen, nlink, path)) in std::mem::take(&mut c.links) {
        if seen != nlink {
            c.warning(
                &path,
                Some(nid),
                format!("nlink {nlink} but {seen} directory entries"),
            );
        }
    }
    for (nid, (expect, nlink, path)) in std::mem::take(&mut c.subdirs) {
        if expect != nlink {
            c.warning(
                &path,
                Some(nid),
                format!("directory nlink {nlink}, expected {expect}"),
            );
        }
    }
    if let Some(packed) = image.raw().packed_file() {
        if let Err(e) = read_every_extent(&packed, &mut c.report) {
            c.problem(b"<packed inode>", Some(packed.inode().nid()), e.to_string());
        }
    }
    c.report.problems.sort_by(|a, b| a.path.cmp(&b.path));
    c.report.warnings.sort_by(|a, b| a.path.cmp(&b.path));
    c.report
}
