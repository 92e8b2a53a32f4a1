//! Extended attributes: the long-prefix table, an inode's shared and inline
//! entries, listing and lookup (with the bloom filter the kernel uses).

use ferrofs_format::superblock::compat;
use ferrofs_format::xattr::{
    name_filter_bit, short_prefix, split_short_prefix, XattrBodyHeader, XattrEntryHeader,
    LONG_PREFIX_FLAG, XATTR_BODY_HEADER_SIZE, XATTR_ENTRY_HEADER_SIZE,
};

use crate::addr::MetaAddr;
use crate::error::{Error, Location, OrCorrupt, Result};
use crate::file::read_span;
use crate::image::Image;
use crate::inode::Inode;

/// One attribute: its full name and value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xattr {
    /// Full name, prefix included (`user.comment`).
    pub name: Vec<u8>,
    /// The value bytes.
    pub value: Vec<u8>,
    /// Whether it came from the shared area.
    pub shared: bool,
}

/// Reads the long-prefix table (empty without XATTR_PREFIXES).
pub(crate) fn read_prefix_table(image: &Image) -> Result<Vec<(u8, Vec<u8>)>> {
    let sb = image.superblock();
    // Linux reads the table whenever the count is non-zero, whether or
    // not XATTR_PREFIXES is set, and refuses to mount if it is unreadable:
    // so does this reader.
    if sb.xattr_prefix_count == 0 {
        return Ok(Vec::new());
    }
    // Where the table lives (the kernel's order): raw on the primary
    // device when PLAIN_XATTR_PFX says so, else in the metabox data, else in
    // the packed inode's data, else raw on the primary device.
    let plain = sb.has_compat(compat::PLAIN_XATTR_PFX);
    let in_metabox = !plain && image.inner.metabox.is_some();
    let in_packed = !plain && !in_metabox && image.inner.packed.is_some();
    let read = |buf: &mut [u8], off: u64| -> Result<()> {
        match (&image.inner.packed, in_packed) {
            (Some(p), true) => {
                // Whole extents: the packed inode's pclusters also hold
                // fragments, read later.
                let n = read_span(image, p, buf, off, true)?;
                if n != buf.len() {
                    return Err(Error::corrupt(
                        Location::at(off),
                        "prefix table past the packed inode",
                    ));
                }
                Ok(())
            }
            _ => image.read_raw(
                buf,
                MetaAddr::new(off, in_metabox)
                    .or_corrupt(Location::at(off), "xattr prefix address overflows")?,
            ),
        }
    };
    let table = Location::at(ferrofs_format::SUPERBLOCK_OFFSET + 0x5C);
    let mut pos = u64::from(sb.xattr_prefix_start)
        .checked_mul(4)
        .or_corrupt(table, "xattr prefix table address overflows")?;
    let mut out = Vec::with_capacity(usize::from(sb.xattr_prefix_count));
    for i in 0..sb.xattr_prefix_count {
        pos = ferrofs_format::round_up(pos, 4).or_corrupt(table, "xattr prefix table overflows")?;
        let body = pos
            .checked_add(2)
            .or_corrupt(table, "xattr prefix table overflows")?;
        let mut lb = [0u8; 2];
        read(&mut lb, pos)?;
        let len = usize::from(u16::from_le_bytes(lb));
        if !(1..=256).contains(&len) {
            return Err(Error::corrupt(
                Location::at(pos),
                format!(
                    "long xattr prefix {i} of the superblock's xattr_prefix_count {}: \
                     record length {len}, not 1..=256",
                    sb.xattr_prefix_count
                ),
            ));
        }
        let mut payload = vec![0u8; len];
        read(&mut payload, body)?;
        // len >= 1 was checked above.
        let (&base, infix) = payload
            .split_first()
            .or_corrupt(Location::at(pos), "empty xattr prefix")?;
        out.push((base, infix.to_vec()));
        pos = body
            .checked_add(len as u64)
            .or_corrupt(table, "xattr prefix table overflows")?;
    }
    Ok(out)
}

