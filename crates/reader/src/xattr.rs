//! Extended attributes: the long-prefix table, an inode's shared and inline
//! entries, listing and lookup (with the bloom filter the kernel uses).

use ferrofs_format::superblock::{compat, incompat};
use ferrofs_format::xattr::{
    name_filter_bit, short_prefix, split_short_prefix, XattrBodyHeader, XattrEntryHeader,
    LONG_PREFIX_FLAG, XATTR_BODY_HEADER_SIZE, XATTR_ENTRY_HEADER_SIZE,
};

use crate::error::{Error, Location, Result};
use crate::file::read_data;
use crate::image::{Image, METABOX_SPACE};
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
    if !sb.has_incompat(incompat::XATTR_PREFIXES) || sb.xattr_prefix_count == 0 {
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
                let n = read_data(image, p, buf, off)?;
                if n != buf.len() {
                    return Err(Error::corrupt(
                        Location::at(off),
                        "prefix table past the packed inode",
                    ));
                }
                Ok(())
            }
            _ if in_metabox => image.read_raw(buf, off | METABOX_SPACE),
            _ => image.read_raw(buf, off),
        }
    };
    let mut pos = u64::from(sb.xattr_prefix_start) * 4;
    let mut out = Vec::with_capacity(usize::from(sb.xattr_prefix_count));
    for _ in 0..sb.xattr_prefix_count {
        pos = (pos + 3) & !3;
        let mut lb = [0u8; 2];
        read(&mut lb, pos)?;
        let len = usize::from(u16::from_le_bytes(lb));
        if !(1..=256).contains(&len) {
            return Err(Error::corrupt(
                Location::at(pos),
                format!("xattr prefix of length {len}"),
            ));
        }
        let mut payload = vec![0u8; len];
        read(&mut payload, pos + 2)?;
        let base = payload[0];
        out.push((base, payload[1..].to_vec()));
        pos += 2 + len as u64;
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
    let mut name = Vec::with_capacity(p.len() + infix.len() + suffix.len());
    name.extend_from_slice(p);
    name.extend_from_slice(infix);
    name.extend_from_slice(suffix);
    Some(name)
}

/// The inline xattr body of an inode, or `None` if it has none.
fn body(image: &Image, inode: &Inode) -> Result<Option<(XattrBodyHeader, Vec<u8>)>> {
    let isize = inode.xattr_isize() as usize;
    if isize == 0 {
        return Ok(None);
    }
    let at = inode.loc();
    if isize == XATTR_BODY_HEADER_SIZE {
        return Err(Error::unsupported(
            at,
            "xattr body with only a header (icount 1)",
        ));
    }
    let mut b = vec![0u8; isize];
    image.read_raw(&mut b, inode.pos + inode.inode_size())?;
    let mut h = [0u8; XATTR_BODY_HEADER_SIZE];
    h.copy_from_slice(&b[..XATTR_BODY_HEADER_SIZE]);
    let header = XattrBodyHeader::parse(&h);
    if XATTR_BODY_HEADER_SIZE + 4 * usize::from(header.shared_count) > isize {
        return Err(Error::corrupt(
            at,
            "shared xattr count exceeds the xattr body",
        ));
    }
    Ok(Some((header, b)))
}

fn entry_header(b: &[u8]) -> Option<XattrEntryHeader> {
    let s = b.get(..XATTR_ENTRY_HEADER_SIZE)?;
    let mut a = [0u8; XATTR_ENTRY_HEADER_SIZE];
    a.copy_from_slice(s);
    Some(XattrEntryHeader::parse(&a))
}

/// Reads shared entry `id`: (header, name suffix, value).
fn shared_entry(
    image: &Image,
    id: u32,
    at: Location,
) -> Result<(XattrEntryHeader, Vec<u8>, Vec<u8>)> {
    let sb = image.superblock();
    let mut pos = u64::from(sb.xattr_blkaddr)
        .checked_mul(image.block_size().bytes())
        .and_then(|b| b.checked_add(u64::from(id) * 4))
        .ok_or_else(|| Error::corrupt(at, "shared xattr address overflows"))?;
    if sb.has_compat(compat::SHARED_EA_IN_METABOX) && image.inner.metabox.is_some() {
        pos |= METABOX_SPACE;
    }
    let mut hb = [0u8; XATTR_ENTRY_HEADER_SIZE];
    image.read_raw(&mut hb, pos)?;
    let h = XattrEntryHeader::parse(&hb);
    let mut nv = vec![0u8; usize::from(h.name_len) + usize::from(h.value_size)];
    image.read_raw(&mut nv, pos + XATTR_ENTRY_HEADER_SIZE as u64)?;
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
    for k in 0..usize::from(header.shared_count) {
        let off = XATTR_BODY_HEADER_SIZE + 4 * k;
        let id = u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]);
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
    let mut off = XATTR_BODY_HEADER_SIZE + 4 * usize::from(header.shared_count);
    while off < b.len() {
        let h = entry_header(&b[off..])
            .ok_or_else(|| Error::corrupt(at, "xattr entry header past the body"))?;
        let size = h.entry_size();
        let start = off + XATTR_ENTRY_HEADER_SIZE;
        let name_end = start + usize::from(h.name_len);
        let value_end = name_end + usize::from(h.value_size);
        if off + size > b.len() {
            return Err(Error::corrupt(at, "xattr entry runs past the body"));
        }
        out.push((
            h.name_index,
            b[start..name_end].to_vec(),
            b[name_end..value_end].to_vec(),
        ));
        off += size;
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
