//! Check 2 of the mkfs images (see the parent module): the kernel's view
//! against the source tree, relaxed exactly where an option demands, then
//! the demanded property on every entry (with a model of what an exclusion
//! leaves out).

use super::superblock::{le16, le32, Sb, LAYOUT_CHUNK_BASED, LAYOUT_FLAT_INLINE};
use super::*;

/// The entries an exclusion leaves out (only the topmost of each subtree) and, for what
/// stays, the link counts the image must have: names left of a hardlink group, 2 + subdirs
/// left of a directory.
pub(super) struct ExcludeModel {
    top: Vec<PathBuf>,
    present: BTreeSet<PathBuf>,
    nlink: HashMap<PathBuf, u64>,
    by_path: usize,
    by_regex: usize,
}

pub(super) fn exclude_model(src: &Path) -> Result<ExcludeModel, String> {
    let re = regex::bytes::Regex::new(EXCLUDE_REGEX).unwrap();
    let entries = walk(src)?;
    let mut top: Vec<PathBuf> = Vec::new();
    let mut present = BTreeSet::new();
    let (mut by_path, mut by_regex) = (0, 0);
    let mut kept: Vec<&(PathBuf, fs::Metadata)> = Vec::new();
    for e in &entries {
        let rel = &e.0;
        if top.iter().any(|t| rel.starts_with(t)) && !rel.as_os_str().is_empty() {
            continue;
        }
        let bytes = rel.as_os_str().as_bytes();
        if !bytes.is_empty() && bytes == EXCLUDE_PATH.as_bytes() {
            by_path += 1;
            top.push(rel.clone());
        } else if !bytes.is_empty() && re.is_match(bytes) {
            by_regex += 1;
            top.push(rel.clone());
        } else {
            present.insert(rel.clone());
            kept.push(e);
        }
    }
    let mut names: HashMap<(u64, u64), u64> = HashMap::new();
    let mut subdirs: HashMap<PathBuf, u64> = HashMap::new();
    for (rel, m) in &kept {
        if m.is_dir() {
            if let Some(parent) = rel.parent() {
                *subdirs.entry(parent.to_path_buf()).or_default() += 1;
            }
        } else {
            *names.entry((m.dev(), m.ino())).or_default() += 1;
        }
    }
    let nlink = kept
        .iter()
        .map(|(rel, m)| {
            let n = if m.is_dir() {
                2 + subdirs.get(rel).copied().unwrap_or(0)
            } else {
                names[&(m.dev(), m.ino())]
            };
            (rel.clone(), n)
        })
        .collect();
    Ok(ExcludeModel {
        top,
        present,
        nlink,
        by_path,
        by_regex,
    })
}

