//! `--base OLD.img`: a rebuild that copies the compressed pclusters of
//! every unchanged file from an earlier image instead of compressing the
//! file again. The new image is complete and self-contained; only the work
//! is saved.
//!
//! A file is taken from OLD when all of this holds:
//! - OLD has a regular file at the same path with the same size, and its
//!   bytes, decoded from OLD, equal the source's bytes (compared in full,
//!   never by path, mtime or a digest alone: this also proves that the
//!   pclusters copied decode to the source, so a corrupt OLD cannot make a
//!   wrong image; a file OLD cannot decode is compressed again);
//! - OLD compressed it the way this build would: every pcluster uses this
//!   file's algorithm and fits its cluster size, the extents keep the
//!   lcluster rules, and for each (cluster size, compressor) of the build a
//!   few unchanged files' first extents, compressed again here, come out
//!   byte for byte as OLD stores them (the level, the encoder and
//!   `--max-extent-bytes` are in no header; an image from another encoder
//!   or level fails this and nothing of that class is reused).
//!
//! Then the file's extents are OLD's (compressed streams copied, raw
//! extents read from the source), placed, deduplicated, inlined
//! (ztailpacking) and indexed by the writer as if just compressed; a tail
//! OLD kept in its packed inode is packed again from the source. A file OLD
//! stored flat although compressing was asked is stored flat again without
//! a trial. What cannot be reused: the packed inode itself (its fragments
//! move whenever one changes, so it is always compressed again), files in
//! it whole, and files with `--profile` hot pieces.

// OLD is an image from anywhere: its fields are hostile input.
#![deny(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use ferrofs::format::inode::DataLayout;
use ferrofs::format::superblock::incompat;
use ferrofs::map::{ExtentKind, Pcluster, PclusterFormat};
use ferrofs::Image;
use ferrofs_codec::Algorithm;
use rayon::prelude::*;

use crate::data::compress::{first_extent, Shape};
use crate::data::cuts::segments;
use crate::data::extent::{segment_len, Extent, MAX_EXTENT_BLOCKS};
use crate::data::sparse;
use crate::error::{BuildError, Result};
use crate::options::compress::Compressor;
use crate::options::view::DataOptions;
use crate::summary::BaseStats;
use crate::tree::content::ContentReader;
use crate::tree::{InodeId, Tree};

/// Unchanged files per (cluster size, compressor) whose first extent is
/// compressed again to check that OLD used this build's options.
const SAMPLES: usize = 4;
/// Bytes compared at a time.
const BUF: usize = 1 << 20;

/// One extent of a file in OLD.
struct OldExtent {
    la: u64,
    llen: u64,
    /// `None`: a hole (a sparse pcluster).
    pc: Option<Pcluster>,
}

/// How OLD stores a file this build may take from it.
enum Old {
    /// Flat (uncompressed): OLD found it not worth compressing.
    Flat,
    /// These extents; the rest of the file (if any) was OLD's fragment.
    Extents(Vec<OldExtent>),
}

struct Candidate {
    file: ferrofs::raw::InodeFile,
    old: Old,
    /// (cluster size, compressor) this build gives the file.
    class: (u64, usize),
}

/// What a file gets from OLD.
pub(crate) enum Reused {
    Flat,
    Extents(Vec<Extent>),
}

/// An opened base image and the files of this build it may serve.
pub(crate) struct Base {
    image: Image,
    cands: Vec<Option<Candidate>>,
    bs: u64,
    counts: [AtomicU64; 7],
    notes: Vec<String>,
}

/// Indexes into [`Base::counts`].
const REUSED: usize = 0;
const REUSED_BYTES: usize = 1;
const COPIED: usize = 2;
const COMPRESSED: usize = 3;
const COMPRESSED_BYTES: usize = 4;
const CHANGED: usize = 5;
const UNREADABLE: usize = 6;

