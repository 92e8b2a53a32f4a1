//! The order of the packed inode's fragments: what a profiled start reads
//! first, then `--zD`'s directories in walk order, then the files'
//! fragments by locality (a directory's fragments together, depth first;
//! families of parallel directories after them), content similarity
//! ordering each run.

use std::collections::HashMap;

use crate::data::fragments::FragEntry;
use crate::data::similarity::{self, Class, Sketch};
use crate::tree::{InodeId, Kind, Tree};

/// The order fragments take in the packed inode. What a profiled start
/// reads comes first, in access order; then directories (`--zD`) in the
/// order a walk of the tree reads them; then the files' fragments, grouped
/// by locality (see [`locality_order`]). Returns the order, each
/// fragment's offset and the byte range the directories take.
pub(crate) fn fragment_offsets(
    tree: &Tree,
    entries: &[FragEntry],
    profile: Option<&crate::options::profile::Profile>,
    sketches: &[Sketch],
) -> (Vec<usize>, Vec<u64>, Option<(u64, u64)>) {
    let rank = |id: InodeId| {
        profile
            .and_then(|p| p.get(&tree.inodes[id].rel))
            .map_or(usize::MAX, |f| f.rank)
    };
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by(|&a, &b| {
        let (ia, ib) = (entries[a].owner, entries[b].owner);
        rank(ia)
            .cmp(&rank(ib))
            .then_with(|| tree.inodes[ia].rel.cmp(&tree.inodes[ib].rel))
            .then(a.cmp(&b))
    });
    // The profiled fragments keep their access order.
    let hot = order
        .iter()
        .take_while(|&&i| rank(entries[i].owner) != usize::MAX)
        .count();
    // `--zD`'s directories next, in the order a walk of the tree reads
    // them (depth first, names in order): listing the tree then decodes
    // the packed inode's first pclusters only, not every one a directory
    // happens to sit in (about 0.02-0.06 % more bytes).
    let (mut dirs, files): (Vec<usize>, Vec<usize>) = order[hot..]
        .iter()
        .partition(|&&i| tree.inodes[entries[i].owner].is_dir());
    let components = |i: usize| tree.inodes[entries[i].owner].rel.split(|&c| c == b'/');
    dirs.sort_by(|&a, &b| components(a).cmp(components(b)));
    let rest = locality_order(tree, entries, &files, sketches);
    let ndirs = dirs.len();
    order.truncate(hot);
    order.extend(dirs);
    order.extend(rest);
    let mut offsets = vec![0u64; entries.len()];
    let mut pos = 0;
    let mut dir_range = None;
    for (k, &i) in order.iter().enumerate() {
        if k == hot && ndirs > 0 {
            dir_range = Some((pos, pos));
        }
        offsets[i] = pos;
        pos += entries[i].len;
        if k + 1 == hot + ndirs {
            if let Some(r) = &mut dir_range {
                r.1 = pos;
            }
        }
    }
    (order, offsets, dir_range)
}

/// A file name borne by at least this many fragments' files may mark a
/// family of variants (see [`locality_order`]).
const FAMILY_MIN: usize = 8;

