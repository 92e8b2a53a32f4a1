//! Fixed-size-output compression of file data (EROFS paper §3.1): each
//! extent is as much input as fits into one physical cluster. Files are cut
//! into independent segments so one big file uses every core; an extent
//! that does not save a whole block is stored raw. Pure functions over
//! bytes: reading files and placing blocks is the writer's job.

use ferrofs_codec::{Algorithm, Encoder};

use crate::data::extent::{saves_a_block, Extent, MAX_EXTENT_BLOCKS};
use crate::error::{BuildError, Result};

/// Bytes of a file's head [`is_machine_code`] looks at.
pub(crate) const MAGIC_LEN: usize = 8;

/// Whether a file starting with `head` (its first [`MAGIC_LEN`] bytes)
/// holds machine code: an ELF file, or a static archive (of ELF objects),
/// which the encoder is told ([`Encoder::set_machine_code`]) before any of
/// the file's data. Archives count too because a static library and its
/// shared build often hold the same data: given different encoders, the
/// copies would compress to different pclusters and not be shared.
pub(crate) fn is_machine_code(head: &[u8]) -> bool {
    head.starts_with(b"\x7fELF") || head.starts_with(b"!<arch>\n")
}

/// Compresses one segment (`input`, starting at file offset `base`) into
/// extents. Every extent but the segment's last is at least a block long,
/// so no two extents start in one lcluster; multi-block raw extents always
/// cover the whole next lcluster (where the block count is stored).
/// With `leave_tail`, compression stops once at most that many bytes are
/// left, or once fast LZ4 fits all that is left into two pclusters (so the
/// codec's stream would end the file short of a full pcluster):
/// the rest becomes the file's fragment (the extents then end before the
/// segment does), compressed once, in the packed inode, rather than tried
/// here first and cut to whole blocks after.
///
/// With `ztail` (ztailpacking; the segment ends the file), the segment
/// ends the way mkfs.erofs ends a file whose last pcluster may go inline:
/// a last stream that ends in a partly empty block is made again to fill
/// whole blocks only, and raw data ends with its last whole block, when
/// that leaves a rest of less than a block: the rest is the last
/// pcluster, compressed when it shrinks, which the writer puts after the
/// inode when it fits.
///
/// Also returns whether the file is worth keeping compressed as far as
/// the first trial tells: it saved a block (the test
/// [`worth_compressing`](crate::data::worth::worth_compressing) applies to a
/// file's first pcluster), or, with `ztail`, the file fits in one
/// pcluster (its tail may still shrink inline; the caller compares the
/// result with storing it flat). With `decide` (the segment is a whole
/// file), a first trial that does not tell so ends the work at once: the
/// file is stored flat. No extent is longer than `max_extent` bytes (when
/// given).
pub fn compress_segment(
    enc: &mut Encoder,
    input: &[u8],
    base: u64,
    shape: &Shape,
    decide: bool,
) -> Result<(Vec<Extent>, bool)> {
    extents_upto(enc, input, base, shape, decide, usize::MAX)
}

