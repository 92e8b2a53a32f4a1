//! Writing the image: data blocks in nid order through a buffered writer,
//! then the metadata area (inodes, xattrs, inline tails, directory blocks)
//! and the superblock last, into a temporary file beside the target that is
//! fsynced and renamed only when everything succeeded. Any failure or an
//! interrupt removes the temporary file and leaves the target untouched.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use ferrofs_format::dirent::{RawDirent, DIRENT_SIZE};
use ferrofs_format::inode::{DataLayout, RawInode};
use ferrofs_format::superblock::{checksum_len, compat, compute_checksum, incompat, Superblock};
use ferrofs_format::{BlockSize, Nid};
use xxhash_rust::xxh3::Xxh3;

use crate::error::{BuildError, Result};
use crate::layout::{layout, Layout};
use crate::options::BuildOptions;
use crate::plan::{plan, InodePlan, Plan};
use crate::tree::{Kind, Tree};

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

/// Builds an image of the directory `source` at `output`.
pub fn build(
    source: &Path,
    output: &Path,
    opts: &BuildOptions,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
) -> Result<Summary> {
    BlockSize::from_bits(opts.blkszbits).map_err(|_| {
        BuildError::Option(format!("block size 2^{} (use 512..4096)", opts.blkszbits))
    })?;
    if opts.label.len() > 15 {
        return Err(BuildError::Option(
            "volume label longer than 15 bytes".into(),
        ));
    }
    if let Some(cs) = opts.chunk_size {
        if !cs.is_power_of_two() || cs < opts.block_size() {
            return Err(BuildError::Option(format!(
                "chunk size {cs} is not a power of two >= the block size"
            )));
        }
    }
    let tree = crate::source::dir::scan(source, opts)?;
    let plan = plan(&tree, opts)?;
    let lay = layout(&plan, opts.block_size())?;

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
    let summary = write_image(
        &tree,
        &plan,
        &lay,
        opts,
        &file,
        output,
        interrupted,
        progress,
    )?;
    file.sync_all().map_err(out_err)?;
    drop(file);
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
}

impl Writer<'_> {
    fn write(&mut self, b: &[u8]) -> Result<()> {
        self.data
            .write_all(b)
            .map_err(|source| BuildError::Output {
                path: self.output.to_path_buf(),
                source,
            })?;
        self.hash.update(b);
        self.pos += b.len() as u64;
        Ok(())
    }
    fn pad_to_block(&mut self, bs: u64) -> Result<()> {
        let rem = self.pos % bs;
        if rem != 0 {
            self.write(&vec![0u8; (bs - rem) as usize])?;
        }
        Ok(())
    }
}

/// Encodes a directory block (entries, then names).
fn dir_block(p: &InodePlan, block: usize, lay: &Layout) -> Vec<u8> {
    let entries = &p.dir_blocks[block];
    let mut b = Vec::new();
    let mut nameoff = (entries.len() * DIRENT_SIZE) as u16;
    for e in entries {
        let d = RawDirent {
            nid: Nid(lay.nid(e.target)),
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

/// Reads exactly `buf.len()` bytes of a source file, naming it on failure.
fn read_exact_at(f: &File, path: &Path, buf: &mut [u8], off: u64) -> Result<()> {
    f.read_exact_at(buf, off).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            BuildError::Changed {
                path: path.to_path_buf(),
                reason: "it became shorter".into(),
            }
        } else {
            BuildError::io(path)(e)
        }
    })
}

