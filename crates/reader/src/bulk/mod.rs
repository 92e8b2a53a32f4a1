//! Reading many files at once, in the order their data lies in the image:
//! a [`ReadPlan`] gathers the extents of every file a tool wants (and,
//! for a check, every pcluster of the packed inode), groups the pieces by
//! the physical cluster that holds them, and [`ReadPlan::run`] reads each
//! cluster once, in physical order, on several threads (each working
//! through its own stretch of the image), handing every piece to a sink. A pcluster shared by many files (the packed inode's
//! fragments, deduplicated extents) is decoded once and serves them all;
//! memory stays within a byte budget whatever the image.
//!
//! ```
//! use std::sync::Mutex;
//! use ferrofs::bulk::{Delivery, ReadPlan, RunOptions};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let image = ferrofs::Image::open_path("../../testdata/lz4hc-big.erofs")?;
//! let mut plan = ReadPlan::new(&image);
//! let mut names = Vec::new();
//! for entry in image.read_dir("/")? {
//!     let entry = entry?;
//!     if entry.file_type()?.is_file() {
//!         let file = image.raw().open_path(entry.file_name().as_encoded_bytes())?;
//!         plan.add(&file)?;
//!         names.push(entry.file_name());
//!     }
//! }
//! // Every file's bytes, assembled from pieces that arrive in physical order.
//! let sizes: Vec<u64> = names
//!     .iter()
//!     .map(|n| image.metadata(std::path::Path::new("/").join(n)).map(|m| m.len()))
//!     .collect::<Result<_, _>>()?;
//! let files: Vec<Mutex<Vec<u8>>> = sizes.iter().map(|&s| Mutex::new(vec![0; s as usize])).collect();
//! let stats = plan.run(&RunOptions::default(), &|d: Delivery<'_>| {
//!     match d {
//!         Delivery::Bytes { file, offset, data, .. } => {
//!             let mut f = files[file.index()].lock().unwrap();
//!             f[offset as usize..offset as usize + data.len()].copy_from_slice(data);
//!             Ok(())
//!         }
//!         Delivery::Failed { error, .. } => Err(error.to_string()),
//!     }
//! })?;
//! assert!(stats.pclusters_decoded <= plan.pclusters() as u64);
//! for (name, f) in names.iter().zip(&files) {
//!     let path = std::path::Path::new("/").join(name);
//!     assert_eq!(*f.lock().unwrap(), image.read(&path)?);
//! }
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::cache::Key;
use crate::error::{Error, Location, OrCorrupt, Result};
use crate::file::InodeFile;
use crate::image::Image;
use crate::map::{Extent, ExtentKind, Pcluster, PclusterAt};

mod run;
mod steps;

use steps::{extent_steps, packed_steps, Step};

/// A file added to a plan: the index of the [`ReadPlan::add`] call that
/// returned it (0, 1, 2, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(u32);

impl FileId {
    /// The position of the file in the order it was added.
    pub fn index(self) -> usize {
        // u32 -> usize is lossless on every platform this crate builds on.
        self.0 as usize
    }
}

/// A file's part of a plan, worked out by [`ReadPlan::prepare`].
#[derive(Debug)]
pub struct Prepared {
    steps: Vec<Step>,
    sparse: bool,
    extents: u64,
    base: Location,
}

impl Prepared {
    /// The file has holes (see [`Added::sparse`]).
    pub fn sparse(&self) -> bool {
        self.sparse
    }
}

/// What [`ReadPlan::add`] found out about a file.
#[derive(Clone, Copy, Debug)]
pub struct Added {
    /// The file's handle in deliveries.
    pub id: FileId,
    /// The file has holes (ranges stored as nothing, read as zeros): a
    /// writer must set the file's length itself.
    pub sparse: bool,
    /// Extents the file's map has (holes included).
    pub extents: u64,
}

/// Stored bytes read without a codec: raw blocks, inline data, an
/// uncompressed pcluster. At most [`DIRECT_STEP`] bytes a unit.
#[derive(Clone, Copy, Debug)]
struct Direct {
    /// The extent and the inode it belongs to (for errors).
    ext: Extent,
    base: Location,
    /// The file (or packed-inode) offset the unit starts at, and its length.
    pos: u64,
    len: u64,
}

