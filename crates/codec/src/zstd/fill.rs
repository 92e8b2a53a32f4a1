//! Fixed-size zstd output in one pass: the input goes into one streaming
//! frame piece by piece, each piece flushed (so the output so far is a
//! frame prefix of whole blocks), each piece aimed at a fraction of the
//! room left, measured by the ratio seen so far in this frame. When a
//! flush does not fit, the frame is cut back to the last flush that did
//! and closed with an empty last block. Every input byte is compressed
//! about once, where a prefix search compresses the pcluster's input two
//! to five times; the price is a few more zstd blocks per frame.
//!
//! A piece that overflows with much room left (the data turned less
//! compressible than the ratio said) starts the frame again with smaller
//! pieces, at most [`RESTARTS`] times.
//!
//! Encoder side only: lengths here come from the builder's buffers.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    clippy::cast_sign_loss
)]

use zstd_safe::zstd_sys::ZSTD_EndDirective;
use zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer, ResetDirective};

use crate::fit::Fit;
use crate::{Algorithm, CodecError};

/// An empty raw block marked last: 3-byte header, Last_Block = 1,
/// Block_Type = Raw, Block_Size = 0. It closes a frame cut after a flush.
const LAST_EMPTY_BLOCK: [u8; 3] = [1, 0, 0];
/// Ratio assumed for the first piece of the first frame.
const FIRST_RATIO: f64 = 3.0;
/// The first piece aims at this fraction of the output...
const FIRST_AIM: f64 = 0.3;
/// ...later ones at this fraction of the room left. Lower aims flush
/// more often, so fewer pieces overflow with much room left and start the
/// frame again (each restart compresses the pcluster's input once more):
/// at 0.4 instead of 0.75 the densest zstd build (level 15, 128 KiB
/// pclusters) took 0.76x the wall time on a Debian root (+0.12 % bytes),
/// 0.77x on the Go toolchain (+0.21 %) and 0.75x on Rust crate sources
/// (-0.26 %: there the restarts ran out before the room was used), whose
/// input, ordered by similarity, changes ratio often. Outputs under
/// [`SMALL_OUTPUT`] keep [`SMALL_AIM`]: in a few blocks, each flush costs
/// more of the room (at 16 KiB, 0.4 left 1.1 % of the input a one-shot
/// frame fits, 0.75 0.1 %).
const AIM: f64 = 0.4;
/// The aim of later pieces into outputs under [`SMALL_OUTPUT`].
const SMALL_AIM: f64 = 0.75;
/// Outputs under this many bytes aim at [`SMALL_AIM`].
const SMALL_OUTPUT: usize = 32 << 10;
/// Smallest piece fed (input bytes).
const MIN_PIECE: usize = 256;
/// Frames restarted with smaller pieces at most this often per call.
const RESTARTS: u32 = 2;
/// A piece is at most this many times the input the frame took before it.
const GROWTH: f64 = 4.0;
/// The ratio a first piece may assume, at most (one very compressible
/// run must not make the next frame start with megabytes).
const MAX_FIRST_RATIO: f64 = 8.0;

/// Room left at which a frame is closed: 1/512 of the output (0.2 %),
/// at least 16 bytes.
fn enough(cap: usize) -> usize {
    (cap / 512).max(16)
}

/// Sources over this many bytes get zstd's parameter table for large
/// inputs (`ZSTD_estimateCParams`' size classes).
const LARGE_SOURCE: u64 = 256 << 10;

/// Levels whose large-input parameters are tuned for streams of megabytes:
/// the binary-tree lazy match finder (btlazy2) with 5-byte minimum matches
/// and 1 Mi-entry hash and chain tables.
const LARGE_TABLE_LEVELS: std::ops::RangeInclusive<i32> = 13..=15;

/// What [`LARGE_TABLE_LEVELS`] use for a frame over [`LARGE_SOURCE`]
/// (minimum match, chain log, hash log): the same match finder with
/// zstd's own choices for it on smaller inputs (its level 12 row up to
/// 256 KiB: 4-byte minimum matches, 512 Ki-entry tables). A pcluster's
/// frame holds a few hundred KiB, where the shorter matches pay. Level
/// 15 at 128 KiB pclusters (densest preset): 1.6 % smaller on a
/// directory of shared libraries for 8 % more CPU, 1.0 % on a Go
/// toolchain, 0.25 % on a Debian root (mostly text) for 4 %.
const FRAME_MATCH_FINDER: (u32, u32, u32) = (4, 19, 19);

