//! The library's verified reads (#34): `OpenOptions::verity` over an
//! image with a tree appended (as `ferrofs verity` lays it out) reads
//! every file as the plain image does; a flipped data byte is an
//! `Error::Verity` corruption naming the block, a wrong root fails the
//! open, and a tree in a separate source works the same.

use ferrofs::verity::{RootHash, Verity, VerityOptions};
use ferrofs::{Error, Image, OpenOptions};
use ferrofs_verity::dm::{self, Params};

const IMAGE: &str = "../../testdata/lz4hc-big.erofs";

/// The image padded to 4 KiB with its tree appended, and the root hash.
fn with_tree() -> (Vec<u8>, Vec<u8>, RootHash) {
    let plain = std::fs::read(IMAGE).unwrap();
    let mut img = plain.clone();
    img.resize(plain.len().next_multiple_of(4096), 0);
    let p = Params::new(4096, img.len() as u64 / 4096, b"salt".to_vec());
    let tree = dm::build(&img, &p).unwrap();
    let off = img.len() as u64;
    img.extend(tree.hash_area(&p, off, true).unwrap());
    (plain, img, RootHash(tree.root))
}

fn open(bytes: Vec<u8>, root: &RootHash) -> ferrofs::Result<Image> {
    let opts = OpenOptions {
        verity: Some(VerityOptions::appended(root.clone())),
        ..Default::default()
    };
    Image::open_with(Box::new(bytes), opts)
}

/// Every regular file's contents, by path.
fn contents(image: &Image) -> Vec<(std::path::PathBuf, ferrofs::Result<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from("/")];
    while let Some(d) = dirs.pop() {
        for e in image.read_dir(&d).unwrap() {
            let e = e.unwrap();
            let path = d.join(e.file_name());
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                dirs.push(path);
            } else if ft.is_file() {
                let data = image.read(&path);
                out.push((path, data));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn verified_reads_match_and_catch_a_flip() {
    let (plain, img, root) = with_tree();
    let want = contents(&Image::open(plain.clone()).unwrap());
    let got = contents(&open(img.clone(), &root).unwrap());
    assert_eq!(want.len(), got.len());
    for ((p, a), (_, b)) in want.iter().zip(&got) {
        assert_eq!(a.as_ref().unwrap(), b.as_ref().unwrap(), "{}", p.display());
    }
    // A flipped byte in the middle of the image's data area.
    let mut bad = img.clone();
    let at = plain.len() / 2;
    bad[at] ^= 1;
    let failures: Vec<String> = match open(bad, &root) {
        Err(e) => vec![e.to_string()],
        Ok(image) => contents(&image)
            .into_iter()
            .filter_map(|(_, r)| r.err())
            .inspect(|e| assert!(matches!(e, Error::Verity(_)) && e.is_corruption(), "{e}"))
            .map(|e| e.to_string())
            .collect(),
    };
    let block = format!("data block {}", at / 4096);
    assert!(failures.iter().any(|f| f.contains(&block)), "{failures:?}");
    // A wrong root: refused at open.
    let mut wrong = root.clone();
    wrong.0[0] ^= 1;
    let e = open(img.clone(), &wrong).unwrap_err();
    assert!(e.to_string().contains("root hash does not match"), "{e}");
    // The same tree in a separate source.
    let data_len = plain.len().next_multiple_of(4096);
    let (data, hash) = img.split_at(data_len);
    let opts = VerityOptions {
        hash_source: Some(Box::new(hash.to_vec())),
        hash_offset: Some(0),
        ..VerityOptions::appended(root)
    };
    let v = Verity::open(Box::new(data.to_vec()), opts).unwrap();
    v.verify_all().unwrap();
    assert_eq!(contents(&Image::open(v).unwrap()).len(), want.len());
}
