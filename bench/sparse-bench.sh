#!/usr/bin/env bash
# sparse-bench.sh -- `mkfs -E sparse` on a 1 GiB file holding 4 MiB of data:
# image bytes and build time without and with sparse pclusters, in the
# classic layout and the 48-bit one, beside mkfs.erofs 1.9.4 with the same
# codec options. Two forms of the file: sparse in the source (holes) and
# dense (the zeros written out). Reads back each image through the kernel
# when run as root (this machine's kernel: equal to the source, or the row
# says not).
#
# Usage: sparse-bench.sh
#
# Environment (all optional):
#   RUNS     timed builds per row, alternating the rows   [default: 3]
#   OPTS     codec options                                [default: -zlz4hc -C65536]
#   FERROFS  ferrofs binary                 [default: target/release/ferrofs]
#   TMPROOT  where the scratch directory is created       [default: /tmp]
#
# The 4 MiB of data are four 1 MiB pieces of /usr/bin/python3* (machine
# code, about 2:1 with LZ4HC) at 0, 300 MiB + 12345, 601 MiB and the end.
# Prints a Markdown table: image bytes, median wall and CPU seconds.
# (mkfs.erofs 1.9.4 -Ededupe is left out: it takes over five minutes a
# build of this file.)

set -euo pipefail
RUNS=${RUNS:-3}
OPTS=${OPTS:-"-zlz4hc -C65536"}
source "$(dirname "$0")/lib.sh"
bench_setup
work=$(mktemp -d "${TMPROOT:-/tmp}/sparse-bench.XXXXXX")
trap 'umount -q "$work/m" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/holes" "$work/dense" "$work/m"
python3 - "$work" <<'EOF'
import glob, sys
work = sys.argv[1]
src = open(sorted(glob.glob('/usr/bin/python3*'))[0], 'rb').read()
with open(f'{work}/holes/disk.img', 'wb') as f:
    f.truncate(1 << 30)
    for i, off in enumerate([0, (300 << 20) + 12345, 601 << 20, (1 << 30) - (1 << 20)]):
        f.seek(off)
        f.write(src[i << 20:(i + 1) << 20])
EOF
cp --sparse=never "$work/holes/disk.img" "$work/dense/disk.img"

declare -A read_back=()
# name|command (IMG and SRC replaced)
rows=(
  "ferrofs|$ferrofs mkfs --quiet $OPTS IMG SRC"
  "ferrofs -Ededupe|$ferrofs mkfs --quiet $OPTS -Ededupe IMG SRC"
  "ferrofs -Esparse|$ferrofs mkfs --quiet $OPTS -Esparse IMG SRC"
  "ferrofs -Esparse -E48bit|$ferrofs mkfs --quiet $OPTS -Esparse -E48bit IMG SRC"
  "mkfs.erofs 1.9.4|$bin/mkfs.erofs -d0 $OPTS IMG SRC"
)

echo "| source | tool | image bytes | wall s (median of $RUNS) | CPU s | kernel read |"
echo "|---|---|---:|---:|---:|---|"
for form in holes dense; do
  declare -A wall=() cpu=() size=()
  for ((r = 0; r < RUNS; r++)); do
    for row in "${rows[@]}"; do
      name=${row%%|*}
      cmd=${row#*|}
      img=$work/img
      rm -f "$img"
      cmd=${cmd//IMG/$img}
      cmd=${cmd//SRC/$work/$form}
      /usr/bin/time -f "%e %U %S" -o "$work/t" $cmd >/dev/null
      read -r w u s <"$work/t"
      wall[$name]+="$w "
      cpu[$name]+="$(echo "$u + $s" | bc) "
      size[$name]=$(stat -c %s "$img")
      if ((r == 0)) && [[ $(id -u) == 0 ]]; then
        if mount -o loop,ro "$img" "$work/m" 2>/dev/null; then
          if cmp -s "$work/m/disk.img" "$work/$form/disk.img"; then
            read_back[$form$name]=equal
          else
            read_back[$form$name]=DIFFERS
          fi
          umount "$work/m"
        else
          read_back[$form$name]="no mount"
        fi
      fi
    done
  done
  for row in "${rows[@]}"; do
    name=${row%%|*}
    w=$(tr ' ' '\n' <<<"${wall[$name]}" | grep . | median)
    c=$(tr ' ' '\n' <<<"${cpu[$name]}" | grep . | median)
    echo "| $form | $name | ${size[$name]} | $w | $c | ${read_back[$form$name]:--} |"
  done
done