/// What [`LARGE_TABLE_LEVELS`] use instead for a frame over
/// [`LARGE_SOURCE`] of machine code (FPC §3.2.2: the codec's settings
/// chosen per class of data): the optimal parser (btopt) with 3-byte
/// minimum matches, a target length of 16, 4 candidates per position and
/// 256 Ki-entry tables (minimum match, target length, search log, chain
/// log, hash log). Machine code is full of short matches that btlazy2's
/// 4-byte floor cannot take. Level 15 at 128 KiB pclusters (densest
/// preset), against the frame finder above: 2.2 % smaller on the Go
/// toolchain's binaries, 2.3 % on Debian's /usr/bin, 3.7 % on a sample of
/// /usr/lib/x86_64-linux-gnu's shared libraries, for about 16 % more CPU
/// on them (bench/results/densest-32.md). Searching 8 candidates instead
/// of 4 is 0.5 % smaller still for 10 % more CPU; zstd's own level-15 row
/// for small inputs (64 candidates, a target of 128) 0.7 % for twice it.
/// The price on the read side: the Go toolchain's image decodes in about
/// 15 % more CPU than with the frame finder (1.4 % larger); 4-byte
/// minimum matches here keep most of that cost (read-3trees.md, session
/// 30).
const MACHINE_CODE_MATCH_FINDER: (u32, u32, u32, u32, u32) = (3, 16, 2, 18, 18);

/// The match finder of a frame.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Finder {
    /// The level's own, for the frame's size.
    Level,
    /// [`FRAME_MATCH_FINDER`].
    Frame,
    /// [`MACHINE_CODE_MATCH_FINDER`].
    MachineCode,
}

/// The fill state kept between calls: the level, and the ratio of the
/// last frame.
pub(crate) struct Filler {
    level: i32,
    ratio: Option<f64>,
    /// The next frames hold machine code.
    pub(crate) machine_code: bool,
}

/// Where the frame stood after a flush that fit.
#[derive(Clone, Copy)]
struct Mark {
    consumed: usize,
    written: usize,
}

/// How a frame is cut into pieces.
#[derive(Clone, Copy)]
struct Schedule {
    /// Input per output byte assumed until the frame has output.
    ratio: f64,
    /// Each piece aims at this fraction of the room left.
    aim: f64,
    /// A piece is at most this many times the input taken so far.
    growth: f64,
    /// A first piece known to fit (from an earlier attempt), or 0.
    prefix: usize,
}

impl Filler {
    /// A filler for frames of zstd level `level`.
    pub(crate) fn new(level: i32) -> Self {
        Filler {
            level,
            ratio: None,
            machine_code: false,
        }
    }

    /// The level frames are made at.
    pub(crate) fn level(&self) -> i32 {
        self.level
    }

    /// Forgets the ratio learned from earlier calls.
    pub(crate) fn forget(&mut self) {
        self.ratio = None;
    }

    /// Compresses the longest prefix of `src` this schedule fits into
    /// `dst`, as one zstd frame.
    pub(crate) fn fill(
        &mut self,
        cctx: &mut CCtx<'static>,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Fit, CodecError> {
        let cap = dst.len().saturating_sub(LAST_EMPTY_BLOCK.len());
        // zstd picks its match finder by source size: for a frame of
        // unknown size it takes the one for large inputs, much weaker
        // below 256 KiB than what a one-shot frame of that size gets.
        // Say what this frame will likely take (a little less: where the
        // guess straddles a size class, the smaller class's stronger
        // match finder is the safer side).
        let expect = 0.9 * cap as f64 * self.ratio.unwrap_or(FIRST_RATIO);
        let hint = u32::try_from((expect as u64).max(1)).unwrap_or(u32::MAX);
        let finder =
            match u64::from(hint) > LARGE_SOURCE && LARGE_TABLE_LEVELS.contains(&self.level) {
                false => Finder::Level,
                true if self.machine_code => Finder::MachineCode,
                true => Finder::Frame,
            };
        set_match_finder(cctx, self.level, finder)?;
        cctx.set_parameter(CParameter::SrcSizeHint(hint))
            .map_err(internal)?;
        let mut plan = Schedule {
            ratio: self
                .ratio
                .unwrap_or(FIRST_RATIO)
                .clamp(1.0, MAX_FIRST_RATIO),
            aim: if cap < SMALL_OUTPUT { SMALL_AIM } else { AIM },
            growth: GROWTH,
            prefix: 0,
        };
        let mut trials = 0;
        let mark = loop {
            trials += 1;
            let (mark, overflowed) = frame(cctx, src, &mut dst[..cap], plan)?;
            let left = cap - mark.written;
            if !overflowed || left <= 2 * enough(cap) || trials > RESTARTS {
                break mark;
            }
            // Less compressible than hoped: the same frame again, what
            // fit as its first piece, then smaller pieces growing slower.
            plan = Schedule {
                ratio: plan.ratio / 4.0,
                aim: plan.aim / 2.0,
                growth: 1.0 + (plan.growth - 1.0) / 4.0,
                prefix: mark.consumed,
            };
        };
        if mark.consumed == 0 {
            return Ok(Fit {
                consumed: 0,
                written: 0,
                trials,
            });
        }
        let end = mark.written + LAST_EMPTY_BLOCK.len();
        dst[mark.written..end].copy_from_slice(&LAST_EMPTY_BLOCK);
        self.ratio = Some(mark.consumed as f64 / end as f64);
        Ok(Fit {
            consumed: mark.consumed,
            written: end,
            trials,
        })
    }
}

