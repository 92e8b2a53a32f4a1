//! Fixed-size output for compressors that have no such mode (DEFLATE,
//! zstd): find a long input prefix whose compressed size fits.
//!
//! Compressed size grows roughly linearly with input length, so each trial
//! extrapolates (or, once the target is bracketed, interpolates) the length
//! that should fill the output, aiming slightly under it. The search stops
//! when the best fitting length is within [`tolerance`] of the smallest
//! known overflowing one, or when all input fits. The first trial uses the
//! previous call's ratio (consecutive pieces of a file compress alike).
//! Typically 2–5 trials instead of the ~18 of bisection over
//! `[0, 32 × output]`.
//!
//! Encoder side only: lengths here come from the builder's own input and
//! output buffers, never from an image; float estimates are clamped into
//! the bracket before use (`as usize` from f64 saturates by definition).
#![allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

use crate::CodecError;

/// A compressor that turns a whole input into one stream.
pub(crate) trait WholeCompressor {
    /// Compress all of `src` into `out`: `Some(len)` written, or `None`
    /// when the stream does not fit in `out.len()` bytes.
    fn compress_into(&mut self, src: &[u8], out: &mut [u8]) -> Result<Option<usize>, CodecError>;
}

/// Without a ratio from an earlier call, the first trial compresses this
/// many times the output size (or all of `src` if shorter).
const FIRST_TRIAL_RATIO: f64 = 4.0;
/// With one, the first trial still takes at most this many times the
/// output size, so one zero run does not make the next call start huge.
const FIRST_TRIAL_MAX_RATIO: f64 = 64.0;
/// Scratch output is this many times the output size; larger outputs are
/// only known to be "too big".
const SCRATCH_RATIO: usize = 4;
/// Give up refining after this many trials and keep the best fit.
const MAX_TRIALS: u32 = 12;
/// Aim at this fraction of the output when estimating the next length...
const AIM: f64 = 0.995;
/// ...and lower while nothing has fit yet, so that a fit comes soon.
const AIM_NO_FIT: f64 = 0.98;
/// While nothing fits, shrink by at least this factor per trial, and
/// halve once two overflows in a row did not lead to a fit.
const MAX_SHRINK: f64 = 0.97;
/// While only fits are known, grow by at most this factor per trial.
const MAX_GROWTH: f64 = 8.0;

/// How close (in input bytes) the best fitting length must get to the
/// smallest known overflowing length: 1 %, at least 8 bytes.
pub(crate) fn tolerance(len: usize) -> usize {
    (len / 100).max(8)
}

/// Result of one search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fit {
    pub consumed: usize,
    pub written: usize,
    pub trials: u32,
}

/// A trial: input length and compressed size (for an overflow of the
/// scratch buffer, a lower bound).
#[derive(Debug, Clone, Copy)]
struct Point {
    len: usize,
    size: usize,
}

/// What is known so far.
#[derive(Default)]
struct Bracket {
    /// Longest length known to fit, and the fit before it.
    lo: Option<Point>,
    prev_lo: Option<Point>,
    /// Shortest length known not to fit, and the overflow before it.
    hi: Option<Point>,
    prev_hi: Option<Point>,
    /// Overflows seen.
    overflows: u32,
}

impl Bracket {
    fn record(&mut self, p: Point, fits: bool) {
        if fits {
            self.prev_lo = self.lo.replace(p);
        } else {
            self.prev_hi = self.hi.replace(p);
            self.overflows += 1;
        }
    }

    fn lo_len(&self) -> usize {
        self.lo.map_or(0, |p| p.len)
    }

    /// Stop when all input fits or the bracket is within the tolerance.
    /// (Stopping on "output nearly full" is tempting but wrong: a
    /// compressible stretch after the cut can add far more input for the
    /// last few output bytes.)
    fn done(&self, src_len: usize) -> bool {
        let lo = self.lo_len();
        let hi = self.hi.map_or(src_len + 1, |p| p.len);
        lo >= src_len || hi <= lo + 1 || (lo > 0 && hi - lo <= tolerance(lo))
    }

    /// The next length to try, strictly between the bracket's ends.
    fn next_len(&self, cap: usize, src_len: usize) -> usize {
        let cap_f = cap as f64;
        let target = cap_f * AIM;
        let estimate = match (self.lo, self.hi) {
            // Only overflows: follow the slope between the last two, or
            // scale by the ratio; shrink at least geometrically.
            (None, Some(h)) => {
                let aim = cap_f * AIM_NO_FIT;
                let by_ratio = h.len as f64 * aim / h.size.max(1) as f64;
                let guess = self
                    .prev_hi
                    .map_or(by_ratio, |p| secant(h, p, aim).min(by_ratio));
                let shrink = if self.overflows > 2 { 0.5 } else { MAX_SHRINK };
                guess.min(h.len as f64 * shrink)
            }
            // Only fits: extrapolate with the average ratio and with the
            // slope since the previous fit; take the bolder guess (an
            // overflow only tightens the bracket).
            (Some(l), None) => {
                let by_ratio = l.len as f64 * target / l.size.max(1) as f64;
                let by_slope = self.prev_lo.map_or(0.0, |p| secant(p, l, target));
                by_ratio.max(by_slope).min(l.len as f64 * MAX_GROWTH)
            }
            // Bracketed: interpolate.
            (Some(l), Some(h)) => secant(l, h, target),
            (None, None) => cap_f * FIRST_TRIAL_RATIO,
        };
        let lo = self.lo_len();
        let hi = self.hi.map_or(src_len + 1, |p| p.len);
        let step = if lo == 0 { 1 } else { tolerance(lo) };
        let ceil = hi.saturating_sub(1).max(lo + 1);
        let floor = lo.saturating_add(step).min(ceil);
        (estimate as usize).clamp(floor, ceil)
    }
}

