#!/usr/bin/env bash
# Reading dense images (issue #30): `ferrofs extract` and `ferrofs fsck`
# against `fsck.erofs 1.9.4 --extract` and `unsquashfs 4.7.5`, cold page
# cache, extracting into a tmpfs, tools alternating run by run.
# Usage: [RUNS=3] [PRESETS="dense-lz4hc dense-zstd dense-lzma plain-lz4hc"]
#        [COMMANDS="extract extract-upstream fsck fsck.erofs unsquashfs"]
#        bench/read-bench.sh TREE...      (root: drops caches, mounts a tmpfs)
# For each tree and preset it builds (once, kept in $OUT) the ferrofs image,
# the mkfs.erofs 1.9.4 image with the same options and the mksquashfs 4.7.5
# image with the same codec and block size, then times:
#   ferrofs extract  ferrofs's image           (F)
#   ferrofs extract  mkfs.erofs 1.9.4's image  (ferrofs reading upstream's)
#   ferrofs fsck     ferrofs's image
#   fsck.erofs 1.9.4 --extract  ferrofs's image
#   unsquashfs 4.7.5 the squashfs image
# and prints one Markdown row per (tree, preset, command): median wall and
# CPU seconds, cores used (CPU / wall), median peak RSS, and the ratio of
# wall time to unsquashfs's. COMMANDS picks which are timed (unsquashfs
# always is; mkfs.erofs's image is built only for extract-upstream). The first run's ferrofs extraction is compared
# with unsquashfs's (`diff -r`), so a fast wrong answer cannot pass.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup
runs=${RUNS:-3}
out=${OUT:-/tmp/read-bench}; mkdir -p "$out"
tmp=$out/tmpfs; mkdir -p "$tmp"
mountpoint -q "$tmp" || mount -t tmpfs -o size=12g tmpfs "$tmp"
read -r -a presets <<<"${PRESETS:-dense-lz4hc dense-zstd dense-lzma plain-lz4hc}"
commands=" ${COMMANDS:-extract extract-upstream fsck fsck.erofs} unsquashfs "
wanted() { [[ $commands == *" $1 "* ]]; }

# The options of a preset: for the erofs builders (ferrofs and mkfs.erofs)
# with `erofs`, for mksquashfs (same codec and block size) with `sqfs`.
preset_opts() {
  local e s
  case $1 in
    dense-lz4hc) e="-zlz4hc,12 -C131072" s="-comp lz4 -Xhc -b 128K" ;;
    dense-zstd) e="-zzstd,15 -C131072" s="-comp zstd -Xcompression-level 15 -b 128K" ;;
    dense-lzma) e="-zlzma,6 -C131072" s="-comp xz -b 128K" ;;
    plain-lz4hc) e="-zlz4hc,12 -C65536" s="-comp lz4 -Xhc -b 64K" ;;
    *) echo "unknown preset $1" >&2; exit 2 ;;
  esac
  [[ $1 == dense-* ]] && e="$e -Efragments,dedupe,ztailpacking"
  if [[ $2 == erofs ]]; then echo "$e"; else echo "$s"; fi
}

cold() { rm -rf "${tmp:?}"/*; sync; echo 3 >/proc/sys/vm/drop_caches; }

# timed NAME CMD...: one cold run, "wall cpu rss_kb" appended to $out/NAME.
timed() {
  local name=$1 w u s m; shift
  cold
  /usr/bin/time -o "$out/time" -f "%e %U %S %M" "$@" >/dev/null 2>"$out/stderr" || {
    echo "failed: $*" >&2; cat "$out/stderr" >&2; exit 1; }
  read -r w u s m <"$out/time"
  echo "$w $(echo "$u + $s" | bc) $m" >>"$out/$name"
}

echo "| tree | preset | command | image bytes | wall s | CPU s | cores | peak RSS MiB | wall / unsquashfs |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
for tree in "$@"; do
  t=$(basename "$tree")
  for p in "${presets[@]}"; do
    f=$out/$t-$p.ferrofs.erofs u=$out/$t-$p.upstream.erofs q=$out/$t-$p.sqfs
    # shellcheck disable=SC2046 # the options are lists
    {
      [[ -s $f ]] || "$ferrofs" mkfs --quiet $(preset_opts "$p" erofs) "$f" "$tree"
      [[ -s $u ]] || ! wanted extract-upstream || "$bin/mkfs.erofs" --quiet $(preset_opts "$p" erofs) "$u" "$tree" >/dev/null
      [[ -s $q ]] || "$bin/mksquashfs" "$tree" "$q" $(preset_opts "$p" sqfs) -noappend -quiet -no-progress >/dev/null
    }
    ((runs > 0)) || continue # RUNS=0: build the images only
    names=()
    for n in extract extract-upstream fsck fsck.erofs unsquashfs; do wanted "$n" && names+=("$n"); done
    for n in "${names[@]}"; do : >"$out/$n"; done
    for ((r = 0; r < runs; r++)); do
      timed extract "$ferrofs" extract "$f" "$tmp/x"
      if ((r == 0)); then
        mv "$tmp/x" "$out/check-x"
        cold; "$bin/unsquashfs" -q -n -d "$tmp/q" "$q" >/dev/null
        # diff cannot compare device nodes; anything else must be equal.
        bad=$(diff -r --no-dereference "$out/check-x" "$tmp/q" 2>&1 | grep -v "character special" | head -5 || true)
        if [[ -n $bad ]]; then echo "MISMATCH: $t $p: $bad" >&2; exit 1; fi
        rm -rf "$out/check-x"
      fi
      ! wanted extract-upstream || timed extract-upstream "$ferrofs" extract "$u" "$tmp/x"
      ! wanted fsck || timed fsck "$ferrofs" fsck "$f"
      ! wanted fsck.erofs || timed fsck.erofs "$bin/fsck.erofs" --extract="$tmp/x" "$f"
      timed unsquashfs "$bin/unsquashfs" -q -n -d "$tmp/x" "$q"
    done
    python3 - "$out" "$t" "$p" "$(stat -L -c %s "$f")" "$(stat -L -c %s "$u" 2>/dev/null || echo 0)" "$(stat -L -c %s "$q")" "${names[@]}" <<'EOF'
import statistics, sys
out, tree, preset, fsize, usize, qsize = sys.argv[1:7]
rows = {}
for n in sys.argv[7:]:
    runs = [list(map(float, l.split())) for l in open(f"{out}/{n}") if l.strip()]
    rows[n] = [statistics.median(r[i] for r in runs) for i in range(3)]
label = {
    "extract": ("ferrofs extract", fsize),
    "extract-upstream": ("ferrofs extract of mkfs.erofs's image", usize),
    "fsck": ("ferrofs fsck", fsize),
    "fsck.erofs": ("fsck.erofs 1.9.4 --extract", fsize),
    "unsquashfs": ("unsquashfs 4.7.5", qsize),
}
base = rows["unsquashfs"][0]
for n, (w, c, m) in rows.items():
    name, size = label[n]
    print(f"| {tree} | {preset} | {name} | {int(size):,} | {w:.2f} | {c:.2f} | {c / w:.2f} | {m / 1024:.0f} | {w / base:.2f} |")
EOF
  done
done
