//! Xattr planning: name encoding (short and long prefixes), the shared
//! area for name/value pairs many inodes carry, per-inode inline bodies and
//! their exact name bloom filters, and the long-prefix table.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use ferrofs_format::xattr::{
    encode_body_header, encode_entry, name_filter_bit, short_prefix, split_short_prefix,
    LONG_PREFIX_FLAG,
};

use crate::error::{BuildError, Result};
use crate::options::view::PlanOptions;
use crate::tree::Tree;

/// How a full xattr name is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
struct EncodedName {
    index: u8,
    suffix: Vec<u8>,
    /// Short index and name-after-short-prefix, for the bloom filter.
    filter_bit: u32,
}

/// Xattr layout of the whole image.
#[derive(Clone, Debug, Default)]
pub struct XattrPlan {
    /// Long prefixes as (short base index, infix).
    pub prefixes: Vec<(u8, Vec<u8>)>,
    /// Encoded shared entries, in id order, with each entry's byte offset
    /// inside the area.
    pub shared: Vec<u8>,
    shared_offsets: HashMap<(Vec<u8>, Vec<u8>), usize>,
    /// Inline xattr body of every inode (empty when it has no xattrs).
    pub bodies: Vec<Vec<u8>>,
    /// Whether any inode has xattrs (then the filter feature is set).
    pub any: bool,
    /// `--xattr-inode-digest`: the index of its long prefix.
    pub digest_prefix: Option<u8>,
    /// The prefix table went to the head of the packed inode's data.
    pub prefixes_in_packed: bool,
}

fn encode_name(name: &[u8], prefixes: &[(u8, Vec<u8>)], path: &Path) -> Result<EncodedName> {
    let (base, after_short) = split_short_prefix(name).ok_or_else(|| {
        BuildError::input(
            path,
            format!(
                "xattr {:?} has no prefix EROFS can store",
                String::from_utf8_lossy(name)
            ),
        )
    })?;
    let filter_bit = name_filter_bit(base, after_short);
    // The longest long prefix that matches wins over the short one.
    let mut best: Option<(usize, u8)> = None;
    for (k, (b, infix)) in prefixes.iter().enumerate() {
        if *b == base && after_short.starts_with(infix) && best.is_none_or(|(l, _)| infix.len() > l)
        {
            best = Some((infix.len(), k as u8));
        }
    }
    let (index, suffix) = match best {
        Some((len, k)) if len > 0 => (LONG_PREFIX_FLAG | k, after_short[len..].to_vec()),
        _ => (base, after_short.to_vec()),
    };
    if suffix.len() > 255 {
        return Err(BuildError::input(
            path,
            "xattr name longer than 255 bytes after its prefix",
        ));
    }
    Ok(EncodedName {
        index,
        suffix,
        filter_bit,
    })
}

/// Parses `--xattr-prefix` values into (base index, infix).
pub fn parse_prefixes(opts: &PlanOptions<'_>) -> Result<Vec<(u8, Vec<u8>)>> {
    let mut out = Vec::new();
    for p in opts.xattr_prefixes {
        let (base, infix) = split_short_prefix(p).ok_or_else(|| {
            BuildError::Option(format!(
                "xattr prefix {:?} does not start with a known namespace",
                String::from_utf8_lossy(p)
            ))
        })?;
        if infix.is_empty() || infix.len() > 255 {
            return Err(BuildError::Option(format!(
                "xattr prefix {:?} is not longer than its namespace",
                String::from_utf8_lossy(p)
            )));
        }
        if out.len() >= 128 {
            return Err(BuildError::Option("at most 128 xattr prefixes".into()));
        }
        out.push((base, infix.to_vec()));
    }
    Ok(out)
}

/// Plans xattrs for every inode of `tree`, with the inode fingerprints of
/// `--xattr-inode-digest` last.
pub fn plan(tree: &Tree, opts: &PlanOptions<'_>) -> Result<XattrPlan> {
    let mut plan = plan_named(tree, opts)?;
    if let Some(name) = opts.xattr_digest {
        add_digests(tree, opts, &mut plan, name)?;
    }
    Ok(plan)
}

