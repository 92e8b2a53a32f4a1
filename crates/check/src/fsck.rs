//! fsck: walk every directory and inode, check the invariants the kernel
//! and mkfs rely on, and decode every byte of every file. Problems are
//! collected (by path and nid), never fatal to the walk.
//!
//! The walk checks metadata and plans the files' data; the data pass
//! ([`ferrofs::bulk`]) then decodes every pcluster once (the packed
//! inode's included), in physical order on all cores.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ferrofs::bulk::{Delivery, ReadPlan, RunOptions};
use ferrofs::format::inode::FileType;
use ferrofs::format::Nid;
use ferrofs::map::{ExtentKind, PclusterFormat};
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
    /// Distinct compressed pclusters in the image (files, directories and
    /// the packed inode).
    pub pclusters: u64,
    /// Compressed pclusters decoded by the check (each once: with
    /// `pclusters_cached`, equal to `pclusters` when nothing is damaged).
    pub pclusters_decoded: u64,
    /// Bytes those decodes produced.
    pub bytes_decoded: u64,
    /// Compressed pclusters the data pass found decoded in the image's
    /// cache (by an earlier read, like the long xattr prefixes at open),
    /// checked without decoding them again.
    pub pclusters_cached: u64,
    /// Damage: what makes the kernel return wrong data or errors.
    pub problems: Vec<Problem>,
    /// Oddities the kernel reads the image through unharmed (a link count
    /// that is not the number of entries naming the inode).
    pub warnings: Vec<Problem>,
    /// With a dm-verity tree (`--verity`): the blocks it covers that the
    /// walk did not read (free space, padding), checked after it, so that
    /// every covered block was checked once. Set by the caller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verity_unread_blocks: Option<u64>,
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
    /// Threads decoding file data (default: every core). The report is
    /// the same for any number.
    pub jobs: usize,
    /// Most bytes of decoded data in memory at once (default 256 MiB).
    pub memory: u64,
}

impl Default for Options {
    fn default() -> Self {
        let run = RunOptions::default();
        Self {
            read_data: true,
            jobs: run.jobs,
            memory: run.memory,
        }
    }
}

fn show(path: &[u8]) -> String {
    if path.is_empty() {
        "/".to_string()
    } else {
        format!("/{}", String::from_utf8_lossy(path))
    }
}

