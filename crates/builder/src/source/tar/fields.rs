//! Header fields and PAX records: numbers (octal, base-256), checksums,
//! names, times, base64 and ACL text, and the PAX state of one member.

use super::{BLOCK, MAX_SPARSE};

/// Parses a numeric header field: octal text, or base-256 when the top bit
/// of the first byte is set (negative when the first byte is 0xff).
pub(super) fn number(field: &[u8]) -> Option<i64> {
    let first = *field.first()?;
    if first & 0x80 != 0 {
        let neg = first == 0xff;
        let first = i128::from(if neg { first } else { first & 0x7f });
        let mut v: i128 = if neg { first.checked_sub(256)? } else { first };
        for &b in field.get(1..)? {
            v = v.checked_mul(256)?.checked_add(i128::from(b))?;
        }
        return i64::try_from(v).ok();
    }
    let s: Vec<u8> = field
        .iter()
        .copied()
        .skip_while(|&c| c == b' ')
        .take_while(|&c| c != 0 && c != b' ')
        .collect();
    if s.is_empty() {
        return Some(0);
    }
    let mut v: i64 = 0;
    for c in s {
        if !(b'0'..=b'7').contains(&c) {
            return None;
        }
        v = v
            .checked_mul(8)?
            .checked_add(i64::from(c.checked_sub(b'0')?))?;
    }
    Some(v)
}

pub(super) fn cstr(field: &[u8]) -> &[u8] {
    field.split(|&c| c == 0).next().unwrap_or_default()
}

pub(super) fn checksum_ok(h: &[u8; BLOCK]) -> bool {
    let Some(stored) = h.get(148..156).and_then(number) else {
        return false;
    };
    // 512 bytes: the sums stay far from any overflow.
    let (mut unsigned, mut signed) = (0i64, 0i64);
    for (i, &b) in h.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { b };
        unsigned = unsigned.saturating_add(i64::from(b));
        signed = signed.saturating_add(i64::from(b as i8));
    }
    stored == unsigned || stored == signed
}

/// PAX records `LEN KEY=VALUE\n`.
pub(super) fn pax_records(data: &[u8]) -> std::result::Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        if rest.iter().all(|&c| c == 0) {
            break;
        }
        let sp = rest
            .iter()
            .position(|&c| c == b' ')
            .ok_or("PAX record without a length")?;
        let len: usize = std::str::from_utf8(rest.get(..sp).unwrap_or_default())
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("bad PAX record length")?;
        // `LEN ` counted in LEN, the record ends with a newline.
        let (record, next) = rest.split_at_checked(len).ok_or("bad PAX record length")?;
        let rec = match record.strip_suffix(b"\n") {
            Some(r) if r.len() > sp => r.get(sp.saturating_add(1)..).unwrap_or_default(),
            _ => return Err("bad PAX record length".into()),
        };
        let eq = rec
            .iter()
            .position(|&c| c == b'=')
            .ok_or("PAX record without '='")?;
        let (key, value) = rec.split_at(eq);
        let value = value.get(1..).unwrap_or_default();
        out.push((String::from_utf8_lossy(key).into_owned(), value.to_vec()));
        rest = next;
    }
    Ok(out)
}

pub(super) fn base64(s: &[u8]) -> Option<Vec<u8>> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let val = |c: u8| -> Option<u32> {
        let c = match c {
            b'-' => b'+',
            b'_' => b'/',
            c => c,
        };
        ALPHABET
            .iter()
            .position(|&a| a == c)
            .and_then(|v| u32::try_from(v).ok())
    };
    let mut out = Vec::new();
    // Bits waiting in `acc`: at most 6 + 7, so `acc` stays below 2^14.
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in s.iter().filter(|&&c| c != b'=' && c != b'\n') {
        acc = (acc << 6) | val(c)?;
        bits = bits.checked_add(6)?;
        if let Some(left) = bits.checked_sub(8) {
            bits = left;
            out.push(u8::try_from((acc >> bits) & 0xff).ok()?);
            acc &= (1u32 << bits).checked_sub(1)?;
        }
    }
    Some(out)
}

pub(super) fn url_decode(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut rest = s;
    while let Some((&c, tail)) = rest.split_first() {
        if c == b'%' {
            let hex = tail.get(..2).and_then(|h| std::str::from_utf8(h).ok());
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                rest = tail.get(2..).unwrap_or_default();
                continue;
            }
        }
        out.push(c);
        rest = tail;
    }
    out
}

pub(super) fn parse_u64(v: &[u8]) -> Option<u64> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

