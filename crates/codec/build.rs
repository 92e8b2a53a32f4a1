//! Builds ferrofs's copy of liblzma's MicroLZMA encoder: the two C files
//! behind `lzma_microlzma_encoder` (`microlzma_encoder.c` and
//! `lzma/lzma_encoder.c`), taken from the xz sources that `liblzma-sys`
//! compiles, with one change and with their exported names prefixed by
//! `ferrofs_` so they sit beside liblzma-sys's own objects. Everything
//! else (match finders, optimal parsing, price tables, `lzma_code`) is
//! liblzma-sys's, built from the same headers and `config.h`, so the
//! shared structures have one layout.
//!
//! The change: with an output limit (MicroLZMA's fixed-size output),
//! liblzma encodes every LZMA symbol twice, once for real and once in a
//! dry run (`rc_encode_dummy`) that tells whether the symbol and the final
//! flush would still fit. The dry run can only say "does not fit" when
//! the output is within a few dozen bytes of the limit: the bytes one
//! symbol and the flush can add are the range coder's pending bytes
//! (`cache_size`) plus one per normalisation, and one symbol is at most
//! 53 coded bits (RC_SYMBOLS_MAX) of at most 6.05 bits of range each
//! (probabilities stay within 31..2017 of 2048), so at most 42
//! normalisations, and the flush adds 5. Our copy runs the dry run only
//! when `out_total + cache_size + 128` reaches the limit, so its output
//! is byte-for-byte liblzma's (checked against liblzma-sys's unchanged
//! encoder by `lzma::tests`), and it spends about 10% less time per byte
//! (the range coder's second pass was that share of preset-6 encoding).

use std::path::{Path, PathBuf};
use std::{env, fs};

/// The exported functions of the two files, renamed with `ferrofs_`.
const RENAMED: &[&str] = &[
    "lzma_microlzma_encoder",
    "lzma_lzma_encode",
    "lzma_lzma_encoder_create",
    "lzma_lzma_encoder_init",
    "lzma_lzma_encoder_memusage",
    "lzma_lzma_encoder_reset",
    "lzma_lzma_lclppb_encode",
    "lzma_lzma_props_encode",
    "lzma_mode_is_supported",
];

/// The dry run as liblzma writes it, and the guarded form we compile.
const DRY_RUN: &str = "if (coder->out_limit != 0 && rc_encode_dummy(";
const GUARDED: &str = "if (coder->out_limit != 0 \
    && coder->rc.out_total + coder->rc.cache_size + 128 >= coder->out_limit \
    && rc_encode_dummy(";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DEP_LZMA_INCLUDE");
    // liblzma-sys (`links = "lzma"`, built from source by the `static`
    // feature) says where its liblzma API headers are: xz/src/liblzma/api.
    let api = PathBuf::from(env::var("DEP_LZMA_INCLUDE").expect(
        "liblzma-sys did not report DEP_LZMA_INCLUDE: ferrofs needs it built \
         from its bundled xz sources (the `static` feature)",
    ));
    let liblzma = api.parent().expect("xz/src/liblzma").to_path_buf();
    let src = liblzma.parent().expect("xz/src").to_path_buf();
    // liblzma-sys's config.h is at its crate root, above xz/src.
    let config = src
        .parent()
        .and_then(Path::parent)
        .expect("liblzma-sys crate root");

    let encoder = liblzma.join("lzma/lzma_encoder.c");
    let text = fs::read_to_string(&encoder)
        .unwrap_or_else(|e| panic!("reading {}: {e}", encoder.display()));
    assert_eq!(
        text.matches(DRY_RUN).count(),
        1,
        "{}: the output-limit dry run is not where ferrofs expects it \
         (a new xz version?); update crates/codec/build.rs",
        encoder.display()
    );
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let patched = out.join("lzma_encoder_guarded.c");
    fs::write(&patched, text.replace(DRY_RUN, GUARDED)).expect("writing the guarded encoder");

    let mut build = cc::Build::new();
    build
        .define("HAVE_CONFIG_H", "1")
        .define("NDEBUG", None)
        .flag("-std=c99")
        .include(config);
    for dir in [
        "api",
        "lzma",
        "lz",
        "check",
        "simple",
        "delta",
        "common",
        "rangecoder",
    ] {
        build.include(liblzma.join(dir));
    }
    build.include(src.join("common"));
    // The probe of liblzma's fast paths (src/lzma/probe.c), compiled as
    // liblzma is, before the renames.
    let mut probe = build.clone();
    probe.file("src/lzma/probe.c");
    probe.compile("ferrofs_lzma_probe");
    println!("cargo:rerun-if-changed=src/lzma/probe.c");
    build
        .file(&patched)
        .file(liblzma.join("common/microlzma_encoder.c"));
    for name in RENAMED {
        build.define(name, Some(format!("ferrofs_{name}").as_str()));
    }
    build.compile("ferrofs_microlzma");
}
