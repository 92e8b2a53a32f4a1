//! The data pass's scheduling: files are cut into windows, a dispatcher
//! thread prepares each window in order and puts every unit (a segment to
//! compress) on the pool as a job of its own, oldest first, and the writer
//! gathers units finished in any order until the window it needs next is
//! complete. The result does not depend on the order units finish in.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};

use crate::data::extent::Extent;
use crate::data::fragments::ReadAhead;
use crate::data::zpass::{prepare_window, Encoders, Settled, WindowUnits};
use crate::error::{BuildError, Result};
use crate::options::view::DataOptions;
use crate::tree::{InodeId, Tree};
use crate::util::out::stopped;

/// Files per window of the data pass, and input bytes per window.
const WINDOW_FILES: usize = 1024;
const WINDOW_BYTES: u64 = 16 << 20;
/// How far compression may run ahead of the writer: input bytes and
/// windows dispatched but not yet written. The writer takes windows in
/// order, and the pool takes units oldest first, so one window's last long
/// segment keeps one core while the others go on with later windows; this
/// bounds the compressed data held meanwhile.
const AHEAD_BYTES: u64 = 4 * WINDOW_BYTES;
const AHEAD_WINDOWS: usize = 64;

/// Cuts `files` into windows of at most [`WINDOW_FILES`] files and about
/// [`WINDOW_BYTES`] of data.
pub(crate) fn windows(tree: &Tree, files: &[InodeId]) -> Vec<Range<usize>> {
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
    windows
}

/// Input bytes of a window's files.
pub(crate) fn window_bytes(tree: &Tree, window: &[InodeId]) -> u64 {
    window.iter().map(|&id| tree.inodes[id].data_size()).sum()
}

/// A written window's extents per file (`None`: stored flat) and its
/// whole fragments read ahead, both indexed like its files.
pub(crate) type Taken = (Vec<Option<Vec<Extent>>>, Vec<Option<ReadAhead>>);

/// What the dispatcher tells the writer.
pub(crate) enum Msg<'a> {
    /// Window `n` is cut into units (or failed to be).
    Window(usize, Result<(Arc<WindowUnits<'a>>, Settled)>),
    /// Unit `i` of window `n` is compressed (or failed).
    Unit(usize, usize, Result<Option<Vec<Extent>>>),
}

/// The data pass's dispatcher: prepares windows in order and puts each
/// unit on the pool as a job of its own, oldest first (the last window's
/// longest first), at most
/// [`AHEAD_BYTES`] / [`AHEAD_WINDOWS`] ahead of the writer.
pub(crate) struct Dispatch<'a, 'b> {
    pub(crate) tree: &'a Tree,
    pub(crate) zc: &'b [Option<(u64, usize)>],
    pub(crate) opts: &'a DataOptions<'a>,
    pub(crate) frag_mode: bool,
    pub(crate) base: Option<&'b crate::data::base::Base>,
    pub(crate) copies: &'b [Option<InodeId>],
    pub(crate) interrupted: Option<&'b AtomicBool>,
    /// The image being written (named by an interruption).
    pub(crate) output: &'b std::path::Path,
}

impl<'a> Dispatch<'a, '_> {
    pub(crate) fn run(
        &self,
        pool: &rayon::ThreadPool,
        windows: &[Range<usize>],
        files: &[InodeId],
        msgs: &Sender<Msg<'a>>,
        acks: &Receiver<u64>,
    ) {
        // Each pool thread's encoders, kept across windows.
        let encoders: Vec<Mutex<Encoders>> = (0..pool.current_num_threads())
            .map(|_| Mutex::new(HashMap::new()))
            .collect();
        let encoders = &encoders;
        let (mut ahead_bytes, mut ahead) = (0u64, 0usize);
        pool.in_place_scope_fifo(|scope| {
            for (n, r) in windows.iter().enumerate() {
                while ahead > 0 && (ahead_bytes >= AHEAD_BYTES || ahead >= AHEAD_WINDOWS) {
                    match acks.recv() {
                        Ok(b) => {
                            ahead_bytes -= b;
                            ahead -= 1;
                        }
                        // The writer stopped (an error): so do we.
                        Err(_) => return,
                    }
                }
                if stopped(self.interrupted) {
                    return;
                }
                let window = &files[r.clone()];
                ahead_bytes += window_bytes(self.tree, window);
                ahead += 1;
                let prepared = pool.install(|| {
                    prepare_window(
                        self.tree,
                        self.zc,
                        self.opts,
                        window,
                        self.frag_mode,
                        true,
                        self.base,
                        self.copies,
                        None,
                    )
                });
                let units = match prepared {
                    Ok((units, settled)) => {
                        let units = Arc::new(units);
                        if msgs
                            .send(Msg::Window(n, Ok((units.clone(), settled))))
                            .is_err()
                        {
                            return;
                        }
                        units
                    }
                    Err(e) => {
                        let _ = msgs.send(Msg::Window(n, Err(e)));
                        return;
                    }
                };
                let (interrupted, output) = (self.interrupted, self.output);
                for i in units.start_order(n + 1 == windows.len()) {
                    let (units, msgs) = (units.clone(), msgs.clone());
                    scope.spawn_fifo(move |_| {
                        // After an interrupt a queued unit is not
                        // compressed: it reports the interruption, which
                        // stops the writer if it waits for this unit, so
                        // the build ends once the running units finish.
                        if stopped(interrupted) {
                            let path = output.to_path_buf();
                            let _ =
                                msgs.send(Msg::Unit(n, i, Err(BuildError::Interrupted { path })));
                            return;
                        }
                        let t = rayon::current_thread_index().unwrap_or(0);
                        let mut encs = encoders[t % encoders.len()]
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        let r = units.compress(i, &mut encs);
                        drop(units);
                        let _ = msgs.send(Msg::Unit(n, i, r));
                    });
                }
            }
        });
    }
}

