//! Content similarity of fragments, for their order in the packed inode:
//! each fragment gets a MinHash sketch of its 8-byte shingles (one hash per
//! position, the hash's top bits choosing a bucket, the smallest value per
//! bucket kept) and a coarse class from its first bytes; [`chain`] then
//! walks a base order and lets a fragment jump the queue when its sketch
//! shares clearly more buckets with the fragment just placed than the next
//! one in the base order does. Fragments that share a pcluster compress
//! together, so putting alike content side by side (as DwarFS's similarity
//! order does for its blocks) shrinks the packed inode.

/// Buckets per sketch (a power of two). 64 rather than 32: tree2 (/usr/share)
/// with zstd,15 packs 0.3 % smaller (171,601,920 vs 172,126,208 bytes).
pub(crate) const BUCKETS: usize = 64;
const BUCKET_SHIFT: u32 = 64 - BUCKETS.trailing_zeros();
/// A bucket no shingle fell into.
const EMPTY: u32 = u32::MAX;
/// A bucket value shared by more fragments than this says nothing about
/// any two of them (a run of zeros, a common header): it is not indexed.
const MAX_POSTINGS: usize = 192;
/// Shared buckets a fragment needs with the one just placed to jump ahead
/// of the next fragment in the base order.
pub(crate) const MIN_SHARED: u16 = 2;
/// Bytes looked at for the class.
const CLASS_PROBE: usize = 1024;

/// What kind of bytes a fragment holds, judged by its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Class {
    /// No NUL byte in the first KiB.
    Text,
    /// An ELF object (its file name extension says little).
    Elf,
    /// Anything else.
    Binary,
}

/// A fragment's MinHash sketch and class.
#[derive(Clone, Debug)]
pub(crate) struct Sketch {
    pub(crate) class: Class,
    mins: [u32; BUCKETS],
}

impl Sketch {
    /// Sketches `bytes` (a whole fragment).
    pub(crate) fn of(bytes: &[u8]) -> Self {
        let mut s = Self::start(bytes);
        s.add(bytes);
        s
    }

    /// An empty sketch whose class is judged by `head`, the fragment's
    /// first bytes.
    pub(crate) fn start(head: &[u8]) -> Self {
        let probe = &head[..head.len().min(CLASS_PROBE)];
        let class = if probe.starts_with(b"\x7fELF") {
            Class::Elf
        } else if probe.contains(&0) {
            Class::Binary
        } else {
            Class::Text
        };
        Self {
            class,
            mins: [EMPTY; BUCKETS],
        }
    }

    /// Adds the shingles starting in `bytes` (pieces of a long fragment
    /// overlap by 7 bytes, so every shingle is seen once).
    pub(crate) fn add(&mut self, bytes: &[u8]) {
        for w in bytes.windows(8) {
            let mut h = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            // A 64-bit mix (splitmix64's finaliser): every input bit
            // reaches the bucket bits and the value bits.
            h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            h ^= h >> 31;
            let b = (h >> BUCKET_SHIFT) as usize;
            let v = (h as u32).min(EMPTY - 1);
            if v < self.mins[b] {
                self.mins[b] = v;
            }
        }
    }

    /// Buckets in which both sketches have the same smallest value.
    #[cfg(test)]
    pub(crate) fn shared(&self, other: &Self) -> u16 {
        self.mins
            .iter()
            .zip(&other.mins)
            .filter(|(a, b)| a == b && **a != EMPTY)
            .count() as u16
    }
}

/// Smallest not yet placed position at or after a given one (a union-find
/// over "placed" with path halving).
struct Unplaced {
    next: Vec<u32>,
}

impl Unplaced {
    fn new(n: usize) -> Self {
        Self {
            next: (0..=n as u32).collect(),
        }
    }

    fn find(&mut self, mut i: usize) -> usize {
        while self.next[i] as usize != i {
            let up = self.next[self.next[i] as usize];
            self.next[i] = up;
            i = up as usize;
        }
        i
    }

    fn take(&mut self, i: usize) {
        self.next[i] = i as u32 + 1;
    }
}

