//! A streaming zstd decoder (`Read` over the compressed bytes), on the
//! zstd binding the codec crate already uses; concatenated frames are
//! read one after the other, and a stream ending inside a frame is an
//! error.

use std::io::{self, BufRead, Read};

use zstd_safe::{DCtx, InBuffer, OutBuffer};

pub(super) struct ZstdReader<R> {
    r: R,
    ctx: DCtx<'static>,
    /// The last call ended a frame (so the input may end here).
    frame_done: bool,
}

impl<R: BufRead> ZstdReader<R> {
    pub(super) fn new(r: R) -> Self {
        ZstdReader {
            r,
            ctx: DCtx::create(),
            frame_done: false,
        }
    }
}

impl<R: BufRead> Read for ZstdReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let input = self.r.fill_buf()?;
            let at_end = input.is_empty();
            if at_end && self.frame_done {
                return Ok(0);
            }
            let mut inb = InBuffer::around(input);
            let mut outb = OutBuffer::around(buf);
            let hint = self
                .ctx
                .decompress_stream(&mut outb, &mut inb)
                .map_err(|c| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("zstd: {}", zstd_safe::get_error_name(c)),
                    )
                })?;
            let (used, made) = (inb.pos(), outb.pos());
            self.r.consume(used);
            self.frame_done = hint == 0;
            if made > 0 {
                return Ok(made);
            }
            if at_end {
                if self.frame_done {
                    return Ok(0);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "zstd stream ends inside a frame",
                ));
            }
            if used == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "zstd decoder made no progress",
                ));
            }
        }
    }
}
