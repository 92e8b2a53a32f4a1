#!/bin/bash
# Compressed builds, ferrofs mkfs vs mkfs.erofs 1.8.6 at equal options (#4):
#   bench/z-bench.sh REPEAT SOURCE...
# For each source (a directory, or a file, which is built as a one-file tree)
# and option set, both tools build REPEAT times, alternating; each run is
# timed through a final `sync`. Prints a Markdown table of medians: image
# size, wall and CPU seconds, their ratios, and the in-place-safe share of
# pclusters (`ferrofs dump`). OPTS overrides the option sets (`;`-separated).
set -euo pipefail
REPEAT=${1:?usage: z-bench.sh REPEAT SOURCE...}
shift
U=${UPSTREAM_TOOLS_BIN:-$HOME/.cache/upstream-tools/bin}
F=${FERROFS:-$(cd "$(dirname "$0")/.." && pwd)/target/release/ferrofs}
W=${BENCH_DIR:-/tmp/ferrofs-bench}
mkdir -p "$W"
IFS=';' read -r -a SETS <<<"${OPTS:--zlz4 -C4096;-zlz4 -C65536;-zlz4hc -C4096;-zlz4hc -C65536;-zlzma -C4096;-zlzma -C65536;-zzstd -C4096;-zzstd -C65536}"
med() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "| source | options | size ferrofs / mkfs.erofs (B) | ratio | wall s ferrofs / mkfs.erofs | ratio | CPU s ferrofs / mkfs.erofs | ratio | in-place ferrofs / mkfs.erofs |"
echo "|---|---|---|---|---|---|---|---|---|"
for src in "$@"; do
  tree=$src
  if [ -f "$src" ]; then
    tree=$W/one-file; rm -rf "$tree"; mkdir -p "$tree"; ln "$src" "$tree/" 2>/dev/null || cp "$src" "$tree/"
  fi
  for o in "${SETS[@]}"; do
    declare -A size wall cpu inpl
    for tool in ferrofs upstream; do : >"$W/$tool.wall"; : >"$W/$tool.cpu"; done
    for _ in $(seq "$REPEAT"); do
      for tool in ferrofs upstream; do
        img=$W/z-$tool.img; rm -f "$img"; sync
        if [ $tool = ferrofs ]; then cmd="$F mkfs --quiet $o $img $tree"; else cmd="$U/mkfs.erofs --quiet $o $img $tree"; fi
        /usr/bin/time -o "$W/time" -f "%e %U %S" bash -c "$cmd >/dev/null 2>&1 && sync"
        read -r w u s <"$W/time"
        echo "$w" >>"$W/$tool.wall"; echo "$u + $s" | bc >>"$W/$tool.cpu"
        size[$tool]=$(stat -c %s "$img")
        inpl[$tool]=$($F dump "$img" --json | python3 -c "import json,sys; print(round(json.load(sys.stdin)['statistics']['in_place']['share'],3))")
      done
    done
    for tool in ferrofs upstream; do wall[$tool]=$(med <"$W/$tool.wall"); cpu[$tool]=$(med <"$W/$tool.cpu"); done
    r() { python3 -c "print(f'{$1/$2:.3f}')"; }
    echo "| $(basename "$src") | $o | ${size[ferrofs]} / ${size[upstream]} | $(r "${size[ferrofs]}" "${size[upstream]}") | ${wall[ferrofs]} / ${wall[upstream]} | $(r "${wall[ferrofs]}" "${wall[upstream]}") | ${cpu[ferrofs]} / ${cpu[upstream]} | $(r "${cpu[ferrofs]}" "${cpu[upstream]}") | ${inpl[ferrofs]} / ${inpl[upstream]} |"
  done
done
rm -f "$W"/z-*.img
