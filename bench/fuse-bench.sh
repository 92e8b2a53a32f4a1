#!/bin/bash
mkdir -p "${BENCH_DIR:-/tmp/ferrofs-bench}"
# tar of a tree through: ferrofs mount, erofsfuse 1.8.6, squashfuse (mksquashfs image), kernel erofs.
# caches dropped before each run; wall seconds, medians by eye. usage: fuse-bench.sh SRC N
src=$1; n=$2
U=${UPSTREAM_TOOLS_BIN:-$HOME/.cache/upstream-tools/bin}; F=${FERROFS:-$(cd "$(dirname "$0")/.." && pwd)/target/release/ferrofs}
B=${BENCH_DIR:-/tmp/ferrofs-bench}/fb; mkdir -p $B/m
$U/mkfs.erofs --quiet -zlz4hc -C65536 $B/e.img $src >/dev/null
$U/mksquashfs $src $B/s.sqfs -comp lz4 -Xhc -b 65536 -noappend -quiet >/dev/null 2>&1 || $U/mksquashfs $src $B/s.sqfs -comp lz4 -b 65536 -noappend >/dev/null
for i in $(seq 1 $n); do
 for t in ferrofs erofsfuse squashfuse kernel; do
  case $t in
   ferrofs) $F mount --cache-size 16M $B/e.img $B/m ;;
   erofsfuse) $U/erofsfuse $B/e.img $B/m >/dev/null 2>&1 ;;
   squashfuse) $U/squashfuse $B/s.sqfs $B/m ;;
   kernel) mount -o loop,ro $B/e.img $B/m ;;
  esac
  sleep 0.5; sync; echo 3 > /proc/sys/vm/drop_caches
  s=$(date +%s.%N); bytes=$(tar cf - -C $B/m . | wc -c); e=$(date +%s.%N)
  pid=$(pgrep -n -f "(ferrofs mount|erofsfuse|squashfuse)" || true)
  rss=$( [ -n "$pid" ] && grep VmHWM /proc/$pid/status | awk '{print $2}' )
  echo "$t run$i wall=$(echo "$e - $s" | bc) bytes=$bytes daemon_peak_rss_kb=${rss:-n/a}"
  umount $B/m 2>/dev/null || fusermount3 -u $B/m; sleep 0.5
 done
done