/// The image-wide reason OLD cannot serve this build at all, if any.
fn unusable(image: &Image, opts: &DataOptions<'_>) -> Option<String> {
    let bs = opts.block_size();
    if image.block_size().bytes() != bs {
        return Some(format!(
            "its block size is {}, this build's {bs}",
            image.block_size().bytes()
        ));
    }
    if !image.devices().is_empty() {
        return Some("it has extra devices".into());
    }
    let uses_lz4 = opts
        .compress
        .as_ref()
        .is_some_and(|c| c.compressors.iter().any(|x| x.alg == Algorithm::Lz4));
    if uses_lz4 && !image.superblock().has_incompat(incompat::ZERO_PADDING) {
        return Some("its LZ4 pclusters are not zero-padded".into());
    }
    None
}

impl Base {
    /// Opens OLD and finds, for every file `eligible` says this build
    /// would compress in plain segments (`zc`: its cluster size and
    /// compressor), the same path in OLD stored in a reusable way; checks
    /// each class's options by compressing samples again. An OLD that is
    /// not an image at all is an error; anything less makes files compressed.
    pub(crate) fn open(
        path: &Path,
        tree: &Tree,
        zc: &[Option<(u64, usize)>],
        opts: &DataOptions<'_>,
        eligible: &(dyn Fn(InodeId) -> bool + Sync),
    ) -> Result<Self> {
        let image = Image::open_path(path).map_err(|e| BuildError::Base {
            path: path.to_path_buf(),
            reason: format!("not a readable EROFS image: {e}"),
        })?;
        let root = image.raw().root().and_then(|r| image.raw().read_dir(&r));
        if let Err(e) = root {
            return Err(BuildError::Base {
                path: path.to_path_buf(),
                reason: format!("its root directory cannot be read: {e}"),
            });
        }
        let bs = opts.block_size();
        let mut base = Base {
            image,
            cands: Vec::new(),
            bs,
            counts: Default::default(),
            notes: Vec::new(),
        };
        let Some(c) = &opts.compress else {
            base.notes
                .push("this build compresses nothing: nothing to reuse".into());
            return Ok(base);
        };
        if let Some(why) = unusable(&base.image, opts) {
            base.notes.push(format!("nothing reused: {why}"));
            return Ok(base);
        }
        let old_frags = base.image.raw().packed_file().is_some();
        let ctx = Ctx {
            image: &base.image,
            bs,
            fragments: c.fragments || c.all_fragments,
            old_frags,
            max_extent: c.max_extent_bytes,
            ztail: c.ztailpacking && !(c.fragments || c.all_fragments),
            dedupe: opts.dedupe,
            sparse: c.sparse,
        };
        let found: Vec<(Option<(u64, usize)>, Found)> = (0..tree.inodes.len())
            .into_par_iter()
            .map(|id| match zc.get(id).copied().flatten() {
                Some(class) if eligible(id) => match c.compressors.get(class.1) {
                    Some(comp) => (Some(class), ctx.candidate(tree, id, class, comp.alg)),
                    None => (None, Found::Nothing),
                },
                _ => (None, Found::Nothing),
            })
            .collect();
        // A class OLD contradicts is not taken; the others are checked
        // with samples.
        let mut against: Vec<((u64, usize), String)> = Vec::new();
        let mut cands: Vec<Option<Candidate>> = Vec::with_capacity(found.len());
        for (class, f) in found {
            cands.push(match (class, f) {
                (_, Found::Candidate(c)) => Some(c),
                (Some(class), Found::Contradicts(why)) => {
                    if !against.iter().any(|a| a.0 == class) {
                        against.push((class, why));
                    }
                    None
                }
                _ => None,
            });
        }
        let mut classes: Vec<(u64, usize)> = cands.iter().flatten().map(|c| c.class).collect();
        classes.sort_unstable();
        classes.dedup();
        for class in classes {
            // Classes come from the plan, whose compressor indexes are the options'.
            let Some(comp) = c.compressors.get(class.1) else {
                continue;
            };
            let verdict = match against.iter().find(|a| a.0 == class) {
                Some((_, why)) => Err(format!("{why}, which this build would not make")),
                None => base.check_class(tree, &cands, class, &ctx, comp)?,
            };
            if let Err(why) = verdict {
                base.notes.push(format!(
                    "files compressed with {} in {}-byte pclusters compressed again: {why}",
                    describe(comp),
                    class.0
                ));
                for slot in cands.iter_mut() {
                    if slot.as_ref().is_some_and(|x| x.class == class) {
                        *slot = None;
                    }
                }
            }
        }
        base.cands = cands;
        Ok(base)
    }