/// One frame into `out`: pieces fed and flushed until the input ends, the
/// room left is [`enough`], or a flush overflows (`true`). Returns the
/// last flush that fit.
fn frame(
    cctx: &mut CCtx<'static>,
    src: &[u8],
    out: &mut [u8],
    plan: Schedule,
) -> Result<(Mark, bool), CodecError> {
    cctx.reset(ResetDirective::SessionOnly).map_err(internal)?;
    let cap = out.len();
    let mut output = OutBuffer::around(out);
    let mut mark = Mark {
        consumed: 0,
        written: 0,
    };
    while mark.consumed < src.len() && cap - mark.written > enough(cap) {
        let room = (cap - mark.written) as f64;
        let piece = if mark.written == 0 {
            match plan.prefix {
                0 => (room * FIRST_AIM.min(plan.aim) * plan.ratio) as usize,
                p => p,
            }
        } else {
            let r = mark.consumed as f64 / mark.written as f64;
            let by_room = room * plan.aim * r;
            by_room.min(mark.consumed as f64 * plan.growth) as usize
        };
        let end = mark.consumed + piece.max(MIN_PIECE).min(src.len() - mark.consumed);
        let mut input = InBuffer::around(&src[mark.consumed..end]);
        loop {
            let pending = cctx
                .compress_stream2(&mut output, &mut input, ZSTD_EndDirective::ZSTD_e_flush)
                .map_err(internal)?;
            if pending == 0 && input.pos() == input.src.len() {
                break;
            }
            if output.pos() == cap {
                return Ok((mark, true));
            }
        }
        mark = Mark {
            consumed: end,
            written: output.pos(),
        };
    }
    Ok((mark, false))
}

/// Starts the context over (a frame the last call cut is still open) with
/// every frame's settings: `level`, a window of at most
/// [`ZSTD_ENCODER_WINDOW_LOG`](super::ZSTD_ENCODER_WINDOW_LOG), no
/// checksum, the content size in the header; and `finder`'s parameters
/// (the ones a frame before may have changed go back to the level's).
pub(crate) fn set_match_finder(
    cctx: &mut CCtx<'static>,
    level: i32,
    finder: Finder,
) -> Result<(), CodecError> {
    cctx.reset(ResetDirective::SessionAndParameters)
        .map_err(internal)?;
    let mut params = vec![
        CParameter::CompressionLevel(level),
        CParameter::WindowLog(super::ZSTD_ENCODER_WINDOW_LOG),
        CParameter::ChecksumFlag(false),
        CParameter::ContentSizeFlag(true),
    ];
    match finder {
        Finder::Level => {}
        Finder::Frame => {
            let (min_match, chain_log, hash_log) = FRAME_MATCH_FINDER;
            params.extend([
                CParameter::MinMatch(min_match),
                CParameter::ChainLog(chain_log),
                CParameter::HashLog(hash_log),
            ]);
        }
        Finder::MachineCode => {
            let (min_match, target, search_log, chain_log, hash_log) = MACHINE_CODE_MATCH_FINDER;
            params.extend([
                CParameter::Strategy(zstd_safe::Strategy::ZSTD_btopt),
                CParameter::MinMatch(min_match),
                CParameter::TargetLength(target),
                CParameter::SearchLog(search_log),
                CParameter::ChainLog(chain_log),
                CParameter::HashLog(hash_log),
            ]);
        }
    }
    for p in params {
        cctx.set_parameter(p).map_err(internal)?;
    }
    Ok(())
}

fn internal(code: usize) -> CodecError {
    CodecError::internal(Algorithm::Zstd, zstd_safe::get_error_name(code).to_owned())
}
