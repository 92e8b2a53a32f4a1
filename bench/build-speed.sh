#!/usr/bin/env bash
# Build speed at equal options (issue #17): ferrofs mkfs vs mkfs.erofs
# 1.9.4, alternating run by run, on each TREE.
# Usage: [RUNS=3] [OPTS="-zlz4hc,12 -C65536;..."] bench/build-speed.sh TREE...
#   (root; the 1.9.4 tools via UPSTREAM_NEXT_BIN or
#   ../shared/tools/upstream-tools --next)
# Every timed build ends with `sync`, so both tools pay for getting the
# image onto the disk (ferrofs fsyncs by design). The tree is read once
# before the first run so both tools find it in the page cache.
# Prints one Markdown row per (tree, options, tool): image bytes, median
# wall and CPU seconds, cores used (CPU / wall), median peak RSS, and
# ferrofs's wall and CPU over mkfs.erofs's.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup
runs=${RUNS:-3}
out=${OUT:-/tmp/build-speed}; mkdir -p "$out"
IFS=';' read -r -a sets <<<"${OPTS:--zlz4hc,12 -C65536;-zlz4hc,12 -C131072 -Efragments,dedupe;-zzstd,15 -C131072;-zlzma,6 -C131072}"
echo "| tree | options | tool | image bytes | wall s | CPU s | cores | peak RSS MiB | wall ratio | CPU ratio |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
for tree in "$@"; do
  tar cf - -C "$tree" . | wc -c >/dev/null
  for o in "${sets[@]}"; do
    for t in ferrofs upstream; do : >"$out/$t.wall"; : >"$out/$t.cpu"; : >"$out/$t.rss"; done
    declare -A size
    for ((r = 0; r < runs; r++)); do
      for t in ferrofs upstream; do
        img=$out/$t.img; rm -f "$img"; sync
        # shellcheck disable=SC2086 # $o is a list of options
        if [[ $t == ferrofs ]]; then cmd=("$ferrofs" mkfs --quiet $o "$img" "$tree")
        else cmd=("$bin/mkfs.erofs" --quiet $o "$img" "$tree"); fi
        /usr/bin/time -o "$out/time" -f "%e %U %S %M" bash -c '"$@" >/dev/null && sync' _ "${cmd[@]}"
        read -r w u s m <"$out/time"
        echo "$w" >>"$out/$t.wall"; echo "$u + $s" | bc >>"$out/$t.cpu"; echo "$m" >>"$out/$t.rss"
        size[$t]=$(stat -c %s "$img")
      done
    done
    declare -A wall cpu
    for t in ferrofs upstream; do
      wall[$t]=$(median <"$out/$t.wall"); cpu[$t]=$(median <"$out/$t.cpu")
    done
    for t in upstream ferrofs; do
      name=$([[ $t == ferrofs ]] && echo ferrofs || echo "mkfs.erofs 1.9.4")
      rss=$(median <"$out/$t.rss")
      python3 - "$(basename "$tree")" "$o" "$name" "${size[$t]}" "${wall[$t]}" "${cpu[$t]}" "$rss" \
        "${wall[ferrofs]}" "${wall[upstream]}" "${cpu[ferrofs]}" "${cpu[upstream]}" "$t" <<'EOF'
import sys
tree, o, name, size, w, c, rss, wf, wu, cf, cu, t = sys.argv[1:]
w, c, wf, wu, cf, cu = map(float, (w, c, wf, wu, cf, cu))
ratios = f"{wf / wu:.2f} | {cf / cu:.2f}" if t == "ferrofs" else " | "
print(f"| {tree} | {o} | {name} | {int(size):,} | {w:.2f} | {c:.2f} | {c / w:.2f} | {int(rss) / 1024:.0f} | {ratios} |")
EOF
    done
  done
done
rm -f "$out"/*.img
