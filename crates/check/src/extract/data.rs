//! The data pass of an extraction: one physical-order run of the plan,
//! every piece written into its file, and the interruption report.

// The parent's types and helpers (this pass is one of its stages).
#[allow(clippy::wildcard_imports)]
use super::*;

impl Extractor<'_> {
    /// The data pass: every planned byte into its file.
    pub(super) fn write_data(
        &mut self,
        progress: Option<&(dyn Fn(u64) + Sync)>,
    ) -> Result<(), ExtractError> {
        let jobs = self.opts.jobs.max(1);
        let outputs: Vec<Mutex<Outputs>> = (0..jobs).map(|_| Mutex::default()).collect();
        let left: Vec<AtomicU64> = self
            .files
            .iter()
            .map(|f| AtomicU64::new(f.inode.size()))
            .collect();
        let written = AtomicU64::new(0);
        let files = &self.files;
        let sink = |d: Delivery<'_>| -> Result<(), ExtractError> {
            match d {
                Delivery::Bytes {
                    file,
                    offset,
                    data,
                    worker,
                } => {
                    let f = files.get(file.index()).ok_or_else(|| internal(file))?;
                    if let Some(out) = &f.file {
                        out.write_all_at(data, offset).map_err(io_err(&f.path))?;
                    } else {
                        let slot = outputs.get(worker).ok_or_else(|| internal(file))?;
                        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
                        let out = slot.open(file, &f.path)?;
                        out.write_all_at(data, offset).map_err(io_err(&f.path))?;
                    }
                    let n = data.len() as u64;
                    if let Some(l) = left.get(file.index()) {
                        l.fetch_sub(n.min(l.load(Ordering::Relaxed)), Ordering::Relaxed);
                    }
                    let total = written.fetch_add(n, Ordering::Relaxed) + n;
                    if let Some(p) = progress {
                        p(total);
                    }
                    Ok(())
                }
                Delivery::Failed { file, error, .. } => {
                    let path = file
                        .and_then(|f| files.get(f.index()))
                        .map_or_else(|| "<packed inode>".into(), |f| show(&f.rel));
                    Err(ExtractError::Image {
                        path,
                        source: error.clone_lossy(),
                    })
                }
            }
        };
        let run = RunOptions {
            jobs,
            memory: self.opts.memory,
            cancel: self.opts.cancel.clone(),
        };
        let stats = match self.plan.run(&run, &sink) {
            Ok(stats) => stats,
            Err(e) => {
                drop(outputs);
                if matches!(&e, ExtractError::Image { source, .. } if matches!(source, ferrofs::Error::Verity(_)))
                {
                    self.remove_unverified(&left);
                }
                return Err(e);
            }
        };
        drop(outputs);
        self.summary.bytes = written.load(Ordering::Relaxed);
        self.summary.pclusters = self.plan.pclusters() as u64;
        self.summary.pclusters_decoded = stats.pclusters_decoded;
        self.summary.bytes_decoded = stats.bytes_decoded;
        self.summary.pclusters_cached = stats.pclusters_cached;
        if stats.interrupted {
            let done = left
                .iter()
                .filter(|l| l.load(Ordering::Relaxed) == 0)
                .count();
            return Err(ExtractError::Interrupted {
                files_done: done as u64,
                files: self.files.len() as u64,
                bytes: self.summary.bytes,
            });
        }
        Ok(())
    }

    /// After a block failed its dm-verity check: removes every file not
    /// written whole, so none is left looking good with unverified bytes.
    fn remove_unverified(&self, left: &[AtomicU64]) {
        for (f, l) in self.files.iter().zip(left) {
            if l.load(Ordering::Relaxed) > 0 {
                let _ = fs::remove_file(&f.path);
            }
        }
    }
}

/// Output files a worker holds open, the most recent last: a run of one
/// file's clusters is written through one descriptor.
#[derive(Default)]
pub(super) struct Outputs {
    pub(super) open: Vec<(FileId, fs::File)>,
}

/// Output files one worker keeps open.
pub(super) const OPEN_OUTPUTS: usize = 16;

impl Outputs {
    fn open(&mut self, id: FileId, path: &Path) -> Result<&fs::File, ExtractError> {
        if let Some(i) = self.open.iter().position(|(f, _)| *f == id) {
            let e = self.open.remove(i);
            self.open.push(e);
        } else {
            // Created by the walk: opened again for writing, never
            // following a link put in its place.
            let f = fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
                .map_err(io_err(path))?;
            if self.open.len() >= OPEN_OUTPUTS {
                self.open.remove(0);
            }
            self.open.push((id, f));
        }
        match self.open.last() {
            Some((_, f)) => Ok(f),
            None => Err(internal(id)),
        }
    }
}
