//! Writing the image: file data first (flat, chunk-based or compressed, in
//! nid order, compression on a worker pool with results written in order so
//! the image does not depend on the thread count), then the metadata area,
//! directory blocks, and the superblock last, into a temporary file beside
//! the target that is fsynced and renamed only when everything succeeded.
//! Any failure or an interrupt removes the temporary file.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use ferrofs_format::compress::{ALG_DEFLATE, ALG_LZ4, ALG_LZMA, ALG_ZSTD};
use ferrofs_format::dirent::{RawDirent, DIRENT_SIZE};
use ferrofs_format::inode::{DataLayout, RawInode};
use ferrofs_format::superblock::{checksum_len, compat, compute_checksum, incompat, Superblock};
use ferrofs_format::{BlockSize, Nid};
use xxhash_rust::xxh3::Xxh3;

use crate::compress::{lzma_dict, Extent};
use crate::content::ContentReader;
use crate::error::{BuildError, Result};
use crate::fragments::{add_packed_inode, Fragments};
use crate::layout::{layout_meta, MetaLayout};
use crate::options::BuildOptions;
use crate::plan::{plan, InodePlan, Plan};
use crate::tree::{InodeId, Kind, Tree};
use crate::zinode::{encode_index, encode_whole_fragment, Tail, ZExtent, ZInode};
use crate::zpass::compress_window;

/// Progress of the data pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub files_done: u64,
    pub files_total: u64,
    pub bytes_done: u64,
    pub bytes_total: u64,
}

/// What was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub inodes: u64,
    pub blocks: u64,
    pub meta_blocks: u64,
    pub bytes: u64,
    pub compact_inodes: u64,
    pub compressed_files: u64,
    pub pclusters: u64,
}

/// Removes the temporary file unless the build committed it.
struct TempGuard {
    path: PathBuf,
    done: bool,
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_file(&self.path);
        }
    }
}

fn check_options(opts: &BuildOptions) -> Result<()> {
    BlockSize::from_bits(opts.blkszbits).map_err(|_| {
        BuildError::Option(format!("block size 2^{} (use 512..4096)", opts.blkszbits))
    })?;
    let bs = opts.block_size();
    if opts.label.len() > 15 {
        return Err(BuildError::Option(
            "volume label longer than 15 bytes".into(),
        ));
    }
    if let Some(cs) = opts.chunk_size {
        if !cs.is_power_of_two() || cs < bs {
            return Err(BuildError::Option(format!(
                "chunk size {cs} is not a power of two >= the block size"
            )));
        }
    }
    if let Some(c) = &opts.compress {
        if c.compressors.is_empty() {
            return Err(BuildError::Option("no compressor given".into()));
        }
        for p in std::iter::once(c.pcluster_bytes)
            .chain(c.packed_pcluster)
            .chain(c.hints.iter().map(|h| h.pcluster_bytes))
        {
            if p < bs || !p.is_multiple_of(bs) || p > 1 << 20 {
                return Err(BuildError::Option(format!(
                    "pcluster size {p} must be a multiple of the block size ({bs}) up to 1 MiB"
                )));
            }
        }
    }
    Ok(())
}

/// Builds an image of the directory `source` at `output`.
pub fn build(
    source: &Path,
    output: &Path,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
) -> Result<Summary> {
    check_options(opts)?;
    let tree = crate::source::dir::scan(source, opts)?;
    build_tree(tree, output, opts, interrupted, progress)
}

