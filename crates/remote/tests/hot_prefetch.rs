//! Trace-guided prefetch against a small server: the hot-range record in
//! an object's boot area is found and checked, its ranges' chunks (small
//! gaps included) are fetched in one request per run, a reader wanting a
//! chunk the prefetch is fetching waits for it instead of asking again,
//! and the reads that follow are served from the cache. A damaged or
//! stale record is refused with the reason.

mod common;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::{cache, object, quick, ranged, Server};
use ferrofs::format::hotrange::{HotRanges, AREA};
use ferrofs::ReadAt;
use ferrofs_remote::HttpSource;

/// A 4 MiB object with superblock UUID `[7; 16]` and `record` (if any)
/// in its boot area.
fn image_with(record: Option<&HotRanges>) -> std::sync::Arc<Vec<u8>> {
    let mut v = (*object(4 << 20)).clone();
    v[..AREA].copy_from_slice(&record.map_or([0; AREA], HotRanges::encode));
    v[1024 + 0x30..1024 + 0x40].copy_from_slice(&[7; 16]);
    std::sync::Arc::new(v)
}

const HOT: [(u64, u64); 3] = [
    (200_000, 300_000),
    (600_000, 700_000),
    (3_000_000, 3_100_000),
];

#[test]
fn hot_ranges_are_fetched_in_few_requests_and_read_from_the_cache() {
    let rec = HotRanges::new(&HOT, 0, 4 << 20, [7; 16]);
    let data = image_with(Some(&rec));
    let d = data.clone();
    let srv = Server::start("/img", Duration::from_millis(100), move |r, _| {
        ranged(&d, "\"h\"", r)
    });
    let src = std::sync::Arc::new(HttpSource::open(&srv.url, cache(), &quick()).unwrap());
    let ranges = src.hot_ranges(0).unwrap().expect("a record");
    assert_eq!(ranges, rec.ranges);
    assert_eq!(srv.ranges(), ["bytes=0-0", "bytes=0-65535"]);
    let bg = src.clone();
    let job = std::thread::spawn(move || bg.prefetch(&ranges, &AtomicBool::new(false)).unwrap());
    // Meanwhile a reader wants the last hot range (64 KiB chunks 45..=47).
    std::thread::sleep(Duration::from_millis(30));
    let mut b = vec![0u8; 100_000];
    src.read_exact_at(&mut b, 3_000_000).unwrap();
    assert!(b == data[3_000_000..3_100_000]);
    let stats = job.join().unwrap();
    // Chunks 3..=10 (the 4-chunk gap 5..=8 fetched with them) in one
    // request, chunks 45..=47 in another (by the prefetch or the reader).
    let mut r = srv.ranges()[2..].to_vec();
    r.sort();
    assert_eq!(r, ["bytes=196608-720895", "bytes=2949120-3145727"]);
    assert!(stats.requests >= 1 && stats.requests <= 2, "{stats:?}");
    // The start's reads need nothing more.
    let before = srv.requests();
    for (a, e) in HOT {
        let mut b = vec![0u8; (e - a) as usize];
        src.read_exact_at(&mut b, a).unwrap();
        assert!(b == data[a as usize..e as usize]);
    }
    assert_eq!(srv.requests(), before);
    // Prefetching again fetches nothing.
    let go = AtomicBool::new(false);
    assert_eq!(src.prefetch(&rec.ranges, &go).unwrap().requests, 0);
    // A stopped prefetch asks for nothing.
    let other = HttpSource::open(&srv.url, cache(), &quick()).unwrap();
    let before = srv.requests();
    let stats = other.prefetch(&rec.ranges, &AtomicBool::new(true)).unwrap();
    assert_eq!((stats.requests, srv.requests()), (0, before));
}

#[test]
fn damaged_or_stale_records_are_refused() {
    let rec = HotRanges::new(&HOT, 0, 4 << 20, [7; 16]);
    let cases: [(HotRanges, Option<&str>); 4] = [
        (rec.clone(), None),
        (
            HotRanges {
                image_len: 5 << 20,
                ..rec.clone()
            },
            Some("made for an image of 5242880 bytes, this one has 4194304"),
        ),
        (
            HotRanges {
                uuid: [8; 16],
                ..rec.clone()
            },
            Some("superblock UUID differs"),
        ),
        (
            HotRanges {
                ranges: vec![(4 << 20, 5 << 20)],
                ..rec.clone()
            },
            Some("invalid hot-range record range"),
        ),
    ];
    for (r, want) in cases {
        let data = image_with(Some(&r));
        let d = data.clone();
        let srv = Server::start("/img", Duration::ZERO, move |q, _| ranged(&d, "\"h\"", q));
        let src = HttpSource::open(&srv.url, cache(), &quick()).unwrap();
        match (src.hot_ranges(0), want) {
            (Ok(Some(got)), None) => assert_eq!(got, rec.ranges),
            (Err(e), Some(w)) => assert!(e.contains(w), "{e}"),
            (other, _) => panic!("{want:?}: {other:?}"),
        }
    }
    // A bit flipped in the ranges: the checksum catches it.
    let mut area = rec.encode();
    area[41] ^= 4;
    let mut v = (*image_with(None)).clone();
    v[..AREA].copy_from_slice(&area);
    let srv = Server::start("/img", Duration::ZERO, move |q, _| ranged(&v, "\"h\"", q));
    let src = HttpSource::open(&srv.url, cache(), &quick()).unwrap();
    assert!(src.hot_ranges(0).unwrap_err().contains("checksum"));
    // No record: nothing to do.
    let v = image_with(None);
    let srv = Server::start("/img", Duration::ZERO, move |q, _| ranged(&v, "\"h\"", q));
    let src = HttpSource::open(&srv.url, cache(), &quick()).unwrap();
    assert_eq!(src.hot_ranges(0), Ok(None));
}