/// The length at which the line through `a` and `b` reaches `target`
/// (`f64::MAX` when it never rises: the input is free to extend).
fn secant(a: Point, b: Point, target: f64) -> f64 {
    let (x0, y0) = (a.len as f64, a.size as f64);
    let (x1, y1) = (b.len as f64, b.size as f64);
    let slope = (y1 - y0) / (x1 - x0);
    if slope.is_finite() && slope > 0.0 {
        x0 + (target - y0) / slope
    } else {
        f64::MAX
    }
}

/// Reusable search state: the scratch buffer and the compression ratio of
/// the previous call, which predicts the next one (the builder compresses
/// consecutive pieces of the same file).
#[derive(Default)]
pub(crate) struct Search {
    scratch: Vec<u8>,
    ratio: Option<f64>,
}

impl Search {
    /// Drops the remembered ratio.
    pub fn forget(&mut self) {
        self.ratio = None;
    }

    /// Compress the longest prefix of `src` (within the tolerance) that
    /// fits in `dst`, leaving its stream at the start of `dst`. Returns
    /// (0, 0) when nothing fits.
    pub fn run<C: WholeCompressor>(
        &mut self,
        comp: &mut C,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Fit, CodecError> {
        let cap = dst.len();
        let mut fit = Fit {
            consumed: 0,
            written: 0,
            trials: 0,
        };
        if src.is_empty() || cap == 0 {
            return Ok(fit);
        }
        let scratch_len = cap.saturating_mul(SCRATCH_RATIO);
        if self.scratch.len() < scratch_len {
            self.scratch.resize(scratch_len, 0);
        }
        let out = &mut self.scratch[..scratch_len];
        let mut b = Bracket::default();
        let ratio = self
            .ratio
            .map_or(FIRST_TRIAL_RATIO, |r| (r * AIM).min(FIRST_TRIAL_MAX_RATIO));
        let first = cap as f64 * ratio;
        let mut len = (first as usize).clamp(1, src.len());
        while fit.trials < MAX_TRIALS {
            fit.trials += 1;
            let (size, fits) = match comp.compress_into(&src[..len], out)? {
                Some(size) if size <= cap => {
                    dst[..size].copy_from_slice(&out[..size]);
                    (fit.consumed, fit.written) = (len, size);
                    (size, true)
                }
                Some(size) => (size, false),
                None => (scratch_len + 1, false),
            };
            b.record(Point { len, size }, fits);
            if b.done(src.len()) {
                break;
            }
            len = b.next_len(cap, src.len());
        }
        if fit.written > 0 {
            self.ratio = Some(fit.consumed as f64 / fit.written as f64);
        }
        Ok(fit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake compressor whose output is `len / ratio + overhead` bytes.
    struct Linear {
        ratio: usize,
        overhead: usize,
    }

    impl WholeCompressor for Linear {
        fn compress_into(
            &mut self,
            src: &[u8],
            out: &mut [u8],
        ) -> Result<Option<usize>, CodecError> {
            let size = src.len() / self.ratio + self.overhead;
            Ok((size <= out.len()).then_some(size))
        }
    }

    #[test]
    fn finds_near_optimal_length_in_few_trials() {
        let src = vec![0u8; 10 << 20];
        for ratio in [1, 2, 3, 7, 100, 1000] {
            for cap in [64, 4096, 65536] {
                let mut c = Linear { ratio, overhead: 5 };
                let mut dst = vec![0u8; cap];
                let fit = Search::default().run(&mut c, &src, &mut dst).unwrap();
                let best = ((cap - 5) * ratio + ratio - 1).min(src.len());
                assert!(fit.written <= cap);
                assert!(
                    fit.consumed <= best,
                    "ratio {ratio} cap {cap}: {fit:?} > {best}"
                );
                assert!(
                    best - fit.consumed <= tolerance(best) + best / 100,
                    "ratio {ratio} cap {cap}: {fit:?} vs best {best}"
                );
                assert!(fit.trials <= 8, "ratio {ratio} cap {cap}: {fit:?}");
            }
        }
    }

    #[test]
    fn whole_input_that_fits_takes_one_trial() {
        let mut c = Linear {
            ratio: 2,
            overhead: 5,
        };
        let mut dst = vec![0u8; 4096];
        let fit = Search::default()
            .run(&mut c, &[1u8; 1000], &mut dst)
            .unwrap();
        assert_eq!(
            fit,
            Fit {
                consumed: 1000,
                written: 505,
                trials: 1
            }
        );
    }

    #[test]
    fn nothing_fits_gives_zero() {
        let mut c = Linear {
            ratio: 1,
            overhead: 50,
        };
        let mut dst = vec![0u8; 16];
        let fit = Search::default()
            .run(&mut c, &[1u8; 1000], &mut dst)
            .unwrap();
        assert_eq!((fit.consumed, fit.written), (0, 0));
    }
}