/// Builds an image of an already scanned tree (a directory or an archive)
/// at `output`.
pub fn build_tree(
    mut tree: Tree,
    output: &Path,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
) -> Result<Summary> {
    check_options(opts)?;
    let mut plan = plan(&tree, opts)?;

    let dir = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = output
        .file_name()
        .ok_or_else(|| BuildError::Option(format!("{} is not a file path", output.display())))?;
    let tmp = dir.join(format!(
        ".{}.ferrofs-{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let file = fs::OpenOptions::new()
        .write(true)
        .read(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|source| BuildError::Output {
            path: tmp.clone(),
            source,
        })?;
    let mut guard = TempGuard {
        path: tmp.clone(),
        done: false,
    };
    let out_err = |source| BuildError::Output {
        path: output.to_path_buf(),
        source,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.workers)
        .build()
        .map_err(|e| BuildError::Option(format!("worker threads: {e}")))?;
    let summary = write_image(
        &mut tree,
        &mut plan,
        opts,
        &file,
        output,
        interrupted,
        progress,
        &pool,
    )?;
    file.sync_all().map_err(out_err)?;
    drop(file);
    // The last moment an interrupt can still cancel the build.
    check_stop(interrupted, output)?;
    fs::rename(&tmp, output).map_err(out_err)?;
    guard.done = true;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(summary)
}

struct Writer<'a> {
    data: BufWriter<&'a File>,
    hash: Xxh3,
    pos: u64,
    output: &'a Path,
    stop: Option<&'a AtomicBool>,
}

impl Writer<'_> {
    fn write(&mut self, b: &[u8]) -> Result<()> {
        let out = self.output;
        if b.len() >= 65536 {
            check_stop(self.stop, out)?;
        }
        self.data
            .write_all(b)
            .map_err(|source| BuildError::Output {
                path: out.to_path_buf(),
                source,
            })?;
        self.hash.update(b);
        self.pos += b.len() as u64;
        Ok(())
    }
    fn zeros(&mut self, n: u64) -> Result<()> {
        const Z: [u8; 4096] = [0; 4096];
        let mut left = n;
        while left > 0 {
            let k = left.min(4096) as usize;
            self.write(&Z[..k])?;
            left -= k as u64;
        }
        Ok(())
    }
    fn pad_to_block(&mut self, bs: u64) -> Result<()> {
        let rem = self.pos % bs;
        if rem != 0 {
            self.zeros(bs - rem)?;
        }
        Ok(())
    }
    fn block(&self, bs: u64) -> u64 {
        self.pos / bs
    }
}

fn check_stop(interrupted: Option<&AtomicBool>, output: &Path) -> Result<()> {
    if interrupted.is_some_and(|f| f.load(Ordering::Relaxed)) {
        return Err(BuildError::Interrupted {
            path: output.to_path_buf(),
        });
    }
    Ok(())
}

/// Compression records that follow the superblock, and the SB fields they
/// imply: (records, available bitmap, use COMPR_CFGS).
fn compression_records(opts: &BuildOptions, bs: u64) -> (Vec<u8>, u16, bool) {
    let Some(c) = &opts.compress else {
        return (Vec::new(), 0, false);
    };
    let max_pcl = c
        .hints
        .iter()
        .map(|h| h.pcluster_bytes)
        .chain([c.pcluster_bytes])
        .chain(c.packed_pcluster)
        .max()
        .unwrap_or(bs);
    let mut bitmap = 0u16;
    for comp in &c.compressors {
        bitmap |= 1 << comp.alg.id();
    }
    let cfgs = bitmap != 1 << ALG_LZ4 || max_pcl > bs;
    if !cfgs {
        return (Vec::new(), bitmap, false);
    }
    let mut r = Vec::new();
    let mut rec = |payload: &[u8]| {
        r.resize(r.len().div_ceil(4) * 4, 0);
        r.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        r.extend_from_slice(payload);
    };
    for alg in [ALG_LZ4, ALG_LZMA, ALG_DEFLATE, ALG_ZSTD] {
        if bitmap & (1 << alg) == 0 {
            continue;
        }
        let mut p = Vec::new();
        match alg {
            ALG_LZ4 => {
                p.extend_from_slice(&65535u16.to_le_bytes());
                p.extend_from_slice(&((max_pcl / bs) as u16).to_le_bytes());
                p.resize(14, 0);
            }
            ALG_LZMA => {
                p.extend_from_slice(&lzma_dict(max_pcl).to_le_bytes());
                p.resize(14, 0);
            }
            ALG_DEFLATE => {
                p.push(15);
                p.resize(6, 0);
            }
            _ => {
                p.push(0);
                p.push((ferrofs_codec::ZSTD_ENCODER_WINDOW_LOG - 10) as u8);
                p.resize(6, 0);
            }
        }
        rec(&p);
    }
    (r, bitmap, true)
}