/// `SECONDS[.FRACTION]` (possibly negative) as seconds and nanoseconds.
pub(super) fn parse_time(v: &[u8]) -> Option<(i64, u32)> {
    let s = std::str::from_utf8(v).ok()?.trim();
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    let sec: i64 = sec.parse().ok()?;
    let sec = if neg { sec.checked_neg()? } else { sec };
    // Nanoseconds: the first nine digits, padded with zeros.
    let mut ns = 0u32;
    let digits = frac.bytes().take(9).chain(std::iter::repeat(b'0')).take(9);
    for c in digits {
        let d = c
            .is_ascii_digit()
            .then(|| u32::from(c.wrapping_sub(b'0')))?;
        ns = ns.checked_mul(10)?.checked_add(d)?;
    }
    if frac.bytes().take(9).any(|c| !c.is_ascii_digit()) {
        return None;
    }
    if neg && ns > 0 {
        Some((sec.checked_sub(1)?, 1_000_000_000u32.checked_sub(ns)?))
    } else {
        Some((sec, ns))
    }
}

/// A POSIX.1e ACL in the text form tar writes (`SCHILY.acl.access`:
/// `user::rw-,user:1234:rwx,group::r--,mask::rwx,other::r--`, where a
/// named entry may carry its numeric id as a fourth field) as the binary
/// value of a `system.posix_acl_*` xattr, and the mask's permissions.
pub(super) fn acl_xattr(text: &[u8]) -> std::result::Result<(Vec<u8>, Option<u16>), String> {
    let text = String::from_utf8_lossy(text);
    let mut entries: Vec<(u16, u32, u16)> = Vec::new();
    let mut mask = None;
    for e in text
        .split([',', '\n'])
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let f: Vec<&str> = e.split(':').collect();
        let (Some(&kind), Some(&name), Some(&perms)) = (f.first(), f.get(1), f.get(2)) else {
            return Err(format!("bad ACL entry {e:?}"));
        };
        let perm = perms.chars().try_fold(0u16, |p, c| match c {
            'r' => Ok(p | 4),
            'w' => Ok(p | 2),
            'x' => Ok(p | 1),
            '-' => Ok(p),
            _ => Err(format!("bad ACL permissions in {e:?}")),
        })?;
        let id = if name.is_empty() {
            None
        } else {
            let n = f.get(3).copied().unwrap_or(name);
            Some(
                n.parse::<u32>()
                    .map_err(|_| format!("ACL entry {e:?} has no numeric id"))?,
            )
        };
        let (tag, id) = match (kind, id) {
            ("user" | "u", None) => (0x01, u32::MAX),
            ("user" | "u", Some(i)) => (0x02, i),
            ("group" | "g", None) => (0x04, u32::MAX),
            ("group" | "g", Some(i)) => (0x08, i),
            ("mask" | "m", None) => {
                mask = Some(perm);
                (0x10, u32::MAX)
            }
            ("other" | "o", None) => (0x20, u32::MAX),
            _ => return Err(format!("bad ACL entry {e:?}")),
        };
        entries.push((tag, id, perm));
    }
    entries.sort();
    entries.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, id, perm) in entries {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    Ok((v, mask))
}

/// Path components, with `.` and empty ones dropped; `None` if `..` appears.
pub(super) fn normalize(p: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for c in p.split(|&c| c == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return None,
            c => out.push(c.to_vec()),
        }
    }
    Some(out)
}

/// The extended header values that apply to the next entry.
#[derive(Default, Clone)]
pub(super) struct Pax {
    pub(super) path: Option<Vec<u8>>,
    pub(super) linkpath: Option<Vec<u8>>,
    pub(super) size: Option<u64>,
    pub(super) uid: Option<u32>,
    pub(super) gid: Option<u32>,
    pub(super) mtime: Option<(i64, u32)>,
    pub(super) devmajor: Option<u32>,
    pub(super) devminor: Option<u32>,
    pub(super) xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    pub(super) sparse_major: Option<u64>,
    pub(super) sparse_name: Option<Vec<u8>>,
    pub(super) sparse_realsize: Option<u64>,
    pub(super) sparse_map: Vec<u64>,
    /// The access ACL's mask permissions (they are the group bits of the
    /// mode on Linux).
    pub(super) acl_mask: Option<u16>,
}

impl Pax {
    /// What applies to one entry: the global records, overridden by the
    /// entry's own (`local`).
    pub(super) fn for_entry(global: &Pax, l: Pax) -> Pax {
        let mut pax = global.clone();
        if l.path.is_some() {
            pax.path = l.path;
        }
        if l.linkpath.is_some() {
            pax.linkpath = l.linkpath;
        }
        pax.size = l.size.or(pax.size);
        pax.uid = l.uid.or(pax.uid);
        pax.gid = l.gid.or(pax.gid);
        pax.mtime = l.mtime.or(pax.mtime);
        pax.devmajor = l.devmajor.or(pax.devmajor);
        pax.devminor = l.devminor.or(pax.devminor);
        for (n, v) in l.xattrs {
            pax.xattrs.retain(|(m, _)| *m != n);
            pax.xattrs.push((n, v));
        }
        pax.sparse_major = l.sparse_major;
        pax.sparse_name = l.sparse_name;
        pax.sparse_realsize = l.sparse_realsize;
        pax.sparse_map = l.sparse_map;
        pax.acl_mask = l.acl_mask;
        pax
    }

