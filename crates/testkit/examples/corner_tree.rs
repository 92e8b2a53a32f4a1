//! Writes the corner-case tree into a directory: `cargo run -p ferrofs-testkit --example
//! corner_tree -- DIR` (DIR must be empty or absent; run as root for the full tree).

fn main() {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: corner_tree DIR");
        std::process::exit(2);
    };
    if let Err(e) = ferrofs_testkit::make_corner_tree(std::path::Path::new(&dir)) {
        eprintln!("corner_tree: {e}");
        std::process::exit(1);
    }
}