/// Writes one compressed file's pclusters and returns its inode state.
#[allow(clippy::too_many_arguments)]
fn write_compressed(
    w: &mut Writer,
    tree: &Tree,
    plan: &Plan,
    id: InodeId,
    extents: Vec<Extent>,
    opts: &BuildOptions,
    frags: Option<&mut Fragments>,
    mut dedupe: Option<&mut PclusterDedupe>,
) -> Result<ZInode> {
    let bs = opts.block_size();
    let ino = &tree.inodes[id];
    let p = &plan.inodes[id];
    let size = ino.data_size();
    let comp = opts
        .compress
        .as_ref()
        .map(|c| c.compressors[p.compress.map_or(0, |x| x.1)]);
    let alg = comp.map_or(0, |c| c.alg.id());
    let f = ContentReader::open(ino)?;
    let inode_and_xattrs = p.inode_size() + plan.xattrs.bodies[id].len() as u64;
    // Extents stop short of the end when the rest is the file's fragment.
    let covered = extents.last().map_or(0, |e| e.la + e.llen);
    let fragment = match frags {
        Some(fr) if covered < size => Some((fr.add(id, &f, covered, size)?, covered)),
        _ => None,
    };
    if let Some((fid, 0)) = fragment {
        f.finish()?;
        return Ok(ZInode {
            alg,
            extents: Vec::new(),
            inline: None,
            index: encode_whole_fragment(0),
            compact: false,
            blocks: 0,
            fragment: Some((fid, 0)),
        });
    }
    let mut zext: Vec<ZExtent> = Vec::with_capacity(extents.len());
    let mut cursor = w.block(bs);
    for e in &extents {
        let blocks = e.blocks(bs);
        zext.push(ZExtent {
            la: e.la,
            llen: e.llen,
            plain: e.compressed.is_none(),
            pblk: cursor,
            blocks,
            csize: e.compressed.as_ref().map_or(e.llen, |c| c.len() as u64),
        });
        cursor += blocks;
    }
    // ztailpacking: the last pcluster inline, when it fits in the inode's block.
    let mut inline: Option<Vec<u8>> = None;
    let ztail = opts.compress.as_ref().is_some_and(|c| c.ztailpacking) && fragment.is_none();
    if let (true, Some(last)) = (ztail, extents.last()) {
        let bytes = match &last.compressed {
            Some(c) => c.clone(),
            None => {
                let mut raw = vec![0u8; last.llen as usize];
                f.read_exact_at(&mut raw, last.la)?;
                raw
            }
        };
        if bytes.len() < bs as usize {
            let mut trial = zext.clone();
            let t = trial.len() - 1;
            trial[t].blocks = 0;
            let (index, _) = encode_index(
                &trial,
                size,
                bs,
                alg,
                Tail::Inline(bytes.len() as u16),
                inode_and_xattrs,
            );
            let pad = inode_and_xattrs.div_ceil(8) * 8 - inode_and_xattrs;
            if inode_and_xattrs + pad + index.len() as u64 + bytes.len() as u64 <= bs {
                zext = trial;
                inline = Some(bytes);
            }
        }
    }
    // An extent that is not the tail never crosses... every extent's
    // compressed stream must save a block unless it is stored inline.
    let n_written = if inline.is_some() {
        extents.len() - 1
    } else {
        extents.len()
    };
    let mut buf = Vec::new();
    for (k, e) in extents.iter().enumerate().take(n_written) {
        let z = &mut zext[k];
        match &e.compressed {
            Some(c)
                if (c.len() as u64).div_ceil(bs) < e.llen.div_ceil(bs)
                    || z.blocks * bs < e.llen =>
            {
                if let Some(d) = dedupe.as_deref_mut() {
                    if let Some(at) = d.find(w, c, e.llen, alg, bs)? {
                        // The same stream for the same length is stored:
                        // point at it.
                        z.pblk = at;
                        continue;
                    }
                }
                z.pblk = w.block(bs);
                // Zero padding in front: the stream ends at the pcluster's end.
                w.zeros(z.blocks * bs - c.len() as u64)?;
                w.write(c)?;
                if let Some(d) = dedupe.as_deref_mut() {
                    d.insert(c, e.llen, alg, z.pblk);
                }
            }
            Some(_) | None => {
                // Raw (PLAIN) pcluster: the tail extent that saves no block
                // is stored raw too.
                buf.resize(e.llen as usize, 0);
                f.read_exact_at(&mut buf, e.la)?;
                z.plain = true;
                z.csize = e.llen;
                z.blocks = e.llen.div_ceil(bs);
                z.pblk = w.block(bs);
                w.write(&buf)?;
                w.pad_to_block(bs)?;
            }
        }
    }
    f.finish()?;
    // The inline tail's block address is not used; the next free block
    // keeps compact indexes possible.
    let c = w.block(bs);
    for z in zext.iter_mut().skip(n_written) {
        z.pblk = c;
    }
    let blocks: u64 = zext.iter().map(|z| z.blocks).sum();
    let tail = match (&inline, fragment) {
        (Some(v), _) => Tail::Inline(v.len() as u16),
        (None, Some((_, from))) => {
            // The fragment is the last extent; its head's block address is
            // not used (the next free block keeps compact indexes possible).
            zext.push(ZExtent {
                la: from,
                llen: size - from,
                plain: false,
                pblk: c,
                blocks: 0,
                csize: 0,
            });
            // Placeholder offset: set once the packed inode is laid out.
            Tail::Fragment(0)
        }
        (None, None) => Tail::Blocks,
    };
    let (index, compact) = encode_index(&zext, size, bs, alg, tail, inode_and_xattrs);
    Ok(ZInode {
        alg,
        extents: zext,
        inline,
        index,
        compact,
        blocks,
        fragment,
    })
}