/// Reorders `base` (indexes into `sketches`): starting with its first
/// element, each next element is the one sharing the most sketch buckets
/// (at least [`MIN_SHARED`], and more than the next element of `base`
/// after the current one shares) with the element just placed, else the
/// next element of `base`. Ties go to the earlier element of `base`.
/// Serial and deterministic.
pub(crate) fn chain(base: &[usize], sketches: &[Sketch]) -> Vec<usize> {
    let n = base.len();
    // Postings: (bucket, value) -> positions in `base` holding it, sorted.
    let mut keys: Vec<(u64, u32)> = Vec::with_capacity(n * BUCKETS);
    for (pos, &i) in base.iter().enumerate() {
        for (b, &v) in sketches[i].mins.iter().enumerate() {
            if v != EMPTY {
                keys.push(((b as u64) << 32 | u64::from(v), pos as u32));
            }
        }
    }
    keys.sort_unstable();
    // Each position's posting lists, as ranges of `keys`.
    let mut lists: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
    let mut s = 0;
    while s < keys.len() {
        let mut e = s + 1;
        while e < keys.len() && keys[e].0 == keys[s].0 {
            e += 1;
        }
        if e - s > 1 && e - s <= MAX_POSTINGS {
            for k in &keys[s..e] {
                lists[k.1 as usize].push((s as u32, e as u32));
            }
        }
        s = e;
    }
    let mut placed = vec![false; n];
    let mut free = Unplaced::new(n);
    let mut score = vec![0u16; n];
    let mut touched: Vec<usize> = Vec::new();
    let mut order = Vec::with_capacity(n);
    let mut cur = 0usize;
    while order.len() < n {
        placed[cur] = true;
        free.take(cur);
        order.push(base[cur]);
        if order.len() == n {
            break;
        }
        // The base order's choice: the next unplaced after `cur` (or the
        // first unplaced when none is left after it).
        let mut succ = free.find(cur + 1);
        if succ >= n {
            succ = free.find(0);
        }
        for &(a, b) in &lists[cur] {
            for k in &keys[a as usize..b as usize] {
                let p = k.1 as usize;
                if !placed[p] {
                    if score[p] == 0 {
                        touched.push(p);
                    }
                    score[p] += 1;
                }
            }
        }
        let mut best = succ;
        let mut best_score = score[succ].max(MIN_SHARED - 1);
        for &p in &touched {
            if score[p] > best_score || (score[p] == best_score && p < best && best != succ) {
                best = p;
                best_score = score[p];
            }
        }
        for &p in &touched {
            score[p] = 0;
        }
        touched.clear();
        cur = best;
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b'a' + (x % 26) as u8
            })
            .collect()
    }

    #[test]
    fn alike_bytes_share_buckets_unrelated_do_not() {
        let a = text(1, 20_000);
        let mut b = a.clone();
        b[10_000..10_100].copy_from_slice(&text(9, 100));
        let c = text(2, 20_000);
        let (sa, sb, sc) = (Sketch::of(&a), Sketch::of(&b), Sketch::of(&c));
        assert!(
            sa.shared(&sb) >= 3 * BUCKETS as u16 / 4,
            "{}",
            sa.shared(&sb)
        );
        assert!(sa.shared(&sc) <= 1, "{}", sa.shared(&sc));
        assert_eq!(sa.class, Class::Text);
        assert_eq!(Sketch::of(b"\x7fELF\x02\x01").class, Class::Elf);
        assert_eq!(Sketch::of(b"ab\0cd").class, Class::Binary);
        // Too short for a shingle: shares nothing, not even with itself.
        assert_eq!(Sketch::of(b"abc").shared(&Sketch::of(b"abc")), 0);
    }

    #[test]
    fn chain_puts_alike_fragments_together_and_keeps_every_one() {
        // Base order interleaves two families: a0 b0 a1 b1 ...
        let fam_a = text(11, 30_000);
        let fam_b = text(12, 30_000);
        let mut frags = Vec::new();
        for i in 0..6u8 {
            for fam in [&fam_a, &fam_b] {
                let mut v = fam.clone();
                v[i as usize * 10] = b'#';
                frags.push(v);
            }
        }
        let sk: Vec<Sketch> = frags.iter().map(|f| Sketch::of(f)).collect();
        let base: Vec<usize> = (0..frags.len()).collect();
        let order = chain(&base, &sk);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, base);
        // Family a (even indexes) first, then family b.
        assert!(order[..6].iter().all(|i| i % 2 == 0), "{order:?}");
        assert!(order[6..].iter().all(|i| i % 2 == 1), "{order:?}");
        // Unrelated fragments keep the base order.
        let lone: Vec<Sketch> = (0..5).map(|s| Sketch::of(&text(100 + s, 5000))).collect();
        assert_eq!(chain(&[4, 2, 0, 1, 3], &lone), vec![4, 2, 0, 1, 3]);
    }
}
