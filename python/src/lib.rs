//! The `ferrofs` Python package's native module: the reader's `Image`
//! as Python reads a directory tree, extract and fsck from the checker,
//! `build` over the builder (a directory, or entries through the
//! streaming writer). Reader errors become Python's own exceptions
//! (`FileNotFoundError`, `NotADirectoryError`, `IsADirectoryError`) or
//! `CorruptImage`, each naming the path.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::exceptions::{
    PyFileNotFoundError, PyIsADirectoryError, PyNotADirectoryError, PyOSError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

pyo3::create_exception!(
    _ferrofs,
    CorruptImage,
    pyo3::exceptions::PyException,
    "The image is damaged (or not an EROFS image) where it was read."
);

/// A reader error as the Python exception of its kind, naming `path`.
fn py_err(e: ferrofs::Error, path: &str) -> PyErr {
    use ferrofs::ErrorKind as K;
    let text = e.to_string();
    // The reader's message may already name the path.
    let msg = if text.contains(path) {
        text.clone()
    } else {
        format!("{path}: {text}")
    };
    // As `os` raises them: (errno, strerror, filename), so that
    // `err.filename` is the path.
    let strerror = text
        .strip_prefix(path)
        .and_then(|t| t.strip_prefix(": "))
        .unwrap_or(&text)
        .to_string();
    let os = |errno: i32| (errno, strerror.clone(), path.to_string());
    match e.kind() {
        K::NotFound => PyFileNotFoundError::new_err(os(2)),
        K::NotADirectory => PyNotADirectoryError::new_err(os(20)),
        K::IsADirectory => PyIsADirectoryError::new_err(os(21)),
        K::Corrupt => CorruptImage::new_err(msg),
        K::InvalidInput => PyValueError::new_err(msg),
        _ => PyOSError::new_err(msg),
    }
}

/// An image, opened once and read from any thread.
#[pyclass(module = "ferrofs", frozen)]
struct Image {
    image: Arc<ferrofs::Image>,
    path: String,
}

/// What `stat`/`lstat` return: the fields of `os.stat_result` an image
/// has.
#[pyclass(module = "ferrofs", frozen, get_all)]
struct StatResult {
    st_mode: u32,
    st_ino: u64,
    st_nlink: u64,
    st_uid: u32,
    st_gid: u32,
    st_size: u64,
    st_mtime: f64,
    st_mtime_ns: i128,
}

#[pymethods]
impl StatResult {
    fn __repr__(&self) -> String {
        format!(
            "ferrofs.StatResult(st_mode={:o}, st_ino={}, st_nlink={}, st_uid={}, st_gid={}, st_size={}, st_mtime_ns={})",
            self.st_mode, self.st_ino, self.st_nlink, self.st_uid, self.st_gid, self.st_size, self.st_mtime_ns
        )
    }
}

fn stat_of(m: &ferrofs::Metadata) -> StatResult {
    let ns = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
    StatResult {
        st_mode: m.mode(),
        st_ino: m.ino(),
        st_nlink: m.nlink(),
        st_uid: m.uid(),
        st_gid: m.gid(),
        st_size: m.len(),
        st_mtime: ns as f64 / 1e9,
        st_mtime_ns: ns,
    }
}

