//! composefs dump files (`mkcomposefs --from-file`) on hostile input: a
//! dump is refused with an error naming its line, or becomes an image
//! that ferrofs's own reader opens and checks clean (the writer must not
//! turn any accepted dump into a damaged image).
#![no_main]

use ferrofs_builder::composefs::{build_composefs, CfsOptions, CfsSource};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = CfsOptions {
        threads: Some(1),
        ..Default::default()
    };
    let source = CfsSource::Dump(Box::new(std::io::Cursor::new(data)));
    let Ok(built) = build_composefs(source, &opts) else {
        return;
    };
    let image = ferrofs::Image::open_with(Box::new(built.bytes), ferrofs::OpenOptions::default())
        .expect("an image built from an accepted dump opens");
    let report = ferrofs_check::fsck::check(&image, ferrofs_check::fsck::Options::default(), None);
    assert!(
        report.problems.is_empty(),
        "an image built from an accepted dump is damaged: {:?}",
        report.problems
    );
});
