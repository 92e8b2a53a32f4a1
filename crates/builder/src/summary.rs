//! What a build reports: its [`Summary`] (serialized as `mkfs --json`
//! prints it) and the [`Progress`] of its data pass. Each feature's stats
//! are a field here, so no stage needs another's module to report.

use crate::plan::Plan;

/// Progress of the data pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Regular files whose data is written so far.
    pub files_done: u64,
    /// Regular files in the build.
    pub files_total: u64,
    /// Their sizes, summed (before compression).
    pub bytes_done: u64,
    /// The sizes of all regular files, summed.
    pub bytes_total: u64,
    /// Every file is placed, and this many bytes of fragments (tails and
    /// small files, `-E fragments`) are being compressed into the packed
    /// inode, the pass's last long step; 0 before it.
    pub packing: u64,
}

/// What was built; serializes as `mkfs --json` prints it (the parts that
/// do not apply left out).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// Inodes in the image.
    pub inodes: u64,
    /// Blocks of the image.
    pub blocks: u64,
    /// Blocks of the metadata area (inodes with their xattrs, indexes and
    /// inline tails, shared xattrs).
    pub meta_blocks: u64,
    /// Bytes of the image (`blocks` times the block size; without
    /// `--offset`'s leading zeros).
    pub bytes: u64,
    /// Inodes in the 32-byte compact form.
    pub compact_inodes: u64,
    /// Regular files stored compressed.
    pub compressed_files: u64,
    /// Physical clusters written.
    pub pclusters: u64,
    /// Compressed files with holes (`-E sparse`).
    #[serde(skip_serializing_if = "is_zero")]
    pub sparse_files: u64,
    /// Of those, the files whose holes are in lcluster indexes: Linux 7.2
    /// reads them as holes, older kernels decode a pcluster of zeros for
    /// them (in extent records, every kernel reads holes as such).
    #[serde(skip_serializing_if = "is_zero")]
    pub lcluster_sparse_files: u64,
    /// With `--base`: what came from the base image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseStats>,
    /// Wall and CPU time of each phase of the build, in order.
    pub phases: Vec<crate::util::timing::Phase>,
    /// With EROFS images as the source: what became of their files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layers: Option<LayerStats>,
    /// With `--incremental`: what was kept and what was appended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incremental: Option<IncrementalStats>,
    /// With `--verity`: the dm-verity tree appended to the image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verity: Option<ferrofs_verity::dm::Written>,
}

/// What a rebuild took from its base image.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BaseStats {
    /// Files whose data came from OLD (copied pclusters, or OLD's decision
    /// to store them flat).
    pub reused_files: u64,
    /// Their sizes, summed.
    pub reused_bytes: u64,
    /// Bytes of OLD's pclusters copied.
    pub copied_bytes: u64,
    /// Files this build compressed itself (new, changed, not reusable).
    pub compressed_files: u64,
    /// Their sizes, summed.
    pub compressed_bytes: u64,
    /// Files OLD has at the same path with the same size but other bytes.
    pub changed_files: u64,
    /// Files whose data OLD could not give back (corrupt or truncated).
    pub unreadable_files: u64,
    /// Why parts of OLD were not used at all.
    pub notes: Vec<String>,
}

/// What an incremental build kept and appended.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IncrementalStats {
    /// Bytes the image had (its file length).
    pub old_bytes: u64,
    /// Bytes appended to it.
    pub appended_bytes: u64,
    /// Bytes past the image's recorded end (left by a run killed before
    /// it could commit) that were cut off first.
    pub dead_bytes: u64,
    /// Inodes of the image the new tree still uses as they are.
    pub kept_inodes: u64,
    /// Of those, files the layer has with the same bytes and metadata.
    pub unchanged_files: u64,
    /// Inodes written (the root included).
    pub new_inodes: u64,
    /// The root inode was rewritten in its place (its nid stays, so
    /// directories the layer does not touch stay too): in block 0, or when
    /// a new root after the image could not have a 16-bit nid, where it was.
    pub root_in_place: bool,
    /// Bytes of the old image outside block 0 that were rewritten: the old
    /// root's record in that last case, else 0.
    pub rewritten_outside_block0: u64,
    /// New inodes (other metadata, same bytes) whose blocks are the
    /// image's (flat files only).
    pub shared_files: u64,
}

/// What became of the layers' regular files.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LayerStats {
    /// Files left on the layers, pointed at by chunk indexes.
    pub indexed_files: u64,
    /// Their bytes.
    pub indexed_bytes: u64,
    /// Of those, files whose inline tail was copied into a block.
    pub tails: u64,
    /// Files whose data was copied into the new image.
    pub copied_files: u64,
    /// Their bytes.
    pub copied_bytes: u64,
    /// In blob-index mode, the copied files by why they could not be
    /// indexed ("compressed", "all inline"); serialized as
    /// `[{"why": ..., "files": N}]`.
    #[serde(serialize_with = "why_files")]
    pub copied_why: Vec<(String, u64)>,
}

fn why_files<S: serde::Serializer>(v: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    #[derive(serde::Serialize)]
    struct Why<'a> {
        why: &'a str,
        files: u64,
    }
    let mut seq = s.serialize_seq(Some(v.len()))?;
    for (why, files) in v {
        seq.serialize_element(&Why { why, files: *files })?;
    }
    seq.end()
}

/// Whether a count is zero (left out of the JSON).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Summary {
    /// The counts of an image of `blocks` blocks (`meta_blocks` of them
    /// metadata) holding `inodes` inodes, the planned ones in `plan.order`.
    pub(crate) fn of(
        plan: &Plan,
        inodes: u64,
        (blocks, meta_blocks): (u64, u64),
        bs: u64,
    ) -> Summary {
        let zinodes = || {
            plan.order
                .iter()
                .filter_map(|&id| plan.inodes[id].z.as_ref())
        };
        Summary {
            inodes,
            blocks,
            meta_blocks,
            bytes: blocks * bs,
            compact_inodes: plan
                .order
                .iter()
                .filter(|&&id| !plan.inodes[id].extended)
                .count() as u64,
            compressed_files: zinodes().count() as u64,
            pclusters: zinodes()
                .map(|z| z.extents.iter().filter(|e| !e.hole).count() as u64)
                .sum(),
            sparse_files: zinodes()
                .filter(|z| z.extents.iter().any(|e| e.hole))
                .count() as u64,
            // Holes name the pcluster of zeros only in lcluster indexes.
            lcluster_sparse_files: zinodes()
                .filter(|z| z.extents.iter().any(|e| e.hole && e.blocks > 0))
                .count() as u64,
            ..Summary::default()
        }
    }
}
