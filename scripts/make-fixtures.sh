#!/usr/bin/env bash
# Regenerates the small reference images in testdata/ with the upstream
# mkfs.erofs (1.8.6, installed by ../shared/tools/upstream-tools) and Debian's
# 1.5. They are committed so the corruption sweep and the fuzz seeds need no
# tool at test time; the kernel oracle tests build their own images.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
up=${UPSTREAM_TOOLS_BIN:-$(bash "$root/../shared/tools/upstream-tools")}
out=$root/testdata
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT

# A small tree with a bit of everything (scripts/fixture-tree.sh).
source "$root/scripts/fixture-tree.sh"
fixture_tree "$src"

build() { # name tool opts...
  local name=$1 tool=$2; shift 2
  "$tool" --quiet -T1700000000 -U 11111111-2222-3333-4444-555555555555 "$@" "$out/$name.erofs" "$src" >/dev/null 2>&1 ||
    "$tool" -T1700000000 -U 11111111-2222-3333-4444-555555555555 "$@" "$out/$name.erofs" "$src" >/dev/null
}
build plain "$up/mkfs.erofs"
build lz4 "$up/mkfs.erofs" -zlz4
build lz4hc-big "$up/mkfs.erofs" -zlz4hc,12 -C16384
build lzma-ztail "$up/mkfs.erofs" -zlzma -Eztailpacking
build deflate-dedupe "$up/mkfs.erofs" -zdeflate -Ededupe
build zstd-fragments "$up/mkfs.erofs" -zzstd -Eztailpacking,fragments --xattr-prefix=trusted.overlay.
build all-fragments "$up/mkfs.erofs" -zlz4hc -Eall-fragments
build legacy-1k "$up/mkfs.erofs" -b1024 -zlz4 -Elegacy-compress
build chunked "$up/mkfs.erofs" --chunksize=4096
build chunk-indexes "$up/mkfs.erofs" --chunksize=8192 -Eforce-chunk-indexes
build root-xattrs "$up/mkfs.erofs" -zlz4 --root-xattr-isize=128
build debian-lz4hc /usr/bin/mkfs.erofs -zlz4hc
ls -la "$out"

# The bundled example the README's first command verifies and extracts.
demo=$(mktemp -d)
mkdir -p "$demo/docs" "$demo/data"
cat > "$demo/README.txt" <<'TXT'
This tree was packed into examples/demo.erofs by mkfs.erofs 1.8.6
(-zlz4hc -Eztailpacking). ferrofs reads it back without the kernel.
TXT
for i in $(seq 1 4000); do echo "line $i: EROFS packs as much input as fits into one fixed-size physical cluster"; done > "$demo/docs/paper-notes.txt"
seq 1 20000 > "$demo/data/numbers.txt"
ln -s docs/paper-notes.txt "$demo/notes"
setfattr -n user.origin -v "ferrofs example" "$demo/README.txt"
find "$demo" -exec touch -h -d @1700000000 {} +
"$up/mkfs.erofs" --quiet -T1700000000 -U 11111111-2222-3333-4444-555555555555 -zlz4hc -Eztailpacking "$root/examples/demo.erofs" "$demo" >/dev/null
rm -rf "$demo"