/// The checks of one walk, shared by `fsck` and `extract`: extract runs
/// the same per-directory and per-inode checks as it walks (file data
/// aside, which its own data pass reads), so whatever fsck reports as
/// damage also stops an extraction.
pub(crate) struct Checker<'a> {
    image: &'a Image,
    opts: Options,
    /// Checking for an extraction: regular files' data is left to it.
    extracting: bool,
    report: Report,
    /// nid -> (links seen, nlink on disk, first path)
    links: HashMap<Nid, (u32, u32, Vec<u8>)>,
    subdirs: HashMap<Nid, (u32, u32, Vec<u8>)>,
    checked: HashSet<Nid>,
    progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
    /// Every file's data, read after the walk.
    plan: ReadPlan,
    /// The planned files (path, nid), by plan id.
    planned: Vec<(Vec<u8>, Nid)>,
    /// Compressed pclusters of directories and symlinks (read by the walk).
    meta_pclusters: HashSet<(u64, u64)>,
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
        match self.image.raw().lookup_name_past_end(inode) {
            Ok(None) => {}
            Ok(Some((listed, looked_up))) => self.problem(
                path,
                Some(inode.nid()),
                format!(
                    "last name {:?} runs to the directory's end and bytes stored past it \
                     follow: Linux lists it but looks it up as {:?}, so it cannot be found",
                    String::from_utf8_lossy(&listed),
                    String::from_utf8_lossy(&looked_up)
                ),
            ),
            Err(e) => self.problem(path, Some(inode.nid()), format!("directory: {e}")),
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
            match self.image.raw().read_link(inode) {
                Ok(target) => {
                    if let Err(why) = check_symlink_target(&target) {
                        self.problem(path, Some(inode.nid()), format!("symlink: {why}"));
                    }
                }
                Err(e) => self.problem(path, Some(inode.nid()), format!("symlink: {e}")),
            }
        }
        if let Err(e) = self.data(path, inode) {
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

    fn data(&mut self, path: &[u8], inode: &Inode) -> Result<(), Error> {
        let file = self.image.raw().open(inode.clone())?;
        if !self.opts.read_data {
            return Ok(());
        }
        if !inode.is_reg() {
            read_every_extent(&file, &mut self.report, Some(&mut self.meta_pclusters))?;
        } else if !self.extracting {
            // Read after the walk, with every other file's data. (An
            // extraction plans, reads and checks the data itself; a
            // fingerprint is checked below, reading the file once more.)
            let added = self.plan.add(&file)?;
            self.report.extents += added.extents;
            self.planned.push((path.to_vec(), inode.nid()));
        }
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

    /// The data pass: every planned file's bytes and every pcluster of
    /// the packed inode, each pcluster decoded once. A damaged cluster is
    /// one problem for each file it serves.
    fn run_plan(&mut self) {
        if let Err(e) = self.plan.add_packed_inode() {
            let nid = self.image.raw().packed_file().map(|f| f.inode().nid());
            self.problem(b"<packed inode>", nid, e.to_string());
        }
        // Per file, the error of the lowest failing cluster: the same
        // report for any thread count.
        let failed: Mutex<HashMap<Option<usize>, (usize, String)>> = Mutex::default();
        let bytes = AtomicU64::new(self.report.data_bytes);
        let inodes = self.report.inodes;
        let progress = self.progress;
        let sink = |d: Delivery<'_>| -> Result<(), std::convert::Infallible> {
            match d {
                Delivery::Bytes { data, .. } => {
                    let n = bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
                    if let Some(p) = progress {
                        p(inodes, n + data.len() as u64);
                    }
                }
                Delivery::Failed {
                    file, error, unit, ..
                } => {
                    let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
                    let e = f
                        .entry(file.map(|f| f.index()))
                        .or_insert((usize::MAX, String::new()));
                    if unit < e.0 {
                        *e = (unit, error.to_string());
                    }
                }
            }
            Ok(())
        };
        let run = RunOptions {
            jobs: self.opts.jobs,
            memory: self.opts.memory,
            cancel: None,
        };
        let Ok(stats) = self.plan.run(&run, &sink);
        self.report.pclusters_cached = stats.pclusters_cached;
        self.report.data_bytes = bytes.into_inner();
        self.report.pclusters = (self.plan.pclusters() + self.meta_pclusters.len()) as u64;
        let mut failed: Vec<_> = failed
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .into_iter()
            .collect();
        failed.sort();
        for (file, (_, msg)) in failed {
            match file.and_then(|i| self.planned.get(i)).cloned() {
                Some((path, nid)) => self.problem(&path, Some(nid), format!("data: {msg}")),
                None => {
                    let nid = self.image.raw().packed_file().map(|f| f.inode().nid());
                    self.problem(b"<packed inode>", nid, msg)
                }
            }
        }
    }
}

/// Longest symlink target Linux follows or reads back whole: a target
/// of a page or more is cut to `PATH_MAX - 1` bytes by the VFS.
pub const SYMLINK_MAX: usize = 4095;

/// Checks a symlink target as Linux will use it: not empty (`symlink(2)`
/// refuses it, and a lookup through it fails), no NUL byte (the kernel
/// ends the target there, so it names something else than the image
/// stores), and shorter than a page.
pub fn check_symlink_target(target: &[u8]) -> Result<(), String> {
    if target.is_empty() {
        return Err("empty target".into());
    }
    if let Some(at) = target.iter().position(|&b| b == 0) {
        return Err(format!(
            "NUL byte at offset {at} of a {}-byte target (Linux reads only {:?})",
            target.len(),
            String::from_utf8_lossy(target.get(..at).unwrap_or_default())
        ));
    }
    if target.len() > SYMLINK_MAX {
        return Err(format!(
            "target of {} bytes, longer than Linux's {SYMLINK_MAX}",
            target.len()
        ));
    }
    Ok(())
}

