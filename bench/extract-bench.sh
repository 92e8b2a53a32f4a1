#!/bin/bash
mkdir -p "${BENCH_DIR:-/tmp/ferrofs-bench}"
# ferrofs extract vs fsck.erofs --extract (1.8.6) on the same image, alternating, N runs each.
img=$1; n=${2:-3}
U=${UPSTREAM_TOOLS_BIN:-$HOME/.cache/upstream-tools/bin}
F=${FERROFS:-$(cd "$(dirname "$0")/.." && pwd)/target/release/ferrofs}
out=${BENCH_DIR:-/tmp/ferrofs-bench}/out
for i in $(seq 1 $n); do
  for tool in ferrofs upstream; do
    rm -rf $out; sync
    if [ $tool = ferrofs ]; then cmd="$F extract $img $out"; else cmd="$U/fsck.erofs --extract=$out $img"; fi
    /usr/bin/time -f "$tool run$i wall=%e user=%U sys=%S maxrss_kb=%M" $cmd > /dev/null 2>/tmp/bench.err; tail -1 /tmp/bench.err
  done
done
rm -rf $out