/// The full name of an entry, `None` for prefixes the kernel does not serve.
fn full_name(image: &Image, index: u8, suffix: &[u8]) -> Option<Vec<u8>> {
    let (base, infix): (u8, &[u8]) = if index & LONG_PREFIX_FLAG != 0 {
        let (b, i) = image
            .inner
            .prefixes
            .get(usize::from(index & !LONG_PREFIX_FLAG))?;
        (*b, i)
    } else {
        (index, &[])
    };
    if base == 5 {
        return None;
    }
    let p = short_prefix(base)?;
    Some([p, infix, suffix].concat())
}

/// The inline xattr body of an inode, or `None` if it has none.
fn body(image: &Image, inode: &Inode) -> Result<Option<(XattrBodyHeader, Vec<u8>)>> {
    let at = inode.loc();
    let isize = usize::try_from(inode.xattr_isize()).or_corrupt(at, "xattr body size")?;
    if isize == 0 {
        return Ok(None);
    }
    if isize == XATTR_BODY_HEADER_SIZE {
        return Err(Error::unsupported(
            at,
            "xattr body with only a header (icount 1)",
        ));
    }
    let mut b = vec![0u8; isize];
    let start = inode
        .pos
        .checked_add(inode.inode_size())
        .or_corrupt(at, "xattr body address overflows")?;
    image.read_raw(&mut b, start)?;
    let h = b
        .first_chunk::<XATTR_BODY_HEADER_SIZE>()
        .or_corrupt(at, "xattr body shorter than its header")?;
    let header = XattrBodyHeader::parse(h);
    if shared_end(&header) > isize {
        return Err(Error::corrupt(
            at,
            "shared xattr count exceeds the xattr body",
        ));
    }
    Ok(Some((header, b)))
}

/// Where the shared xattr ids of a body end and its inline entries start.
// why: shared_count is a u8, so 12 + 4 * 255 fits any usize.
#[allow(clippy::arithmetic_side_effects)]
fn shared_end(header: &XattrBodyHeader) -> usize {
    XATTR_BODY_HEADER_SIZE + 4 * usize::from(header.shared_count)
}

fn entry_header(b: &[u8]) -> Option<XattrEntryHeader> {
    Some(XattrEntryHeader::parse(b.first_chunk()?))
}

/// Reads shared entry `id`: (header, name suffix, value).
fn shared_entry(
    image: &Image,
    id: u32,
    at: Location,
) -> Result<(XattrEntryHeader, Vec<u8>, Vec<u8>)> {
    let sb = image.superblock();
    let in_metabox = sb.has_compat(compat::SHARED_EA_IN_METABOX) && image.inner.metabox.is_some();
    let pos = u64::from(sb.xattr_blkaddr)
        .checked_mul(image.block_size().bytes())
        .and_then(|b| b.checked_add(u64::from(id).checked_mul(4)?))
        .and_then(|p| MetaAddr::new(p, in_metabox))
        .ok_or_else(|| Error::corrupt(at, "shared xattr address overflows"))?;
    let mut hb = [0u8; XATTR_ENTRY_HEADER_SIZE];
    image.read_raw(&mut hb, pos)?;
    let h = XattrEntryHeader::parse(&hb);
    let len = usize::from(h.name_len)
        .checked_add(usize::from(h.value_size))
        .or_corrupt(at, "shared xattr size overflows")?;
    let mut nv = vec![0u8; len];
    let body = pos
        .checked_add(XATTR_ENTRY_HEADER_SIZE as u64)
        .or_corrupt(at, "shared xattr address overflows")?;
    image.read_raw(&mut nv, body)?;
    let value = nv.split_off(usize::from(h.name_len));
    Ok((h, nv, value))
}

/// Lists every attribute of `inode` the kernel would list, shared first.
pub(crate) fn list(image: &Image, inode: &Inode) -> Result<Vec<Xattr>> {
    let Some((header, b)) = body(image, inode)? else {
        return Ok(Vec::new());
    };
    let at = inode.loc();
    let mut out = Vec::new();
    // body() checked that the ids lie inside the body.
    let ids = b
        .get(XATTR_BODY_HEADER_SIZE..shared_end(&header))
        .unwrap_or_default();
    for id in ids.chunks_exact(4) {
        let &[b0, b1, b2, b3] = id else { continue };
        let id = u32::from_le_bytes([b0, b1, b2, b3]);
        let (h, suffix, value) = shared_entry(image, id, at)?;
        if let Some(name) = full_name(image, h.name_index, &suffix) {
            out.push(Xattr {
                name,
                value,
                shared: true,
            });
        }
    }
    for (index, suffix, value) in inline_entries(inode, &header, &b)? {
        if let Some(name) = full_name(image, index, &suffix) {
            out.push(Xattr {
                name,
                value,
                shared: false,
            });
        }
    }
    Ok(out)
}

