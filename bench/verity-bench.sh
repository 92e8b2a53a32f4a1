#!/usr/bin/env bash
# The cost of verified reads (issue #34): `ferrofs fsck` and `ferrofs
# extract` of an image with an appended dm-verity tree, with and without
# `--verity ROOT_HASH`, alternating run by run, on each TREE.
# Usage: [RUNS=5] [OPTS="-zlz4hc,12 -C65536;"] bench/verity-bench.sh TREE...
# Images are built once per (tree, options) with `mkfs --verity`; the runs
# find them in the page cache (a warm read, where hashing costs the most
# relative to the rest). extract writes into /dev/shm.
# Prints one Markdown row per (tree, options, command): median wall and CPU
# seconds of each, and verified over unverified.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup
runs=${RUNS:-5}
out=${OUT:-/tmp/verity-bench}; mkdir -p "$out"
IFS=';' read -r -a sets <<<"${OPTS:--zlz4hc,12 -C65536;}"
echo "| tree | options | command | verified wall s | unverified wall s | verified CPU s | unverified CPU s | wall ratio | CPU ratio |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
for tree in "$@"; do
  for o in "${sets[@]}"; do
    img=$out/image.erofs
    # shellcheck disable=SC2086 # $o is a list of options
    root=$("$ferrofs" mkfs --quiet --json --verity $o "$img" "$tree" |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["verity"]["root_hash"])')
    cat "$img" >/dev/null
    for cmd in fsck extract; do
      for v in on off; do : >"$out/$v.wall"; : >"$out/$v.cpu"; done
      for ((r = 0; r < runs; r++)); do
        for v in on off; do
          args=()
          [[ $v == on ]] && args=(--verity "$root")
          rm -rf /dev/shm/verity-bench
          case $cmd in
            fsck) c=("$ferrofs" fsck "${args[@]}" "$img") ;;
            extract) c=("$ferrofs" extract "${args[@]}" "$img" /dev/shm/verity-bench) ;;
          esac
          /usr/bin/time -o "$out/time" -f "%e %U %S" "${c[@]}" >/dev/null 2>"$out/stderr"
          read -r w u s <"$out/time"
          echo "$w" >>"$out/$v.wall"; echo "$u + $s" | bc >>"$out/$v.cpu"
        done
      done
      rm -rf /dev/shm/verity-bench
      python3 - "$(basename "$tree")" "${o:-none}" "$cmd" \
        "$(median <"$out/on.wall")" "$(median <"$out/off.wall")" \
        "$(median <"$out/on.cpu")" "$(median <"$out/off.cpu")" <<'EOF'
import sys
tree, o, cmd, won, woff, con, coff = sys.argv[1:]
won, woff, con, coff = map(float, (won, woff, con, coff))
ratio = lambda a, b: f"{a / b:.2f}" if b > 0 else "n/a"
print(f"| {tree} | {o} | {cmd} | {won:.3f} | {woff:.3f} | {con:.3f} | {coff:.3f} | "
      f"{ratio(won, woff)} | {ratio(con, coff)} |")
EOF
    done
  done
done
rm -f "$out/image.erofs"
