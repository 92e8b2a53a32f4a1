//! The tree pass of an extraction: the walk makes each directory as it
//! meets it (parents come first) and hands every other entry, in batches
//! of the walk order, to creation threads that run beside it, so the
//! files are made while the walk is still reading the image's metadata.

use std::sync::mpsc;
use std::thread::{Scope, ScopedJoinHandle};

// The parent's types and helpers (this pass is one of its stages).
#[allow(clippy::wildcard_imports)]
use super::*;

/// Entries the walk hands to the creation threads at a time.
pub(super) const BATCH: usize = 128;

/// What the walk builds up: the directories it made, the entries queued
/// for creation, the hard links, and the first error.
pub(super) struct Walker<'a> {
    image: &'a Image,
    target: &'a Path,
    devices: bool,
    /// Directories made (the target itself not counted).
    pub(super) dirs_made: u64,
    first_path: HashMap<Nid, PathBuf>,
    /// Directories whose metadata is applied at the end, deepest last
    /// (the target, with the root's inode, first).
    pub(super) dirs: Vec<(PathBuf, Inode)>,
    /// Entries not yet handed to the creation threads.
    pub(super) pending: Vec<Entry>,
    /// Hard links (to the first path, at this path), made last.
    pub(super) links: Vec<(PathBuf, PathBuf)>,
    pub(super) error: Option<ExtractError>,
}

impl<'a> Walker<'a> {
    pub(super) fn new(image: &'a Image, target: &'a Path, devices: bool, root: Inode) -> Self {
        Self {
            image,
            target,
            devices,
            dirs_made: 0,
            first_path: HashMap::new(),
            dirs: vec![(target.to_path_buf(), root)],
            pending: Vec::new(),
            links: Vec::new(),
            error: None,
        }
    }

    /// One entry of the walk: directories are made now, hard links to a
    /// file seen before are noted, everything else is queued for the
    /// creation threads.
    pub(super) fn entry(
        &mut self,
        rel: &[u8],
        name: &[u8],
        inode: &Inode,
    ) -> Result<(), ExtractError> {
        if !valid_name(name) {
            return Err(ExtractError::BadName {
                path: String::from_utf8_lossy(rel).into_owned(),
                name: String::from_utf8_lossy(name).into_owned(),
            });
        }
        let path = self.target.join(OsStr::from_bytes(rel));
        if !inode.is_dir() && inode.nlink() > 1 {
            if let Some(first) = self.first_path.get(&inode.nid()) {
                self.links.push((first.clone(), path));
                return Ok(());
            }
            self.first_path.insert(inode.nid(), path.clone());
        }
        let img_err = |source| ExtractError::Image {
            path: String::from_utf8_lossy(rel).into_owned(),
            source,
        };
        let what = match inode.file_type() {
            FileType::Directory => {
                fs::create_dir(&path).map_err(io_err(&path))?;
                rustix::fs::chmod(&path, Mode::from_raw_mode(0o700)).map_err(rx_err(&path))?;
                self.dirs_made += 1;
                self.dirs.push((path, inode.clone()));
                return Ok(());
            }
            FileType::Regular => Pending::File,
            FileType::Symlink => {
                Pending::Symlink(self.image.raw().read_link(inode).map_err(img_err)?)
            }
            FileType::CharDevice | FileType::BlockDevice | FileType::Fifo | FileType::Socket => {
                let kind = match inode.file_type() {
                    FileType::CharDevice => RxType::CharacterDevice,
                    FileType::BlockDevice => RxType::BlockDevice,
                    FileType::Fifo => RxType::Fifo,
                    _ => RxType::Socket,
                };
                let is_dev = matches!(kind, RxType::CharacterDevice | RxType::BlockDevice);
                if is_dev && !self.devices {
                    return Ok(());
                }
                Pending::Special(kind)
            }
        };
        self.pending.push(Entry {
            rel: rel.to_vec(),
            path,
            inode: inode.clone(),
            what,
        });
        Ok(())
    }
}

/// A batch of entries and its place in the walk order.
type Batch = (usize, Vec<Entry>);

/// The creation threads and the queue the walk feeds them through.
pub(super) struct Feed<'scope> {
    tx: mpsc::Sender<Batch>,
    sent: usize,
    workers: Vec<ScopedJoinHandle<'scope, Vec<(usize, Created)>>>,
}

impl<'scope> Feed<'scope> {
    /// Starts `jobs` creation threads in `s`. Once a batch fails, the
    /// threads skip the batches after it in walk order (they cannot be
    /// reported), but still make every batch before it.
    pub(super) fn start<'env>(
        s: &'scope Scope<'scope, 'env>,
        ctx: &'scope Create<'_>,
        jobs: usize,
    ) -> Self {
        let (tx, rx) = mpsc::channel::<Batch>();
        let rx = Arc::new(Mutex::new(rx));
        let first_failed = Arc::new(AtomicUsize::new(usize::MAX));
        let workers = (0..jobs.max(1))
            .map(|_| {
                let rx = Arc::clone(&rx);
                let first_failed = Arc::clone(&first_failed);
                s.spawn(move || {
                    let mut made = Vec::new();
                    loop {
                        let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok((seq, batch)) = next else {
                            return made;
                        };
                        if seq > first_failed.load(Ordering::Relaxed) {
                            made.push((seq, Created::default()));
                            continue;
                        }
                        let c = ctx.run(&batch);
                        if c.error.is_some() {
                            first_failed.fetch_min(seq, Ordering::Relaxed);
                        }
                        made.push((seq, c));
                    }
                })
            })
            .collect();
        Self {
            tx,
            sent: 0,
            workers,
        }
    }

    /// Hands a batch (the next run of the walk order) to the threads.
    pub(super) fn send(&mut self, batch: Vec<Entry>) {
        if batch.is_empty() {
            return;
        }
        // The threads hold the receiver until this feed is finished, so
        // sending fails only if every one of them panicked: `finish` then
        // finds batches missing and says so.
        let _ = self.tx.send((self.sent, batch));
        self.sent += 1;
    }

    /// Waits for the threads and returns what they made, in walk order. A
    /// batch that was lost (a thread panicked) ends the list with an
    /// internal error.
    pub(super) fn finish(self, target: &Path) -> Vec<Created> {
        let Feed { tx, sent, workers } = self;
        drop(tx);
        let mut made: Vec<(usize, Created)> = Vec::with_capacity(sent);
        for h in workers {
            if let Ok(v) = h.join() {
                made.extend(v);
            }
        }
        made.sort_unstable_by_key(|(seq, _)| *seq);
        let complete = made.len() == sent && made.iter().enumerate().all(|(i, (seq, _))| i == *seq);
        let mut out: Vec<Created> = made.into_iter().map(|(_, c)| c).collect();
        if !complete {
            out.push(Created {
                error: Some(ExtractError::Io {
                    path: target.to_path_buf(),
                    source: io::Error::other("internal: a creating thread panicked"),
                }),
                ..Created::default()
            });
        }
        out
    }
}