    /// Compresses the first extent of up to [`SAMPLES`] unchanged files of
    /// a class again and compares it with OLD's.
    fn check_class(
        &self,
        tree: &Tree,
        cands: &[Option<Candidate>],
        class: (u64, usize),
        ctx: &Ctx,
        comp: &Compressor,
    ) -> Result<std::result::Result<(), String>> {
        let (pcl, _) = class;
        // Files whose first extent is compressed, those of several
        // extents first (their first pcluster was cut by its size).
        let mut pool: Vec<(bool, InodeId)> = cands
            .iter()
            .enumerate()
            .filter_map(|(id, c)| {
                let c = c.as_ref().filter(|c| c.class == class)?;
                let Old::Extents(ex) = &c.old else {
                    return None;
                };
                let first = ex.first()?.pc.as_ref()?;
                matches!(first.format, PclusterFormat::Codec(_)).then_some((ex.len() < 2, id))
            })
            .collect();
        pool.sort_unstable();
        let mut enc = comp.encoder(pcl)?;
        let mut checked = 0;
        for (_, id) in pool {
            if checked == SAMPLES {
                break;
            }
            let Some(c) = cands.get(id).and_then(Option::as_ref) else {
                continue;
            };
            if self.same_bytes(tree, id, c)? != Some(true) {
                continue;
            }
            let Old::Extents(ex) = &c.old else { continue };
            let Some(old) = ex.first().and_then(|e| self.extent(e)) else {
                continue;
            };
            let ino = tree.inode(id);
            let size = ino.data_size();
            // The file's first segment, cut as this build cuts it.
            let r = ContentReader::open(ino)?;
            let content = ctx.dedupe && pcl >= self.bs.saturating_mul(4);
            let read = |buf: &mut [u8], off: u64| r.read_exact_at(buf, off);
            // The file's first piece: up to its first hole (-E sparse).
            let piece_end = match ctx.sparse {
                true => sparse::find_holes(ino, self.bs, sparse::min_hole(pcl, self.bs))?
                    .first()
                    .map_or(size, |h| h.0),
                false => size,
            };
            let first = segments(read, (0, piece_end), segment_len(pcl), content)?;
            let seg_end = first
                .first()
                .map_or(piece_end, |&(o, l)| o.saturating_add(l));
            let seg = usize::try_from(seg_end).unwrap_or(usize::MAX);
            let mut input = vec![0u8; seg];
            r.read_exact_at(&mut input, 0)?;
            let shape = Shape {
                pcluster: pcl,
                bs: self.bs,
                big: pcl > self.bs,
                leave_tail: (ctx.fragments && seg as u64 == size).then_some(pcl),
                max_extent: ctx.max_extent,
                ztail: ctx.ztail && seg as u64 == size,
                cut_end: seg_end < size && !seg_end.is_multiple_of(self.bs),
                by_content: content && piece_end > segment_len(pcl),
                page_end: false,
            };
            let elf = crate::data::compress::is_machine_code(&input);
            enc.set_machine_code(elf);
            enc.set_one_file(true);
            let mut again = first_extent(&mut enc, &input, 0, &shape)?;
            if again.as_ref() != Some(&old) {
                // mkfs.erofs compresses every file with liblz4 (ferrofs
                // gives machine code, and one file's text with long hash
                // chains, to its own LZ4HC encoder).
                enc.set_machine_code(false);
                enc.set_one_file(false);
                again = first_extent(&mut enc, &input, 0, &shape)?;
            }
            if again.as_ref() != Some(&old) {
                return Ok(Err(format!(
                    "OLD's first pcluster of {} is not what this build makes of it \
                     (another compressor, level, cluster size or encoder)",
                    String::from_utf8_lossy(&ino.rel)
                )));
            }
            checked = checked.saturating_add(1);
        }
        if checked == 0 {
            return Ok(Err(
                "no unchanged file compressed in OLD to check its options against".into(),
            ));
        }
        Ok(Ok(()))
    }

