//! Compiles a fixed-output copy of 7-Zip's LZMA encoder (`LzmaEnc.c` from
//! the lzma-sdk-sys sources this crate depends on) for the encoder
//! measurement of issue 61. The copy is patched at build time, as
//! ferrofs's codec crate patches liblzma's encoder:
//!
//! - near the output limit each symbol is encoded after a snapshot of the
//!   range coder; when the symbol and the final flush (5 bytes) would pass
//!   the limit, the range coder goes back to the snapshot and the stream
//!   ends before that symbol (the probabilities it changed are never used
//!   again), so the stream is as full as a symbol-exact encoder can make it;
//! - the range coder's buffer is 2 MiB, so nothing is written out during a
//!   stream of up to 1 MiB and the snapshot can always be restored;
//! - its exported names take an `ffx_` prefix, beside lzma-sdk-sys's own.
//!
//! lzma-sdk-sys has no `links` key, so its sources are found through
//! `cargo metadata`.

use std::path::PathBuf;
use std::process::Command;
use std::{env, fs};

const EXPORTS: &[&str] = &[
    "LzmaEncProps_Init",
    "LzmaEncProps_Normalize",
    "LzmaEncProps_GetDictSize",
    "GetPosSlot1",
    "LzmaEnc_SaveState",
    "LzmaEnc_RestoreState",
    "LzmaEnc_SetProps",
    "LzmaEnc_SetDataSize",
    "LzmaEnc_Create",
    "LzmaEnc_Destroy",
    "LzmaEnc_PrepareForLzma2",
    "LzmaEnc_MemPrepare",
    "LzmaEnc_Finish",
    "LzmaEnc_GetNumAvailableBytes",
    "LzmaEnc_GetCurBuf",
    "LzmaEnc_CodeOneMemBlock",
    "LzmaEnc_Encode",
    "LzmaEnc_WriteProperties",
    "LzmaEnc_IsWriteEndMark",
    "LzmaEnc_MemEncode",
    "LzmaEncode",
    "LzmaEnc_GetLzThreads",
];

/// (what the source says, what the copy says instead)
const PATCHES: &[(&str, &str)] = &[
    (
        "#define RC_BUF_SIZE (1 << 16)",
        "#define RC_BUF_SIZE (1 << 21)",
    ),
    (
        "#include \"LzmaEnc.h\"\n",
        "#include \"LzmaEnc.h\"\nstatic UInt32 ffx_limit, ffx_pos;\nstatic int ffx_stopped;\n",
    ),
    (
        "    posState = (unsigned)nowPos32 & p->pbMask;\n",
        "    CRangeEnc ffx_saved; int ffx_snap = 0;\n    \
         if (ffx_limit != 0 && RangeEnc_GetProcessed_sizet(&p->rc) + 128 >= ffx_limit)\n    \
         { ffx_saved = p->rc; ffx_snap = 1; }\n    \
         posState = (unsigned)nowPos32 & p->pbMask;\n",
    ),
    (
        "    nowPos32 += (UInt32)len;\n",
        "    if (ffx_snap && RangeEnc_GetProcessed_sizet(&p->rc) + 5 > ffx_limit)\n    \
         { p->rc = ffx_saved; ffx_stopped = 1; ffx_pos = nowPos32;\n      \
         p->nowPos64 += nowPos32 - startPos32; return Flush(p, nowPos32); }\n    \
         nowPos32 += (UInt32)len;\n",
    ),
];

const TAIL: &str =
    "\nvoid ffx_set_limit(UInt32 limit) { ffx_limit = limit; ffx_stopped = 0; ffx_pos = 0; }\n\
int ffx_stopped_at(UInt32 *pos) { *pos = ffx_pos; return ffx_stopped; }\n";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let cargo = env::var("CARGO").expect("CARGO");
    let meta = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .output()
        .expect("cargo metadata");
    let text = String::from_utf8_lossy(&meta.stdout);
    let key = "lzma-sdk-sys-0.1.2+25.01/Cargo.toml";
    let at = text.find(key).expect("lzma-sdk-sys in cargo metadata");
    let start = text[..at].rfind('"').expect("path start") + 1;
    let root = PathBuf::from(&text[start..at]).join("lzma-sdk-sys-0.1.2+25.01");
    let c = root.join("7z/C");
    let mut src = fs::read_to_string(c.join("LzmaEnc.c"))
        .expect("LzmaEnc.c")
        .replace("\r\n", "\n");
    for (from, to) in PATCHES {
        assert_eq!(src.matches(from).count(), 1, "patch site {from:?}");
        src = src.replace(from, to);
    }
    src.push_str(TAIL);
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("LzmaEncFixed.c");
    fs::write(&out, src).unwrap();
    let mut b = cc::Build::new();
    b.file(&out)
        .include(&c)
        .define("_REENTRANT", None)
        .warnings(false);
    for name in EXPORTS {
        b.define(name, Some(format!("ffx_{name}").as_str()));
    }
    b.compile("ffxenc");
}
