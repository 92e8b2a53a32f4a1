#!/usr/bin/env bash
# FUSE read performance (issue #6): ferrofs mount vs erofsfuse 1.8.6 vs
# squashfuse (on the mksquashfs image of the same data) vs the kernel's
# erofs, in one run. Images: mkfs.erofs 1.8.6 -zlz4hc -C65536 and
# mksquashfs -comp lz4 -Xhc -b 64K. Tests, each with caches dropped and a
# fresh mount: `tar cf - | wc -c` of TREE; fio 4 KiB sequential reads of the
# whole of FILE and 4 KiB random reads of 16 MiB from it; "warm" is the
# sequential test again with FILE already in the page cache (no request
# reaches the daemon: the floor every mount shares). Reported: medians
# of RUNS for wall seconds, MiB/s, CPU seconds of the daemon (utime+stime
# from /proc; for the kernel, the reader's own sys+user time) and the
# daemon's peak RSS (VmHWM). fio figures are fio's own (runtime of the
# reads, not of its start).
# Usage: bench/fuse-bench.sh RUNS TREE FILE   (root)
set -euo pipefail
runs=${1:?RUNS}; tree=${2:?TREE}; file=${3:?FILE}
here=$(cd "$(dirname "$0")/.." && pwd)
U=${UPSTREAM_TOOLS_BIN:-$(bash "$here/../shared/tools/upstream-tools")}
F=${FERROFS:-$here/target/release/ferrofs}
[[ -x $F ]] || (cd "$here" && cargo build --release -q -p ferrofs-cli)
out=${OUT:-/tmp/fuse-bench}; mkdir -p "$out/m" "$out/filedir"
m=$out/m
tick=$(getconf CLK_TCK)
cp "$file" "$out/filedir/big"
fname=big
for set in tree file; do
  src=$tree; [[ $set == file ]] && src=$out/filedir
  "$U/mkfs.erofs" --quiet -zlz4hc -C65536 "$out/$set.erofs" "$src" >/dev/null 2>&1
  "$U/mksquashfs" "$src" "$out/$set.sqfs" -comp lz4 -Xhc -b 65536 -noappend -quiet -no-progress >/dev/null 2>&1
done
# shellcheck source=bench/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
daemon_pid() { pgrep -n -f "ferrofs mount|erofsfuse|squashfuse" || true; }
cpu_of() { awk -v t="$tick" '{printf "%.2f", ($14 + $15) / t}' "/proc/$1/stat"; }
mount_it() { # kind set
  case $1 in
    ferrofs) "$F" mount --cache-size 16M "$out/$2.erofs" "$m" ;;
    erofsfuse) "$U/erofsfuse" "$out/$2.erofs" "$m" >/dev/null 2>&1 ;;
    squashfuse) "$U/squashfuse" "$out/$2.sqfs" "$m" ;;
    kernel) mount -o loop,ro "$out/$2.erofs" "$m" ;;
  esac
  for _ in $(seq 50); do mountpoint -q "$m" && return; sleep 0.1; done
  echo "mount $1 failed" >&2; exit 1
}
run_test() { # test -> prints "wall bytes readercpu"
  case $1 in
    tar) /usr/bin/time -f "%e %U %S" -o "$out/t" bash -c "tar cf - -C '$m' . | wc -c > '$out/bytes'"
         read -r w u s < "$out/t"; echo "$w $(cat "$out/bytes") $(echo "$u + $s" | bc)" ;;
    seq|rand|warm)
      # fio's own runtime and CPU figures: they leave out its start, which
      # reads ~60 MB of its libraries after the cache drop (the binary is
      # warmed below too, so that read does not compete with the test).
      local rw=read extra=()
      [[ $1 == rand ]] && rw=randread extra=(--io_size=16m --randrepeat=1)
      # fio drops the file's cached pages before a job unless told not to.
      [[ $1 == warm ]] && extra=(--invalidate=0)
      fio --name=r --filename="$m/$fname" --readonly --rw=$rw \
        --bs=4k --ioengine=psync "${extra[@]}" --output-format=json > "$out/fio.json" 2>/dev/null
      python3 -c "import json; j = json.load(open('$out/fio.json'))['jobs'][0]; r = j['read']; \
s = r['runtime'] / 1000; print(s, r['io_bytes'], round((j['usr_cpu'] + j['sys_cpu']) / 100 * s, 3))" ;;
  esac
}
echo "| test | mount | MiB/s | wall s | CPU s (daemon; kernel: reader) | peak RSS MiB |"
echo "|---|---|---:|---:|---:|---:|"
for t in tar seq rand warm; do
  set=file; [[ $t == tar ]] && set=tree
  for kind in ferrofs erofsfuse squashfuse kernel; do
    walls=(); rates=(); cpus=(); rss=()
    for ((r = 0; r < runs; r++)); do
      mount_it $kind $set
      sync; echo 3 > /proc/sys/vm/drop_caches
      fio --version > /dev/null; tar --version > /dev/null; wc --version > /dev/null
      [[ $t == warm ]] && cat "$m/$fname" > /dev/null
      pid=""; [[ $kind != kernel ]] && pid=$(daemon_pid)
      c0=0; [[ -n $pid ]] && c0=$(cpu_of "$pid")
      read -r w b rc < <(run_test $t)
      if [[ -n $pid ]]; then
        c1=$(cpu_of "$pid"); cpus+=("$(echo "$c1 - $c0" | bc)")
        rss+=("$(awk '/VmHWM/ {printf "%.1f", $2/1024}' "/proc/$pid/status")")
      else
        cpus+=("$rc"); rss+=("-")
      fi
      walls+=("$w"); rates+=("$(echo "scale=1; $b / 1048576 / $w" | bc)")
      umount "$m" 2>/dev/null || fusermount3 -u "$m"; sleep 0.5
    done
    printf '| %s | %s | %s | %s | %s | %s |\n' "$t" "$kind" \
      "$(printf '%s\n' "${rates[@]}" | median)" "$(printf '%s\n' "${walls[@]}" | median)" \
      "$(printf '%s\n' "${cpus[@]}" | median)" "$(printf '%s\n' "${rss[@]}" | median)"
  done
done
