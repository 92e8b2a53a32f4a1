//! One member's header: the 512-byte ustar/GNU block read and checked,
//! with the extensions that came before it applied (PAX global and local
//! records, GNU long names and link targets). Extension members themselves
//! are taken in here and never reach the tree.

use super::fields::{checksum_ok, compressed_hint, cstr, normalize, number, pax_records, Pax};
use super::input::Src;
use super::BLOCK;
use crate::error::Result;

/// Extensions waiting for the entry they apply to.
#[derive(Default)]
pub(super) struct Pending {
    /// PAX global records (`g`): every later entry.
    global: Pax,
    /// PAX local records (`x`): the next entry.
    local: Pax,
    /// GNU long name (`L`) and long link target (`K`) of the next entry.
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
}

/// An entry's header with its extensions applied.
pub(super) struct Header {
    /// The raw block (a GNU sparse entry's map is in it).
    pub(super) block: [u8; BLOCK],
    pub(super) typeflag: u8,
    /// The GNU magic (`ustar  \0`), not POSIX ustar.
    pub(super) gnu: bool,
    /// The member's path as the archive gives it, for messages.
    pub(super) member: String,
    /// The path's components, normalized (no `.`, `..` or empty ones).
    pub(super) comps: Vec<Vec<u8>>,
    /// The link target (symlinks and hard links).
    pub(super) link: Vec<u8>,
    /// Bytes of data the archive holds for the member.
    pub(super) size: u64,
    pub(super) mode: i64,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) mtime: (i64, u32),
    /// The extended values not resolved above: xattrs, the sparse map,
    /// device numbers.
    pub(super) pax: Pax,
}

/// The numeric field at `r` of block `h`.
fn field(
    h: &[u8; BLOCK],
    r: std::ops::Range<usize>,
    what: &str,
) -> std::result::Result<i64, String> {
    h.get(r)
        .and_then(number)
        .ok_or_else(|| format!("bad {what} field"))
}

/// Reads headers until an entry proper, taking in the extension members
/// on the way; `None` at the end of the archive (two zero blocks, or the
/// end of the stream).
pub(super) fn next(src: &mut Src, pending: &mut Pending) -> Result<Option<Header>> {
    let mut h = [0u8; BLOCK];
    let mut zero_blocks = 0u8;
    loop {
        if !src.block(&mut h)? {
            return Ok(None);
        }
        if h.iter().all(|&c| c == 0) {
            zero_blocks = zero_blocks.saturating_add(1);
            if zero_blocks == 2 {
                return Ok(None);
            }
            continue;
        }
        zero_blocks = 0;
        let at = src.pos.saturating_sub(BLOCK as u64);
        let shown = String::from_utf8_lossy(cstr(&h[0..100])).into_owned();
        let member = if shown.is_empty() {
            format!("header at byte {at}")
        } else {
            shown
        };
        if !checksum_ok(&h) {
            // Not a header: its name field is noise, so it is not shown.
            let hint = if at == 0 { compressed_hint(&h) } else { None };
            return Err(src.err(
                "",
                match hint {
                    Some(hint) => format!("not a tar archive: {hint}"),
                    None => format!("header checksum mismatch at byte {at}"),
                },
            ));
        }
        let size = field(&h, 124..136, "size").map_err(|e| src.err(&member, e))?;
        let size = u64::try_from(size).map_err(|_| src.err(&member, "negative size"))?;
        if !pending.absorb(src, h[156], size, &member)? {
            return entry(src, pending, h, size).map(Some);
        }
    }
}