    pub(super) fn apply(
        &mut self,
        recs: Vec<(String, Vec<u8>)>,
    ) -> std::result::Result<(), String> {
        let bad = |k: &str| format!("bad PAX value for {k}");
        for (k, v) in recs {
            let u32v = |v: &[u8]| parse_u64(v).and_then(|x| u32::try_from(x).ok());
            match k.as_str() {
                "path" => self.path = Some(v),
                "linkpath" => self.linkpath = Some(v),
                "size" => self.size = Some(parse_u64(&v).ok_or_else(|| bad(&k))?),
                "uid" => self.uid = Some(u32v(&v).ok_or_else(|| bad(&k))?),
                "gid" => self.gid = Some(u32v(&v).ok_or_else(|| bad(&k))?),
                "mtime" => self.mtime = Some(parse_time(&v).ok_or_else(|| bad(&k))?),
                "SCHILY.devmajor" => self.devmajor = Some(u32v(&v).ok_or_else(|| bad(&k))?),
                "SCHILY.devminor" => self.devminor = Some(u32v(&v).ok_or_else(|| bad(&k))?),
                "GNU.sparse.major" => {
                    self.sparse_major = Some(parse_u64(&v).ok_or_else(|| bad(&k))?)
                }
                "GNU.sparse.name" => self.sparse_name = Some(v),
                "SCHILY.acl.access" | "SCHILY.acl.default" => {
                    let (value, mask) = acl_xattr(&v)?;
                    let name: &[u8] = if k.ends_with("access") {
                        self.acl_mask = mask;
                        b"system.posix_acl_access"
                    } else {
                        b"system.posix_acl_default"
                    };
                    if !self.xattrs.iter().any(|(n, _)| n == name) {
                        self.xattrs.push((name.to_vec(), value));
                    }
                }
                "GNU.sparse.realsize" | "GNU.sparse.size" => {
                    self.sparse_realsize = Some(parse_u64(&v).ok_or_else(|| bad(&k))?)
                }
                "GNU.sparse.offset" | "GNU.sparse.numbytes" => {
                    if self.sparse_map.len() >= 2 * MAX_SPARSE {
                        return Err("sparse map too long".into());
                    }
                    self.sparse_map.push(parse_u64(&v).ok_or_else(|| bad(&k))?);
                    self.sparse_major.get_or_insert(0);
                }
                "GNU.sparse.map" => {
                    for n in v.split(|&c| c == b',') {
                        if self.sparse_map.len() >= 2 * MAX_SPARSE {
                            return Err("sparse map too long".into());
                        }
                        self.sparse_map.push(parse_u64(n).ok_or_else(|| bad(&k))?);
                    }
                    self.sparse_major.get_or_insert(0);
                }
                _ => {
                    if let Some(name) = k.strip_prefix("SCHILY.xattr.") {
                        self.xattrs.retain(|(n, _)| n != name.as_bytes());
                        self.xattrs.push((name.as_bytes().to_vec(), v));
                    } else if let Some(name) = k.strip_prefix("LIBARCHIVE.xattr.") {
                        let name = url_decode(name.as_bytes());
                        let val = base64(&v).ok_or_else(|| bad(&k))?;
                        self.xattrs.retain(|(n, _)| *n != name);
                        self.xattrs.push((name, val));
                    }
                }
            }
        }
        Ok(())
    }
}

/// What to do with an archive whose first bytes are a compressor's magic
/// number rather than a tar header; `None` when they are not one.
pub(super) fn compressed_hint(head: &[u8]) -> Option<&'static str> {
    const HINTS: &[(&[u8], &str)] = &[
        (&[0x1f, 0x8b], "it is gzip-compressed: add --ungzip"),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0], "it is xz-compressed: add --unxz"),
        (b"LZIP", "it is lzip-compressed: add --unxz"),
        (&[0x5d, 0, 0], "it looks lzma-compressed: add --unxz"),
        (
            &[0x28, 0xb5, 0x2f, 0xfd],
            "it is zstd-compressed: decompress it on the way in (zstd -dc ARCHIVE | ferrofs mkfs --tar IMAGE -)",
        ),
        (
            b"BZh",
            "it is bzip2-compressed: decompress it on the way in (bzip2 -dc ARCHIVE | ferrofs mkfs --tar IMAGE -)",
        ),
    ];
    HINTS
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|&(_, hint)| hint)
}
