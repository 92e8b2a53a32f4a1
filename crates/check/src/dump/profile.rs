//! What a cold replay of a read trace costs on an image: the device
//! blocks and pclusters it touches, their runs, and decoded against
//! requested bytes (`ferrofs dump --profile`).

use std::collections::HashSet;

use ferrofs::map::{ExtentKind, PclusterAt, PclusterFormat};
use ferrofs::Image;
use serde_json::{json, Value};

/// What a cold replay of a trace costs on this image: the reads it makes
/// (`ferrofs_trace`), the pclusters and device blocks they touch
/// (a compressed pcluster is read and decoded whole, as the kernel does),
/// how many runs of consecutive blocks those form in first-touch order,
/// and decoded bytes against requested bytes. Metadata blocks (inodes,
/// directories) are not counted.
/// With `window` > 0 every read is widened as the kernel's read-around
/// widens a page fault: `window / 2` bytes before and after it, within the
/// file (what a cold start costs under that readahead).
pub fn profile(image: &Image, reads: &[ferrofs_trace::TraceRead], window: u64) -> Value {
    struct Acc {
        seen: HashSet<u64>,
        order: Vec<u64>,
        pclusters: HashSet<PclusterAt>,
        decoded: u64,
        errors: Vec<String>,
    }
    impl Acc {
        fn block(&mut self, b: u64) {
            if self.seen.insert(b) {
                self.order.push(b);
            }
        }
    }
    fn touch(
        image: &Image,
        file: &ferrofs::raw::InodeFile,
        from: u64,
        to: u64,
        acc: &mut Acc,
        depth: u8,
    ) {
        let bs = image.block_size().bytes();
        let mut pos = from;
        while pos < to {
            let ext = match file.map(pos) {
                Ok(e) => e,
                Err(e) => {
                    acc.errors.push(e.to_string());
                    return;
                }
            };
            let end = ext.logical.saturating_add(ext.len).min(to);
            if end <= pos {
                return;
            }
            let rel = pos - ext.logical;
            let n = end - pos;
            match ext.kind {
                ExtentKind::Hole => {}
                ExtentKind::Raw { pos: p, .. } => {
                    for b in (p + rel) / bs..=(p + rel + n - 1) / bs {
                        acc.block(b);
                    }
                    acc.decoded += n;
                }
                ExtentKind::Inline { .. } => acc.decoded += n,
                ExtentKind::Fragment { offset } => match image.raw().packed_file() {
                    Some(packed) if depth == 0 => {
                        touch(image, &packed, offset + rel, offset + rel + n, acc, 1)
                    }
                    _ => acc.errors.push("fragment without a packed inode".into()),
                },
                ExtentKind::Pcluster(pc) => {
                    if acc.pclusters.insert(pc.at) {
                        if let PclusterAt::Blocks(pos) = pc.at {
                            for b in pos / bs..(pos + pc.len).div_ceil(bs) {
                                acc.block(b);
                            }
                        }
                        acc.decoded += match pc.format {
                            PclusterFormat::Codec(_) => ext.len,
                            _ => n,
                        };
                    }
                }
            }
            pos = end;
        }
    }
    let mut acc = Acc {
        seen: HashSet::new(),
        order: Vec::new(),
        pclusters: HashSet::new(),
        decoded: 0,
        errors: Vec::new(),
    };
    let mut requested = 0u64;
    let mut files = HashSet::new();
    let mut missing = 0u64;
    for r in reads {
        let file = match image
            .raw()
            .lookup_path(&r.path, true)
            .and_then(|i| image.raw().open(i))
        {
            Ok(f) => f,
            Err(_) => {
                missing += 1;
                continue;
            }
        };
        let size = file.size();
        let (off, len) = r.range.unwrap_or((0, size));
        let end = off.saturating_add(len).min(size);
        if off >= end {
            continue;
        }
        files.insert(r.path.clone());
        requested += end - off;
        let (from, to) = (
            off.saturating_sub(window / 2),
            end.saturating_add(window / 2).min(size),
        );
        touch(image, &file, from, to, &mut acc, 0);
    }
    let runs = acc.order.windows(2).filter(|w| w[1] != w[0] + 1).count()
        + usize::from(!acc.order.is_empty());
    let bs = image.block_size().bytes();
    json!({
        "reads": reads.len(),
        "readahead_window": window,
        "files": files.len(),
        "missing_paths": missing,
        "requested_bytes": requested,
        "decoded_bytes": acc.decoded,
        "decoded_per_requested": if requested > 0 { acc.decoded as f64 / requested as f64 } else { 0.0 },
        "pclusters": acc.pclusters.len(),
        "device_blocks": acc.order.len(),
        "device_bytes": acc.order.len() as u64 * bs,
        "runs": runs,
        "errors": acc.errors,
    })
}