/// The writer's side: units finished in any order, gathered per window
/// until the window it needs next is complete.
#[derive(Default)]
pub(crate) struct Inbox<'a> {
    windows: HashMap<usize, Gathering<'a>>,
}

/// One window's units so far.
struct Gathering<'a> {
    units: Arc<WindowUnits<'a>>,
    settled: Settled,
    results: Vec<Option<Option<Vec<Extent>>>>,
    left: usize,
}

impl<'a> Inbox<'a> {
    /// Window `n`'s extents per file and the whole fragments read ahead
    /// (indexed like `ids`; empty when none were), waiting for its units.
    pub(crate) fn take(
        &mut self,
        n: usize,
        rx: &Receiver<Msg<'a>>,
        ids: &[InodeId],
        zc: &[Option<(u64, usize)>],
        base: Option<&crate::data::base::Base>,
        output: &std::path::Path,
    ) -> Result<Taken> {
        loop {
            if self.windows.get(&n).is_some_and(|g| g.left == 0) {
                if let Some(mut g) = self.windows.remove(&n) {
                    let read = std::mem::take(&mut g.settled.read);
                    let results = g.results.into_iter().map(Option::flatten).collect();
                    let extents = g.units.finish(g.settled, results, ids, zc, base);
                    return Ok((extents, read));
                }
            }
            let msg = rx.recv().map_err(|_| BuildError::Interrupted {
                path: output.to_path_buf(),
            })?;
            match msg {
                Msg::Window(m, prepared) => {
                    let (units, settled) = prepared?;
                    let len = units.len();
                    self.windows.insert(
                        m,
                        Gathering {
                            units,
                            settled,
                            results: (0..len).map(|_| None).collect(),
                            left: len,
                        },
                    );
                }
                Msg::Unit(m, i, r) => {
                    let r = r?;
                    if let Some(g) = self.windows.get_mut(&m) {
                        if let Some(slot) = g.results.get_mut(i) {
                            *slot = Some(r);
                            g.left -= 1;
                        }
                    }
                }
            }
        }
    }
}
