//! The only unsafe code in the crate: a safe wrapper around one liblzma
//! `lzma_stream` used with the MicroLZMA encoder or decoder.
#![allow(unsafe_code)]

use liblzma_sys as sys;
use std::ptr;

extern "C" {
    /// Which of liblzma's compile-time fast paths this build selects
    /// (`src/lzma/probe.c`): bit 0 unaligned word reads, 1 the decoder's
    /// SSE2 copy, 2 the 8-byte `lzma_memcmplen`, 3 CRC by carry-less
    /// multiplication, 4 builtin byte swaps.
    fn ferrofs_lzma_fast_paths() -> std::ffi::c_uint;

    /// liblzma's `lzma_microlzma_encoder`, built by `build.rs` with the
    /// output-limit dry run guarded (same output, less work); everything
    /// it calls besides its own file and `lzma_encoder.c` is liblzma-sys's.
    fn ferrofs_lzma_microlzma_encoder(
        strm: *mut sys::lzma_stream,
        options: *const sys::lzma_options_lzma,
    ) -> sys::lzma_ret;
}

/// [`ferrofs_lzma_fast_paths`]'s answer.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn fast_paths() -> u32 {
    // SAFETY: a C function of no arguments that only returns a constant.
    unsafe { ferrofs_lzma_fast_paths() }
}

/// Which build of the MicroLZMA encoder [`Stream::init_microlzma_encoder`]
/// sets up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EncoderBuild {
    /// ferrofs's (see `build.rs`): what the builder uses.
    Guarded,
    /// liblzma-sys's unchanged one, for tests that compare the two.
    #[cfg_attr(not(test), allow(dead_code))]
    Reference,
}

/// What one [`Stream::finish`] run did.
pub(crate) struct Outcome {
    /// The last `lzma_code` return value (`LZMA_OK` means it stalled).
    pub ret: sys::lzma_ret,
    /// Input bytes consumed.
    pub consumed: usize,
    /// Output bytes written.
    pub produced: usize,
}

/// An owned `lzma_stream`. Boxed so its address never changes while
/// liblzma's internal state is attached to it.
pub(crate) struct Stream {
    raw: Box<sys::lzma_stream>,
}

// SAFETY: a liblzma stream has no thread affinity (no thread-local state,
// no locks held between calls); all access goes through `&mut self`, so
// moving it to another thread is sound. It is deliberately not `Sync`.
unsafe impl Send for Stream {}

impl Stream {
    /// A stream equal to `LZMA_STREAM_INIT`.
    pub fn new() -> Self {
        // SAFETY: LZMA_STREAM_INIT is all-zero bytes. Every field of
        // `lzma_stream` is a raw pointer or an integer (the enums are integer
        // aliases), for which all-zero is a valid value.
        let raw: sys::lzma_stream = unsafe { std::mem::zeroed() };
        Self { raw: Box::new(raw) }
    }

    /// `lzma_microlzma_decoder` on this stream (reusing its allocations).
    pub fn init_microlzma_decoder(
        &mut self,
        comp_size: usize,
        uncomp_size: usize,
        uncomp_size_is_exact: bool,
        dict_size: u32,
    ) -> sys::lzma_ret {
        // SAFETY: `self.raw` is a valid stream: zeroed, or left by earlier
        // liblzma calls. liblzma keeps no pointer to the struct itself and
        // only reads the arguments, which are plain values.
        unsafe {
            sys::lzma_microlzma_decoder(
                &mut *self.raw,
                comp_size as u64,
                uncomp_size as u64,
                sys::lzma_bool::from(uncomp_size_is_exact),
                dict_size,
            )
        }
    }

    /// `lzma_microlzma_encoder` (of the `build` given) with
    /// `lzma_lzma_preset(preset)` options and the dictionary size replaced
    /// by `dict_size`.
    pub fn init_microlzma_encoder(
        &mut self,
        build: EncoderBuild,
        preset: u32,
        dict_size: u32,
    ) -> sys::lzma_ret {
        // SAFETY: all-zero is a valid `lzma_options_lzma` (integers, integer
        // enums and a null preset_dict pointer); `lzma_lzma_preset` then
        // fills every field it uses.
        let mut opts: sys::lzma_options_lzma = unsafe { std::mem::zeroed() };
        // SAFETY: `opts` is a valid, exclusively borrowed options struct.
        if unsafe { sys::lzma_lzma_preset(&mut opts, preset) } != 0 {
            return sys::LZMA_OPTIONS_ERROR;
        }
        opts.dict_size = dict_size;
        // SAFETY: as in `init_microlzma_decoder`; `opts` outlives the call and
        // liblzma copies what it needs (preset_dict is null). Both encoders
        // take the same arguments; ferrofs's is compiled from the same
        // sources, headers and config.h as liblzma-sys's (build.rs), so the
        // stream and options structs have one layout.
        unsafe {
            match build {
                EncoderBuild::Guarded => ferrofs_lzma_microlzma_encoder(&mut *self.raw, &opts),
                EncoderBuild::Reference => sys::lzma_microlzma_encoder(&mut *self.raw, &opts),
            }
        }
    }

    /// Run `lzma_code(LZMA_FINISH)` over `input` and `output` until it
    /// returns something other than `LZMA_OK` or stops making progress.
    pub fn finish(&mut self, input: &[u8], output: &mut [u8]) -> Outcome {
        let s = &mut *self.raw;
        s.next_in = input.as_ptr();
        s.avail_in = input.len();
        s.next_out = output.as_mut_ptr();
        s.avail_out = output.len();
        let ret = loop {
            let before = (s.avail_in, s.avail_out);
            // SAFETY: next_in/avail_in describe `input` and next_out/avail_out
            // describe `output`, both borrowed for this whole function;
            // liblzma reads and writes only inside those bounds and advances
            // the pointers with the counts. On a stream that no init call
            // succeeded on, lzma_code returns LZMA_PROG_ERROR.
            let ret = unsafe { sys::lzma_code(s, sys::LZMA_FINISH) };
            // Each LZMA_OK round moved data, and the data is finite, so the
            // loop ends; a round without progress ends it at once.
            if ret != sys::LZMA_OK || (s.avail_in, s.avail_out) == before {
                break ret;
            }
        };
        let consumed = input.len().saturating_sub(s.avail_in);
        let produced = output.len().saturating_sub(s.avail_out);
        // Keep no pointers to the borrowed buffers once they go away.
        s.next_in = ptr::null();
        s.avail_in = 0;
        s.next_out = ptr::null_mut();
        s.avail_out = 0;
        Outcome {
            ret,
            consumed,
            produced,
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: lzma_end accepts a zeroed or initialised stream, frees the
        // internal state liblzma allocated for it, and nothing uses the
        // stream afterwards.
        unsafe { sys::lzma_end(&mut *self.raw) }
    }
}