/// The "algorithm" under which [`PclusterDedupe`] keeps raw data chunks.
const CHUNK_KEY: u8 = u8::MAX;

/// `-E dedupe` across files: compressed pclusters already stored (same
/// stream, same decoded length) are pointed at instead of written again.
/// A hash match is confirmed against the stored bytes.
#[derive(Default)]
struct PclusterDedupe {
    seen: HashMap<(u128, u64, u8), u64>,
    shared: u64,
}

impl PclusterDedupe {
    fn key(stream: &[u8], llen: u64, alg: u8) -> (u128, u64, u8) {
        (xxhash_rust::xxh3::xxh3_128(stream), llen, alg)
    }

    fn find(
        &mut self,
        w: &mut Writer,
        stream: &[u8],
        llen: u64,
        alg: u8,
        bs: u64,
    ) -> Result<Option<u64>> {
        let Some(&pblk) = self.seen.get(&Self::key(stream, llen, alg)) else {
            return Ok(None);
        };
        let err = |source| BuildError::Output {
            path: w.output.to_path_buf(),
            source,
        };
        w.data.flush().map_err(err)?;
        let end = (pblk + (stream.len() as u64).div_ceil(bs)) * bs;
        let mut stored = vec![0u8; stream.len()];
        w.data
            .get_ref()
            .read_exact_at(&mut stored, end - stream.len() as u64)
            .map_err(err)?;
        if stored != stream {
            return Ok(None);
        }
        self.shared += 1;
        Ok(Some(pblk))
    }

    fn insert(&mut self, stream: &[u8], llen: u64, alg: u8, pblk: u64) {
        self.seen
            .entry(Self::key(stream, llen, alg))
            .or_insert(pblk);
    }
}

/// Records where a compressed file went.
fn apply_z(plan: &mut Plan, id: InodeId, z: ZInode) {
    let p = &mut plan.inodes[id];
    p.layout = if z.compact {
        DataLayout::CompressedCompact
    } else {
        DataLayout::CompressedFull
    };
    p.tail = 0;
    p.blocks = 0;
    p.z = Some(z);
}

/// Copies a flat or chunk-based file into the data area. With `dedupe`,
/// a chunk whose (zero-padded) blocks are already stored points at them
/// instead (confirmed against the stored bytes).
fn write_flat(
    w: &mut Writer,
    tree: &Tree,
    p: &InodePlan,
    id: InodeId,
    bs: u64,
    buf: &mut [u8],
    mut dedupe: Option<&mut PclusterDedupe>,
) -> Result<(u64, Vec<Option<u64>>)> {
    let ino = &tree.inodes[id];
    let size = ino.data_size();
    let f = ContentReader::open(ino)?;
    let copy = |w: &mut Writer, buf: &mut [u8], from: u64, len: u64| -> Result<()> {
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(buf.len() as u64) as usize;
            f.read_exact_at(&mut buf[..n], from + done)?;
            w.write(&buf[..n])?;
            done += n as u64;
        }
        w.pad_to_block(bs)
    };
    let start = w.block(bs);
    let mut chunks = Vec::new();
    if let Some(c) = &p.chunks {
        let cs = bs << c.bits_extra;
        for (k, ch) in c.chunks.iter().enumerate() {
            if ch.is_none() {
                chunks.push(None);
                continue;
            }
            let from = k as u64 * cs;
            let len = cs.min(size - from);
            let padded = len.div_ceil(bs) * bs;
            match dedupe.as_deref_mut() {
                Some(d) if padded as usize <= buf.len() => {
                    let chunk = &mut buf[..padded as usize];
                    f.read_exact_at(&mut chunk[..len as usize], from)?;
                    chunk[len as usize..].fill(0);
                    // Keyed like a pcluster of its own "algorithm", by the
                    // stored blocks (a file's last chunk may share blocks
                    // with any chunk of the same bytes and zeros).
                    if let Some(blk) = d.find(w, chunk, padded, CHUNK_KEY, bs)? {
                        chunks.push(Some(blk));
                        continue;
                    }
                    let blk = w.block(bs);
                    w.write(chunk)?;
                    d.insert(chunk, padded, CHUNK_KEY, blk);
                    chunks.push(Some(blk));
                }
                _ => {
                    chunks.push(Some(w.block(bs)));
                    copy(w, buf, from, len)?;
                }
            }
        }
    } else {
        copy(w, buf, 0, (size - p.tail).min(p.blocks * bs))?;
    }
    f.finish()?;
    Ok((start, chunks))
}

