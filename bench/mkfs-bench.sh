#!/bin/bash
mkdir -p "${BENCH_DIR:-/tmp/ferrofs-bench}"
# ferrofs mkfs vs mkfs.erofs 1.8.6 (uncompressed), same tree; each timed run ends with `sync`
# so both pay for getting the image onto the disk (ferrofs fsyncs by design).
src=$1; n=$2; shift 2
U=${UPSTREAM_TOOLS_BIN:-$HOME/.cache/upstream-tools/bin}
F=${FERROFS:-$(cd "$(dirname "$0")/.." && pwd)/target/release/ferrofs}
for i in $(seq 1 $n); do
  for tool in ferrofs upstream; do
    img=${BENCH_DIR:-/tmp/ferrofs-bench}/b-$tool.img; rm -f $img; sync
    if [ $tool = ferrofs ]; then cmd="$F mkfs --quiet $* $img $src"; else cmd="$U/mkfs.erofs --quiet $* $img $src"; fi
    /usr/bin/time -f "$tool run$i wall=%e user=%U sys=%S maxrss_kb=%M" bash -c "$cmd && sync" >/dev/null 2>/tmp/mb2.err; echo "$(tail -1 /tmp/mb2.err) size=$(stat -c %s $img)"
  done
done
rm -f ${BENCH_DIR:-/tmp/ferrofs-bench}/b-*.img