/// A compressed pcluster, decoded once for every piece it holds.
#[derive(Clone, Copy, Debug)]
struct Decode {
    pc: Pcluster,
    /// Bytes to decode: the longest extent that uses the pcluster.
    llen: u64,
    /// That longest extent uses all of the pcluster's output, so the
    /// decode must end exactly there (as a whole-extent read checks it).
    exact: bool,
    at: Location,
}

#[derive(Clone, Copy, Debug)]
enum Source {
    Direct(Direct),
    Decode(Decode),
}

/// One piece of a file: `len` bytes at file offset `offset` are the
/// unit's bytes from `src`.
#[derive(Clone, Copy, Debug)]
struct Piece {
    file: FileId,
    offset: u64,
    src: u64,
    len: u64,
}

#[derive(Debug)]
struct Unit {
    /// Where the stored bytes are: (space, device, byte position).
    order: (u8, u16, u64),
    source: Source,
    pieces: Vec<Piece>,
}

impl Unit {
    /// Bytes this unit holds in memory while it is read.
    fn bytes(&self) -> u64 {
        match self.source {
            Source::Direct(d) => d.len,
            Source::Decode(d) => d.llen,
        }
    }
}

/// Raw extents are read in steps of at most this many bytes.
const DIRECT_STEP: u64 = 1 << 20;

/// The packed inode's extents, read when the plan is made.
enum Packed {
    Extents(Location, Vec<Extent>),
    /// No packed inode, or one whose map is damaged: why.
    Broken(String),
}

/// A plan to read many files' data, each stored cluster once (see the
/// module documentation).
pub struct ReadPlan {
    image: Image,
    units: Vec<Unit>,
    /// Compressed pclusters already in `units`.
    decodes: HashMap<Key, usize>,
    /// The packed inode's raw extents already in `units` (by their
    /// logical start), so fragments that share one read it once.
    packed_direct: HashMap<u64, usize>,
    packed: Packed,
    files: u32,
}

impl std::fmt::Debug for ReadPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadPlan")
            .field("files", &self.files)
            .field("units", &self.units.len())
            .field("pclusters", &self.decodes.len())
            .finish()
    }
}

/// How a plan runs.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Threads reading and decoding (at least 1; default: every core).
    pub jobs: usize,
    /// Most bytes of read or decoded data held at once (a unit larger
    /// than this still runs, alone). Default 256 MiB.
    pub memory: u64,
    /// Set from elsewhere (a signal handler) to stop early: units not yet
    /// started are skipped and [`RunStats::interrupted`] is set.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory: 256 << 20,
            cancel: None,
        }
    }
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Compressed pclusters decoded by this run.
    pub pclusters_decoded: u64,
    /// Bytes those decodes produced.
    pub bytes_decoded: u64,
    /// Compressed pclusters served from the image's cache instead.
    pub pclusters_cached: u64,
    /// Stored bytes read without a codec (raw blocks, inline data).
    pub bytes_direct: u64,
    /// Bytes delivered to the sink.
    pub bytes_delivered: u64,
    /// Units (clusters or raw steps) read.
    pub units: u64,
    /// The run stopped early on [`RunOptions::cancel`].
    pub interrupted: bool,
}

/// What a run hands to its sink.
#[derive(Debug)]
pub enum Delivery<'a> {
    /// `data` is the file's bytes at `offset`.
    Bytes {
        /// The file.
        file: FileId,
        /// Offset in the file.
        offset: u64,
        /// The bytes.
        data: &'a [u8],
        /// The thread delivering (below [`RunOptions::jobs`]), for sinks
        /// that keep per-thread state.
        worker: usize,
    },
    /// A cluster holding bytes of `file` could not be read: the file's
    /// bytes in it are not delivered. `file` is `None` for a cluster of
    /// the packed inode that no added file uses.
    Failed {
        /// The file, once for every file the cluster serves.
        file: Option<FileId>,
        /// Why.
        error: &'a Error,
        /// The unit's position in the physical order: sinks that keep one
        /// error per file keep the lowest, the same for any thread count.
        unit: usize,
        /// As in [`Delivery::Bytes`].
        worker: usize,
    },
}