#[pymethods]
impl Image {
    /// Opens the image at `path`: a file, or an `http://`, `https://` or
    /// `s3://BUCKET/KEY` URL read lazily with range requests (S3 as the
    /// environment's `AWS_*` variables say; fetched chunks kept in a
    /// temporary cache of at most 1 GiB).
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        py.detach(|| Self::open_any(path))
    }

    fn __repr__(&self) -> String {
        format!("ferrofs.Image({:?})", self.path)
    }

    /// The names in directory `path` (without `.` and `..`).
    #[pyo3(signature = (path = "/"))]
    fn listdir(&self, py: Python<'_>, path: &str) -> PyResult<Vec<String>> {
        py.detach(|| {
            let rd = self.image.read_dir(path).map_err(|e| py_err(e, path))?;
            let mut out = Vec::new();
            for e in rd {
                let e = e.map_err(|e| py_err(e, path))?;
                out.push(e.file_name().to_string_lossy().into_owned());
            }
            Ok(out)
        })
    }

    /// The metadata of `path`, symlinks followed.
    fn stat(&self, path: &str) -> PyResult<StatResult> {
        let m = self.image.metadata(path).map_err(|e| py_err(e, path))?;
        Ok(stat_of(&m))
    }

    /// The metadata of `path` itself.
    fn lstat(&self, path: &str) -> PyResult<StatResult> {
        let m = self
            .image
            .symlink_metadata(path)
            .map_err(|e| py_err(e, path))?;
        Ok(stat_of(&m))
    }

    /// The target of the symlink `path`.
    fn readlink(&self, path: &str) -> PyResult<String> {
        let t = self.image.read_link(path).map_err(|e| py_err(e, path))?;
        Ok(t.to_string_lossy().into_owned())
    }

    /// A binary file object over the regular file `path`.
    fn open(&self, py: Python<'_>, path: &str) -> PyResult<ImageFile> {
        let f = py.detach(|| self.image.open_file(path).map_err(|e| py_err(e, path)))?;
        Ok(ImageFile {
            size: f.len(),
            file: Some(f),
            pos: 0,
            path: path.to_owned(),
        })
    }

    /// The value of xattr `name` of `path`, as `os.getxattr`.
    #[pyo3(signature = (path, name, follow_symlinks = true))]
    fn getxattr<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        name: &str,
        follow_symlinks: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let raw = self.image.raw();
        let inode = raw
            .lookup_path(path.as_bytes(), follow_symlinks)
            .map_err(|e| py_err(e, path))?;
        match raw
            .xattr(&inode, name.as_bytes())
            .map_err(|e| py_err(e, path))?
        {
            Some(v) => Ok(PyBytes::new(py, &v)),
            None => Err(PyOSError::new_err((61, format!("{path}: no xattr {name}")))),
        }
    }

    /// The xattr names of `path`, as `os.listxattr`.
    #[pyo3(signature = (path, follow_symlinks = true))]
    fn listxattr(&self, path: &str, follow_symlinks: bool) -> PyResult<Vec<String>> {
        let raw = self.image.raw();
        let inode = raw
            .lookup_path(path.as_bytes(), follow_symlinks)
            .map_err(|e| py_err(e, path))?;
        let x = raw.xattrs(&inode).map_err(|e| py_err(e, path))?;
        Ok(x.into_iter()
            .map(|x| String::from_utf8_lossy(&x.name).into_owned())
            .collect())
    }

    /// `os.walk` over the image: (dirpath, dirnames, filenames) from
    /// `top` down, each directory's names sorted.
    #[pyo3(signature = (top = "/"))]
    fn walk<'py>(&self, py: Python<'py>, top: &str) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        let mut stack = vec![top.trim_end_matches('/').to_owned()];
        if stack[0].is_empty() {
            stack[0] = "/".to_owned();
        }
        let mut steps = 0usize;
        while let Some(dir) = stack.pop() {
            steps += 1;
            if steps > 10_000_000 {
                return Err(CorruptImage::new_err(format!(
                    "{top}: too many directories"
                )));
            }
            let mut dirs = Vec::new();
            let mut files = Vec::new();
            let rd = self.image.read_dir(&dir).map_err(|e| py_err(e, &dir))?;
            for e in rd {
                let e = e.map_err(|e| py_err(e, &dir))?;
                let name = e.file_name().to_string_lossy().into_owned();
                let full = if dir == "/" {
                    format!("/{name}")
                } else {
                    format!("{dir}/{name}")
                };
                let m = self
                    .image
                    .symlink_metadata(&full)
                    .map_err(|e| py_err(e, &full))?;
                if m.is_dir() {
                    dirs.push(name);
                } else {
                    files.push(name);
                }
            }
            dirs.sort();
            files.sort();
            for d in dirs.iter().rev() {
                stack.push(if dir == "/" {
                    format!("/{d}")
                } else {
                    format!("{dir}/{d}")
                });
            }
            out.append((dir, dirs, files))?;
        }
        Ok(out)
    }

    /// Extracts the tree (or the directory `path` of it: its contents and
    /// its own metadata) into `dest` (empty or missing); owners restored
    /// when running as root. Returns the summary as a dict.
    #[pyo3(signature = (dest, path = "/"))]
    fn extract<'py>(
        &self,
        py: Python<'py>,
        dest: PathBuf,
        path: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let image = self.image.clone();
        let opts = ferrofs_check::extract::Options {
            path: path.trim_start_matches('/').as_bytes().to_vec(),
            ..Default::default()
        };
        let res = py.detach(|| ferrofs_check::extract::extract(&image, &dest, opts, None));
        let s = res.map_err(|e| PyOSError::new_err(format!("{}: {e}", dest.display())))?;
        json_to_py(py, &serde_json::to_value(&s).unwrap_or_default())
    }

    /// Checks every inode, directory and byte; raises `CorruptImage`
    /// naming the first problem, else returns the report as a dict.
    fn fsck<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let image = self.image.clone();
        let report = py.detach(|| ferrofs_check::fsck::check(&image, Default::default(), None));
        if let Some(p) = report.problems.first() {
            return Err(CorruptImage::new_err(format!(
                "{}: {}: {} ({} problems)",
                self.path,
                p.path,
                p.message,
                report.problems.len()
            )));
        }
        json_to_py(py, &serde_json::to_value(&report).unwrap_or_default())
    }
}

