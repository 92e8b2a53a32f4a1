//! Open an arbitrary image and walk its tree: metadata only.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = ferrofs::OpenOptions {
        verify_checksum: false,
        ..Default::default()
    };
    if let Ok(image) = ferrofs::Image::open_with(Box::new(data.to_vec()), opts) {
        let _ = ferrofs_check::fsck::check(
            &image,
            ferrofs_check::fsck::Options {
                read_data: false,
                ..Default::default()
            },
            None,
        );
        let _ = ferrofs_check::dump::superblock(&image);
    }
});
