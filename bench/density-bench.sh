#!/usr/bin/env bash
# Small-file density (issue #5): image size and build time of
#   ferrofs mkfs -C PCL -Efragments,dedupe, mkfs.erofs 1.8.6 with the same
#   options, and mksquashfs -b 128K, with the same codec, on each TREE.
# Usage: [CODECS="lz4hc lzma zstd"] [PCL=131072] bench/density-bench.sh RUNS TREE...
#   (root; upstream tools via
#   UPSTREAM_TOOLS_BIN or ../shared/tools/upstream-tools)
# Prints one Markdown row per (tree, codec, tool): size, size ratio to
# mksquashfs, median wall and CPU seconds of RUNS builds.
set -euo pipefail
runs=${1:?RUNS}; shift
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${UPSTREAM_TOOLS_BIN:-$(bash "$here/../shared/tools/upstream-tools")}
ferrofs=$here/target/release/ferrofs
[[ -x $ferrofs ]] || (cd "$here" && cargo build --release -q -p ferrofs-cli)
out=${OUT:-/tmp/density-bench}; mkdir -p "$out"
pcl=${PCL:-131072}
# shellcheck source=bench/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
measure() { # name cmd... -> sets size wall cpu
  local img=$out/img walls=() cpus=()
  for ((r = 0; r < runs; r++)); do
    rm -f "$img"; sync
    /usr/bin/time -f "%e %U %S" -o "$out/t" "$@" >/dev/null 2>&1
    read -r w u s < "$out/t"
    walls+=("$w"); cpus+=("$(echo "$u + $s" | bc)")
  done
  size=$(stat -c %s "$img")
  wall=$(printf '%s\n' "${walls[@]}" | median)
  cpu=$(printf '%s\n' "${cpus[@]}" | median)
}
echo "| tree | codec | tool | image bytes | vs mksquashfs | wall s | CPU s |"
echo "|---|---|---|---:|---:|---:|---:|"
for tree in "$@"; do
  for codec in ${CODECS:-lz4hc lzma zstd}; do
    case $codec in
      lz4hc) sq=(-comp lz4 -Xhc); ez=lz4hc ;;
      lzma) sq=(-comp xz); ez=lzma ;;
      zstd) sq=(-comp zstd); ez=zstd ;;
    esac
    measure "$bin/mksquashfs" "$tree" "$out/img" -b 128K "${sq[@]}" -quiet -no-progress -noappend
    sqsize=$size
    printf '| %s | %s | mksquashfs 4.6.1 -b 128K | %s | 1.000 | %s | %s |\n' "$(basename "$tree")" "$codec" "$size" "$wall" "$cpu"
    measure "$bin/mkfs.erofs" --quiet -z$ez -C$pcl -Efragments,dedupe "$out/img" "$tree"
    printf '| %s | %s | mkfs.erofs 1.8.6 -C%s -Efragments,dedupe | %s | %.3f | %s | %s |\n' "$(basename "$tree")" "$codec" "$pcl" "$size" "$(echo "$size / $sqsize" | bc -l)" "$wall" "$cpu"
    measure "$ferrofs" mkfs --quiet -z$ez -C$pcl -Efragments,dedupe "$out/img" "$tree"
    printf '| %s | %s | ferrofs -C%s -Efragments,dedupe | %s | %.3f | %s | %s |\n' "$(basename "$tree")" "$codec" "$pcl" "$size" "$(echo "$size / $sqsize" | bc -l)" "$wall" "$cpu"
  done
done
