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
mod tests {
    use super::*;
    use crate::options::compress::Compressor;

    /// The shape of a build with 4 KiB blocks and `pcl`-byte pclusters.
    fn shape(pcl: u64, leave_tail: Option<u64>, ztail: bool) -> Shape {
        Shape {
            pcluster: pcl,
            bs: 4096,
            big: pcl > 4096,
            leave_tail,
            max_extent: None,
            ztail,
            cut_end: false,
            by_content: false,
            page_end: false,
        }
    }

    #[test]
    fn elf_files_and_static_archives_are_machine_code() {
        assert!(is_machine_code(b"\x7fELF\x02\x01\x01\0"));
        assert!(is_machine_code(b"!<arch>\n"));
        assert!(!is_machine_code(b"!<thin>\n"));
        assert!(!is_machine_code(b"#!/bin/sh"));
        assert!(!is_machine_code(b"\x7fEL"));
    }

    #[test]
    fn segments_tile_the_input_and_respect_the_lcluster_rules() {
        let bs = 4096;
        let mut data = Vec::new();
        for i in 0..20000 {
            data.extend_from_slice(format!("{i} some text that compresses well\n").as_bytes());
        }
        // Random-ish part that does not compress.
        let mut x = 12345u64;
        for _ in 0..50000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            data.push(x as u8);
        }
        for (alg, pcl, ztail) in [
            ("lz4", 4096u64, false),
            ("lz4hc", 65536, false),
            ("zstd", 16384, false),
            ("lz4hc", 65536, true),
            ("zstd", 16384, true),
        ] {
            let mut enc = Compressor::parse(alg).unwrap().encoder(pcl).unwrap();
            let shape = shape(pcl, None, ztail);
            let (ex, saves) = compress_segment(&mut enc, &data, 0, &shape, false).unwrap();
            assert!(saves, "{alg}: text start compresses");
            let mut pos = 0;
            for (k, e) in ex.iter().enumerate() {
                assert_eq!(e.la, pos);
                assert!(e.blocks(bs) * bs <= pcl);
                if k + 1 < ex.len() {
                    assert!(e.llen >= bs, "{alg}: short extent {k}");
                }
                if e.blocks(bs) > 1 {
                    assert!(
                        e.la % bs + e.llen >= 2 * bs,
                        "{alg}: extent {k} does not reach lcluster h+2"
                    );
                }
                if e.compressed.is_none() {
                    assert!(e.llen <= e.blocks(bs) * bs);
                }
                pos += e.llen;
            }
            assert_eq!(pos, data.len() as u64);
            assert!(ex.iter().any(|e| e.compressed.is_some()));
            assert!(
                ex.iter().any(|e| e.compressed.is_none()),
                "{alg}: random tail stored raw"
            );
        }
    }

    #[test]
    fn a_segment_cut_off_a_block_boundary_leaves_the_next_its_lcluster() {
        // Segments that end at a content-defined cut (any byte), just past
        // where the first extent ends on its own: the last extent starts
        // at least two lclusters before the cut's, so the next segment's
        // head has the cut's lcluster and a multi-block last extent its
        // NONHEAD; where the first extent would end too near the cut, it
        // is made shorter.
        let bs = 4096u64;
        let data = ferrofs_testkit::corpus::mixed_bytes(1 << 20, 9);
        for (alg, pcl) in [("lz4hc", 131_072u64), ("zstd", 65536), ("lz4", 16384)] {
            let mut enc = Compressor::parse(alg).unwrap().encoder(pcl).unwrap();
            let mut limited = 0;
            for base in [5_000_123u64, 77] {
                let plain = shape(pcl, None, false);
                let e0 = first_extent(&mut enc, &data, base, &plain)
                    .unwrap()
                    .unwrap();
                let from = e0.llen as usize;
                for end in (from..from + 3 * bs as usize).step_by(97) {
                    let shape = Shape {
                        cut_end: true,
                        by_content: true,
                        ..plain
                    };
                    let (ex, _) =
                        compress_segment(&mut enc, &data[..end], base, &shape, false).unwrap();
                    let cut = base + end as u64;
                    let mut pos = base;
                    for e in &ex {
                        assert_eq!(e.la, pos, "{alg}: extents tile the segment");
                        assert!(e.blocks(bs) * bs <= pcl);
                        if e.blocks(bs) > 1 {
                            assert!(e.la % bs + e.llen >= 2 * bs, "{alg}: no NONHEAD");
                        }
                        pos += e.llen;
                    }
                    assert_eq!(pos, cut, "{alg}: extents end at the cut");
                    let last = ex.last().unwrap();
                    assert!(
                        last.la / bs + 2 <= cut / bs,
                        "{alg}: last extent at {} too near the cut at {cut}",
                        last.la
                    );
                    if ex[0].llen < e0.llen {
                        limited += 1;
                    }
                }
            }
            assert!(limited > 0, "{alg}: no first extent was made shorter");
        }
    }

    #[test]
    fn short_tails_after_a_big_pcluster_stay_readable() {
        // A multi-block pcluster needs a NONHEAD lcluster after its head
        // (it holds the block count): a last extent of one to two blocks
        // that ends in the lcluster after its head must be one block. A
        // 72,911-byte PNG hit this: 66,389 bytes compressed, then 6,522
        // that did not save a block, stored raw in two blocks.
        let bs = 4096;
        let mut text = Vec::new();
        for i in 0..4000 {
            text.extend_from_slice(format!("{i} some text that compresses well\n").as_bytes());
        }
        // Noise that LZ4 shrinks by a few percent (8 repeated bytes in
        // every 72): a short tail of it compresses, but not by a block.
        let random = ferrofs_testkit::corpus::random_bytes(3 * 65536, 7);
        let mut noise = Vec::new();
        for chunk in random.chunks(64) {
            noise.extend_from_slice(chunk);
            let back = noise.len().saturating_sub(1000);
            noise.extend_from_within(back..back + 8);
        }
        let mut enc = Compressor::parse("lz4hc,12")
            .unwrap()
            .encoder(65536)
            .unwrap();
        let shape = shape(65536, None, false);
        let mut checked = 0;
        for head in (0..60000).step_by(1999) {
            // Some text, then noise: the first pcluster ends somewhere in
            // the noise; the file then ends 1 to 2 blocks later, before
            // the lcluster after next.
            let mut long = text[..head].to_vec();
            long.extend_from_slice(&noise);
            let first = first_extent(&mut enc, &long, 0, &shape).unwrap().unwrap();
            let c = first.llen % bs;
            for tail in (bs + 1..2 * bs - c).step_by(211) {
                let data = &long[..(first.llen + tail) as usize];
                for ztail in [false, true] {
                    let s = Shape { ztail, ..shape };
                    let (ex, _) = compress_segment(&mut enc, data, 0, &s, false).unwrap();
                    assert_eq!(ex.iter().map(|e| e.llen).sum::<u64>(), data.len() as u64);
                    for (k, e) in ex.iter().enumerate() {
                        if e.stored_blocks(bs) > 1 {
                            assert!(
                                e.la % bs + e.llen >= 2 * bs,
                                "head {head} tail {tail}: extent {k} at {} of {} bytes takes {} \
                             blocks but has no NONHEAD lcluster",
                                e.la,
                                e.llen,
                                e.stored_blocks(bs)
                            );
                        }
                    }
                }
                checked += 1;
            }
        }
        assert!(checked > 0);
    }

    /// LZ4 extents (but a segment's last) keep the kernel's in-place
    /// margin, which depends on where in its page an extent ends; a file
    /// cut by content keeps none, so the same bytes make the same extents
    /// wherever they lie in the file, for liblz4 and for the machine-code
    /// encoder alike.
    #[test]
    fn a_file_cut_by_content_compresses_its_bytes_alike_at_any_offset() {
        let data = ferrofs_testkit::corpus::mixed_bytes(3 << 20, 5);
        let pcl = 131_072u64;
        let relative = |ex: &[Extent], base: u64| -> Vec<(u64, u64, Option<Vec<u8>>)> {
            ex.iter()
                .map(|e| (e.la - base, e.llen, e.compressed.clone()))
                .collect()
        };
        for machine_code in [false, true] {
            let mut enc = Compressor::parse("lz4hc,12").unwrap().encoder(pcl).unwrap();
            enc.set_machine_code(machine_code);
            let mut runs = Vec::new();
            for by_content in [false, true] {
                let shape = Shape {
                    by_content,
                    ..shape(pcl, None, false)
                };
                let mut alike = true;
                let (first, _) = compress_segment(&mut enc, &data, 0, &shape, false).unwrap();
                for base in [77u64, 4096 * 1000 + 3001, 2050] {
                    let (ex, _) = compress_segment(&mut enc, &data, base, &shape, false).unwrap();
                    alike &= relative(&ex, base) == relative(&first, 0);
                    let (_, rest) = ex.split_last().unwrap();
                    let kept = rest.iter().all(|e| {
                        let oend = e.la % 4096 + e.llen;
                        let need = e.compressed.as_ref().map_or(0, |c| c.len() as u64) / 256 + 32;
                        oend.div_ceil(4096) * 4096 - oend >= need
                    });
                    // Without content cuts the margin holds; with them it
                    // is not looked at.
                    assert!(kept || by_content, "machine code {machine_code}: margin");
                }
                runs.push(alike);
            }
            assert_eq!(runs, [false, true], "machine code {machine_code}");
        }
    }

    /// With a fragment to take the file's tail, an LZ4 segment's last
    /// stream ends in whole blocks by cutting the stream shorter, not by
    /// compressing again: every extent decodes to exactly its bytes, the
    /// last fills whole blocks, and it leaves the fragment no more than a
    /// second compression into those blocks would (within a sequence; on
    /// these lines of text the two differ by at most 223 bytes).
    #[test]
    fn an_lz4_tail_for_the_fragment_is_cut_from_the_stream() {
        let bs = 4096u64;
        let pcl = 65536u64;
        let mut data = Vec::new();
        for i in 0u64..40_000 {
            let w = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52;
            data.extend_from_slice(format!("{i} {w:x} a line of text, {}\n", i % 97).as_bytes());
        }
        let mut dec = ferrofs_codec::Decoder::new(ferrofs_codec::DecoderConfig::default());
        for alg in ["lz4hc,12", "lz4"] {
            let mut enc = Compressor::parse(alg).unwrap().encoder(pcl).unwrap();
            let mut checked = 0;
            for len in (150_000..400_000).step_by(12_347) {
                let input = &data[..len];
                let shape = shape(pcl, Some(pcl), false);
                let (ex, _) = compress_segment(&mut enc, input, 0, &shape, false).unwrap();
                let mut at = 0u64;
                for e in &ex {
                    assert_eq!(e.la, at);
                    let c = e.compressed.as_ref().unwrap();
                    let mut out = vec![0u8; e.llen as usize];
                    dec.decompress(
                        Algorithm::Lz4,
                        c,
                        &mut out,
                        ferrofs_codec::DecodeMode::Exact,
                    )
                    .unwrap();
                    assert!(out == input[e.la as usize..(e.la + e.llen) as usize]);
                    at += e.llen;
                }
                let last = ex.last().unwrap();
                let written = last.compressed.as_ref().unwrap().len() as u64;
                let rest = len as u64 - at;
                if rest == 0 {
                    continue;
                }
                // What compressing the last extent's input again into its
                // whole blocks would have left.
                let blocks = written.div_ceil(bs) * bs;
                let mut again = vec![0u8; blocks as usize];
                let (took, _) = enc
                    .compress_fixed_output(&input[last.la as usize..], &mut again)
                    .unwrap();
                let rest_again = len as u64 - last.la - took as u64;
                assert!(
                    rest <= rest_again + 300,
                    "{alg} {len}: {rest} left vs {rest_again}"
                );
                checked += 1;
            }
            assert!(checked > 5, "{alg}: {checked} tails");
        }
    }

    #[test]
    fn ztail_ends_a_file_with_a_pcluster_shorter_than_a_block() {
        let bs = 4096;
        let mut text = Vec::new();
        for i in 0..2000 {
            text.extend_from_slice(format!("{i} a line of text, said twice\n").as_bytes());
        }
        let random = ferrofs_testkit::corpus::random_bytes(65536, 11);
        let cut = |data: &[u8], ztail: bool| {
            let mut enc = Compressor::parse("lz4hc").unwrap().encoder(65536).unwrap();
            compress_segment(&mut enc, data, 0, &shape(65536, None, ztail), true).unwrap()
        };
        // A file of less than a block saves no block, but it shrinks: with
        // ztailpacking it is kept, one stream that can go inline.
        let small = &text[..3000];
        assert_eq!(cut(small, false), (Vec::new(), false));
        let (ex, keep) = cut(small, true);
        assert!(keep);
        assert_eq!(ex.len(), 1);
        assert!(ex[0].compressed.as_ref().unwrap().len() < 3000);
        // Text then noise: the whole compresses to more than a block that
        // ends partly empty; made again into one whole block, the rest is
        // a last pcluster of less than a block.
        let mut mixed = text[..5000].to_vec();
        mixed.extend_from_slice(&random[..5000]);
        let (whole, _) = cut(&mixed, false);
        let (ex, keep) = cut(&mixed, true);
        assert!(keep);
        assert_eq!(ex.iter().map(|e| e.llen).sum::<u64>(), mixed.len() as u64);
        let (last, rest) = ex.split_last().unwrap();
        assert!(last.llen < bs, "{ex:?}");
        let blocks = |ex: &[Extent]| ex.iter().map(|e| e.stored_blocks(bs)).sum::<u64>();
        assert!(blocks(rest) < blocks(&whole), "{whole:?} vs {ex:?}");
        // Noise then text: no block saved, so whole blocks are stored raw
        // and the rest, less than a block, is compressed on its own.
        let mut mixed = random[..9000].to_vec();
        mixed.extend_from_slice(&text[..1000]);
        let (ex, keep) = cut(&mixed, true);
        assert!(keep);
        assert_eq!(ex.len(), 2, "{ex:?}");
        assert_eq!((ex[0].llen, ex[0].compressed.is_none()), (2 * bs, true));
        assert!(ex[1].compressed.as_ref().unwrap().len() < ex[1].llen as usize);
        // Without ztailpacking such a file is stored flat.
        assert!(!cut(&mixed, false).1);
    }

    /// With `page_end`, every extent but the last ends on a page of the
    /// file, whatever page offset the segment starts at, with every codec,
    /// and the extents still tile the input and decode to it (LZMA,
    /// DEFLATE and zstd as partial references to their streams). Without
    /// it, fixed-size output ends mid-page.
    #[test]
    fn page_ends_put_every_extent_end_but_the_last_on_a_page() {
        let mut data = Vec::new();
        for i in 0..40000 {
            data.extend_from_slice(format!("{i} line {} of text\n", i * 7 % 23).as_bytes());
        }
        let mut dec = ferrofs_codec::Decoder::new(ferrofs_codec::DecoderConfig::default());
        for (alg, algo) in [
            ("lzma,6", Algorithm::Lzma),
            ("zstd", Algorithm::Zstd),
            ("deflate", Algorithm::Deflate),
            ("lz4hc,12", Algorithm::Lz4),
        ] {
            let pcl = 16384u64;
            let mut enc = Compressor::parse(alg).unwrap().encoder(pcl).unwrap();
            for base in [0u64, 1000, 4096 * 3 + 17] {
                let on = Shape {
                    page_end: true,
                    ..shape(pcl, None, false)
                };
                let (ex, _) = compress_segment(&mut enc, &data, base, &on, false).unwrap();
                assert!(ex.len() > 2, "{alg}");
                let mut at = base;
                let mut partial = 0;
                for e in &ex {
                    assert_eq!(e.la, at, "{alg}");
                    let src = &data[(at - base) as usize..][..e.llen as usize];
                    if let Some(c) = &e.compressed {
                        // A stream cut short of its end on the page is a
                        // partial reference: its first llen bytes are the
                        // extent's. LZ4's is cut where it stands instead.
                        let mode = match e.partial {
                            true => ferrofs_codec::DecodeMode::Prefix,
                            false => ferrofs_codec::DecodeMode::Exact,
                        };
                        assert!(!(e.partial && algo == Algorithm::Lz4), "{alg}");
                        let mut out = vec![0u8; src.len()];
                        dec.decompress(algo, c, &mut out, mode).unwrap();
                        assert!(out == src, "{alg} at {at}");
                    }
                    partial += usize::from(e.partial);
                    at += e.llen;
                }
                assert_eq!(partial > 0, algo != Algorithm::Lz4, "{alg} at {base}");
                assert_eq!(at, base + data.len() as u64, "{alg}");
                let ends_on_page = ex[..ex.len() - 1]
                    .iter()
                    .filter(|e| (e.la + e.llen) % 4096 == 0)
                    .count();
                assert_eq!(ends_on_page, ex.len() - 1, "{alg} at {base}");
                let (off, _) =
                    compress_segment(&mut enc, &data, base, &shape(pcl, None, false), false)
                        .unwrap();
                assert!(
                    off[..off.len() - 1]
                        .iter()
                        .any(|e| (e.la + e.llen) % 4096 != 0),
                    "{alg}"
                );
            }
        }
    }

    #[test]
    fn first_extent_is_the_first_of_the_segment() {
        let mut data = Vec::new();
        for i in 0..30000 {
            data.extend_from_slice(format!("{i} line of text {}\n", i % 17).as_bytes());
        }
        for (alg, pcl, leave) in [
            ("lz4hc,12", 65536u64, None),
            ("lz4", 4096, Some(4096)),
            ("zstd", 16384, None),
        ] {
            let mut enc = Compressor::parse(alg).unwrap().encoder(pcl).unwrap();
            for base in [0u64, 8192, 123 * 4096] {
                let shape = shape(pcl, leave, false);
                let (all, _) = compress_segment(&mut enc, &data, base, &shape, false).unwrap();
                let first = first_extent(&mut enc, &data, base, &shape).unwrap();
                assert!(all.len() > 1, "{alg}");
                assert_eq!(first.as_ref(), all.first(), "{alg} at {base}");
            }
        }
    }

    #[test]
    fn a_rest_fast_lz4_fits_in_two_pclusters_goes_to_the_fragment_whole() {
        let pcl = 16384u64;
        let mut text = Vec::new();
        let mut i = 0u64;
        while text.len() < 400_000 {
            text.extend_from_slice(format!("{i} {} lines of text\n", i * 7 % 1000).as_bytes());
            i += 1;
        }
        let random = ferrofs_testkit::corpus::random_bytes(200_000, 3);
        for alg in ["lzma,6", "zstd,15", "deflate,9"] {
            let mut enc = Compressor::parse(alg).unwrap().encoder(pcl).unwrap();
            let frag = shape(pcl, Some(pcl), false);
            // Text fast LZ4 fits into two pclusters (but longer than the
            // pcluster the rest used to have to fit in): no extent, all of
            // it for the fragment, and worth compressing.
            let short = &text[..60_000];
            let mut room = vec![0u8; 2 * pcl as usize];
            let lz4 = probe_encoder()
                .unwrap()
                .compress_fixed_output(short, &mut room);
            assert_eq!(lz4.unwrap().0, short.len());
            let (ex, keep) = compress_segment(&mut enc, short, 0, &frag, true).unwrap();
            assert!(ex.is_empty() && keep, "{alg}: {ex:?}");
            // Random data fast LZ4 cannot fit: compressed (or stored) as
            // before, up to a rest of at most a pcluster.
            let (ex, _) = compress_segment(&mut enc, &random, 0, &frag, false).unwrap();
            let covered: u64 = ex.iter().map(|e| e.llen).sum();
            assert!(
                covered > 0 && random.len() as u64 - covered <= 2 * pcl,
                "{alg}"
            );
            // Long text: extents while the rest is more than fast LZ4
            // fits into two pclusters, then a rest for the fragment.
            let (ex, _) = compress_segment(&mut enc, &text, 0, &frag, false).unwrap();
            let covered: u64 = ex.iter().map(|e| e.llen).sum();
            assert!(!ex.is_empty() && covered < text.len() as u64, "{alg}");
            // Without a fragment, nothing changes: the segment is covered.
            let plain = shape(pcl, None, false);
            let (ex, _) = compress_segment(&mut enc, short, 0, &plain, false).unwrap();
            assert_eq!(ex.iter().map(|e| e.llen).sum::<u64>(), short.len() as u64);
        }
    }
}