/// Encodes a directory block (entries, then names).
fn dir_block(p: &InodePlan, block: usize, lay: &MetaLayout, bs: u64) -> Vec<u8> {
    let entries = &p.dir_blocks[block];
    let mut b = Vec::new();
    let mut nameoff = (entries.len() * DIRENT_SIZE) as u16;
    for e in entries {
        let d = RawDirent {
            nid: Nid(lay.nid(e.target, bs)),
            nameoff,
            file_type: e.file_type,
        };
        b.extend_from_slice(&d.to_bytes());
        nameoff += e.name.len() as u16;
    }
    for e in entries {
        b.extend_from_slice(&e.name);
    }
    b
}

/// Files per window of the data pass, and input bytes per window.
const WINDOW_FILES: usize = 1024;
const WINDOW_BYTES: u64 = 32 << 20;
/// Threads that hand windows to the compression pool (taking turns).
const PRODUCERS: usize = 2;

#[allow(clippy::too_many_arguments)]
fn write_image(
    tree: &mut Tree,
    plan: &mut Plan,
    opts: &BuildOptions,
    file: &File,
    output: &Path,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
    pool: &rayon::ThreadPool,
) -> Result<Summary> {
    let bs = opts.block_size();
    let (records, algs, cfgs) = compression_records(opts, bs);
    let sb_end = 1024 + 128 + records.len() as u64;
    let data_start = sb_end.div_ceil(bs).max(1);
    let mut w = Writer {
        data: BufWriter::with_capacity(1 << 20, file),
        hash: Xxh3::new(),
        pos: data_start * bs,
        output,
        stop: interrupted,
    };
    w.data
        .seek(SeekFrom::Start(data_start * bs))
        .map_err(|source| BuildError::Output {
            path: output.to_path_buf(),
            source,
        })?;

    let mut files: Vec<InodeId> = plan
        .order
        .iter()
        .copied()
        .filter(|&id| matches!(tree.inodes[id].kind, Kind::File { size, .. } if size > 0))
        .collect();
    if let Some(p) = &opts.profile {
        // Data in first-access order, so a start reads few, mostly
        // sequential runs; files it does not read follow in nid order.
        files.sort_by_key(|&id| p.get(&tree.inodes[id].rel).map_or(usize::MAX, |f| f.rank));
    }
    let mut prog = Progress {
        files_total: files.len() as u64,
        bytes_total: files.iter().map(|&id| tree.inodes[id].data_size()).sum(),
        ..Default::default()
    };
    let mut start_blk = vec![0u64; tree.inodes.len()];
    let mut chunk_blk: Vec<Vec<Option<u64>>> = vec![Vec::new(); tree.inodes.len()];
    let frag_mode = opts
        .compress
        .as_ref()
        .is_some_and(|c| c.fragments || c.all_fragments);
    let mut frags = if frag_mode {
        Some(Fragments::new(output)?)
    } else {
        None
    };
    // Whole-file dedupe (also with fragments, as mkfs.erofs does).
    let dup = if opts.dedupe || frag_mode {
        let t: &Tree = tree;
        let p: &Plan = plan;
        let ztail = opts.compress.as_ref().is_some_and(|c| c.ztailpacking);
        pool.install(|| crate::dedupe::find_duplicates(t, p, ztail))?
    } else {
        vec![None; tree.inodes.len()]
    };
    for (id, d) in dup.iter().enumerate() {
        if d.is_some() {
            plan.inodes[id].compress = None;
        }
    }
    let mut pdedupe = opts.dedupe.then(PclusterDedupe::default);
    let mut buf = vec![0u8; 1 << 20];
    let mut windows = Vec::new();
    let mut i = 0;
    while i < files.len() {
        let mut j = i;
        let mut bytes = 0;
        while j < files.len() && j - i < WINDOW_FILES && (j == i || bytes < WINDOW_BYTES) {
            bytes += tree.inodes[files[j]].data_size();
            j += 1;
        }
        windows.push(i..j);
        i = j;
    }
    // Windows are compressed by two producer threads taking turns (their
    // jobs share the pool, so one window's last segments overlap the next
    // window's first) while this thread writes finished windows in order.
    let zc: Vec<Option<(u64, usize)>> = plan.inodes.iter().map(|p| p.compress).collect();
    let tree_ref: &Tree = tree;
    std::thread::scope(|s| -> Result<()> {
        let tree = tree_ref;
        let mut rxs = Vec::new();
        for lane in 0..PRODUCERS {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            rxs.push(rx);
            let (files, zc) = (&files, &zc);
            let mine: Vec<_> = windows
                .iter()
                .skip(lane)
                .step_by(PRODUCERS)
                .cloned()
                .collect();
            s.spawn(move || {
                for r in mine {
                    if interrupted.is_some_and(|f| f.load(Ordering::Relaxed)) {
                        break;
                    }
                    let window = &files[r];
                    let out =
                        pool.install(|| compress_window(tree, zc, opts, window, frag_mode, true));
                    let failed = out.is_err();
                    if tx.send(out).is_err() || failed {
                        break;
                    }
                }
            });
        }
        for (n, r) in windows.into_iter().enumerate() {
            let window = &files[r];
            let compressed = rxs[n % PRODUCERS]
                .recv()
                .map_err(|_| BuildError::Interrupted {
                    path: output.to_path_buf(),
                })??;
            for (k, &id) in window.iter().enumerate() {
                check_stop(interrupted, output)?;
                if let Some(orig) = dup[id] {
                    // Same bytes as an earlier file stored the same way: its
                    // data serve this one too (with an index of its own).
                    match plan.inodes[orig].z.clone() {
                        Some(mut z) => {
                            if z.fragment.is_none() {
                                let p = &plan.inodes[id];
                                let ix = p.inode_size() + plan.xattrs.bodies[id].len() as u64;
                                let tail = z
                                    .inline
                                    .as_ref()
                                    .map_or(Tail::Blocks, |v| Tail::Inline(v.len() as u16));
                                (z.index, z.compact) =
                                    encode_index(&z.extents, p.size, bs, z.alg, tail, ix);
                            }
                            apply_z(plan, id, z)
                        }
                        None => start_blk[id] = start_blk[orig],
                    }
                    prog.files_done += 1;
                    prog.bytes_done += tree.inodes[id].data_size();
                    progress(prog);
                    continue;
                }
                match compressed[k].clone() {
                    Some(ex) => {
                        let z = write_compressed(
                            &mut w,
                            tree,
                            plan,
                            id,
                            ex,
                            opts,
                            frags.as_mut(),
                            pdedupe.as_mut(),
                        )?;
                        apply_z(plan, id, z);
                    }
                    None => {
                        let (s, c) = write_flat(
                            &mut w,
                            tree,
                            &plan.inodes[id],
                            id,
                            bs,
                            &mut buf,
                            pdedupe.as_mut(),
                        )?;
                        start_blk[id] = s;
                        chunk_blk[id] = c;
                    }
                }
                prog.files_done += 1;
                prog.bytes_done += tree.inodes[id].data_size();
                progress(prog);
            }
        }
        Ok(())
    })?;
    // The packed inode, then the fragment offsets in the inodes that use it.
    let mut packed = None;
    if let Some(fr) = frags.take().filter(|f| !f.entries.is_empty()) {
        check_stop(interrupted, output)?;
        let (pid, offsets) = add_packed_inode(tree, plan, fr, opts);
        start_blk.push(0);
        chunk_blk.push(Vec::new());
        let t: &Tree = tree;
        let zc: Vec<Option<(u64, usize)>> = plan.inodes.iter().map(|p| p.compress).collect();
        let ex = pool.install(|| compress_window(t, &zc, opts, &[pid], false, false))?;
        match ex.into_iter().next().flatten() {
            Some(ex) => {
                let z = write_compressed(&mut w, tree, plan, pid, ex, opts, None, None)?;
                apply_z(plan, pid, z);
            }
            None => {
                let (s, _) = write_flat(&mut w, tree, &plan.inodes[pid], pid, bs, &mut buf, None)?;
                start_blk[pid] = s;
            }
        }
        for id in 0..plan.inodes.len() {
            let ix = plan.inodes[id].inode_size() + plan.xattrs.bodies[id].len() as u64;
            let size = plan.inodes[id].size;
            if let Some(z) = plan.inodes[id].z.as_mut() {
                let Some((fid, from)) = z.fragment else {
                    continue;
                };
                let off = offsets[fid];
                if from == 0 {
                    z.index = encode_whole_fragment(off);
                } else {
                    let (index, compact) =
                        encode_index(&z.extents, size, bs, z.alg, Tail::Fragment(off), ix);
                    z.index = index;
                    z.compact = compact;
                }
                plan.inodes[id].layout = if plan.inodes[id].z.as_ref().is_some_and(|z| z.compact) {
                    DataLayout::CompressedCompact
                } else {
                    DataLayout::CompressedFull
                };
            }
        }
        plan.order.push(pid);
        packed = Some(pid);
    }
    // Symlink targets that need blocks (longer than an inline tail allows).
    for &id in &plan.order {
        if let Kind::Symlink { target } = &tree.inodes[id].kind {
            let p = &plan.inodes[id];
            if p.blocks > 0 {
                start_blk[id] = w.block(bs);
                let split = (p.blocks * bs).min(target.len() as u64) as usize;
                w.write(&target[..split])?;
                w.pad_to_block(bs)?;
            }
        }
    }
    let data_end = w.block(bs);

    // Metadata area.
    let item_len: Vec<u64> = (0..tree.inodes.len())
        .map(|id| {
            let p = &plan.inodes[id];
            let ix = p.inode_size() + plan.xattrs.bodies[id].len() as u64;
            match &p.z {
                Some(z) => ix + z.tail_len(ix),
                None => ix + p.table_len() + p.tail,
            }
        })
        .collect();
    let prefixes = plan.xattrs.prefix_table();
    let lay = layout_meta(
        &plan.order,
        &item_len,
        prefixes.len() as u64,
        plan.xattrs.shared.len() as u64,
        bs,
        data_end,
    )?;
    let meta_base = lay.meta_blkaddr * bs;
    let mut meta = vec![0u8; (lay.meta_blocks * bs) as usize];
    meta[..prefixes.len()].copy_from_slice(&prefixes);
    let ss = lay.shared_start as usize;
    meta[ss..ss + plan.xattrs.shared.len()].copy_from_slice(&plan.xattrs.shared);

    // Directory blocks go after the metadata area.
    let mut dir_cursor = lay.meta_blkaddr + lay.meta_blocks;
    for &id in &plan.order {
        if tree.inodes[id].is_dir() && plan.inodes[id].blocks > 0 {
            start_blk[id] = dir_cursor;
            dir_cursor += plan.inodes[id].blocks;
        }
    }
    let total_blocks = dir_cursor.max(4096u64.div_ceil(bs));
    if total_blocks > u64::from(u32::MAX) {
        return Err(BuildError::TooLarge(format!("{total_blocks} blocks")));
    }

    let mut compact = 0u64;
    let mut compressed_files = 0u64;
    let mut pclusters = 0u64;
    for (serial, &id) in plan.order.iter().enumerate() {
        let p = &plan.inodes[id];
        let ino = &tree.inodes[id];
        let mut body = plan.xattrs.bodies[id].clone();
        plan.xattrs.finish_body(&mut body, lay.shared_start);
        let xattr_icount = if body.is_empty() {
            0
        } else {
            ((body.len() - 12) / 4 + 1) as u16
        };
        let i_u = if let Some(z) = &p.z {
            z.blocks as u32
        } else {
            match p.layout {
                DataLayout::ChunkBased => u32::from(p.chunks.as_ref().map_or(0, |c| c.bits_extra)),
                _ if p.rdev.is_some() => p.rdev.unwrap_or(0),
                _ if p.blocks > 0 => start_blk[id] as u32,
                DataLayout::FlatInline => u32::MAX,
                _ => 0,
            }
        };
        let raw = RawInode {
            format: p.layout.bits() << 1,
            extended: p.extended,
            xattr_icount,
            mode: p.mode,
            nb: 0,
            size: p.size,
            mtime: if p.extended { p.mtime } else { 0 },
            mtime_nsec: p.mtime_nsec,
            i_u,
            ino: (serial + 1) as u32,
            uid: p.uid,
            gid: p.gid,
            nlink: p.nlink,
        };
        let mut at = (lay.pos[id] - meta_base) as usize;
        if p.extended {
            meta[at..at + 64].copy_from_slice(&raw.to_extended_bytes());
            at += 64;
        } else {
            meta[at..at + 32].copy_from_slice(&raw.to_compact_bytes());
            at += 32;
            compact += 1;
        }
        meta[at..at + body.len()].copy_from_slice(&body);
        at += body.len();
        if let Some(z) = &p.z {
            compressed_files += 1;
            pclusters += z.extents.len() as u64;
            at = at.div_ceil(8) * 8;
            meta[at..at + z.index.len()].copy_from_slice(&z.index);
            at += z.index.len();
            if let Some(idata) = &z.inline {
                meta[at..at + idata.len()].copy_from_slice(idata);
            }
            continue;
        }
        for blk in &chunk_blk[id] {
            let v = blk.map_or(u32::MAX, |b| b as u32);
            meta[at..at + 4].copy_from_slice(&v.to_le_bytes());
            at += 4;
        }
        if p.tail > 0 {
            let t = p.tail as usize;
            match &ino.kind {
                Kind::File { size, .. } => {
                    let f = ContentReader::open(ino)?;
                    f.read_exact_at(&mut meta[at..at + t], size - p.tail)?;
                    f.finish()?;
                }
                Kind::Symlink { target } => {
                    let s = target.len() - t;
                    meta[at..at + t].copy_from_slice(&target[s..]);
                }
                Kind::Dir { .. } => {
                    let last = p.dir_blocks.len() - 1;
                    let b = dir_block(p, last, &lay, bs);
                    meta[at..at + b.len()].copy_from_slice(&b);
                }
                _ => {}
            }
        }
    }
    w.write(&meta)?;
    // Directory blocks.
    for &id in &plan.order {
        let p = &plan.inodes[id];
        if !tree.inodes[id].is_dir() || p.blocks == 0 {
            continue;
        }
        debug_assert_eq!(w.block(bs), start_blk[id]);
        for b in 0..p.blocks as usize {
            let bytes = dir_block(p, b, &lay, bs);
            w.write(&bytes)?;
            w.pad_to_block(bs)?;
        }
    }
    w.data.flush().map_err(|source| BuildError::Output {
        path: output.to_path_buf(),
        source,
    })?;

    // The superblock and the compression records, last.
    let mut sb = Superblock::empty();
    sb.blkszbits = opts.blkszbits;
    // Like mkfs.erofs: no checksum with blocks below 2 KiB (fsck.erofs
    // 1.8.6 crashes on such images).
    sb.feature_compat = compat::MTIME;
    if bs >= 2048 && opts.sb_checksum {
        sb.feature_compat |= compat::SB_CHKSUM;
    }
    if plan.xattrs.any && opts.xattr_filter {
        sb.feature_compat |= compat::XATTR_FILTER;
    }
    if plan.chunked {
        sb.feature_incompat |= incompat::CHUNKED_FILE;
    }
    if compressed_files > 0 || opts.compress.is_some() {
        sb.feature_incompat |= incompat::ZERO_PADDING;
        if cfgs {
            sb.feature_incompat |= incompat::COMPR_CFGS;
            sb.u1 = algs;
        } else {
            sb.u1 = 65535;
        }
        if plan
            .inodes
            .iter()
            .any(|p| p.z.as_ref().is_some_and(|z| z.inline.is_some()))
        {
            sb.feature_incompat |= incompat::ZTAILPACKING;
        }
    }
    if !plan.xattrs.prefixes.is_empty() {
        sb.feature_incompat |= incompat::XATTR_PREFIXES;
        sb.xattr_prefix_count = plan.xattrs.prefixes.len() as u8;
        sb.xattr_prefix_start = (lay.prefix_start / 4) as u32;
    }
    sb.root_nid_16 = lay.nid(plan.order[0], bs) as u16;
    if let Some(pid) = packed {
        sb.feature_incompat |= incompat::FRAGMENTS;
        sb.packed_nid = lay.nid(pid, bs);
    }
    sb.inos = plan.order.len() as u64;
    sb.epoch = plan.epoch as u64;
    sb.fixed_nsec = plan.fixed_nsec;
    sb.blocks = total_blocks as u32;
    sb.meta_blkaddr = lay.meta_blkaddr as u32;
    sb.xattr_blkaddr = lay.meta_blkaddr as u32;
    sb.volume_name[..opts.label.len()].copy_from_slice(&opts.label);
    let bsz =
        BlockSize::from_bits(opts.blkszbits).map_err(|e| BuildError::Option(e.to_string()))?;
    let head_len = (1024 + checksum_len(bsz)).max(sb_end as usize);
    let mut head = vec![0u8; head_len];
    head[1152..1152 + records.len()].copy_from_slice(&records);
    head[1024..1152].copy_from_slice(&sb.to_bytes());
    sb.uuid = match opts.uuid {
        Some(u) => u,
        None => {
            // Content-derived: equal inputs and options give equal images.
            let mut h = w.hash.clone();
            h.update(&head);
            let mut u = h.digest128().to_le_bytes();
            u[6] = (u[6] & 0x0f) | 0x40;
            u[8] = (u[8] & 0x3f) | 0x80;
            u
        }
    };
    head[1024..1152].copy_from_slice(&sb.to_bytes());
    if sb.has_compat(compat::SB_CHKSUM) {
        sb.checksum = compute_checksum(&head[1024..1024 + checksum_len(bsz)]);
    }
    head[1024..1152].copy_from_slice(&sb.to_bytes());
    let out_err = |source| BuildError::Output {
        path: output.to_path_buf(),
        source,
    };
    file.write_all_at(&head, 0).map_err(out_err)?;
    file.set_len(total_blocks * bs).map_err(out_err)?;
    Ok(Summary {
        inodes: plan.order.len() as u64,
        blocks: total_blocks,
        meta_blocks: lay.meta_blocks,
        bytes: total_blocks * bs,
        compact_inodes: compact,
        compressed_files,
        pclusters,
    })
}