/// One stored entry: (name index, name suffix, value).
type RawEntry = (u8, Vec<u8>, Vec<u8>);

/// The inline entries of an xattr body as stored, hidden ones included.
fn inline_entries(inode: &Inode, header: &XattrBodyHeader, b: &[u8]) -> Result<Vec<RawEntry>> {
    let at = inode.loc();
    let mut out = Vec::new();
    let past = || Error::corrupt(at, "xattr entry runs past the body");
    let mut rest = b.get(shared_end(header)..).unwrap_or_default();
    while !rest.is_empty() {
        let h = entry_header(rest)
            .ok_or_else(|| Error::corrupt(at, "xattr entry header past the body"))?;
        let (entry, next) = rest.split_at_checked(h.entry_size()).ok_or_else(past)?;
        let (name, value) = entry
            .get(XATTR_ENTRY_HEADER_SIZE..)
            .and_then(|e| e.split_at_checked(usize::from(h.name_len)))
            .ok_or_else(past)?;
        let value = value.get(..usize::from(h.value_size)).ok_or_else(past)?;
        out.push((h.name_index, name.to_vec(), value.to_vec()));
        rest = next;
    }
    Ok(out)
}

/// The inode fingerprint (`--xattr-inode-digest`) of an image with
/// COMPAT_ISHARE_XATTRS: the value of the inline entry whose long prefix is
/// the superblock's `ishare_xattr_prefix_id` and whose suffix is empty
/// (hidden from listings when the prefix has no short base). `None` when
/// the image or the inode has none.
pub(crate) fn fingerprint(image: &Image, inode: &Inode) -> Result<Option<Vec<u8>>> {
    let sb = image.superblock();
    if !sb.has_compat(compat::ISHARE_XATTRS) {
        return Ok(None);
    }
    let id = sb.ishare_xattr_prefix_id;
    if usize::from(id) >= image.inner.prefixes.len() {
        return Err(Error::corrupt(
            Location::at(ferrofs_format::SUPERBLOCK_OFFSET + 0x69),
            format!("fingerprint prefix {id} is not in the prefix table"),
        ));
    }
    let Some((header, b)) = body(image, inode)? else {
        return Ok(None);
    };
    Ok(inline_entries(inode, &header, &b)?
        .into_iter()
        .find(|(index, suffix, _)| *index == LONG_PREFIX_FLAG | id && suffix.is_empty())
        .map(|(_, _, value)| value))
}

/// Whether the inode's name filter rules `name` out without a scan.
pub(crate) fn filtered_out(image: &Image, name_filter: u32, name: &[u8]) -> bool {
    let sb = image.superblock();
    if !sb.has_compat(compat::XATTR_FILTER) || sb.xattr_filter_reserved != 0 {
        return false;
    }
    match split_short_prefix(name) {
        Some((idx, suffix)) => name_filter & (1 << name_filter_bit(idx, suffix)) != 0,
        None => false,
    }
}

/// Looks one attribute up by its full name.
pub(crate) fn get(image: &Image, inode: &Inode, name: &[u8]) -> Result<Option<Vec<u8>>> {
    let Some((header, _)) = body(image, inode)? else {
        return Ok(None);
    };
    if filtered_out(image, header.name_filter, name) {
        return Ok(None);
    }
    Ok(list(image, inode)?
        .into_iter()
        .find(|x| x.name == name)
        .map(|x| x.value))
}

/// The stored name filter of an inode's xattr body (None without a body).
pub(crate) fn name_filter(image: &Image, inode: &Inode) -> Result<Option<u32>> {
    Ok(body(image, inode)?.map(|(h, _)| h.name_filter))
}
