//! Building and reading through trees in memory: the same tree at any
//! thread count, and every flipped byte (data, any hash block, the top
//! block) found, named, and never returned.

use ferrofs_verity::dm::{self, Params, Verified};
use ferrofs_verity::{Algorithm, Error};

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 4096) as u8).collect()
}

fn setup(len: usize, dbs: u32, alg: Algorithm) -> (Vec<u8>, Params, dm::Tree) {
    let bytes = data(len);
    let mut p = Params::new(dbs, (len as u64).div_ceil(u64::from(dbs)), vec![9, 8, 7]);
    p.algorithm = alg;
    let tree = dm::build_with_threads(&bytes, &p, 1).unwrap();
    (bytes, p, tree)
}

#[test]
fn same_tree_at_any_thread_count() {
    let (bytes, p, one) = setup(4096 * 1000 + 17, 4096, Algorithm::Sha256);
    for t in [2, 3, 8] {
        let tree = dm::build_with_threads(&bytes, &p, t).unwrap();
        assert_eq!(tree.root, one.root);
        assert!(tree.blocks == one.blocks);
    }
}

#[test]
fn reads_verify_and_match() {
    for (len, dbs, alg) in [
        (1, 4096, Algorithm::Sha256),
        (4096 * 300 + 5, 4096, Algorithm::Sha256),
        (512 * 700, 512, Algorithm::Sha512),
    ] {
        let (bytes, p, tree) = setup(len, dbs, alg);
        let v = Verified::open(&bytes, &tree.blocks[..], 0, p.clone(), &tree.root).unwrap();
        v.verify_all().unwrap();
        let mut padded = bytes.clone();
        padded.resize(p.data_len().unwrap() as usize, 0);
        assert_eq!(v.len(), padded.len() as u64);
        for (off, n) in [(0usize, 1usize), (1, 4095), (4000, 9000), (0, padded.len())] {
            if off + n > padded.len() {
                continue;
            }
            let mut buf = vec![0u8; n];
            v.read_exact_at(&mut buf, off as u64).unwrap();
            assert!(buf == padded[off..off + n], "{len}: {off}+{n}");
        }
        let mut buf = [0u8; 2];
        let e = v.read_exact_at(&mut buf, v.len() - 1).unwrap_err();
        assert!(matches!(e, Error::OutOfRange { .. }), "{e}");
    }
}

#[test]
fn every_flip_is_caught() {
    let (bytes, p, tree) = setup(4096 * 300, 4096, Algorithm::Sha256);
    // A data byte of block 150: reads of it fail naming the block, the
    // others still read.
    let mut bad = bytes.clone();
    bad[150 * 4096 + 10] ^= 0x40;
    let v = Verified::open(&bad, &tree.blocks[..], 0, p.clone(), &tree.root).unwrap();
    let mut buf = vec![0u8; 100];
    let e = v.read_exact_at(&mut buf, 150 * 4096).unwrap_err();
    assert!(
        matches!(
            e,
            Error::DataMismatch {
                block: 150,
                offset: 614_400,
                size: 4096
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("data block 150"), "{e}");
    assert!(e.is_integrity());
    v.read_exact_at(&mut buf, 149 * 4096).unwrap();
    assert!(v.verify_all().is_err());
    // A byte of a bottom-level hash block (the tree's third block: levels
    // are top, then 3 bottom blocks).
    let mut h = tree.blocks.clone();
    h[2 * 4096 + 5] ^= 1;
    let v = Verified::open(&bytes, &h[..], 0, p.clone(), &tree.root).unwrap();
    let e = v.read_exact_at(&mut buf, 130 * 4096).unwrap_err();
    assert!(
        matches!(
            e,
            Error::HashMismatch {
                level: 0,
                index: 1,
                ..
            }
        ),
        "{e}"
    );
    v.read_exact_at(&mut buf, 0).unwrap();
    // The top block, or a wrong root: refused at open.
    let mut h = tree.blocks.clone();
    h[100] ^= 1;
    let e = Verified::open(&bytes, &h[..], 0, p.clone(), &tree.root)
        .err()
        .unwrap();
    assert!(matches!(e, Error::WrongRoot { .. }), "{e}");
    let mut root = tree.root.clone();
    root[31] ^= 1;
    assert!(Verified::open(&bytes, &tree.blocks[..], 0, p.clone(), &root).is_err());
    assert!(Verified::open(&bytes, &tree.blocks[..], 0, p, &root[..5]).is_err());
}

#[test]
fn a_tiny_cache_still_verifies() {
    let (bytes, p, tree) = setup(4096 * 40_000, 4096, Algorithm::Sha256);
    let v = Verified::open(&bytes, &tree.blocks[..], 0, p, &tree.root)
        .unwrap()
        .with_cache_blocks(2);
    v.verify_all().unwrap();
    let mut buf = vec![0u8; 8192];
    for b in (0..40_000u32).step_by(997).rev().map(u64::from) {
        v.read_exact_at(&mut buf[..4096], b * 4096).unwrap();
    }
}

#[test]
fn short_data_is_refused() {
    let p = Params::new(4096, 10, vec![]);
    let e = dm::build(&vec![0u8; 4096 * 8], &p).unwrap_err();
    assert!(e.to_string().contains("need 40960 bytes"), "{e}");
}

/// The corruption sweep of a hash file (superblock, padding, tree): a
/// flipped byte anywhere the root hash covers fails the open or a read;
/// the bytes it does not cover (the UUID, the padding, the algorithm name
/// after its NUL, the salt field past the salt) change nothing.
#[test]
fn corruption_sweep_of_a_hash_file() {
    let (bytes, mut p, tree) = setup(512 * 130, 512, Algorithm::Sha256);
    p.uuid = [3; 16];
    let area = tree.hash_area(&p, 0, true).unwrap();
    let salt_end = 88 + p.salt.len();
    let covered = |at: usize| {
        at < 16
            || (32..39).contains(&at)
            || (64..82).contains(&at)
            || (88..salt_end).contains(&at)
            || at >= 4096
    };
    let check = |h: &[u8]| -> bool {
        let sb: [u8; 512] = h[..512].try_into().unwrap();
        let Ok(params) = Params::parse_superblock(&sb, 0) else {
            return false;
        };
        let Ok(start) = dm::tree_offset(0, params.hash_block_size, true) else {
            return false;
        };
        match Verified::open(&bytes, h, start, params, &tree.root) {
            Ok(v) => v.verify_all().is_ok(),
            Err(_) => false,
        }
    };
    assert!(check(&area));
    let mut checked = 0;
    for at in (0..area.len())
        .step_by(7)
        .chain([16, 31, 39, 63, 82, 87, 511, 4095])
    {
        let mut h = area.clone();
        h[at] ^= 0x24;
        assert_eq!(check(&h), !covered(at), "byte {at}");
        checked += 1;
    }
    assert!(checked > 2000);
}
