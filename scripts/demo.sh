#!/usr/bin/env bash
# Builds ferrofs and runs its main job on the bundled example image:
# verify every byte of examples/demo.erofs, then extract it and show it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v cargo >/dev/null || { echo "demo: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
cargo build --release --quiet -p ferrofs-cli
bin=$root/target/release/ferrofs
img=$root/examples/demo.erofs
out=$(mktemp -d)/demo
echo "== ferrofs fsck $img"
"$bin" fsck "$img"
echo "== ferrofs ls -l $img docs"
"$bin" ls -l "$img" docs
echo "== ferrofs extract $img $out"
"$bin" extract "$img" "$out"
find "$out" | sort
echo "== head -3 of the extracted docs/paper-notes.txt"
head -3 "$out/docs/paper-notes.txt"
