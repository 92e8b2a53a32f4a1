//! `--digest-store`: the object store our drop-in fills has the same names,
//! contents and modes as mkcomposefs 1.0.8's, for a fresh store and for one
//! that already holds some objects, and the images stay identical.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use ferrofs_testkit::make_corner_tree;

use super::{differ, dropin, refs, run, work};

/// Every entry under `dir`: relative path → (mode, content for files).
fn listing(dir: &Path) -> BTreeMap<String, (u32, Option<Vec<u8>>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            if m.is_dir() {
                stack.push(p.clone());
                out.insert(rel, (m.permissions().mode(), None));
            } else {
                out.insert(rel, (m.permissions().mode(), Some(fs::read(&p).unwrap())));
            }
        }
    }
    out
}

#[test]
fn object_store_matches_mkcomposefs() {
    let Some(refs) = refs() else { return };
    let w = work("store");
    let src = w.path().join("tree");
    make_corner_tree(&src).unwrap();
    fs::write(src.join("dup-a"), vec![7u8; 9000]).unwrap();
    fs::write(src.join("dup-b"), vec![7u8; 9000]).unwrap();
    let bin = dropin(w.path());
    let (rs, os) = (w.path().join("ref-store"), w.path().join("our-store"));
    // A store that already holds one object (and a foreign file).
    for s in [&rs, &os] {
        fs::create_dir_all(s).unwrap();
        fs::write(s.join("README"), b"not an object").unwrap();
    }
    let (ri, oi) = (w.path().join("ref.cfs"), w.path().join("ours.cfs"));
    let src_s = src.display().to_string();
    for round in 0..2 {
        let ra = format!("--digest-store={}", rs.display());
        run(
            &refs.mkcomposefs,
            &[&ra, &src_s, &ri.display().to_string()],
            None,
        )
        .unwrap();
        let oa = format!("--digest-store={}", os.display());
        run(&bin, &[&oa, &src_s, &oi.display().to_string()], None).unwrap();
        assert_eq!(differ(&ri, &oi), None, "round {round}");
        let (l, r) = (listing(&rs), listing(&os));
        let names = |m: &BTreeMap<String, _>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(names(&l), names(&r), "round {round}: object names");
        for (k, v) in &l {
            assert_eq!(Some(v), r.get(k), "round {round}: {k}");
        }
        assert!(l.len() > 10, "the store holds objects: {}", l.len());
        // The second round finds every object already there.
        if round == 0 {
            let victim = r.keys().find(|k| k.len() > 10).unwrap().clone();
            fs::remove_file(os.join(&victim)).unwrap();
            fs::remove_file(rs.join(&victim)).unwrap();
        }
    }
}

/// `objects` of composefs-info lists exactly the store's objects.
#[test]
fn composefs_info_objects_lists_the_store() {
    let Some(refs) = refs() else { return };
    let w = work("objects");
    let (_, img, store) = super::corner_with_store(w.path());
    let listed = run(&refs.info, &["objects", &img.display().to_string()], None).unwrap();
    let mut listed: Vec<String> = String::from_utf8(listed)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    listed.sort();
    listed.dedup();
    let mut stored: Vec<String> = listing(&store)
        .into_iter()
        .filter(|(_, (_, c))| c.is_some())
        .map(|(k, _)| k)
        .collect();
    stored.sort();
    assert_eq!(listed, stored);
}