/// 2: the kernel's view of the image against the source, relaxed exactly where the option
/// demands; then the demanded property on every entry.
pub(super) fn check_kernel_vs_source(
    setup: &Setup,
    case: &Case,
    mnt: &Path,
    img: &[u8],
    sb: &Sb,
    f: &mut Vec<String>,
) {
    let src = setup.tree.as_path();
    let mut opts = CompareOptions::strict();
    match case.expect {
        Expect::FixedTime(_) | Expect::Clamp(_) | Expect::IgnoreMtime => opts.compare_mtime = false,
        Expect::AllRoot | Expect::Offsets(..) | Expect::Force(..) => opts.compare_owner = false,
        Expect::NoXattrs => opts.compare_xattrs = false,
        _ => {}
    }
    let model = if case.expect == Expect::Excludes {
        match exclude_model(src) {
            Ok(m) => {
                if m.by_path != 1 || m.by_regex < 3 {
                    f.push(format!(
                        "test bug: the exclusions matched {} entries by path and {} by regex",
                        m.by_path, m.by_regex
                    ));
                }
                opts.ignore_paths = m.top.clone();
                Some(m)
            }
            Err(e) => return f.push(e),
        }
    } else {
        None
    };
    for d in compare::compare_trees(src, mnt, &opts) {
        if let Some(m) = &model {
            if excluded_nlink_ok(m, &d) {
                continue;
            }
        }
        f.push(format!("kernel vs source: {d}"));
    }

    let mounted = match walk(mnt) {
        Ok(v) => v,
        Err(e) => return f.push(e),
    };
    let mut bad: Vec<String> = Vec::new();
    let src_meta = |rel: &Path| fs::symlink_metadata(src.join(rel)).ok();
    // Distinct inodes the kernel shows (st_ino is the nid) against the superblock's count.
    let inodes: BTreeSet<u64> = mounted.iter().map(|(_, m)| m.ino()).collect();
    if inodes.len() as u64 != sb.inos {
        f.push(format!(
            "the kernel shows {} distinct inodes, the superblock counts {}",
            inodes.len(),
            sb.inos
        ));
    }
    for (rel, m) in &mounted {
        let p = show_path(rel);
        match case.expect {
            Expect::FixedTime(t) if (m.mtime(), m.mtime_nsec()) != (t, 0) => {
                bad.push(format!(
                    "{p}: mtime {}.{:09}, expected {t}.000000000",
                    m.mtime(),
                    m.mtime_nsec()
                ));
            }
            Expect::IgnoreMtime
                if (m.mtime(), m.mtime_nsec())
                    != (sb.build_time as i64, i64::from(sb.build_time_nsec)) =>
            {
                bad.push(format!(
                    "{p}: mtime {}.{:09}, expected the build time {}.{:09}",
                    m.mtime(),
                    m.mtime_nsec(),
                    sb.build_time,
                    sb.build_time_nsec
                ));
            }
            Expect::Clamp(t) => match src_meta(rel) {
                // Newer mtimes (and T with nanoseconds) become T.0; older ones are kept.
                Some(s) => {
                    let src_t = (s.mtime(), s.mtime_nsec());
                    let want = if src_t <= (t, 0) { src_t } else { (t, 0) };
                    if (m.mtime(), m.mtime_nsec()) != want {
                        bad.push(format!(
                            "{p}: mtime {}.{:09}, expected {}.{:09} (source {}.{:09}, \
                             SOURCE_DATE_EPOCH {t})",
                            m.mtime(),
                            m.mtime_nsec(),
                            want.0,
                            want.1,
                            src_t.0,
                            src_t.1
                        ));
                    }
                }
                None => bad.push(format!("{p}: not in the source")),
            },
            Expect::AllRoot if (m.uid(), m.gid()) != (0, 0) => {
                bad.push(format!("{p}: owner {}:{}, expected 0:0", m.uid(), m.gid()));
            }
            Expect::Force(u, g) if (m.uid(), m.gid()) != (u, g) => {
                bad.push(format!(
                    "{p}: owner {}:{}, expected {u}:{g}",
                    m.uid(),
                    m.gid()
                ));
            }
            Expect::Offsets(du, dg) => match src_meta(rel) {
                // As mkfs.erofs 1.8.6 does: the id plus the offset, modulo 2^32.
                Some(s) => {
                    let want = (s.uid().wrapping_add(du), s.gid().wrapping_add(dg));
                    if (m.uid(), m.gid()) != want {
                        bad.push(format!(
                            "{p}: owner {}:{}, expected {}:{} (source {}:{} + {du}:{dg})",
                            m.uid(),
                            m.gid(),
                            want.0,
                            want.1,
                            s.uid(),
                            s.gid()
                        ));
                    }
                }
                None => bad.push(format!("{p}: not in the source")),
            },
            Expect::NoXattrs => match xattr::list(mnt.join(rel)) {
                Ok(names) => {
                    let names: Vec<String> =
                        names.map(|n| n.to_string_lossy().into_owned()).collect();
                    if !names.is_empty() {
                        bad.push(format!("{p}: xattrs {names:?}, expected none"));
                    }
                }
                Err(e) => bad.push(format!("{p}: listxattr failed: {e}")),
            },
            Expect::Excludes => {
                let m_ = model.as_ref().unwrap();
                if !m_.present.contains(rel) {
                    bad.push(format!("{p}: present, but it should have been excluded"));
                }
            }
            _ => {}
        }
        // The raw inode at the nid the kernel reports.
        let off = u64::from(sb.meta_blkaddr) * (1u64 << sb.blkszbits) + m.ino() * 32;
        if off + 32 > img.len() as u64 {
            bad.push(format!("{p}: nid {} lies outside the image", m.ino()));
            continue;
        }
        let off = off as usize;
        let format = le16(img, off);
        let (extended, layout) = (format & 1 == 1, (format >> 1) & 7);
        let i_u = le32(img, off + 16);
        match case.expect {
            Expect::Extended if !extended => bad.push(format!(
                "{p}: compact inode (nid {}), expected extended",
                m.ino()
            )),
            // -Enoinline_data is about regular files (as mkfs.erofs means
            // it): directories and symlinks stay inline.
            Expect::NoInline if m.is_file() && layout == LAYOUT_FLAT_INLINE => bad.push(format!(
                "{p}: inline data layout (nid {}) despite noinline_data",
                m.ino()
            )),
            // --chunksize is the smallest chunk: as mkfs.erofs does, runs
            // of holes and of contiguous chunks merge into larger ones
            // (zero_chunks.rs compares the tables with mkfs.erofs).
            Expect::Chunked(chunk) if m.is_file() && m.len() > 0 => {
                let want = chunk.trailing_zeros() - sb.blkszbits as u32;
                if layout != LAYOUT_CHUNK_BASED || i_u & 0x1f < want {
                    bad.push(format!(
                        "{p}: layout {layout}, chunk format {i_u:#x} (nid {}); expected \
                         chunk-based with chunkbits at least {} (+{want})",
                        m.ino(),
                        chunk.trailing_zeros()
                    ));
                }
            }
            _ => {}
        }
    }
    if let Some(m_) = &model {
        let seen: BTreeSet<&PathBuf> = mounted.iter().map(|(r, _)| r).collect();
        for rel in &m_.present {
            if !seen.contains(rel) {
                bad.push(format!(
                    "{}: missing, but it was not excluded",
                    show_path(rel)
                ));
            }
        }
    }
    let n = bad.len();
    f.extend(bad.into_iter().take(30));
    if n > 30 {
        f.push(format!("... and {} more entries like these", n - 30));
    }
}

/// An nlink difference that the exclusion explains: the image has the link count of what is
/// left.
pub(super) fn excluded_nlink_ok(m: &ExcludeModel, d: &Difference) -> bool {
    d.what == "nlink" && m.nlink.get(&d.path).map(|n| n.to_string()) == Some(d.actual.clone())
}
