//! Writing a tree for an image file: appended after the image (its data
//! padded to a data block, then veritysetup's superblock and the tree, as
//! `veritysetup format IMG IMG --hash-offset=N` lays them out) or into a
//! separate hash file.
//!
//! An interrupted append must not leave an image that looks verified with
//! half a tree: the superblock's place is written as zeros with the tree,
//! the tree is synced, and only then is the superblock (its magic) written.
//! Until that last write the image has no verity superblock, so nothing
//! finds a tree in it; a failed write truncates the file back to its data.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::{build, Params, SUPERBLOCK_LEN};
use crate::error::{Error, Result};
use crate::hash::{to_hex, Algorithm};

/// How to make a tree.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// The hash algorithm.
    pub algorithm: Algorithm,
    /// Bytes per data block (4096; 512 for tar-index layers).
    pub data_block_size: u32,
    /// The salt; `None`: [`Params::derived_salt`] of the image, so the same
    /// image always gets the same tree.
    pub salt: Option<Vec<u8>>,
    /// Where the salt goes (veritysetup's `--format`; 1 by default).
    pub hash_type: super::HashType,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            algorithm: Algorithm::Sha256,
            data_block_size: 4096,
            salt: None,
            hash_type: super::HashType::Normal,
        }
    }
}

/// A tree written. Serializes as `ferrofs verity --json` and `mkfs
/// --json` print it: `root_hash`, `hash_offset`, `salt`, `data_blocks`,
/// `data_block_size`, `algorithm`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Its parameters (as in its superblock).
    pub params: Params,
    /// The root hash.
    pub root: Vec<u8>,
    /// Where its superblock starts in the hash device (the image, or the
    /// hash file).
    pub hash_offset: u64,
}

impl serde::Serialize for Written {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut st = s.serialize_struct("Written", 7)?;
        st.serialize_field("root_hash", &to_hex(&self.root))?;
        st.serialize_field("hash_offset", &self.hash_offset)?;
        st.serialize_field("salt", &to_hex(&self.params.salt))?;
        st.serialize_field("data_blocks", &self.params.data_blocks)?;
        st.serialize_field("data_block_size", &self.params.data_block_size)?;
        st.serialize_field("algorithm", self.params.algorithm.name())?;
        st.serialize_field("hash_type", &self.params.hash_type.number())?;
        st.end()
    }
}

/// Appends a tree to the image `file` as [`append`] does, the whole file
/// being the data (a build's staged image, `--offset` zeros included).
pub fn append_file(file: &File, opts: &WriteOptions) -> Result<Written> {
    let len = file.metadata().map_err(io("data", 0))?.len();
    append(file, len, opts)
}

fn io(what: &'static str, offset: u64) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io {
        what,
        offset,
        source,
    }
}

/// The parameters for `data_len` bytes of `data`, the salt derived from
/// its first block unless given.
fn params_for(data: &File, data_len: u64, opts: &WriteOptions) -> Result<Params> {
    let blocks = data_len.div_ceil(u64::from(opts.data_block_size.max(1)));
    let salt = match &opts.salt {
        Some(s) => s.clone(),
        None => {
            let n = usize::try_from(data_len.min(4096)).unwrap_or(4096);
            let mut first = vec![0u8; n];
            data.read_exact_at(&mut first, 0).map_err(io("data", 0))?;
            Params::derived_salt(opts.algorithm, &first, data_len)
        }
    };
    let mut p = Params::new(opts.data_block_size, blocks, salt);
    p.algorithm = opts.algorithm;
    p.hash_type = opts.hash_type;
    p.validate()?;
    Ok(p)
}

/// Appends a tree to `file`, an image whose first `data_len` bytes are the
/// data to protect: whatever follows them (an older tree) is cut, the data
/// padded with zeros to a data block, the superblock written there and the
/// tree after it. Synced before returning.
pub fn append(file: &File, data_len: u64, opts: &WriteOptions) -> Result<Written> {
    let mut params = params_for(file, data_len, opts)?;
    let hash_offset = params.data_len()?;
    let result = append_at(file, &mut params, hash_offset);
    if result.is_err() {
        let _ = file.set_len(hash_offset);
    }
    let root = result?;
    Ok(Written {
        params,
        root,
        hash_offset,
    })
}

fn append_at(file: &File, params: &mut Params, hash_offset: u64) -> Result<Vec<u8>> {
    file.set_len(hash_offset).map_err(io("data", hash_offset))?;
    let tree = build(file, params)?;
    params.uuid = params.derived_uuid(&tree.root);
    let mut area = tree.hash_area(params, hash_offset, true)?;
    let sb = params.superblock()?;
    // The tree first, the superblock's place zero: no magic yet.
    if let Some(head) = area.get_mut(..SUPERBLOCK_LEN) {
        head.fill(0);
    }
    file.write_all_at(&area, hash_offset)
        .map_err(io("hash area", hash_offset))?;
    file.sync_data().map_err(io("hash area", hash_offset))?;
    file.write_all_at(&sb, hash_offset)
        .map_err(io("verity superblock", hash_offset))?;
    file.sync_data()
        .map_err(io("verity superblock", hash_offset))?;
    Ok(tree.root)
}

/// Writes the tree over the first `data_len` bytes of `data` (the last
/// block hashed zero-padded; `data` is not changed) into `hash`, from byte
/// 0: superblock, padding, tree, as `veritysetup format DATA HASH` does.
/// `hash` is truncated first and synced at the end.
pub fn write_hash_file(
    data: &File,
    data_len: u64,
    opts: &WriteOptions,
    hash: &File,
) -> Result<Written> {
    let mut params = params_for(data, data_len, opts)?;
    let tree = build(data, &params)?;
    params.uuid = params.derived_uuid(&tree.root);
    let area = tree.hash_area(&params, 0, true)?;
    hash.set_len(0).map_err(io("hash file", 0))?;
    hash.write_all_at(&area, 0).map_err(io("hash file", 0))?;
    hash.sync_all().map_err(io("hash file", 0))?;
    Ok(Written {
        params,
        root: tree.root,
        hash_offset: 0,
    })
}
