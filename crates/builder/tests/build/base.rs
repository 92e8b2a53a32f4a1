//! `BuildOptions.base`: a rebuild from an earlier image of a tree with one
//! file rewritten (another size) and one changed in a byte (same size and
//! mtime), with lz4hc and with lz4hc plus fragments and dedupe. As
//! crates/cli/tests/mkfs/base.rs asserts of `mkfs --base`: the rebuild is
//! byte for byte the image a fresh build with the same options makes
//! (its `Summary` the same but for `base` and the timings), reads back as
//! the new tree, and `Summary.base` counts the reused files (the
//! unchanged compressed ones, at least) and the one changed at the same
//! size, with nothing unreadable; a fresh build has no `base`.

use std::fs;
use std::path::Path;

use ferrofs_builder::{BuildOptions, Summary};
use ferrofs_testkit::corpus;
use ferrofs_testkit::tmp::finish;
use ferrofs_testkit::work_dir;

use crate::common;

/// The old tree: the small tree plus compressible files of a few
/// pclusters.
fn old_tree(dir: &Path) {
    common::small_tree(dir, 17);
    let t = dir.join("text");
    fs::create_dir(&t).unwrap();
    for (k, size) in [5000usize, 70_000, 200_000, 300_000]
        .into_iter()
        .enumerate()
    {
        fs::write(
            t.join(format!("t{k}")),
            corpus::text_bytes(size, 30 + k as u64),
        )
        .unwrap();
    }
}

/// `old` copied to `new`, `text/t1` rewritten at another size, `text/t2`
/// changed in one byte keeping its size and mtime.
fn new_tree(old: &Path, new: &Path) {
    common::cp_a(old, new);
    fs::write(new.join("text/t1"), corpus::text_bytes(90_000, 40)).unwrap();
    corpus::change_middle_byte(&new.join("text/t2")).unwrap();
}

/// `s` without what a rebuild adds to a fresh build's summary.
fn sans_base(s: &Summary) -> Summary {
    Summary {
        base: None,
        phases: Vec::new(),
        ..s.clone()
    }
}

#[test]
fn a_rebuild_equals_a_fresh_build_and_counts_reuse() {
    let work = work_dir!("lib_base");
    let (old, new) = (work.join("old"), work.join("new"));
    old_tree(&old);
    new_tree(&old, &new);
    let lz4hc = common::compressed("lz4hc,12", 65536);
    let mut dense = BuildOptions {
        dedupe: true,
        ..lz4hc.clone()
    };
    dense.compress.as_mut().unwrap().fragments = true;
    let mut f = Vec::new();
    for (name, opts) in [("lz4hc", lz4hc), ("frag-dedupe", dense)] {
        let (o, full, re) = (
            work.join(format!("{name}-old.img")),
            work.join(format!("{name}-full.img")),
            work.join(format!("{name}-re.img")),
        );
        common::build_dir(&old, &o, &opts);
        let fresh = common::build_dir(&new, &full, &opts);
        let rebuilt = common::build_dir(
            &new,
            &re,
            &BuildOptions {
                base: Some(o.clone()),
                ..opts.clone()
            },
        );
        if fs::read(&re).unwrap() != fs::read(&full).unwrap() {
            f.push(format!("{name}: the rebuild differs from the fresh build"));
        }
        if fresh.base.is_some() || sans_base(&rebuilt) != sans_base(&fresh) {
            f.push(format!("{name}: summaries {rebuilt:?} and fresh {fresh:?}"));
        }
        match &rebuilt.base {
            Some(b) if b.reused_files >= 3 && b.changed_files == 1 && b.unreadable_files == 0 => {}
            other => f.push(format!("{name}: base {other:?}")),
        }
        f.extend(common::reads_back(name, &re, &[], &new));
    }
    finish(&work, &f);
}