/// Sort key of stored bytes: inline (metadata) data first, then the block
/// space, by device and position.
fn order_of(at: PclusterAt) -> (u8, u16, u64) {
    match at {
        PclusterAt::Inline(a) => (0, 0, a.bits()),
        PclusterAt::Blocks(p) => (1, 0, p),
    }
}

fn direct_order(ext: &Extent, rel: u64) -> (u8, u16, u64) {
    match ext.kind {
        ExtentKind::Raw { device, pos } => (1, device, pos.saturating_add(rel)),
        ExtentKind::Inline { pos } => (0, 0, pos.bits().saturating_add(rel)),
        ExtentKind::Pcluster(pc) => {
            let (s, d, p) = order_of(pc.at);
            (s, d, p.saturating_add(rel))
        }
        ExtentKind::Hole | ExtentKind::Fragment { .. } => (2, 0, 0),
    }
}

impl ReadPlan {
    /// An empty plan over `image`.
    pub fn new(image: &Image) -> Self {
        // The packed inode's extents, once for every fragment to come.
        let packed = match image.raw().packed_file() {
            None => Packed::Broken("fragment without a packed inode".into()),
            Some(f) => match f.extents().collect::<Result<Vec<_>>>() {
                Ok(v) => Packed::Extents(f.inode().loc(), v),
                Err(e) => Packed::Broken(format!("the packed inode: {e}")),
            },
        };
        Self {
            image: image.clone(),
            units: Vec::new(),
            decodes: HashMap::new(),
            packed_direct: HashMap::new(),
            packed,
            files: 0,
        }
    }

    /// Files added so far.
    pub fn files(&self) -> usize {
        self.files as usize
    }

    /// Distinct compressed pclusters the plan reads.
    pub fn pclusters(&self) -> usize {
        self.decodes.len()
    }

    /// Bytes those pclusters decode to (the longest extent of each).
    pub fn decoded_bytes(&self) -> u64 {
        self.units
            .iter()
            .filter_map(|u| match u.source {
                Source::Decode(d) => Some(d.llen),
                Source::Direct(_) => None,
            })
            .fold(0u64, u64::saturating_add)
    }

    /// Adds every byte of `file` (holes excepted) to the plan. On an error
    /// (a damaged map) nothing of the file is added and no id is used.
    pub fn add(&mut self, file: &InodeFile) -> Result<Added> {
        let prepared = self.prepare(file)?;
        self.commit(prepared)
    }

    /// Works out what [`ReadPlan::add`] would add for `file` without
    /// changing the plan: the slow part (mapping every extent), which
    /// threads can run side by side on a shared plan. [`ReadPlan::commit`]
    /// then adds it; ids follow the order of the commits.
    pub fn prepare(&self, file: &InodeFile) -> Result<Prepared> {
        let base = file.inode().loc();
        if !Arc::ptr_eq(&file.image().inner, &self.image.inner) {
            return Err(Error::unsupported(
                base,
                "the file belongs to another image than the plan's",
            ));
        }
        let mut steps = Vec::new();
        let mut sparse = false;
        let mut extents = 0u64;
        for ext in file.extents() {
            let ext = ext?;
            extents = extents.saturating_add(1);
            match ext.kind {
                ExtentKind::Hole => sparse = true,
                ExtentKind::Fragment { offset } => {
                    self.fragment_steps(&mut steps, &ext, offset, base)?;
                }
                _ => extent_steps(&mut steps, &ext, ext.logical, ext.len, ext.logical, base)?,
            }
        }
        Ok(Prepared {
            steps,
            sparse,
            extents,
            base,
        })
    }

    /// Adds a file [`ReadPlan::prepare`] worked out (on this plan).
    pub fn commit(&mut self, prepared: Prepared) -> Result<Added> {
        let id = FileId(self.files);
        let next = self
            .files
            .checked_add(1)
            .ok_or_else(|| Error::unsupported(prepared.base, "more than 2^32 files in one plan"))?;
        for step in prepared.steps {
            self.apply(Some(id), step);
        }
        self.files = next;
        Ok(Added {
            id,
            sparse: prepared.sparse,
            extents: prepared.extents,
        })
    }