impl Image {
    /// Opens a file or URL (what `Image(path)` does, without the GIL).
    fn open_any(path: PathBuf) -> PyResult<Self> {
        let shown = path.display().to_string();
        let image = match path.to_str().filter(|s| ferrofs_remote::is_url(s)) {
            Some(url) => {
                let remote =
                    |e: ferrofs_remote::RemoteError| PyOSError::new_err(format!("{url}: {e}"));
                let cache = Arc::new(ferrofs_remote::Cache::temporary(1 << 30).map_err(remote)?);
                let src = ferrofs_remote::open(
                    url,
                    &ferrofs_remote::s3::S3Options::default(),
                    cache,
                    &ferrofs_remote::RemoteOptions::default(),
                    &mut |_| {},
                )
                .map_err(remote)?;
                ferrofs::Image::open(src).map_err(|e| py_err(e, &shown))?
            }
            None => ferrofs::Image::open_path(&path).map_err(|e| py_err(e, &shown))?,
        };
        Ok(Image {
            image: Arc::new(image),
            path: shown,
        })
    }
}

/// A regular file of an image, as `open(..., "rb")` gives one.
#[pyclass(module = "ferrofs")]
struct ImageFile {
    file: Option<ferrofs::File>,
    size: u64,
    pos: u64,
    path: String,
}

impl ImageFile {
    fn f(&self) -> PyResult<&ferrofs::File> {
        self.file
            .as_ref()
            .ok_or_else(|| PyValueError::new_err("I/O operation on closed file"))
    }

    fn read_into(&mut self, buf: &mut [u8]) -> PyResult<usize> {
        let mut pos = self.pos;
        let f = self.f()?;
        let mut got = 0;
        while got < buf.len() {
            let n = f
                .read_at(&mut buf[got..], pos)
                .map_err(|e| py_err(e, &self.path))?;
            if n == 0 {
                break;
            }
            got += n;
            pos += n as u64;
        }
        self.pos = pos;
        Ok(got)
    }
}