impl Pending {
    /// Takes in an extension member (PAX `x`/`g`, GNU `L`/`K`, a volume
    /// label `V`) of `size` bytes; `false` for any other type, whose data
    /// is left unread.
    fn absorb(&mut self, src: &mut Src, typeflag: u8, size: u64, member: &str) -> Result<bool> {
        match typeflag {
            b'x' | b'g' => {
                let data = src.small(size, member)?;
                let recs = pax_records(&data).map_err(|e| src.err(member, e))?;
                let target = if typeflag == b'g' {
                    &mut self.global
                } else {
                    &mut self.local
                };
                target.apply(recs).map_err(|e| src.err(member, e))?;
            }
            b'L' | b'K' => {
                let v = cstr(&src.small(size, member)?).to_vec();
                if typeflag == b'L' {
                    self.long_name = Some(v);
                } else {
                    self.long_link = Some(v);
                }
            }
            b'V' => src.skip_data(size, member)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The entry proper of header block `h` (its size field `hdr_size`):
/// extended values override the header's.
fn entry(src: &Src, pending: &mut Pending, h: [u8; BLOCK], hdr_size: u64) -> Result<Header> {
    let mut pax = Pax::for_entry(&pending.global, std::mem::take(&mut pending.local));
    let raw_name = cstr(&h[0..100]);
    let mut path = raw_name.to_vec();
    if &h[257..263] == b"ustar\0" {
        let prefix = cstr(&h[345..500]);
        if !prefix.is_empty() {
            path = [prefix, b"/", raw_name].concat();
        }
    }
    let names = [
        pending.long_name.take(),
        pax.path.take(),
        pax.sparse_name.take(),
    ];
    if let Some(p) = names.into_iter().flatten().last() {
        path = p;
    }
    let mut link = cstr(&h[157..257]).to_vec();
    if let Some(l) = [pending.long_link.take(), pax.linkpath.take()]
        .into_iter()
        .flatten()
        .last()
    {
        link = l;
    }
    let member = String::from_utf8_lossy(&path).into_owned();
    // Extended records carry lengths, so they can hold NULs; no file
    // system name can (a trailing one is tolerated as a terminator).
    for (what, v) in [("path", &path), ("link target", &link)] {
        let end = v
            .iter()
            .rposition(|&b| b != 0)
            .map_or(0, |i| i.saturating_add(1));
        if v.get(..end).unwrap_or_default().contains(&0) {
            return Err(src.err(&member, format!("its {what} contains a NUL byte")));
        }
    }
    while path.last() == Some(&0) {
        path.pop();
    }
    while link.last() == Some(&0) {
        link.pop();
    }
    let bad = |e: String| src.err(&member, e);
    let mut mode = field(&h, 100..108, "mode").map_err(bad)?;
    if let Some(m) = pax.acl_mask {
        mode = (mode & !0o070) | (i64::from(m) << 3);
    }
    let id = |r, what: &str, pax: Option<u32>| -> Result<u32> {
        match pax {
            Some(v) => Ok(v),
            None => u32::try_from(field(&h, r, what).map_err(bad)?)
                .map_err(|_| src.err(&member, format!("{what} out of range"))),
        }
    };
    let uid = id(108..116, "uid", pax.uid)?;
    let gid = id(116..124, "gid", pax.gid)?;
    let mtime = match pax.mtime {
        Some(t) => t,
        None => (field(&h, 136..148, "mtime").map_err(bad)?, 0),
    };
    let Some(comps) = normalize(&path) else {
        return Err(src.err(&member, "path leaves the archive's root (`..`)"));
    };
    if comps.iter().any(|c| c.len() > ferrofs_format::NAME_MAX) {
        return Err(src.err(&member, "name longer than 255 bytes"));
    }
    Ok(Header {
        block: h,
        typeflag: h[156],
        gnu: &h[257..265] == b"ustar  \0",
        member,
        comps,
        link,
        size: pax.size.unwrap_or(hdr_size),
        mode,
        uid,
        gid,
        mtime,
        pax,
    })
}

impl Header {
    /// A device's (major, minor), from the PAX records or the header;
    /// an error when they do not fit the on-disk encoding.
    pub(super) fn device(&self) -> std::result::Result<(u32, u32), String> {
        let number = |r, what, pax: Option<u32>| -> std::result::Result<u32, String> {
            match pax {
                Some(m) => Ok(m),
                None => Ok(u32::try_from(field(&self.block, r, what)?).unwrap_or(u32::MAX)),
            }
        };
        let major = number(329..337, "devmajor", self.pax.devmajor)?;
        let minor = number(337..345, "devminor", self.pax.devminor)?;
        if major >= 1 << 12 || minor >= 1 << 20 {
            return Err(format!("device number {major}:{minor} does not fit"));
        }
        Ok((major, minor))
    }
}