/// How a segment is cut: what [`compress_segment`] needs besides the
/// bytes and where they start.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub pcluster: u64,
    pub bs: u64,
    pub big: bool,
    pub leave_tail: Option<u64>,
    pub max_extent: Option<u64>,
    /// ztailpacking, and the segment ends the file: its last pcluster may
    /// go inline (see [`compress_segment`]).
    pub ztail: bool,
    /// The segment ends inside the file off a block boundary (a
    /// content-defined cut): its last extent starts at least two
    /// lclusters before the one the cut is in, so the next segment's
    /// first extent has that lcluster to itself and a multi-block last
    /// extent has the NONHEAD lcluster its block count goes in. Needs
    /// pclusters of at least four blocks (a last extent of under three
    /// blocks then always fits one).
    pub cut_end: bool,
    /// The file is cut by content (`-E dedupe`): a run it shares with
    /// another file, at any shift, must compress alike in both. LZ4 then
    /// keeps no in-place margin, which depends on where an extent ends in
    /// its page and so would end the two copies' extents differently (the
    /// kernel decodes such a pcluster from a copy of its compressed bytes
    /// instead of in place).
    pub by_content: bool,
    /// Every extent but the last ends on a page boundary of the file
    /// (4 KiB): for the packed inode and the metabox, whose bytes are read
    /// at random. The kernel fills whole pages of the page cache, and
    /// (for LZMA, DEFLATE and zstd) every page of the extent it decodes,
    /// so an extent that ends inside a page makes a read of it decode, and
    /// read from the device, the next pcluster too. For LZ4 this gives up
    /// in-place decoding (see [`Cut::keep_inplace_margin`]): the kernel
    /// copies such a pcluster's compressed bytes first, which costs less
    /// than reading a second pcluster.
    pub page_end: bool,
}

/// The first extent [`compress_segment`] makes of a segment (the same
/// bytes, the same cut), computing nothing after it: what `--base` uses to
/// tell whether an old image was compressed the way this build compresses.
pub fn first_extent(
    enc: &mut Encoder,
    input: &[u8],
    base: u64,
    shape: &Shape,
) -> Result<Option<Extent>> {
    let (ex, _) = extents_upto(enc, input, base, shape, false, 1)?;
    Ok(ex.into_iter().next())
}

/// [`compress_segment`], stopping after `limit` extents (the first ones do
/// not depend on what follows).
fn extents_upto(
    enc: &mut Encoder,
    input: &[u8],
    base: u64,
    shape: &Shape,
    decide: bool,
    limit: usize,
) -> Result<(Vec<Extent>, bool)> {
    let mut cut = Cut::new(enc, input, base, *shape);
    let mut out = Vec::new();
    let mut pos = 0usize;
    let mut first_saves = None;
    while pos < input.len() && out.len() < limit {
        if shape
            .leave_tail
            .is_some_and(|t| (input.len() - pos) as u64 <= t)
        {
            break;
        }
        if cut.rest_fits_fast(pos)? {
            // It shrinks (into less than a pcluster): worth compressing,
            // in the packed inode.
            first_saves.get_or_insert(true);
            break;
        }
        let mut stream = cut.compress(pos)?;
        if first_saves.is_none() {
            let keep = cut.first_trial_keeps(stream, decide);
            first_saves = Some(keep);
            if !keep && decide {
                return Ok((Vec::new(), false));
            }
        }
        stream = cut.ztail_whole_blocks(pos, stream)?;
        let Some(s) = cut.fragment_whole_blocks(pos, stream)? else {
            break;
        };
        stream = cut.keep_inplace_margin(pos, s)?;
        let (stream, partial) = cut.end_on_page(pos, stream)?;
        let ex = match cut.takes_stream(pos, stream) {
            true => Extent {
                partial,
                ..Extent::new(
                    base + pos as u64,
                    stream.0 as u64,
                    Some(cut.dst[..stream.1].to_vec()),
                )
            },
            false => cut.raw_extent(pos),
        };
        if let Some(y) = cut.before_cut(pos, ex.llen) {
            // Made again, ending where the segment's last extent can start.
            cut.end = y;
            continue;
        }
        cut.end = input.len();
        pos += ex.llen as usize;
        out.push(ex);
    }
    Ok((out, first_saves.unwrap_or(false)))
}

/// A compressed stream in [`Cut::dst`]: (input bytes consumed, bytes
/// written).
type Stream = (usize, usize);

