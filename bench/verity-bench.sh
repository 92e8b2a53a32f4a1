#!/usr/bin/env bash
# The cost of verified reads (issue #34): `ferrofs fsck`, `ferrofs
# extract` and `tar cf - | wc -c` of a `ferrofs mount` of an image with an
# appended dm-verity tree, with and without `--verity ROOT_HASH`,
# alternating run by run, on each TREE.
# Usage: [RUNS=5] [COLD=1] [CMDS="fsck extract tar"]
#        [OPTS="-zlz4hc,12 -C65536;"] bench/verity-bench.sh TREE...   (root)
# Images are built once per (tree, options) with `mkfs --verity`. By
# default the runs find the image in the page cache (a warm read, where
# hashing costs the most relative to the rest); COLD=1 drops the caches
# before every run. extract writes into /dev/shm. For tar, the mount is
# made before the clock starts and the CPU is the daemon's (from /proc)
# plus tar's.
# Prints one Markdown row per (tree, options, command): median wall and CPU
# seconds of each, and verified over unverified.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup
runs=${RUNS:-5}
out=${OUT:-/tmp/verity-bench}; mkdir -p "$out/m"
IFS=';' read -r -a sets <<<"${OPTS:--zlz4hc,12 -C65536;}"
read -r -a cmds <<<"${CMDS:-fsck extract tar}"
cold=${COLD:-0}
tick=$(getconf CLK_TCK)
drop() { if [[ $cold == 1 ]]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi; }
# tar of a fresh mount: "wall cpu" (the daemon's CPU from /proc, plus tar's).
fuse_tar() { # img verity-args...
  local img=$1 pid w u s
  shift
  "$ferrofs" mount "$@" "$img" "$out/m"
  for _ in $(seq 50); do mountpoint -q "$out/m" && break; sleep 0.1; done
  pid=$(pgrep -n -f "$ferrofs mount") || { echo "verity-bench: the mount did not start" >&2; exit 1; }
  drop
  /usr/bin/time -o "$out/time" -f "%e %U %S" bash -c "tar cf - -C '$out/m' . | wc -c >/dev/null"
  read -r w u s <"$out/time"
  local d
  d=$(awk -v t="$tick" '{printf "%.2f", ($14 + $15) / t}' "/proc/$pid/stat")
  umount "$out/m" 2>/dev/null || fusermount3 -u "$out/m"
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  echo "$w $(echo "$u + $s + $d" | bc)"
}
echo "| tree | options | cache | command | verified wall s | unverified wall s | verified CPU s | unverified CPU s | wall ratio | CPU ratio |"
echo "|---|---|---|---|---:|---:|---:|---:|---:|---:|"
for tree in "$@"; do
  for o in "${sets[@]}"; do
    img=$out/image.erofs
    # shellcheck disable=SC2086 # $o is a list of options
    root=$("$ferrofs" mkfs --quiet --json --verity $o "$img" "$tree" |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["verity"]["root_hash"])')
    cat "$img" >/dev/null
    for cmd in "${cmds[@]}"; do
      for v in on off; do : >"$out/$v.wall"; : >"$out/$v.cpu"; done
      for ((r = 0; r < runs; r++)); do
        for v in on off; do
          args=()
          [[ $v == on ]] && args=(--verity "$root")
          rm -rf /dev/shm/verity-bench
          if [[ $cmd == tar ]]; then
            read -r w c < <(fuse_tar "$img" "${args[@]}")
            echo "$w" >>"$out/$v.wall"; echo "$c" >>"$out/$v.cpu"
            continue
          fi
          case $cmd in
            fsck) c=("$ferrofs" fsck "${args[@]}" "$img") ;;
            extract) c=("$ferrofs" extract "${args[@]}" "$img" /dev/shm/verity-bench) ;;
          esac
          drop
          /usr/bin/time -o "$out/time" -f "%e %U %S" "${c[@]}" >/dev/null 2>"$out/stderr"
          read -r w u s <"$out/time"
          echo "$w" >>"$out/$v.wall"; echo "$u + $s" | bc >>"$out/$v.cpu"
        done
      done
      rm -rf /dev/shm/verity-bench
      cache=warm; [[ $cold == 1 ]] && cache=cold
      python3 - "$(basename "$tree")" "${o:-none}" "$cache" "$cmd" \
        "$(median <"$out/on.wall")" "$(median <"$out/off.wall")" \
        "$(median <"$out/on.cpu")" "$(median <"$out/off.cpu")" <<'EOF'
import sys
tree, o, cache, cmd, won, woff, con, coff = sys.argv[1:]
won, woff, con, coff = map(float, (won, woff, con, coff))
ratio = lambda a, b: f"{a / b:.2f}" if b > 0 else "n/a"
print(f"| {tree} | {o} | {cache} | {cmd} | {won:.3f} | {woff:.3f} | {con:.3f} | {coff:.3f} | "
      f"{ratio(won, woff)} | {ratio(con, coff)} |")
EOF
    done
  done
done
rm -f "$out/image.erofs"
