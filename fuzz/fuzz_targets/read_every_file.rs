//! Open an arbitrary image and read (decode) every byte of every file:
//! fsck's walk and its physical-order data pass on two threads.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = ferrofs::OpenOptions {
        verify_checksum: false,
        cache_bytes: 1 << 20,
        ..Default::default()
    };
    if let Ok(image) = ferrofs::Image::open_with(Box::new(data.to_vec()), opts) {
        let opts = ferrofs_check::fsck::Options {
            jobs: 2,
            ..Default::default()
        };
        let _ = ferrofs_check::fsck::check(&image, opts, None);
        let _ = ferrofs_check::dump::statistics(&image);
    }
});
