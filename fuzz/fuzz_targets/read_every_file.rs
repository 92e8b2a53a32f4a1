//! Open an arbitrary image and read (decode) every byte of every file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = ferrofs::OpenOptions {
        verify_checksum: false,
        cache_bytes: 1 << 20,
        ..Default::default()
    };
    if let Ok(image) = ferrofs::Image::open_with(Box::new(data.to_vec()), opts) {
        let _ = ferrofs_check::fsck::check(&image, Default::default(), None);
        let _ = ferrofs_check::dump::statistics(&image);
    }
});