impl<'a> Checker<'a> {
    /// The checks of an extraction's walk: metadata, directories and
    /// symlinks as fsck checks them; regular files' data is the
    /// extraction's own data pass.
    pub(crate) fn for_extract(image: &'a Image) -> Self {
        Self::new(
            image,
            Options {
                read_data: true,
                jobs: 1,
                memory: 0,
            },
            None,
            true,
        )
    }

    fn new(
        image: &'a Image,
        opts: Options,
        progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
        extracting: bool,
    ) -> Self {
        Checker {
            image,
            opts,
            extracting,
            report: Report::default(),
            links: HashMap::new(),
            subdirs: HashMap::new(),
            checked: Default::default(),
            progress,
            plan: ReadPlan::new(image),
            planned: Vec::new(),
            meta_pclusters: HashSet::new(),
        }
    }

    /// Checks what the walk shows; errors of the walk itself are the
    /// caller's.
    pub(crate) fn visit(&mut self, v: &Visit<'_>) {
        match v {
            Visit::Dir {
                path,
                inode,
                entries,
                parent,
            } => self.dir(path, inode, entries, *parent),
            Visit::Entry { path, entry, inode } => self.entry(path, entry, inode),
            Visit::Error { path, nid, error } => self.problem(path, *nid, error.to_string()),
        }
    }

    /// The first damage found so far.
    pub(crate) fn first_problem(&self) -> Option<&Problem> {
        self.report.problems.first()
    }

    /// What an extraction checks after its walk: the metabox and the
    /// packed inode whole, as fsck reads them (the data pass decodes each
    /// packed pcluster once for both).
    pub(crate) fn check_metabox(&mut self) {
        if let Some(mb) = self.image.raw().metabox_file() {
            if let Err(e) = read_every_extent(&mb, &mut self.report, Some(&mut self.meta_pclusters))
            {
                self.problem(b"<metabox>", Some(mb.inode().nid()), e.to_string());
            }
        }
    }
}

/// Reads every extent of a file whole (so every pcluster is decoded in
/// full and checked for its exact length); the compressed pclusters seen
/// go into `pclusters` by (position, length).
pub fn read_every_extent(
    file: &File,
    report: &mut Report,
    mut pclusters: Option<&mut HashSet<(u64, u64)>>,
) -> Result<(), Error> {
    let mut buf = Vec::new();
    for ext in file.extents() {
        let ext = ext?;
        report.extents += 1;
        if ext.kind == ExtentKind::Hole {
            continue; // nothing stored, nothing to verify
        }
        if let (ExtentKind::Pcluster(pc), Some(set)) = (ext.kind, pclusters.as_deref_mut()) {
            if matches!(pc.format, PclusterFormat::Codec(_)) {
                set.insert((pc.at.bits(), pc.len));
            }
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

/// Checks a whole image. `progress(inodes, bytes)` is called as it goes
/// (from several threads during the data pass).
pub fn check(image: &Image, opts: Options, progress: Option<&(dyn Fn(u64, u64) + Sync)>) -> Report {
    let before = image.cache_stats();
    let mut c = Checker::new(image, opts, progress, false);
    walk(image, |v| c.visit(&v));
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
    if opts.read_data {
        // The metabox (inodes of metabox images) was read piecemeal by the
        // walk: every byte of it now (its pclusters come from the cache).
        c.check_metabox();
        c.run_plan();
    }
    let after = image.cache_stats();
    c.report.pclusters_decoded = after.decodes - before.decodes;
    c.report.bytes_decoded = after.decoded_bytes - before.decoded_bytes;
    c.report.problems.sort_by(|a, b| a.path.cmp(&b.path));
    c.report.warnings.sort_by(|a, b| a.path.cmp(&b.path));
    c.report
}