/// Gives every non-empty regular file an inline entry named by a long
/// prefix that is the whole fingerprint name (empty suffix), whose value is
/// `sha256:` and the 32 raw bytes of the SHA-256 of its contents. A name
/// under a known namespace (`user.fp.`) keeps that namespace as the
/// prefix's base; any other (the default) gets base 0, which the kernel
/// does not list.
fn add_digests(
    tree: &Tree,
    opts: &PlanOptions<'_>,
    plan: &mut XattrPlan,
    name: &[u8],
) -> Result<()> {
    let (base, infix) = match split_short_prefix(name) {
        Some((b, rest)) if !rest.is_empty() && short_prefix(b).is_some() => (b, rest.to_vec()),
        _ => (0, name.to_vec()),
    };
    if infix.is_empty() || infix.len() > 255 {
        return Err(BuildError::Option(format!(
            "--xattr-inode-digest name {:?} is empty or too long",
            String::from_utf8_lossy(name)
        )));
    }
    if plan.prefixes.len() >= 128 {
        return Err(BuildError::Option("at most 128 xattr prefixes".into()));
    }
    let id = plan.prefixes.len() as u8;
    plan.prefixes.push((base, infix.clone()));
    plan.digest_prefix = Some(id);
    let bit = name_filter_bit(base, &infix);
    for (i, ino) in tree.inodes.iter().enumerate() {
        let crate::tree::Kind::File { size, .. } = ino.kind else {
            continue;
        };
        if size == 0 {
            continue;
        }
        let mut value = b"sha256:".to_vec();
        value.extend_from_slice(&sha256_of(ino, size)?);
        let body = &mut plan.bodies[i];
        if body.is_empty() {
            let filter = if opts.xattr_filter { u32::MAX } else { 0 };
            body.extend_from_slice(&encode_body_header(filter, 0));
        }
        if opts.xattr_filter {
            // Stored inverted: a clear bit says the name may be present.
            let f = u32::from_le_bytes([body[0], body[1], body[2], body[3]]) & !(1 << bit);
            body[..4].copy_from_slice(&f.to_le_bytes());
        }
        encode_entry(body, LONG_PREFIX_FLAG | id, &[], &value);
        if body.len() > 12 + 4 * (usize::from(u16::MAX) - 1) {
            return Err(BuildError::input(
                &ino.source,
                "xattrs too large for one inode",
            ));
        }
        plan.any = true;
    }
    Ok(())
}

/// SHA-256 of a file's `size` bytes as the image will hold them.
fn sha256_of(ino: &crate::tree::Inode, size: u64) -> Result<[u8; 32]> {
    use sha2::{Digest, Sha256};
    let f = crate::tree::content::ContentReader::open(ino)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; (1 << 20).min(size as usize)];
    let mut pos = 0u64;
    while pos < size {
        let n = (size - pos).min(buf.len() as u64) as usize;
        f.read_exact_at(&mut buf[..n], pos)?;
        h.update(&buf[..n]);
        pos += n as u64;
    }
    f.finish()?;
    Ok(h.finalize().into())
}

/// Refuses xattrs Linux could not give back from the mounted image: a
/// name longer than 255 bytes (`getxattr` refuses it), values longer
/// than 64 KiB, or names that together pass the 64 KiB `listxattr`
/// returns at most.
fn check_linux_limits(ino: &crate::tree::Inode) -> Result<()> {
    let mut list = 0usize;
    for (n, v) in &ino.xattrs {
        let name = String::from_utf8_lossy(n);
        if n.len() > 255 {
            return Err(BuildError::input(
                &ino.source,
                format!(
                    "xattr {name:?}: name of {} bytes, Linux takes at most 255",
                    n.len()
                ),
            ));
        }
        if v.len() > usize::from(u16::MAX) {
            return Err(BuildError::input(
                &ino.source,
                format!("xattr {name:?} value longer than 65535 bytes"),
            ));
        }
        list += n.len() + 1;
    }
    if list > 65536 {
        return Err(BuildError::input(
            &ino.source,
            format!(
                "{} xattr names take {list} bytes, more than the 65536 Linux lists",
                ino.xattrs.len()
            ),
        ));
    }
    Ok(())
}

