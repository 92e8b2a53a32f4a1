#!/usr/bin/env bash
# Builds ferrofs, then runs its main job on the bundled example:
#  1. ferrofs mkfs packs examples/tree into a compressed EROFS image
#     (--preset balanced: lz4hc, 64 KiB pclusters, ztailpacking);
#  2. ferrofs fsck verifies every byte of it, and ferrofs extract unpacks it,
#     compared with the tree (diff -r);
#  3. as root, the kernel mounts it and it is compared with the tree again;
#  4. the image made by upstream mkfs.erofs (examples/demo.erofs) is checked too.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v cargo >/dev/null || { echo "demo: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
# The test suite's profile (optimized, with overflow checks), so that
# ./scripts/test.sh afterwards reuses this build.
echo "== building ferrofs: cargo build --profile ci -p ferrofs-cli (a first build takes several minutes)"
cargo build --profile ci -p ferrofs-cli
bin=$root/target/ci/ferrofs
work=$(mktemp -d)
trap 'mountpoint -q "$work/mnt" 2>/dev/null && umount "$work/mnt"; rm -rf "$work"' EXIT
img=$work/example.erofs

echo "== ferrofs mkfs --preset balanced $img examples/tree"
"$bin" mkfs --preset balanced "$img" examples/tree
echo "== ferrofs fsck"
"$bin" fsck "$img"
echo "== ferrofs ls -l / and extract"
"$bin" ls -l "$img"
"$bin" extract "$img" "$work/out"
diff -r --no-dereference examples/tree "$work/out" && echo "extracted tree matches examples/tree"
if [[ $(id -u) == 0 ]] && mkdir -p "$work/mnt" && mount -t erofs -o loop,ro "$img" "$work/mnt" 2>/dev/null; then
  diff -r --no-dereference examples/tree "$work/mnt" && echo "kernel mount matches examples/tree"
  umount "$work/mnt"
else
  echo "(not root or no loop device: kernel mount skipped)"
fi
echo "== an image made by mkfs.erofs 1.8.6: examples/demo.erofs"
"$bin" fsck examples/demo.erofs
"$bin" cat examples/demo.erofs README.txt