/// One segment being cut into extents: the encoder, the bytes and the
/// buffers every step of [`extents_upto`] shares.
struct Cut<'a> {
    enc: &'a mut Encoder,
    input: &'a [u8],
    /// The file offset `input` starts at.
    base: u64,
    shape: Shape,
    /// LZ4: the kernel decodes in place (a margin is kept), and a stream
    /// is cut shorter rather than compressed again.
    inplace: bool,
    /// Most input bytes one extent takes.
    cap: usize,
    /// Where the current extent's input ends: the segment's end, or
    /// earlier when [`Cut::before_cut`] asked.
    end: usize,
    /// The current extent's stream.
    dst: Vec<u8>,
    /// A second stream, for ztailpacking's whole-blocks attempt (made on
    /// first use).
    alt: Option<Vec<u8>>,
    /// [`Cut::rest_fits_fast`]'s output (made on first use).
    probe_buf: Option<Vec<u8>>,
}

/// Fast LZ4, the probe [`Cut::rest_fits_fast`] runs.
///
/// Measured on a Debian rootfs at 128 KiB pclusters (densest preset): with
/// the rest sent to the fragment when LZ4 fits it into one pcluster, lzma
/// took 6 % less CPU and made a 1.3 % smaller image; into two, 12 % less
/// CPU and 1.8 % smaller (zstd on the Go toolchain: 13 % less CPU, 0.6 %
/// smaller); into three, more CPU again (larger fragments to order and
/// compress). lzma and zstd shrink real data about twice as well as fast
/// LZ4 does.
const PROBE_PCLUSTERS: usize = 2;

/// A new fast-LZ4 encoder for [`Cut::rest_fits_fast`].
fn probe_encoder() -> Result<Encoder> {
    Encoder::new(ferrofs_codec::EncoderConfig::new(Algorithm::Lz4))
        .map_err(|e| BuildError::Option(format!("compression probe: {e}")))
}

impl<'a> Cut<'a> {
    /// Starts cutting `input` (at file offset `base`), the encoder reset.
    fn new(enc: &'a mut Encoder, input: &'a [u8], base: u64, shape: Shape) -> Self {
        let inplace = enc.config().alg == Algorithm::Lz4;
        // Segments are spread over threads: start every one from the same state.
        enc.reset();
        let cap = (MAX_EXTENT_BLOCKS * shape.bs)
            .min(12 << 20)
            .min(shape.max_extent.unwrap_or(u64::MAX).max(shape.bs)) as usize;
        Cut {
            enc,
            input,
            base,
            shape,
            inplace,
            cap,
            end: input.len(),
            dst: vec![0u8; shape.pcluster as usize],
            alt: None,
            probe_buf: None,
        }
    }