    /// Adds every pcluster of the packed inode, used by a file or not (a
    /// check reads them all).
    pub fn add_packed_inode(&mut self) -> Result<()> {
        if self.image.raw().packed_file().is_none() {
            return Ok(());
        }
        self.packed_extents()?;
        let mut steps = Vec::new();
        if let Packed::Extents(base, exts) = &self.packed {
            for ext in exts {
                packed_steps(&mut steps, ext, ext.logical, ext.len, *base, 0)?;
            }
        }
        for step in steps {
            self.apply(None, step);
        }
        Ok(())
    }

    /// Whether the packed inode's extents could be read.
    fn packed_extents(&self) -> Result<()> {
        match &self.packed {
            Packed::Broken(why) => Err(Error::corrupt(Location::default(), why.clone())),
            _ => Ok(()),
        }
    }

    /// The steps of a file's fragment: its bytes are the packed inode's
    /// from `offset`.
    fn fragment_steps(
        &self,
        steps: &mut Vec<Step>,
        ext: &Extent,
        offset: u64,
        at: Location,
    ) -> Result<()> {
        let (base, exts) = match &self.packed {
            Packed::Extents(base, exts) => (base, exts),
            Packed::Broken(why) => return Err(Error::corrupt(at, why.clone())),
        };
        let at = at.with_offset(ext.logical);
        let end = offset
            .checked_add(ext.len)
            .or_corrupt(at, "fragment offset overflows")?;
        // The first packed extent that ends after `offset`.
        let mut i = exts.partition_point(|e| e.end() <= offset);
        let mut pos = offset;
        while pos < end {
            let pe = exts
                .get(i)
                .filter(|e| e.logical <= pos)
                .ok_or_else(|| Error::corrupt(at, "fragment runs past the packed inode"))?;
            let n = pe.end().min(end).saturating_sub(pos);
            // pos - offset < ext.len, so the file offset stays in the file.
            let file_off = ext
                .logical
                .checked_add(pos.saturating_sub(offset))
                .or_corrupt(at, "fragment offset overflows")?;
            packed_steps(steps, pe, pos, n, *base, file_off)?;
            pos = pos.saturating_add(n);
            i = i.saturating_add(1);
        }
        Ok(())
    }

    /// Puts one step into the plan, for `file` (or for nobody).
    fn apply(&mut self, file: Option<FileId>, step: Step) {
        let piece = |src: u64, offset: u64, len: u64| {
            file.map(|file| Piece {
                file,
                offset,
                src,
                len,
            })
        };
        match step {
            Step::Direct {
                direct,
                order,
                file_off,
            } => self.units.push(Unit {
                order,
                source: Source::Direct(direct),
                pieces: piece(0, file_off, direct.len).into_iter().collect(),
            }),
            Step::SharedDirect {
                direct,
                rel,
                len,
                file_off,
            } => {
                let idx = match self.packed_direct.get(&direct.pos) {
                    Some(&i) => i,
                    None => {
                        let i = self.units.len();
                        self.units.push(Unit {
                            order: direct_order(&direct.ext, 0),
                            source: Source::Direct(direct),
                            pieces: Vec::new(),
                        });
                        self.packed_direct.insert(direct.pos, i);
                        i
                    }
                };
                if let (Some(p), Some(unit)) = (piece(rel, file_off, len), self.units.get_mut(idx))
                {
                    unit.pieces.push(p);
                }
            }
            Step::Decode {
                decode,
                rel,
                len,
                file_off,
            } => {
                let key = Key::of(&decode.pc);
                let idx = match self.decodes.get(&key) {
                    Some(&i) => i,
                    None => {
                        let i = self.units.len();
                        self.units.push(Unit {
                            order: order_of(decode.pc.at),
                            source: Source::Decode(decode),
                            pieces: Vec::new(),
                        });
                        self.decodes.insert(key, i);
                        i
                    }
                };
                let Some(unit) = self.units.get_mut(idx) else {
                    return;
                };
                if let Source::Decode(d) = &mut unit.source {
                    // The longest extent decides the decode; an exact end
                    // is checked when that extent uses the whole output.
                    if decode.llen > d.llen {
                        d.llen = decode.llen;
                        d.exact = decode.exact;
                    } else if decode.llen == d.llen {
                        d.exact |= decode.exact;
                    }
                }
                if let Some(p) = piece(rel, file_off, len) {
                    unit.pieces.push(p);
                }
            }
        }
    }
}