#[pymethods]
impl ImageFile {
    /// Up to `size` bytes (all that is left when negative or omitted).
    #[pyo3(signature = (size = -1))]
    fn read<'py>(&mut self, py: Python<'py>, size: i64) -> PyResult<Bound<'py, PyBytes>> {
        let left = self.size.saturating_sub(self.pos);
        let want = if size < 0 {
            left
        } else {
            (size as u64).min(left)
        };
        let want = usize::try_from(want).map_err(|_| PyValueError::new_err("too large a read"))?;
        let mut buf = vec![0u8; want];
        let n = py.detach(|| self.read_into(&mut buf))?;
        buf.truncate(n);
        Ok(PyBytes::new(py, &buf))
    }

    /// Reads into a writable buffer (a `bytearray`, a writable
    /// `memoryview`); returns the bytes read.
    fn readinto(&mut self, py: Python<'_>, buf: &Bound<'_, PyAny>) -> PyResult<usize> {
        let len = buf.len()?;
        let mut tmp = vec![0u8; len];
        let n = py.detach(|| self.read_into(&mut tmp))?;
        // Slice assignment: the buffer's own code copies the bytes.
        let slice = pyo3::types::PySlice::new(py, 0, n as isize, 1);
        buf.set_item(slice, PyBytes::new(py, &tmp[..n]))?;
        Ok(n)
    }

    /// Moves to `offset` from the start (0), the position (1) or the end
    /// (2); returns the new position.
    #[pyo3(signature = (offset, whence = 0))]
    fn seek(&mut self, offset: i64, whence: i32) -> PyResult<u64> {
        self.f()?;
        let base: i128 = match whence {
            0 => 0,
            1 => i128::from(self.pos),
            2 => i128::from(self.size),
            _ => return Err(PyValueError::new_err(format!("whence {whence}"))),
        };
        let to = base + i128::from(offset);
        if to < 0 {
            return Err(PyValueError::new_err(format!(
                "negative seek position {to}"
            )));
        }
        self.pos = u64::try_from(to).unwrap_or(u64::MAX);
        Ok(self.pos)
    }

    fn tell(&self) -> u64 {
        self.pos
    }

    fn readable(&self) -> bool {
        true
    }

    fn seekable(&self) -> bool {
        true
    }

    fn close(&mut self) {
        self.file = None;
    }

    #[getter]
    fn closed(&self) -> bool {
        self.file.is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &mut self,
        _t: &Bound<'_, PyAny>,
        _v: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) -> bool {
        self.close();
        false
    }
}

/// A JSON value as Python objects (dicts, lists, numbers, strings).
fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    let json = py.import("json")?;
    json.call_method1("loads", (v.to_string(),))
}

/// Builds an image at `out` from `source`, a directory path or an
/// iterable of entries `(path, data)` (`data` bytes for a file, `None`
/// for a directory; mode 0644/0755, root, mtime 0), with a `preset`
/// (`fast`, `balanced`, `dense`) or none (uncompressed). Returns the
/// summary as a dict.
/// Options as keywords: `compress` (mkfs's `-z`, e.g. `"lz4hc,12"`),
/// `pcluster` (`-C`, bytes), `block_size` (`-b`), `ztailpacking`,
/// `fragments` and `dedupe` (`-E`), `uuid` (16 bytes), `mtime` (every
/// file's, `-T`).
#[pyfunction]
#[pyo3(signature = (out, source, preset = None, **options))]
fn build<'py>(
    py: Python<'py>,
    out: PathBuf,
    source: &Bound<'py, PyAny>,
    preset: Option<&str>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut opts = match preset {
        Some(p) => ferrofs_builder::BuildOptions::preset(p)
            .map_err(|e| PyValueError::new_err(e.to_string()))?,
        None => ferrofs_builder::BuildOptions::default(),
    };
    if let Some(kw) = options {
        keyword_options(kw, &mut opts)?;
    }
    let summary = if let Ok(dir) = source.extract::<PathBuf>() {
        let d: &Path = &dir;
        py.detach(|| {
            ferrofs_builder::Build::new(ferrofs_builder::Input::Dir(d))
                .options(&opts)
                .write_to(&out)
        })
    } else {
        use ferrofs_builder::writer::{EntryMeta, ImageWriter};
        let mut w =
            ImageWriter::create(&out, opts).map_err(|e| PyOSError::new_err(e.to_string()))?;
        for item in source.try_iter()? {
            let item = item?;
            let (path, data): (String, Option<Vec<u8>>) = item.extract()?;
            let r = match data {
                None => w.append_dir(&path, &EntryMeta::new(0o755)),
                Some(d) => w.append_file(&path, &EntryMeta::new(0o644), d.len() as u64, &d[..]),
            };
            r.map_err(|e| PyValueError::new_err(e.to_string()))?;
        }
        py.detach(|| w.finish())
    };
    let s = summary.map_err(|e| PyOSError::new_err(format!("{}: {e}", out.display())))?;
    let d = PyDict::new(py);
    d.set_item("bytes", s.bytes)?;
    d.set_item("inodes", s.inodes)?;
    d.set_item("path", out.as_os_str().as_bytes())?;
    Ok(d.into_any())
}

