//! dm-verity trees on hostile input: the verity superblock parser and
//! geometry on arbitrary bytes (then a verified read under what they say),
//! and a real tree over the input with two bytes of data or tree flipped,
//! every block of which must read as its true bytes or fail, never differ.
#![no_main]

use ferrofs_verity::dm::{self, Params, Verified};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(sb) = data.get(..512).and_then(|s| <[u8; 512]>::try_from(s).ok()) {
        if let Ok(p) = Params::parse_superblock(&sb, 0) {
            let _ = p.geometry();
            let rest = &data[512..];
            let root = rest.get(..p.algorithm.digest_len()).unwrap_or(&[]);
            if let Ok(v) = Verified::open(rest, rest, 0, p, root) {
                let mut b = [0u8; 600];
                let _ = v.read_exact_at(&mut b, 0);
            }
        }
    }
    // The last 8 bytes: two positions to flip; the rest: the data.
    let Some((body, tail)) = data.len().checked_sub(8).map(|n| data.split_at(n)) else {
        return;
    };
    if body.is_empty() || body.len() > 1 << 16 {
        return;
    }
    let p = Params::new(512, (body.len() as u64).div_ceil(512), tail[..4].to_vec());
    let Ok(tree) = dm::build_with_threads(&body, &p, 2) else {
        return;
    };
    let (mut d, mut t) = (body.to_vec(), tree.blocks.clone());
    for pos in [&tail[..4], &tail[4..]] {
        let at = u32::from_le_bytes(pos.try_into().unwrap()) as usize;
        let total = d.len() + t.len();
        let at = at % total;
        if at < d.len() {
            d[at] ^= 0x01;
        } else {
            t[at - d.len()] ^= 0x80;
        }
    }
    let Ok(v) = Verified::open(&d, &t[..], 0, p.clone(), &tree.root) else {
        return;
    };
    let mut padded = body.to_vec();
    padded.resize(p.data_len().unwrap() as usize, 0);
    for (i, want) in padded.chunks(512).enumerate() {
        let mut got = vec![0u8; 512];
        if v.read_exact_at(&mut got, i as u64 * 512).is_ok() {
            assert_eq!(got, want, "block {i} read wrong bytes");
        }
    }
});
