//! `--trace`: every read the mount serves, as a line of the trace format
//! (`ferrofs_trace`), with the path the names seen in lookups and
//! listings give the file.

use std::collections::HashMap;
use std::io::Write;

use ferrofs::format::Nid;

/// Records every read as a trace line (`--trace`): names seen in
/// lookups and directory listings give each nid its path.
pub(crate) struct Tracer {
    out: std::io::BufWriter<std::fs::File>,
    /// nid -> (parent nid, name).
    names: HashMap<u64, (u64, Vec<u8>)>,
    pending: usize,
}

impl Tracer {
    pub(crate) fn new(file: std::fs::File) -> Self {
        Self {
            out: std::io::BufWriter::new(file),
            names: HashMap::new(),
            pending: 0,
        }
    }

    pub(crate) fn name(&mut self, parent: Nid, child: Nid, name: &[u8]) {
        self.names
            .entry(child.0)
            .or_insert_with(|| (parent.0, name.to_vec()));
    }

    pub(crate) fn path(&self, root: Nid, nid: Nid) -> Vec<u8> {
        let mut parts = Vec::new();
        let mut cur = nid.0;
        // Bounded walk: names come from the image, which may loop.
        for _ in 0..4096 {
            if cur == root.0 {
                break;
            }
            match self.names.get(&cur) {
                Some((p, n)) => {
                    parts.push(n.as_slice());
                    cur = *p;
                }
                None => break,
            }
        }
        parts.reverse();
        parts.join(&b'/')
    }

    pub(crate) fn read(&mut self, path: &[u8], offset: u64, len: u64) {
        let line = ferrofs_trace::format_read(path, offset, len);
        let _ = self.out.write_all(line.as_bytes());
        self.pending += 1;
        if self.pending >= 64 {
            let _ = self.out.flush();
            self.pending = 0;
        }
    }
}

impl Tracer {
    /// Writes out the lines recorded so far.
    pub(crate) fn flush(&mut self) {
        let _ = self.out.flush();
        self.pending = 0;
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = self.out.flush();
    }
}
