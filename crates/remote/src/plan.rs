//! Which requests a read needs: the chunks a byte range covers, and the
//! missing ones grouped into as few range requests as the size cap allows.

use std::ops::Range;

/// One range request: chunks `first..first + count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fetch {
    pub first: u64,
    pub count: u64,
}

/// The chunks of `chunk` bytes that bytes `offset..offset + len` touch
/// (empty for `len == 0`). `chunk` is non-zero; the range lies below
/// `u64::MAX` (the caller checked it against the object's length).
pub fn chunks_of(offset: u64, len: u64, chunk: u64) -> Range<u64> {
    if len == 0 {
        return 0..0;
    }
    let last = offset.saturating_add(len - 1) / chunk;
    offset / chunk..last.saturating_add(1)
}

/// Groups `missing` (ascending chunk indexes) into requests: each run of
/// consecutive chunks becomes one request, split every `max_chunks`
/// chunks (at least one per request), so a large run can be fetched by
/// several requests in parallel.
pub fn coalesce(missing: &[u64], max_chunks: u64) -> Vec<Fetch> {
    let max_chunks = max_chunks.max(1);
    let mut out: Vec<Fetch> = Vec::new();
    for &c in missing {
        match out.last_mut() {
            Some(f) if f.first.checked_add(f.count) == Some(c) && f.count < max_chunks => {
                f.count += 1;
            }
            _ => out.push(Fetch { first: c, count: 1 }),
        }
    }
    out
}

/// Splits `fetches` into at most `workers` groups of about equal bytes
/// (greedy: each request goes to the lightest group), so the groups can
/// run on parallel connections. Order within a group is kept.
pub fn spread(fetches: &[Fetch], workers: usize) -> Vec<Vec<Fetch>> {
    let n = workers.clamp(1, fetches.len().max(1));
    let mut groups: Vec<(u64, Vec<Fetch>)> = vec![(0, Vec::new()); n];
    for f in fetches {
        if let Some(g) = groups.iter_mut().min_by_key(|g| g.0) {
            g.0 += f.count;
            g.1.push(*f);
        }
    }
    groups
        .into_iter()
        .map(|g| g.1)
        .filter(|g| !g.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_range_of_bytes() {
        assert_eq!(chunks_of(0, 0, 4096), 0..0);
        assert_eq!(chunks_of(0, 1, 4096), 0..1);
        assert_eq!(chunks_of(4095, 2, 4096), 0..2);
        assert_eq!(chunks_of(4096, 4096, 4096), 1..2);
        assert_eq!(chunks_of(4096, 4097, 4096), 1..3);
        assert_eq!(
            chunks_of(u64::MAX - 10, 5, 4096),
            u64::MAX / 4096..u64::MAX / 4096 + 1
        );
    }

    #[test]
    fn adjacent_misses_share_a_request() {
        let f = |first, count| Fetch { first, count };
        assert_eq!(coalesce(&[], 8), vec![]);
        assert_eq!(coalesce(&[3], 8), vec![f(3, 1)]);
        assert_eq!(
            coalesce(&[1, 2, 3, 5, 6, 9], 8),
            vec![f(1, 3), f(5, 2), f(9, 1)]
        );
        // The cap splits a long run; 0 is taken as 1.
        assert_eq!(
            coalesce(&[0, 1, 2, 3, 4, 5, 6], 3),
            vec![f(0, 3), f(3, 3), f(6, 1)]
        );
        assert_eq!(coalesce(&[4, 5], 0), vec![f(4, 1), f(5, 1)]);
        // No overflow at the top of the index space.
        assert_eq!(
            coalesce(&[u64::MAX - 1, u64::MAX], 8),
            vec![f(u64::MAX - 1, 2)]
        );
    }

    #[test]
    fn spread_balances_bytes_over_workers() {
        let f = |first, count| Fetch { first, count };
        let reqs = [f(0, 4), f(10, 1), f(20, 1), f(30, 1), f(40, 1)];
        let g = spread(&reqs, 2);
        assert_eq!(g.len(), 2);
        let load: Vec<u64> = g.iter().map(|g| g.iter().map(|f| f.count).sum()).collect();
        assert_eq!(load, vec![4, 4]);
        assert_eq!(spread(&reqs, 1), vec![reqs.to_vec()]);
        assert_eq!(spread(&reqs[..2], 8).len(), 2);
        assert!(spread(&[], 4).is_empty());
    }
}
