#!/usr/bin/env bash
# composefs build time (issue #37): ferrofs's mkcomposefs drop-in vs
# mkcomposefs 1.0.8, with and without --digest-store, alternating run by
# run, on each TREE, from a cold page cache.
# Usage: [RUNS=5] [THREADS=N] bench/composefs-bench.sh TREE...
#   (root: drop_caches; the 1.0.8 tools via UPSTREAM_NEXT_BIN or
#   ../shared/tools/upstream-tools --next; FERROFS=path picks the binary)
# Before every run: the image and the store are removed, `sync`, and
# `echo 3 > /proc/sys/vm/drop_caches`, so both tools read the tree from
# the disk. Every timed build ends with `sync` (mkcomposefs fsyncs each
# object, ferrofs syncs the store once and the image). The images of the
# two tools are compared (they must be identical).
# Prints one Markdown row per (tree, store?, tool): median wall and CPU
# seconds, and ferrofs's over mkcomposefs's (targets: <= 0.8 with the
# store, <= 0.5 without).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup
runs=${RUNS:-5}
out=${OUT:-/tmp/composefs-bench}; mkdir -p "$out"
ln -sf "$ferrofs" "$out/mkcomposefs"
threads=()
[[ -n ${THREADS:-} ]] && threads=("--threads=$THREADS")
cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }
echo "| tree | store | tool | wall s | CPU s | wall ratio | CPU ratio |"
echo "|---|---|---|---:|---:|---:|---:|"
for tree in "$@"; do
  for store in no yes; do
    for t in ferrofs upstream; do : >"$out/$t.wall"; : >"$out/$t.cpu"; done
    for ((r = 0; r < runs; r++)); do
      for t in ferrofs upstream; do
        img=$out/$t.cfs; rm -rf "$img" "$out/$t.store"
        opts=("${threads[@]}")
        [[ $store == yes ]] && opts+=("--digest-store=$out/$t.store")
        prog=$([[ $t == ferrofs ]] && echo "$out/mkcomposefs" || echo "$bin/mkcomposefs")
        cold
        /usr/bin/time -o "$out/time" -f "%e %U %S" bash -c '"$@" && sync' _ "$prog" "${opts[@]}" "$tree" "$img"
        read -r w u s <"$out/time"
        echo "$w" >>"$out/$t.wall"; echo "$u + $s" | bc >>"$out/$t.cpu"
      done
      cmp -s "$out/ferrofs.cfs" "$out/upstream.cfs" || { echo "images differ on $tree" >&2; exit 1; }
    done
    wf=$(median <"$out/ferrofs.wall"); wu=$(median <"$out/upstream.wall")
    cf=$(median <"$out/ferrofs.cpu"); cu=$(median <"$out/upstream.cpu")
    name=$(basename "$tree")
    printf '| %s | %s | mkcomposefs 1.0.8 | %.2f | %.2f | | |\n' "$name" "$store" "$wu" "$cu"
    printf '| %s | %s | ferrofs | %.2f | %.2f | %.2f | %.2f |\n' "$name" "$store" "$wf" "$cf" \
      "$(echo "$wf / $wu" | bc -l)" "$(echo "$cf / $cu" | bc -l)"
  done
done
rm -rf "$out"/*.cfs "$out"/*.store