    /// Whether OLD's bytes of `c` equal the source's; `None` when OLD
    /// cannot give them back.
    fn same_bytes(&self, tree: &Tree, id: InodeId, c: &Candidate) -> Result<Option<bool>> {
        let ino = tree.inode(id);
        let size = ino.data_size();
        let src = ContentReader::open(ino)?;
        let n0 = usize::try_from(size).map_or(BUF, |s| s.min(BUF));
        let (mut a, mut b) = (vec![0u8; n0], vec![0u8; n0]);
        let mut off = 0u64;
        while off < size {
            let n = usize::try_from(size.saturating_sub(off)).map_or(n0, |left| left.min(n0));
            let (Some(a), Some(b)) = (a.get_mut(..n), b.get_mut(..n)) else {
                return Ok(None);
            };
            src.read_exact_at(a, off)?;
            match c.file.read_at(b, off) {
                Ok(got) if got == n => {}
                _ => return Ok(None),
            }
            if a != b {
                return Ok(Some(false));
            }
            off = off.saturating_add(n as u64);
        }
        src.finish()?;
        Ok(Some(true))
    }

    /// One extent as the writer takes it: OLD's stream without its zero
    /// padding, or a raw extent (read from the source when written).
    fn extent(&self, e: &OldExtent) -> Option<Extent> {
        let Some(pc) = &e.pc else {
            return Some(Extent::hole(e.la, e.llen));
        };
        let compressed = match pc.format {
            PclusterFormat::Codec(_) => {
                let raw = self.image.raw().read_pcluster(pc).ok()?;
                let window = usize::try_from(self.bs).map_or(raw.len(), |bs| raw.len().min(bs));
                let start = raw.get(..window)?.iter().position(|&b| b != 0)?;
                let stream = raw.get(start..)?.to_vec();
                // Whole blocks of padding would not be OLD's own layout.
                let stored = (stream.len() as u64).div_ceil(self.bs).checked_mul(self.bs);
                if !pc.at.is_inline() && stored != Some(pc.len) {
                    return None;
                }
                Some(stream)
            }
            _ => None,
        };
        Some(Extent::new(e.la, e.llen, compressed))
    }

    /// What file `id` takes from OLD, if anything: its bytes are compared
    /// with the source's first.
    pub(crate) fn reuse(&self, tree: &Tree, id: InodeId) -> Result<Option<Reused>> {
        let Some(c) = self.cands.get(id).and_then(Option::as_ref) else {
            return Ok(None);
        };
        match self.same_bytes(tree, id, c)? {
            Some(true) => {}
            Some(false) => {
                self.add(CHANGED, 1);
                return Ok(None);
            }
            None => {
                self.add(UNREADABLE, 1);
                return Ok(None);
            }
        }
        let reused = match &c.old {
            Old::Flat => Reused::Flat,
            Old::Extents(ex) => {
                let mut out = Vec::with_capacity(ex.len());
                for e in ex {
                    let Some(x) = self.extent(e) else {
                        self.add(UNREADABLE, 1);
                        return Ok(None);
                    };
                    out.push(x);
                }
                let copied = ex
                    .iter()
                    .filter_map(|e| e.pc.as_ref())
                    .filter(|pc| matches!(pc.format, PclusterFormat::Codec(_)))
                    .map(|pc| pc.len)
                    .sum();
                self.add(COPIED, copied);
                Reused::Extents(out)
            }
        };
        self.add(REUSED, 1);
        self.add(REUSED_BYTES, tree.inode(id).data_size());
        Ok(Some(reused))
    }

