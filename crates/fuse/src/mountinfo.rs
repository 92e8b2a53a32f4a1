//! What is mounted where, from `/proc/self/mountinfo`.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Undoes the octal escapes (`\040` for a space…) of a mountinfo field.
fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut k = 0;
    while k < b.len() {
        let oct = b
            .get(k + 1..k + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match oct {
            Some(d) if b[k] == b'\\' => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                k += 4;
            }
            _ => {
                out.push(b[k]);
                k += 1;
            }
        }
    }
    out
}

/// The device number (`major:minor`) of what is mounted exactly at
/// `mountpoint`, if anything is.
pub(crate) fn mounted_dev(mountpoint: &Path) -> Option<String> {
    let canon = mountpoint.canonicalize().ok()?;
    let target = canon.as_os_str().as_bytes();
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        let hit = f.get(4).map(|p| unescape(p)).as_deref() == Some(target);
        hit.then(|| f.get(2).map(|d| d.to_string())).flatten()
    })
}

/// Whether something is mounted exactly at `mountpoint`.
pub(crate) fn is_mounted(mountpoint: &Path) -> bool {
    mounted_dev(mountpoint).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape(r"/mnt/a\040b\134c"), b"/mnt/a b\\c");
        assert_eq!(unescape(r"/x\04"), b"/x\\04");
    }

    #[test]
    fn the_root_is_mounted() {
        assert!(is_mounted(Path::new("/")));
        assert!(!is_mounted(Path::new("/nonexistent/ferrofs")));
    }
}
