//! Walks an EROFS image with the path API only and prints one line per
//! entry: path, type, mode, owner, size, mtime, link count, and the
//! content hash of a regular file or the target of a symlink.
//!
//! ```text
//! cargo run -p ferrofs --example walk -- IMAGE
//! ```

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use ferrofs::{Image, Metadata};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: walk IMAGE");
        std::process::exit(2);
    };
    let image = Image::open_path(&path)?;
    let stdout = io::stdout();
    walk(&image, &mut stdout.lock())?;
    Ok(())
}

/// Prints every entry below the root in sorted order, depth first.
pub fn walk(image: &Image, out: &mut impl Write) -> Result<(), Box<dyn std::error::Error>> {
    let mut stack = vec![PathBuf::from("/")];
    while let Some(dir) = stack.pop() {
        let mut entries = Vec::new();
        for entry in image.read_dir(&dir)? {
            entries.push(entry?.path());
        }
        entries.sort();
        for path in entries.iter().rev() {
            let meta = image.symlink_metadata(path)?;
            if meta.is_dir() {
                stack.push(path.clone());
            }
        }
        for path in &entries {
            let meta = image.symlink_metadata(path)?;
            let extra = if meta.is_file() {
                let mut hasher = Fnv::default();
                let mut file = image.open_file(path)?;
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = file.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    hasher.update(&buf[..n]);
                }
                format!("fnv64={:016x}", hasher.0)
            } else if meta.is_symlink() {
                format!("-> {}", image.read_link(path)?.display())
            } else {
                String::new()
            };
            writeln!(out, "{}", row(path, &meta, extra))?;
        }
    }
    Ok(())
}

/// One printed line (the test that checks this example builds the same
/// rows from the kernel's mount with `std::fs`).
pub struct Row<'a> {
    /// Path from the root, starting with `/`.
    pub path: &'a Path,
    /// `file`, `dir`, `symlink`, `device`, `fifo` or `socket`.
    pub kind: &'static str,
    /// `st_mode`.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// `st_size`.
    pub size: u64,
    /// Modification time: seconds and nanoseconds.
    pub mtime: (i64, i64),
    /// Link count.
    pub nlink: u64,
    /// Content hash or symlink target.
    pub extra: String,
}

impl std::fmt::Display for Row<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {:o} {}:{} size={} mtime={}.{:09} nlink={}",
            self.path.display(),
            self.kind,
            self.mode,
            self.uid,
            self.gid,
            self.size,
            self.mtime.0,
            self.mtime.1,
            self.nlink
        )?;
        if !self.extra.is_empty() {
            write!(f, " {}", self.extra)?;
        }
        Ok(())
    }
}

/// The kind word for a file type given as (dir, symlink, device, fifo, socket).
pub fn kind(dir: bool, symlink: bool, device: bool, fifo: bool, socket: bool) -> &'static str {
    match (dir, symlink, device, fifo, socket) {
        (true, ..) => "dir",
        (_, true, ..) => "symlink",
        (_, _, true, ..) => "device",
        (_, _, _, true, _) => "fifo",
        (_, _, _, _, true) => "socket",
        _ => "file",
    }
}

fn row<'a>(path: &'a Path, meta: &Metadata, extra: String) -> Row<'a> {
    let t = meta.file_type();
    Row {
        path,
        kind: kind(
            t.is_dir(),
            t.is_symlink(),
            t.is_char_device() || t.is_block_device(),
            t.is_fifo(),
            t.is_socket(),
        ),
        mode: meta.mode(),
        uid: meta.uid(),
        gid: meta.gid(),
        size: meta.len(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        nlink: meta.nlink(),
        extra,
    }
}

/// FNV-1a, 64 bits: a small content hash for the listing.
pub struct Fnv(pub u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    /// Adds bytes to the hash.
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}