    /// Counts a file this build compresses itself.
    pub(crate) fn compressed(&self, bytes: u64) {
        self.add(COMPRESSED, 1);
        self.add(COMPRESSED_BYTES, bytes);
    }

    fn add(&self, k: usize, n: u64) {
        if let Some(c) = self.counts.get(k) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    pub(crate) fn stats(&self) -> BaseStats {
        let g = |k: usize| self.counts.get(k).map_or(0, |c| c.load(Ordering::Relaxed));
        BaseStats {
            reused_files: g(REUSED),
            reused_bytes: g(REUSED_BYTES),
            copied_bytes: g(COPIED),
            compressed_files: g(COMPRESSED),
            compressed_bytes: g(COMPRESSED_BYTES),
            changed_files: g(CHANGED),
            unreadable_files: g(UNREADABLE),
            notes: self.notes.clone(),
        }
    }
}

/// `-z` spelling of a compressor, for notes.
fn describe(c: &Compressor) -> String {
    let name = match (c.alg, c.lz4hc) {
        (Algorithm::Lz4, true) => "lz4hc".to_string(),
        (alg, _) => format!("{alg:?}").to_lowercase(),
    };
    match c.level {
        Some(l) => format!("{name},{l}"),
        None => name,
    }
}

/// What deciding on candidates needs to know.
struct Ctx<'a> {
    image: &'a Image,
    bs: u64,
    /// This build puts tails into the packed inode.
    fragments: bool,
    /// OLD has a packed inode (it was built with fragments).
    old_frags: bool,
    max_extent: Option<u64>,
    /// This build may put last pclusters inline (ztailpacking without
    /// fragments).
    ztail: bool,
    /// This build cuts long files where their bytes say (`-E dedupe`).
    dedupe: bool,
    /// This build makes sparse pclusters (`-E sparse`).
    sparse: bool,
}

/// What OLD holds for one file of this build.
enum Found {
    /// Nothing this build can take (not there, another size, a layout it
    /// does not reuse, unreadable).
    Nothing,
    Candidate(Candidate),
    /// Stored as this build's options would not store it: OLD was built
    /// with other options, so nothing of the file's class is taken.
    Contradicts(String),
}