/// Plans the xattrs the tree's inodes carry.
fn plan_named(tree: &Tree, opts: &PlanOptions<'_>) -> Result<XattrPlan> {
    let prefixes = parse_prefixes(opts)?;
    let mut plan = XattrPlan {
        prefixes,
        bodies: vec![Vec::new(); tree.inodes.len()],
        ..Default::default()
    };
    let want = opts.root_xattr_isize;
    if want > 0 && !(16..=65532).contains(&want) {
        return Err(BuildError::Option(format!(
            "--root-xattr-isize {want}: 16 to 65532 bytes (a 12-byte header and its entries)"
        )));
    }
    for ino in &tree.inodes {
        check_linux_limits(ino)?;
    }
    if opts.xattr_tolerance < 0 {
        return Ok(plan);
    }
    // Count how many inodes carry each name/value pair.
    let mut counts: BTreeMap<(&[u8], &[u8]), u32> = BTreeMap::new();
    for ino in &tree.inodes {
        // Value sizes were checked by check_linux_limits.
        for (n, v) in &ino.xattrs {
            *counts.entry((n, v)).or_default() += 1;
        }
    }
    let tolerance = opts.xattr_tolerance.max(1) as u32;
    let share = |c: u32| opts.xattr_tolerance > 0 && c >= tolerance.max(2);
    for ((n, v), c) in &counts {
        if share(*c) {
            let path = Path::new("<shared xattr>");
            let e = encode_name(n, &plan.prefixes, path)?;
            let off = plan.shared.len();
            encode_entry(&mut plan.shared, e.index, &e.suffix, v);
            plan.shared_offsets.insert((n.to_vec(), v.to_vec()), off);
        }
    }
    for (i, ino) in tree.inodes.iter().enumerate() {
        if ino.xattrs.is_empty() {
            continue;
        }
        plan.any = true;
        let mut filter = 0u32;
        let mut shared_ids: Vec<usize> = Vec::new();
        let mut inline = Vec::new();
        for (n, v) in &ino.xattrs {
            let e = encode_name(n, &plan.prefixes, &ino.source)?;
            filter |= 1 << e.filter_bit;
            match plan.shared_offsets.get(&(n.clone(), v.clone())) {
                Some(&off) if shared_ids.len() < 255 => shared_ids.push(off),
                _ => encode_entry(&mut inline, e.index, &e.suffix, v),
            }
        }
        // Without the filter feature the field is zero, as mkfs.erofs
        // leaves it.
        let filter = if opts.xattr_filter { !filter } else { 0 };
        let mut body = encode_body_header(filter, shared_ids.len() as u8).to_vec();
        for off in &shared_ids {
            // Ids are filled in by the layout (the area's start is not known
            // yet); store the offset inside the area for now.
            body.extend_from_slice(&(*off as u32).to_le_bytes());
        }
        body.extend_from_slice(&inline);
        if body.len() > 12 + 4 * (usize::from(u16::MAX) - 1) {
            return Err(BuildError::input(
                &ino.source,
                "xattrs too large for one inode",
            ));
        }
        plan.bodies[i] = body;
    }
    if want > 0 {
        // Room in the root's body, zeros after its entries (a zero entry
        // is four bytes naming nothing); without xattrs, a header whose
        // filter says no name is there.
        let body = &mut plan.bodies[tree.root];
        if body.is_empty() {
            let filter = if opts.xattr_filter { u32::MAX } else { 0 };
            body.extend_from_slice(&encode_body_header(filter, 0));
            plan.any = true;
        }
        let want = (want as usize).next_multiple_of(4);
        if body.len() < want {
            body.resize(want, 0);
        }
    }
    Ok(plan)
}

impl XattrPlan {
    /// Encodes the long-prefix table (records padded to 4 bytes).
    pub fn prefix_table(&self) -> Vec<u8> {
        let mut t = Vec::new();
        for (base, infix) in &self.prefixes {
            t.extend_from_slice(&((1 + infix.len()) as u16).to_le_bytes());
            t.push(*base);
            t.extend_from_slice(infix);
            t.resize((t.len() + 3) & !3, 0);
        }
        t
    }

    /// Rewrites the shared ids in a body once the area starts at byte
    /// `area_start` of the xattr block address space.
    pub fn finish_body(&self, body: &mut [u8], area_start: u64) {
        if body.len() < 12 {
            return;
        }
        let count = usize::from(body[4]);
        for k in 0..count {
            let at = 12 + 4 * k;
            let off = u32::from_le_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
            let id = ((area_start + u64::from(off)) / 4) as u32;
            body[at..at + 4].copy_from_slice(&id.to_le_bytes());
        }
    }
}