#[allow(clippy::too_many_arguments)]
fn write_image(
    tree: &Tree,
    plan: &Plan,
    lay: &Layout,
    opts: &BuildOptions,
    file: &File,
    output: &Path,
    interrupted: Option<&AtomicBool>,
    progress: &dyn Fn(Progress),
) -> Result<Summary> {
    let bs = opts.block_size();
    let mut meta = vec![0u8; (lay.meta_blocks * bs) as usize];
    let mut w = Writer {
        data: BufWriter::with_capacity(1 << 20, file),
        hash: Xxh3::new(),
        pos: lay.meta_blocks * bs,
        output,
    };
    w.data
        .seek(SeekFrom::Start(w.pos))
        .map_err(|source| BuildError::Output {
            path: output.to_path_buf(),
            source,
        })?;
    let mut prog = Progress {
        files_total: tree
            .inodes
            .iter()
            .filter(|i| matches!(i.kind, Kind::File { .. }))
            .count() as u64,
        bytes_total: tree
            .inodes
            .iter()
            .map(|i| {
                if let Kind::File { size, .. } = i.kind {
                    size
                } else {
                    0
                }
            })
            .sum(),
        ..Default::default()
    };
    let mut buf = vec![0u8; 1 << 20];
    for &id in &plan.order {
        if interrupted.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Err(BuildError::Interrupted {
                path: output.to_path_buf(),
            });
        }
        let ino = &tree.inodes[id];
        let p = &plan.inodes[id];
        // Where the inline tail goes in the metadata area.
        let tail_pos =
            lay.pos[id] + p.inode_size() + plan.xattrs.bodies[id].len() as u64 + p.table_len();
        match &ino.kind {
            Kind::Dir { .. } => {
                let nblocks = p.dir_blocks.len();
                for b in 0..nblocks {
                    let bytes = dir_block(p, b, lay);
                    if b + 1 == nblocks && p.layout == DataLayout::FlatInline {
                        meta[tail_pos as usize..tail_pos as usize + bytes.len()]
                            .copy_from_slice(&bytes);
                    } else {
                        debug_assert_eq!(w.pos, (lay.start_blk[id] + b as u64) * bs);
                        w.write(&bytes)?;
                        w.pad_to_block(bs)?;
                    }
                }
            }
            Kind::Symlink { target } => {
                let split = (p.blocks * bs).min(target.len() as u64) as usize;
                if p.blocks > 0 {
                    w.write(&target[..split])?;
                    w.pad_to_block(bs)?;
                }
                let tail = &target[split..];
                if p.layout == DataLayout::FlatInline {
                    meta[tail_pos as usize..tail_pos as usize + tail.len()].copy_from_slice(tail);
                }
            }
            Kind::File { size, .. } if *size > 0 => {
                let path = &ino.source;
                let f = File::open(path).map_err(BuildError::io(path))?;
                let now = f.metadata().map_err(BuildError::io(path))?.len();
                if now != *size {
                    return Err(BuildError::Changed {
                        path: path.clone(),
                        reason: format!("size was {size}, is now {now}"),
                    });
                }
                let mut copy = |w: &mut Writer, from: u64, len: u64| -> Result<()> {
                    let mut done = 0u64;
                    while done < len {
                        let n = (len - done).min(buf.len() as u64) as usize;
                        read_exact_at(&f, path, &mut buf[..n], from + done)?;
                        w.write(&buf[..n])?;
                        done += n as u64;
                    }
                    w.pad_to_block(bs)
                };
                if let Some(c) = &p.chunks {
                    let cs = bs << c.bits_extra;
                    for (k, ch) in c.chunks.iter().enumerate() {
                        if ch.is_some() {
                            let from = k as u64 * cs;
                            copy(&mut w, from, cs.min(size - from))?;
                        }
                    }
                } else {
                    let body = (*size - p.tail).min(p.blocks * bs);
                    copy(&mut w, 0, body)?;
                    if p.tail > 0 {
                        let t = tail_pos as usize;
                        read_exact_at(&f, path, &mut meta[t..t + p.tail as usize], body)?;
                    }
                }
                let mut probe = [0u8; 1];
                let mut fr = &f;
                fr.seek(SeekFrom::Start(*size))
                    .map_err(BuildError::io(path))?;
                if fr.read(&mut probe).map_err(BuildError::io(path))? != 0 {
                    return Err(BuildError::Changed {
                        path: path.clone(),
                        reason: "it grew".into(),
                    });
                }
                prog.files_done += 1;
                prog.bytes_done += size;
                progress(prog);
            }
            _ => {}
        }
    }
    w.data.flush().map_err(|source| BuildError::Output {
        path: output.to_path_buf(),
        source,
    })?;

    // Metadata area.
    let prefixes = plan.xattrs.prefix_table();
    let ps = lay.prefix_start as usize;
    meta[ps..ps + prefixes.len()].copy_from_slice(&prefixes);
    let ss = lay.shared_start as usize;
    meta[ss..ss + plan.xattrs.shared.len()].copy_from_slice(&plan.xattrs.shared);
    let mut compact = 0u64;
    for (serial, &id) in plan.order.iter().enumerate() {
        let p = &plan.inodes[id];
        let mut body = plan.xattrs.bodies[id].clone();
        plan.xattrs.finish_body(&mut body, lay.shared_start);
        let xattr_icount = if body.is_empty() {
            0
        } else {
            ((body.len() - 12) / 4 + 1) as u16
        };
        let i_u = match p.layout {
            DataLayout::ChunkBased => u32::from(p.chunks.as_ref().map_or(0, |c| c.bits_extra)),
            _ if p.rdev.is_some() => p.rdev.unwrap_or(0),
            _ if p.blocks > 0 => lay.start_blk[id] as u32,
            DataLayout::FlatInline => u32::MAX,
            _ => 0,
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
        let mut at = lay.pos[id] as usize;
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
        if let Some(c) = &p.chunks {
            for blk in &lay.chunk_blk[id] {
                let v = blk.map_or(u32::MAX, |b| b as u32);
                meta[at..at + 4].copy_from_slice(&v.to_le_bytes());
                at += 4;
            }
            debug_assert_eq!(c.chunks.len(), lay.chunk_blk[id].len());
        }
    }

    let mut sb = Superblock::empty();
    sb.blkszbits = opts.blkszbits;
    sb.feature_compat = compat::SB_CHKSUM | compat::MTIME;
    if plan.xattrs.any {
        sb.feature_compat |= compat::XATTR_FILTER;
    }
    if plan.chunked {
        sb.feature_incompat |= incompat::CHUNKED_FILE;
    }
    if !plan.xattrs.prefixes.is_empty() {
        sb.feature_incompat |= incompat::XATTR_PREFIXES;
        sb.xattr_prefix_count = plan.xattrs.prefixes.len() as u8;
        sb.xattr_prefix_start = (lay.prefix_start / 4) as u32;
    }
    sb.root_nid_16 = lay.nid(plan.order[0]) as u16;
    sb.inos = plan.order.len() as u64;
    sb.epoch = plan.epoch as u64;
    sb.fixed_nsec = plan.fixed_nsec;
    sb.blocks = lay.total_blocks as u32;
    sb.volume_name[..opts.label.len()].copy_from_slice(&opts.label);
    let sb_range = 1024..1024 + 128;
    meta[sb_range.clone()].copy_from_slice(&sb.to_bytes());
    sb.uuid = match opts.uuid {
        Some(u) => u,
        None => {
            // Content-derived: equal inputs and options give equal images.
            let mut h = w.hash.clone();
            h.update(&meta);
            let mut u = h.digest128().to_le_bytes();
            u[6] = (u[6] & 0x0f) | 0x40;
            u[8] = (u[8] & 0x3f) | 0x80;
            u
        }
    };
    meta[sb_range.clone()].copy_from_slice(&sb.to_bytes());
    let bsz =
        BlockSize::from_bits(opts.blkszbits).map_err(|e| BuildError::Option(e.to_string()))?;
    let crc = compute_checksum(&meta[1024..1024 + checksum_len(bsz)]);
    sb.checksum = crc;
    meta[sb_range].copy_from_slice(&sb.to_bytes());
    let out_err = |source| BuildError::Output {
        path: output.to_path_buf(),
        source,
    };
    file.write_all_at(&meta, 0).map_err(out_err)?;
    file.set_len(lay.total_blocks * bs).map_err(out_err)?;
    Ok(Summary {
        inodes: plan.order.len() as u64,
        blocks: lay.total_blocks,
        meta_blocks: lay.meta_blocks,
        bytes: lay.total_blocks * bs,
        compact_inodes: compact,
    })
}