impl Ctx<'_> {
    /// File `id` of the new tree as OLD stores it (the bytes are compared
    /// later).
    fn candidate(&self, tree: &Tree, id: InodeId, class: (u64, usize), alg: Algorithm) -> Found {
        let ino = tree.inode(id);
        let Ok(inode) = self.image.raw().lookup_path(&ino.rel, false) else {
            return Found::Nothing;
        };
        if !inode.is_reg() || inode.size() != ino.data_size() || inode.size() == 0 {
            return Found::Nothing;
        }
        let layout = inode.layout();
        let Ok(file) = self.image.raw().open(inode) else {
            return Found::Nothing;
        };
        let old = match layout {
            DataLayout::FlatPlain | DataLayout::FlatInline => Old::Flat,
            DataLayout::CompressedFull | DataLayout::CompressedCompact => {
                match self.extents(&file, class.0, alg) {
                    Ok(Some(ex)) => Old::Extents(ex),
                    Ok(None) => return Found::Nothing,
                    Err(why) => {
                        return Found::Contradicts(format!(
                            "OLD stores {} with {why}",
                            String::from_utf8_lossy(&ino.rel)
                        ))
                    }
                }
            }
            DataLayout::ChunkBased => return Found::Nothing,
        };
        Found::Candidate(Candidate { file, old, class })
    }

    /// OLD's extents of a compressed file, if they are what this build's
    /// compressor could have made: contiguous from 0, no extent but the
    /// last shorter than a block, raw extents longer than a block reaching
    /// the next lcluster, no shared pcluster. An error when they contradict
    /// this build's options: another algorithm than `alg`, a pcluster
    /// larger than `pcl`, an extent longer than this build cuts, a packed
    /// tail where this build packs none or none where it would.
    fn extents(
        &self,
        file: &ferrofs::raw::InodeFile,
        pcl: u64,
        alg: Algorithm,
    ) -> std::result::Result<Option<Vec<OldExtent>>, String> {
        let bs = self.bs;
        let size = file.size();
        let cap = MAX_EXTENT_BLOCKS
            .saturating_mul(bs)
            .min(12 << 20)
            .min(self.max_extent.unwrap_or(u64::MAX).max(bs));
        let mut out: Vec<OldExtent> = Vec::new();
        let mut pos = 0u64;
        let mut tail = false;
        for e in file.extents() {
            let Ok(e) = e else { return Ok(None) };
            if e.logical != pos || tail {
                return Ok(None);
            }
            match e.kind {
                ExtentKind::Pcluster(pc) => {
                    if e.len > cap {
                        return Err(format!("an extent of {} bytes", e.len));
                    }
                    let room = if pc.at.is_inline() {
                        bs.saturating_sub(1)
                    } else {
                        pcl
                    };
                    match pc.format {
                        PclusterFormat::Codec(a) if a != alg => {
                            return Err(format!("{a:?} pclusters"));
                        }
                        PclusterFormat::Codec(_) if pc.len > room => {
                            return Err(format!("a pcluster of {} bytes", pc.len));
                        }
                        PclusterFormat::Shifted if e.len.div_ceil(bs).saturating_mul(bs) > pcl => {
                            return Err(format!("a raw extent of {} bytes", e.len));
                        }
                        PclusterFormat::Codec(_) => {}
                        PclusterFormat::Shifted => {
                            let blocks = e.len.div_ceil(bs);
                            if !pc.at.is_inline()
                                && blocks > 1
                                && (pcl == bs
                                    || e.logical.checked_rem(bs).unwrap_or(0).saturating_add(e.len)
                                        < bs.saturating_mul(2))
                            {
                                return Ok(None);
                            }
                        }
                        PclusterFormat::Interlaced => return Ok(None),
                    }
                    if pc.partial {
                        return Ok(None);
                    }
                    out.push(OldExtent {
                        la: e.logical,
                        llen: e.len,
                        pc: Some(pc),
                    });
                }
                // A sparse pcluster, for a build that makes them: whole
                // blocks (as a hole starts an lcluster, and the file goes on).
                ExtentKind::Hole
                    if self.sparse
                        && e.logical.is_multiple_of(bs)
                        && e.len.is_multiple_of(bs)
                        && e.end() < size =>
                {
                    match out.last_mut() {
                        Some(p) if p.pc.is_none() => p.llen = p.llen.saturating_add(e.len),
                        _ => out.push(OldExtent {
                            la: e.logical,
                            llen: e.len,
                            pc: None,
                        }),
                    }
                }
                ExtentKind::Fragment { .. } if self.fragments => tail = true,
                ExtentKind::Fragment { .. } => return Err("a tail in the packed inode".into()),
                _ => return Ok(None),
            }
            pos = e.end();
        }
        let n = out.len();
        let short = out.iter().take(n.saturating_sub(1)).any(|e| e.llen < bs);
        let covered = out.last().map_or(0, |e| e.la.saturating_add(e.llen));
        let packed = size.saturating_sub(covered);
        if self.fragments && tail && packed > pcl {
            return Err(format!("a packed tail of {packed} bytes"));
        }
        // With fragments, a file OLD left without a tail is taken only from
        // an image that packed tails (else OLD compressed its tail too).
        if self.fragments && !tail && !self.old_frags {
            return Err("no tail packed".into());
        }
        Ok((n > 0 && !short && (tail || covered == size)).then_some(out))
    }
}

/// Opens `opts.base` for a build, if there is one.
pub(crate) fn open_for(
    opts: &DataOptions<'_>,
    tree: &Tree,
    zc: &[Option<(u64, usize)>],
    eligible: &(dyn Fn(InodeId) -> bool + Sync),
) -> Result<Option<Base>> {
    opts.base
        .map(|p: &Path| Base::open(p, tree, zc, opts, eligible))
        .transpose()
}
