/* Which of liblzma's compile-time fast paths the C flags of this build
 * select (.cargo/config.toml sets them, as xz's own build would on x86-64).
 * Compiled by build.rs with liblzma-sys's headers and config.h, the way
 * liblzma-sys compiles liblzma itself; the Rust test
 * lzma::tests::liblzma_is_built_with_xzs_fast_paths reads the answer. */
#include "common.h"
#include "lz_decoder.h"
#include "memcmplen.h"
#include "crc_common.h"

unsigned int ferrofs_lzma_fast_paths(void)
{
	unsigned int bits = 0;
#ifdef TUKLIB_FAST_UNALIGNED_ACCESS
	bits |= 1u; /* unaligned word reads */
#endif
#if LZMA_LZ_DECODER_CONFIG == 2
	bits |= 2u; /* the decoder's SSE2 copy of repeated bytes */
#endif
#if LZMA_MEMCMPLEN_EXTRA == 8
	bits |= 4u; /* lzma_memcmplen eight bytes at a time */
#endif
#ifdef CRC_X86_CLMUL
	bits |= 8u; /* CRC32/CRC64 by carry-less multiplication */
#endif
#ifdef HAVE___BUILTIN_BSWAPXX
	bits |= 16u; /* byte swaps by builtins */
#endif
	return bits;
}
