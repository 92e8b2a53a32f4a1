//! Android's canned fs_config (`mkfs.erofs --fs-config-file`): owners,
//! permission bits and file capabilities by path, as Android's libcutils
//! reads the file and mkfs.erofs applies it.
//!
//! One entry per line, `PATH UID GID MODE [capabilities=N] [...]`, tokens
//! separated by spaces; the path has no leading `/` (one is dropped), a
//! line starting with a space is the root; UID and GID are decimal, MODE
//! octal, N decimal, octal or `0x` hex (C's parsing); other tokens
//! (`selabel=...`) are ignored; a line of fewer than four tokens (an empty
//! line too) is an error. A path given twice takes its last line.
//!
//! Every inode is looked up by its path: the root as the empty path, any
//! other as `MOUNT_POINT/PATH` without its leading `/` (so with
//! `--mount-point=/system` a file `bin/sh` is `system/bin/sh`). An inode
//! without an entry is an error, as in mkfs.erofs. Its owner and
//! permission bits are replaced; non-zero capabilities become its
//! `security.capability` xattr (a version 2 `vfs_cap_data`, effective,
//! the capabilities permitted and none inheritable).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{BuildError, Result};
use crate::tree::Tree;
use crate::util::cnum::{atoi, strtoul};

/// One fs_config entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub uid: u32,
    pub gid: u32,
    /// The permission bits (`& 0o7777` of the MODE field).
    pub mode: u16,
    pub capabilities: u64,
}

/// A loaded canned fs_config file.
#[derive(Clone, Debug)]
pub struct CannedFsConfig {
    file: PathBuf,
    entries: HashMap<Vec<u8>, Entry>,
}

const CAPABILITY_XATTR: &[u8] = b"security.capability";
const VFS_CAP_REVISION_2: u32 = 0x0200_0000;
const VFS_CAP_FLAGS_EFFECTIVE: u32 = 1;

/// The `security.capability` value for `caps`.
pub fn capability_xattr(caps: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(20);
    v.extend_from_slice(&(VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE).to_le_bytes());
    v.extend_from_slice(&(caps as u32).to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&((caps >> 32) as u32).to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v
}

impl CannedFsConfig {
    /// Reads `file`.
    pub fn load(file: &Path) -> Result<Self> {
        let text = std::fs::read(file).map_err(BuildError::io(file))?;
        Self::parse(&text, file)
    }

    /// Parses the text of `file` (named in errors).
    pub(crate) fn parse(text: &[u8], file: &Path) -> Result<Self> {
        let mut entries = HashMap::new();
        let mut lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
        if text.ends_with(b"\n") || text.is_empty() {
            lines.pop();
        }
        for (n, line) in lines.into_iter().enumerate() {
            let rooted;
            let line = if line.starts_with(b" ") {
                rooted = [b"/", line].concat();
                &rooted[..]
            } else {
                line
            };
            let tokens: Vec<&[u8]> = line
                .split(|b| *b == b' ')
                .filter(|t| !t.is_empty())
                .collect();
            if tokens.len() < 4 {
                return Err(BuildError::input(
                    file,
                    format!(
                        "line {}: ill-formed fs_config line {:?}",
                        n + 1,
                        String::from_utf8_lossy(line)
                    ),
                ));
            }
            let path = tokens[0].strip_prefix(b"/").unwrap_or(tokens[0]);
            let capabilities = tokens[4..]
                .iter()
                .find_map(|t| t.strip_prefix(b"capabilities="))
                .map_or(0, |c| strtoul(c, 0));
            entries.insert(
                path.to_vec(),
                Entry {
                    uid: atoi(tokens[1]),
                    gid: atoi(tokens[2]),
                    mode: (strtoul(tokens[3], 8) & 0o7777) as u16,
                    capabilities,
                },
            );
        }
        Ok(Self {
            file: file.to_path_buf(),
            entries,
        })
    }

    /// The entry of a path as looked up (no leading `/`).
    pub(crate) fn get(&self, key: &[u8]) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// The lookup key of an inode at `rel` (relative to the source root)
    /// in an image for `mount_point`.
    pub(crate) fn key(mount_point: &[u8], rel: &[u8]) -> Vec<u8> {
        if rel.is_empty() {
            return Vec::new();
        }
        let m = mount_point.strip_suffix(b"/").unwrap_or(mount_point);
        let full = [m, b"/", rel].concat();
        full.strip_prefix(b"/").unwrap_or(&full).to_vec()
    }

    /// Gives every inode of `tree` the owner, permissions and capabilities
    /// its entry says.
    pub(crate) fn apply(&self, tree: &mut Tree, mount_point: &[u8]) -> Result<()> {
        for ino in &mut tree.inodes {
            let key = Self::key(mount_point, &ino.rel);
            let Some(e) = self.get(&key) else {
                return Err(BuildError::input(
                    &self.file,
                    format!(
                        "no entry for {:?} (the source's {})",
                        String::from_utf8_lossy(&key),
                        ino.source.display()
                    ),
                ));
            };
            ino.uid = e.uid;
            ino.gid = e.gid;
            ino.perm = e.mode;
            if e.capabilities != 0 {
                ino.xattrs.retain(|(n, _)| n != CAPABILITY_XATTR);
                ino.xattrs
                    .push((CAPABILITY_XATTR.to_vec(), capability_xattr(e.capabilities)));
                ino.xattrs.sort();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_as_libcutils_reads_them() {
        let f = Path::new("fs_config");
        let c = CannedFsConfig::parse(
            b" 0 0 0755\n\
              /system/bin 0 2000 0751 selabel=u:object_r:x:s0\n\
              system/bin/ping 0 2000 04750 capabilities=0x2000\n\
              system/etc/hosts 1000 1000 0600\n\
              system/etc/hosts  0  0  0644\n",
            f,
        )
        .unwrap();
        let e = |uid, gid, mode, capabilities| Entry {
            uid,
            gid,
            mode,
            capabilities,
        };
        assert_eq!(c.get(b""), Some(&e(0, 0, 0o755, 0)));
        assert_eq!(c.get(b"system/bin"), Some(&e(0, 2000, 0o751, 0)));
        assert_eq!(c.get(b"system/bin/ping"), Some(&e(0, 2000, 0o4750, 0x2000)));
        assert_eq!(c.get(b"system/etc/hosts"), Some(&e(0, 0, 0o644, 0)));
        assert!(CannedFsConfig::parse(b"a 0 0 0644\n\nb 0 0 0644\n", f).is_err());
        assert!(CannedFsConfig::parse(b"a 0 0\n", f).is_err());
        assert_eq!(CannedFsConfig::key(b"/system", b"bin/sh"), b"system/bin/sh");
        assert_eq!(CannedFsConfig::key(b"/system/", b"bin"), b"system/bin");
        assert_eq!(CannedFsConfig::key(b"/", b"bin"), b"bin");
        assert_eq!(CannedFsConfig::key(b"/system", b""), b"");
        assert_eq!(
            capability_xattr(0x2000),
            [1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }
}
