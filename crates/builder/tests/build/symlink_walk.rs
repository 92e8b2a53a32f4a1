//! Path resolution through long symlink chains stays bounded: an image
//! whose symlinks expand to thousands of components each resolves while
//! the walk stays under `MAX_PATH_STEPS` lookups, and fails with "too many
//! levels of symbolic links" (not minutes of work) past it. Built with the
//! library, read back through the front door; no root needed.

use std::path::Path;

use ferrofs::raw::MAX_PATH_STEPS;
use ferrofs::{ErrorKind, Image};
use ferrofs_builder::BuildOptions;

#[test]
fn long_symlink_chains_resolve_within_the_step_budget() {
    let work = ferrofs_testkit::work_dir!("symlink_walk");
    let tree = work.join("tree");
    std::fs::create_dir_all(tree.join("x")).unwrap();
    // "x/../" repeated: every pair is two real lookups back to the root.
    let pairs = 800;
    let hop = "x/../".repeat(pairs);
    let per_link = 2 * pairs as u32 + 1;
    std::os::unix::fs::symlink(format!("{hop}."), tree.join("s0")).unwrap();
    for i in 1..8 {
        let target = format!("{hop}s{}", i - 1);
        std::os::unix::fs::symlink(target, tree.join(format!("s{i}"))).unwrap();
    }
    let img = work.join("walk.img");
    ferrofs_builder::build(&tree, &img, &BuildOptions::default(), None, &|_| {}).unwrap();
    let image = Image::open_path(&img).unwrap();
    let root_ino = image.metadata("/").unwrap().ino();
    for i in 0..8u32 {
        // Resolving s{i} looks up 1 + (i + 1) * per_link components.
        let steps = 1 + (i + 1) * per_link;
        let path = format!("/s{i}/x");
        let got = image.metadata(Path::new(&path));
        if steps <= MAX_PATH_STEPS {
            let m = got.unwrap_or_else(|e| panic!("{path}: {e}"));
            assert!(m.is_dir(), "{path}");
            let dir = image.metadata(Path::new(&format!("/s{i}"))).unwrap();
            assert_eq!(dir.ino(), root_ino, "{path}");
        } else {
            let e = got
                .err()
                .unwrap_or_else(|| panic!("{path} resolved past the budget"));
            assert!(e.to_string().contains("too many levels"), "{path}: {e}");
            assert_ne!(e.kind(), ErrorKind::NotFound, "{path}");
        }
    }
    assert!(
        1 + 8 * per_link > MAX_PATH_STEPS,
        "the chain must reach the budget"
    );
    ferrofs_testkit::tmp::finish(&work, &[]);
}