    /// The most input an extent starting at `pos` may take.
    fn src(&self, pos: usize) -> &'a [u8] {
        let input = self.input;
        &input[pos..self.end.min(pos + self.cap)]
    }

    /// With [`Shape::cut_end`]: where an extent from `pos` that would take
    /// `llen` bytes must end instead, because the extent after it would
    /// start in the lcluster before the cut's or in the cut's own: at the
    /// start of the lcluster two before the cut's. `None` when it may
    /// stay as it is.
    fn before_cut(&self, pos: usize, llen: u64) -> Option<usize> {
        let len = self.input.len();
        let next = pos.checked_add(usize::try_from(llen).ok()?)?;
        if !self.shape.cut_end || next >= len || self.end != len {
            return None;
        }
        let bs = self.shape.bs;
        let cut_lcluster = (self.base + len as u64) / bs;
        if (self.base + next as u64) / bs + 2 <= cut_lcluster {
            return None;
        }
        let y = cut_lcluster
            .checked_sub(2)?
            .checked_mul(bs)?
            .checked_sub(self.base)?;
        let y = usize::try_from(y).ok()?;
        (y > pos && y < next).then_some(y)
    }

    /// Whether the stream from `pos` reaches the segment's end.
    fn ends_input(&self, pos: usize, consumed: usize) -> bool {
        pos + consumed == self.input.len()
    }

    /// With a fragment to take the file's tail: whether fast LZ4 fits
    /// everything from `pos` to the segment's end into
    /// [`PROBE_PCLUSTERS`] pclusters. The codec's own stream would then
    /// (nearly always) end the file short of a full pcluster, be made
    /// again to fill whole blocks only, and leave its rest to the
    /// fragment: the whole rest goes there instead, compressed once.
    /// Not for LZ4 itself, whose trial costs no more than the probe.
    fn rest_fits_fast(&mut self, pos: usize) -> Result<bool> {
        let rest = self.input.len() - pos;
        if self.shape.leave_tail.is_none() || self.inplace || rest > self.cap {
            return Ok(false);
        }
        let room = self.dst.len().saturating_mul(PROBE_PCLUSTERS);
        let src = self.src(pos);
        let buf = self.probe_buf.get_or_insert_with(|| vec![0u8; room]);
        let (consumed, _) = fixed_output(&mut probe_encoder()?, src, buf)?;
        Ok(consumed == rest)
    }

    /// Compresses as much from `pos` as one pcluster holds, into `dst`.
    fn compress(&mut self, pos: usize) -> Result<Stream> {
        let src = self.src(pos);
        fixed_output(self.enc, src, &mut self.dst)
    }

    /// Whether the first trial tells the file is worth keeping compressed
    /// (see [`compress_segment`]): it saved a block, or (with `decide`) a
    /// probe of the file's middle does, or with ztailpacking the file fits
    /// in one pcluster.
    fn first_trial_keeps(&mut self, (consumed, written): Stream, decide: bool) -> bool {
        let Shape { pcluster, bs, .. } = self.shape;
        let input = self.input;
        let mut saves = saves_a_block(consumed, written, bs);
        if !saves && decide && input.len() as u64 >= 2 * pcluster.max(2 * bs) {
            // A start that does not compress (a header, short lines)
            // does not condemn the file: ask its middle too.
            let mid = (input.len() as u64 / 2 / bs * bs) as usize;
            let mut probe = vec![0u8; pcluster as usize];
            let end = input.len().min(mid + self.cap);
            saves = matches!(self.enc.compress_fixed_output(&input[mid..end], &mut probe),
                Ok((c, w)) if saves_a_block(c, w, bs));
        }
        // With ztailpacking, a file of one pcluster that saves no
        // block can still shrink: its tail may compress into the
        // inode's block (the caller weighs the result).
        saves || (self.shape.ztail && input.len() as u64 <= pcluster)
    }

    /// With ztailpacking, the segment's last stream, when it ends in a
    /// partly empty block, made again to fill whole blocks only where
    /// that takes fewer blocks: the rest can go inline.
    fn ztail_whole_blocks(&mut self, pos: usize, stream: Stream) -> Result<Stream> {
        let (consumed, written) = stream;
        let bs = self.shape.bs;
        if !(self.shape.ztail
            && self.ends_input(pos, consumed)
            && written < consumed
            && written as u64 > bs
            && !(written as u64).is_multiple_of(bs))
        {
            return Ok(stream);
        }
        // The rest's stream ends in a partly empty block: made again
        // to fill whole blocks only, it leaves a rest that can go
        // inline. Taken, as mkfs.erofs takes it, when the shorter
        // stream and the rest, even raw, are less than the blocks the
        // whole stream takes. An LZ4 block is cut shorter instead
        // (its sequences up to the longest prefix that fits, then
        // literals), costing no second compression.
        let src = self.src(pos);
        let full = (written as u64 / bs * bs) as usize;
        let pcluster = self.shape.pcluster as usize;
        let alt = self.alt.get_or_insert_with(|| vec![0u8; pcluster]);
        let dst = &self.dst;
        let cut = match self.inplace {
            true => ferrofs_codec::lz4cut::longest_prefix_within(&dst[..written], consumed, full)
                .and_then(|keep| {
                    alt[..written].copy_from_slice(&dst[..written]);
                    let w = ferrofs_codec::lz4cut::truncate_block(alt, written, src, keep)?;
                    (w <= full).then_some((keep, w))
                }),
            false => None,
        };
        let (c, w) = match cut {
            Some(r) => r,
            None => fixed_output(self.enc, src, &mut alt[..full])?,
        };
        if c as u64 >= bs && w + (consumed - c) < full + bs as usize {
            self.dst[..w].copy_from_slice(&alt[..w]);
            return Ok((c, w));
        }
        Ok(stream)
    }

    /// With a fragment taking the file's tail, the segment's last stream,
    /// when its last block would be partly empty, made again to fill whole
    /// blocks only (an LZ4 block is cut shorter instead): what does not fit
    /// goes to the fragment, packed without a gap. `None`: less than a
    /// block is left to compress (the rest is all fragment).
    fn fragment_whole_blocks(&mut self, pos: usize, stream: Stream) -> Result<Option<Stream>> {
        let (consumed, written) = stream;
        let bs = self.shape.bs;
        if !(self.shape.leave_tail.is_some()
            && self.ends_input(pos, consumed)
            && !(written as u64).is_multiple_of(bs))
        {
            return Ok(Some(stream));
        }
        let full = (written as u64 / bs * bs) as usize;
        let r = match (self.lz4_cut_within(pos, stream, full), full) {
            (Some(r), _) => r,
            (None, 0) => (0, 0),
            (None, _) => fixed_output(self.enc, self.src(pos), &mut self.dst[..full])?,
        };
        Ok(((r.0 as u64) >= bs).then_some(r))
    }

    /// LZ4: the stream from `pos` cut shorter to fit `full` bytes (its
    /// sequences up to the longest prefix that fits, then literals), which
    /// costs no second compression. `None` for other codecs, where nothing
    /// fits, or where the cut leaves the rest much more than the stream's
    /// ratio says (a long match crossed the cut) or more than a pcluster:
    /// compressed again, the blocks would hold most of it.
    fn lz4_cut_within(
        &mut self,
        pos: usize,
        (consumed, written): Stream,
        full: usize,
    ) -> Option<Stream> {
        if !self.inplace || full == 0 {
            return None;
        }
        let ratio_rest = (written - full) as u64 * consumed as u64 / written as u64;
        let most_rest = ratio_rest
            .saturating_mul(2)
            .saturating_add(self.shape.bs)
            .min(self.shape.pcluster);
        let keep =
            ferrofs_codec::lz4cut::longest_prefix_within(&self.dst[..written], consumed, full)
                .filter(|&keep| (consumed - keep) as u64 <= most_rest)?;
        let src = self.src(pos);
        let w = ferrofs_codec::lz4cut::truncate_block(&mut self.dst, written, src, keep)?;
        (w <= full).then_some((keep, w))
    }

    /// LZ4: keeps the kernel's in-place margin (paper §3.3), ending an
    /// extent that is not the segment's last early enough in its last page
    /// that the page can hold the compressed data and the decoded data at
    /// once.
    fn keep_inplace_margin(&mut self, pos: usize, stream: Stream) -> Result<Stream> {
        let (consumed, written) = stream;
        if !self.inplace
            || self.shape.by_content
            || self.shape.page_end
            || self.ends_input(pos, consumed)
        {
            return Ok(stream);
        }
        let la = self.base + pos as u64;
        let oend = la % 4096 + consumed as u64;
        let margin = oend.div_ceil(4096) * 4096 - oend;
        let need = (written as u64 >> 8) + 32;
        if margin >= need || consumed as u64 <= need - margin + self.shape.bs {
            return Ok(stream);
        }
        // The block's sequences up to the shorter end, and the
        // rest as literals: no larger, so the margin still holds
        // (compressed again only if the block cannot be cut).
        let src = self.src(pos);
        let shorter = consumed - (need - margin) as usize;
        match ferrofs_codec::lz4cut::truncate_block(&mut self.dst, written, src, shorter) {
            Some(w) => Ok((shorter, w)),
            None => fixed_output(self.enc, &src[..shorter], &mut self.dst),
        }
    }

    /// With [`Shape::page_end`]: the stream from `pos` cut to end on the
    /// last page boundary it reaches (unless it ends the segment or
    /// reaches none). LZ4's block is cut where it stands; the other
    /// codecs' stream is kept whole and its extent ends on the boundary,
    /// a partial reference (`true`: the kernel decodes the stream only that
    /// far, and the next extent starts there): no second compression.
    fn end_on_page(&mut self, pos: usize, stream: Stream) -> Result<(Stream, bool)> {
        const PAGE: u64 = 4096;
        let (mut consumed, mut written) = stream;
        if !self.shape.page_end || self.ends_input(pos, consumed) {
            return Ok((stream, false));
        }
        let la = self.base + pos as u64;
        loop {
            let end = (la + consumed as u64) / PAGE * PAGE;
            if end <= la || end == la + consumed as u64 {
                return Ok(((consumed, written), false));
            }
            let keep = (end - la) as usize;
            if !self.inplace {
                // The whole stream, of which the extent takes `keep` bytes.
                return Ok(((keep, written), true));
            }
            // LZ4: the block cut short where it stands (as the in-place
            // margin does), not compressed again.
            let src = self.src(pos);
            if let Some(w) =
                ferrofs_codec::lz4cut::truncate_block(&mut self.dst, written, src, keep)
            {
                (consumed, written) = (keep, w);
                continue;
            }
            (consumed, written) = fixed_output(self.enc, &src[..keep], &mut self.dst)?;
            if consumed == 0 {
                // (`dst` no longer holds `stream`: make it again, unaligned.)
                let src = &self.src(pos)[..stream.0];
                return Ok((fixed_output(self.enc, src, &mut self.dst)?, false));
            }
        }
    }

    /// Whether the stream from `pos` becomes a compressed extent: it saves
    /// a block, or it ends the segment and shrinks at all.
    fn takes_stream(&self, pos: usize, (consumed, written): Stream) -> bool {
        let bs = self.shape.bs;
        let at_end = self.ends_input(pos, consumed);
        let blocks_in = (consumed as u64).div_ceil(bs);
        let blocks_out = (written as u64).div_ceil(bs);
        let long_enough = consumed as u64 >= bs || at_end;
        // A last extent that saves no block is kept (a shorter stream can
        // still go inline), but the writer stores it raw in its input's
        // blocks, so more than one only where a NONHEAD lcluster follows
        // the head to hold the count.
        let c = (self.base + pos as u64) % bs;
        let countable = blocks_in <= 1 || c + consumed as u64 >= 2 * bs;
        consumed > 0
            && written > 0
            && long_enough
            && (blocks_out < blocks_in || (at_end && written < consumed && countable))
    }

    /// The raw extent at `pos`: as much as a pcluster holds.
    fn raw_extent(&self, pos: usize) -> Extent {
        let Shape {
            pcluster,
            bs,
            big,
            ztail,
            ..
        } = self.shape;
        let c = (self.base + pos as u64) % bs;
        let rest = (self.end - pos) as u64;
        let mut llen = rest.min(pcluster).min(self.cap as u64);
        if ztail && big && llen == rest && rest > bs && !rest.is_multiple_of(bs) {
            // Whole blocks only: the rest, less than a block, is the last
            // pcluster, which may shrink and go inline.
            llen = rest / bs * bs;
        }
        if !big || (llen > bs && llen < 2 * bs && c + llen < 2 * bs) {
            llen = llen.min(bs);
        }
        Extent::new(self.base + pos as u64, llen, None)
    }
}

/// [`Encoder::compress_fixed_output`], its error a build error.
fn fixed_output(enc: &mut Encoder, src: &[u8], dst: &mut [u8]) -> Result<Stream> {
    enc.compress_fixed_output(src, dst)
        .map_err(|e| BuildError::Option(format!("compression failed: {e}")))
}

#[cfg(test)]
mod tests;
