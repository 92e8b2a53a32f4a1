//! [`Build`]: a build's parts by name (source, mode, options, progress,
//! interruption, output) over [`crate::build_from`].

use std::path::Path;
use std::sync::atomic::AtomicBool;

use crate::build::{build_from, Mode};
use crate::error::Result;
use crate::options::BuildOptions;
use crate::source::Input;
use crate::summary::{Progress, Summary};

/// One build, its parts named: the source, then whatever differs from
/// the defaults (a fresh image, default options, no progress, no
/// interruption), then the output. `ferrofs mkfs` builds through it.
///
/// ```
/// use ferrofs_builder::{Build, BuildOptions, Input, Mode};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let work = std::env::temp_dir().join(format!("ferrofs-build-doc-{}", std::process::id()));
/// std::fs::create_dir_all(work.join("tree"))?;
/// std::fs::write(work.join("tree/hello"), "hello\n")?;
/// let opts = BuildOptions::default();
/// let files = std::cell::Cell::new(0);
/// let summary = Build::new(Input::Dir(&work.join("tree")))
///     .mode(Mode::Fresh)
///     .options(&opts)
///     .progress(&|p| files.set(p.files_done))
///     .write_to(&work.join("tree.erofs"))?;
/// assert_eq!(summary.inodes, 2);
/// # std::fs::remove_dir_all(&work)?;
/// # Ok(())
/// # }
/// ```
#[must_use = "a Build does nothing until `write_to`"]
pub struct Build<'a> {
    input: Input<'a>,
    mode: Mode,
    opts: std::borrow::Cow<'a, BuildOptions>,
    progress: Option<&'a dyn Fn(Progress)>,
    interrupted: Option<&'a AtomicBool>,
}

impl<'a> Build<'a> {
    /// A fresh image of `input` with default options.
    pub fn new(input: Input<'a>) -> Self {
        Build {
            input,
            mode: Mode::Fresh,
            opts: std::borrow::Cow::Owned(BuildOptions::default()),
            progress: None,
            interrupted: None,
        }
    }

    /// A new image ([`Mode::Fresh`], the default) or a layer appended
    /// to the existing one.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// The options (compression, block size, times, ...).
    pub fn options(mut self, opts: &'a BuildOptions) -> Self {
        self.opts = std::borrow::Cow::Borrowed(opts);
        self
    }

    /// Called as files are written and other steps advance.
    pub fn progress(mut self, f: &'a dyn Fn(Progress)) -> Self {
        self.progress = Some(f);
        self
    }

    /// Stops the build (leaving nothing behind) once `flag` is set.
    pub fn interrupt_on(mut self, flag: &'a AtomicBool) -> Self {
        self.interrupted = Some(flag);
        self
    }

    /// Builds the image at `output` (replaced atomically; scratch files
    /// go beside it).
    pub fn write_to(self, output: &Path) -> Result<Summary> {
        let none = |_: Progress| {};
        let progress: &dyn Fn(Progress) = match self.progress {
            Some(p) => p,
            None => &none,
        };
        build_from(
            self.input,
            self.mode,
            output,
            &self.opts,
            self.interrupted,
            progress,
        )
    }
}