/// Applies `build`'s keyword options to `opts`.
fn keyword_options(
    kw: &Bound<'_, PyDict>,
    opts: &mut ferrofs_builder::BuildOptions,
) -> PyResult<()> {
    let bad = |e: String| PyValueError::new_err(e);
    let mut compress: Option<String> = None;
    let mut pcluster: Option<u64> = None;
    let mut flags: Vec<(String, bool)> = Vec::new();
    for (k, v) in kw.iter() {
        let k: String = k.extract()?;
        match k.as_str() {
            "compress" => compress = Some(v.extract()?),
            "pcluster" => pcluster = Some(v.extract()?),
            "block_size" => {
                let b: u32 = v.extract()?;
                opts.blkszbits = match b {
                    512 => 9,
                    1024 => 10,
                    2048 => 11,
                    4096 => 12,
                    _ => return Err(bad(format!("block_size {b}: 512, 1024, 2048 or 4096"))),
                };
            }
            "ztailpacking" | "fragments" => flags.push((k.clone(), v.extract()?)),
            "dedupe" => opts.dedupe = v.extract()?,
            "uuid" => {
                let u: Vec<u8> = v.extract()?;
                opts.uuid = Some(u.try_into().map_err(|_| bad("uuid: 16 bytes".into()))?);
            }
            "mtime" => opts.time = ferrofs_builder::TimePolicy::Fixed(v.extract()?),
            other => return Err(bad(format!("unknown option {other:?}"))),
        }
    }
    if compress.is_some() || pcluster.is_some() {
        let alg = match (&compress, &opts.compress) {
            (Some(c), _) => {
                ferrofs_builder::Compressor::parse(c).map_err(|e| bad(e.to_string()))?
            }
            (None, Some(c)) => c
                .compressors
                .first()
                .cloned()
                .ok_or_else(|| bad("no compressor".into()))?,
            (None, None) => return Err(bad("pcluster without compress".into())),
        };
        let pcl = pcluster.unwrap_or(opts.compress.as_ref().map_or(65536, |c| c.pcluster_bytes));
        let old = opts.compress.take();
        let mut c = ferrofs_builder::CompressOptions::new(alg, pcl);
        if let Some(o) = old {
            (c.ztailpacking, c.fragments) = (o.ztailpacking, o.fragments);
        }
        opts.compress = Some(c);
    }
    for (flag, on) in flags {
        let Some(c) = opts.compress.as_mut() else {
            return Err(bad(format!("{flag} needs compress")));
        };
        match flag.as_str() {
            "ztailpacking" => c.ztailpacking = on,
            _ => c.fragments = on,
        }
    }
    Ok(())
}

#[pymodule]
fn _ferrofs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Image>()?;
    m.add_class::<ImageFile>()?;
    m.add_class::<StatResult>()?;
    m.add_function(wrap_pyfunction!(build, m)?)?;
    m.add("CorruptImage", m.py().get_type::<CorruptImage>())?;
    Ok(())
}