/// Orders the fragments of files so that what one program reads together
/// shares pclusters.
///
/// A start reads the files of a few packages or programs (a package's
/// modules and their compiled forms, a program's libraries, its
/// configuration directory), and the kernel reads and decodes a whole
/// pcluster of the packed inode to serve any byte of it. So each
/// directory's fragments stay side by side, directories in depth-first
/// order (names in order): a package's subdirectories follow it, as a
/// depth-first walk and mksquashfs lay files out. Inside a directory, the
/// fragments of whole files come first and the tails of larger files (read
/// with the rest of their file, not with their neighbours) after them,
/// each run ordered by class (text, ELF, other binary), file name extension
/// (not for ELF objects: `libfoo.so.1.2` says nothing) and name, in which
/// [`similarity::chain`] lets a fragment follow the one its content is
/// most like: content similarity where it costs no locality.
///
/// Parallel directories are the exception: a directory at least half of
/// whose files bear names that many directories bear ([`FAMILY_MIN`]) is
/// one of a set of variants (the message catalogues of one language, one
/// package's documentation), of which a program reads one file (its own
/// catalogue in its own language). Such files go together by name, after
/// the directories, where the alike members of a family compress well
/// (translations of one catalogue share their source strings) and no
/// start loses. A recurring name in a directory of its own files
/// (`doc.go`, `__init__.py` beside a package's modules) stays with them:
/// a program that reads the directory reads it too.
fn locality_order(
    tree: &Tree,
    entries: &[FragEntry],
    files: &[usize],
    sketches: &[Sketch],
) -> Vec<usize> {
    // Each inode's directory: the depth-first position of the first
    // directory that names it (hard links go with their first name).
    let mut group = vec![usize::MAX; tree.inodes.len()];
    let mut stack = vec![tree.root];
    let mut pos = 0usize;
    while let Some(d) = stack.pop() {
        if let Kind::Dir { entries } = &tree.inodes[d].kind {
            let first_child = stack.len();
            for (_, c) in entries {
                if group[*c] == usize::MAX {
                    group[*c] = pos;
                    // (Each directory is pushed once: its group is set.)
                    if tree.inodes[*c].is_dir() && *c != d {
                        stack.push(*c);
                    }
                }
            }
            // Popped last first: subdirectories in name order.
            stack[first_child..].reverse();
        }
        pos += 1;
    }
    let class = |i: usize| sketches.get(i).map_or(Class::Binary, |s| s.class);
    let name = |i: usize| -> &[u8] {
        let rel = &tree.inodes[entries[i].owner].rel;
        rel.rsplit(|&c| c == b'/').next().unwrap_or(rel)
    };
    let ext = |i: usize| -> &[u8] {
        let n = name(i);
        match n.iter().rposition(|&c| c == b'.') {
            Some(p) if p > 0 && class(i) != Class::Elf => &n[p + 1..],
            _ => b"",
        }
    };
    let tail = |i: usize| tree.inodes[entries[i].owner].data_size() > entries[i].len;
    let mut names: HashMap<&[u8], usize> = HashMap::new();
    for &i in files {
        *names.entry(name(i)).or_default() += 1;
    }
    let recurs = |i: usize| names.get(name(i)).is_some_and(|&n| n >= FAMILY_MIN);
    // Per directory: its fragments, and those whose names recur.
    let mut per_dir: HashMap<usize, (usize, usize)> = HashMap::new();
    for &i in files {
        let e = per_dir.entry(group[entries[i].owner]).or_default();
        e.0 += 1;
        e.1 += usize::from(recurs(i));
    }
    let parallel = |i: usize| {
        per_dir
            .get(&group[entries[i].owner])
            .is_some_and(|&(n, r)| r * 2 >= n)
    };
    let (mut family, mut near): (Vec<usize>, Vec<usize>) =
        files.iter().partition(|&&i| recurs(i) && parallel(i));
    let kind = |a: usize, b: usize| {
        class(a)
            .cmp(&class(b))
            .then_with(|| ext(a).cmp(ext(b)))
            .then_with(|| name(a).cmp(name(b)))
    };
    near.sort_by(|&a, &b| {
        let (ga, gb) = (group[entries[a].owner], group[entries[b].owner]);
        ga.cmp(&gb)
            .then_with(|| tail(a).cmp(&tail(b)))
            .then_with(|| kind(a, b))
            .then(a.cmp(&b))
    });
    family.sort_by(|&a, &b| {
        kind(a, b)
            .then_with(|| {
                tree.inodes[entries[a].owner]
                    .rel
                    .cmp(&tree.inodes[entries[b].owner].rel)
            })
            .then(a.cmp(&b))
    });
    if sketches.len() != entries.len() {
        near.extend(family);
        return near;
    }
    let mut out = Vec::with_capacity(files.len());
    let runs = near
        .chunk_by(|&a, &b| group[entries[a].owner] == group[entries[b].owner] && tail(a) == tail(b))
        .chain(family.chunk_by(|&a, &b| class(a) == class(b) && ext(a) == ext(b)));
    for run in runs {
        if run.len() > 2 {
            out.extend(similarity::chain(run, sketches));
        } else {
            out.extend_from_slice(run);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::tree::Inode;
    use ferrofs_testkit::corpus::text_bytes;

    /// A tree of `files` (path, file size, fragment bytes; parents made as
    /// needed, every directory's entries in name order) and its fragments,
    /// one per file, in the order given.
    fn tree_of<S: AsRef<str>>(files: &[(S, u64, Vec<u8>)]) -> (Tree, Vec<FragEntry>, Vec<Sketch>) {
        let mut tree = Tree::default();
        let dir = || Kind::Dir {
            entries: Vec::new(),
        };
        tree.inodes.push(Inode::new(dir(), b"", 0, PathBuf::new()));
        let mut by_path: HashMap<String, InodeId> = HashMap::new();
        let mut entries = Vec::new();
        let mut sketches = Vec::new();
        for (path, size, bytes) in files {
            let mut parent = 0;
            let parts: Vec<&str> = path.as_ref().split('/').collect();
            for (k, part) in parts.iter().enumerate() {
                let rel = parts[..=k].join("/");
                let last = k + 1 == parts.len();
                let id = *by_path.entry(rel.clone()).or_insert_with(|| {
                    let kind = match last {
                        true => Kind::File {
                            size: *size,
                            data: None,
                        },
                        false => dir(),
                    };
                    tree.inodes
                        .push(Inode::new(kind, rel.as_bytes(), parent, PathBuf::new()));
                    let id = tree.inodes.len() - 1;
                    if let Kind::Dir { entries } = &mut tree.inodes[parent].kind {
                        entries.push((part.as_bytes().to_vec(), id));
                        entries.sort();
                    }
                    id
                });
                parent = id;
            }
            entries.push(FragEntry {
                owner: parent,
                at: 0,
                len: bytes.len() as u64,
                sketch: None,
                machine_code: false,
            });
            sketches.push(Sketch::of(bytes));
        }
        (tree, entries, sketches)
    }

    fn paths(tree: &Tree, entries: &[FragEntry], order: &[usize]) -> Vec<String> {
        order
            .iter()
            .map(|&i| String::from_utf8_lossy(&tree.inodes[entries[i].owner].rel).into_owned())
            .collect()
    }

    /// Each directory's fragments form one run, directories depth first
    /// (a package's subdirectory right after it), whole files before the
    /// tails of larger files: even where the files of two directories are
    /// pairwise alike, which the similarity chain alone would interleave.
    #[test]
    fn a_directorys_fragments_stay_together_depth_first() {
        let t = |seed| text_bytes(3000, seed);
        let files = [
            ("b/one.txt", 3000, t(1)),
            ("a/one.txt", 3000, t(1)),
            ("b/two.txt", 3000, t(2)),
            ("a/big.txt", 90_000, t(3)),
            ("a/two.txt", 3000, t(2)),
            ("a/sub/x.txt", 3000, t(4)),
            ("b/big.txt", 90_000, t(3)),
            ("a2/y.txt", 3000, t(5)),
        ];
        let (tree, entries, sketches) = tree_of(&files);
        let (order, offsets, _) = fragment_offsets(&tree, &entries, None, &sketches);
        let got = paths(&tree, &entries, &order);
        let dirs: Vec<&str> = got.iter().map(|p| p.rsplit_once('/').unwrap().0).collect();
        assert_eq!(
            dirs,
            ["a", "a", "a", "a/sub", "a2", "b", "b", "b"],
            "{got:?}"
        );
        // The tails last in their directory.
        assert_eq!(
            (got[2].as_str(), got[7].as_str()),
            ("a/big.txt", "b/big.txt")
        );
        // Offsets follow the order, without gaps.
        let mut at = 0;
        for &i in &order {
            assert_eq!(offsets[i], at);
            at += entries[i].len;
        }
    }

    /// A name that many directories bear, in directories mostly of such
    /// names (a message catalogue in every language, each package's
    /// copyright), makes a family: its members go together after the
    /// directories, by path, and every other file stays with its
    /// directory; so does a recurring name among a directory's own files.
    #[test]
    fn a_name_many_directories_bear_is_kept_as_a_family() {
        // A 2000-byte text file at `path`, its content chosen by `seed`.
        let small = |path: String, seed: u64| (path, 2000u64, text_bytes(2000, seed));
        let mut files = Vec::new();
        let langs: Vec<String> = (0..FAMILY_MIN).map(|k| format!("l{k}")).collect();
        for (k, l) in langs.iter().enumerate() {
            files.push(small(format!("{l}/app.mo"), 7));
            files.push(small(format!("{l}/own{k}.mo"), 100 + k as u64));
        }
        let (tree, entries, sketches) = tree_of(&files);
        let (order, _, _) = fragment_offsets(&tree, &entries, None, &sketches);
        let got = paths(&tree, &entries, &order);
        let own: Vec<String> = langs
            .iter()
            .enumerate()
            .map(|(k, l)| format!("{l}/own{k}.mo"))
            .collect();
        let family: Vec<String> = langs.iter().map(|l| format!("{l}/app.mo")).collect();
        assert_eq!(got[..own.len()], own[..], "{got:?}");
        let mut tail = got[own.len()..].to_vec();
        tail.sort();
        assert_eq!(tail, family);
        // A recurring name in directories mostly of their own files
        // (`doc.go` beside a package's sources) stays with them.
        let mut src = Vec::new();
        for k in 0..FAMILY_MIN {
            src.push(small(format!("p{k}/doc.go"), 9));
            src.push(small(format!("p{k}/a{k}.go"), 200 + k as u64));
            src.push(small(format!("p{k}/b{k}.go"), 300 + k as u64));
        }
        let (tree, entries, sketches) = tree_of(&src);
        let (order, _, _) = fragment_offsets(&tree, &entries, None, &sketches);
        let got = paths(&tree, &entries, &order);
        let mut runs: Vec<&str> = got.iter().map(|p| p.split('/').next().unwrap()).collect();
        runs.dedup();
        assert_eq!(runs.len(), FAMILY_MIN, "{got:?}");
        // One fewer directory bearing the name: no family.
        let (tree, entries, sketches) = tree_of(&files[..files.len() - 2]);
        let (order, _, _) = fragment_offsets(&tree, &entries, None, &sketches);
        let got = paths(&tree, &entries, &order);
        let dirs: Vec<&str> = got.iter().map(|p| p.split('/').next().unwrap()).collect();
        let mut runs = dirs.clone();
        runs.dedup();
        assert_eq!(runs.len(), FAMILY_MIN - 1, "{got:?}");
    }
}
