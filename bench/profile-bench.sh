#!/usr/bin/env bash
# Access-pattern-guided layout (issue #8): cold start of a program in a
# root file system, from images built
#   default:  ferrofs mkfs -zALG -CPCL
#   profiled: ferrofs mkfs -zALG -CPCL --profile T1 --profile T2
#   profiled-ra: the same with --profile-readahead (RA_KB, default 128 KiB)
#   upstream: mkfs.erofs 1.8.6 -zALG -CPCL
# The traces are recorded by running CMD in a chroot on `ferrofs mount
# --trace` of the default image (a fresh mount per trace). Each image is
# then loop-mounted by the kernel, caches are dropped, and CMD runs in a
# chroot on it; we report device bytes read (/sys/block/loopN/stat), wall
# time (medians of RUNS), `dump --profile` figures and image sizes.
# RA_KB sets the loop device's readahead (read_ahead_kb) for the replays;
# by default the loop device keeps what the kernel gave it (on this VM 2560,
# inherited from the virtio disk; the kernel's own default is 128).
# EXTRA adds mkfs options to every build (e.g. EXTRA=-Efragments; the same
# for all four images, upstream's included).
# Usage: [ALG=lz4hc] [PCL=65536] [RA_KB=128] [EXTRA=...] bench/profile-bench.sh RUNS ROOTFS CMD...
set -euo pipefail
runs=${1:?RUNS}; rootfs=${2:?ROOTFS}; shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/trace-lib.sh"
bin=${UPSTREAM_TOOLS_BIN:-$(bash "$here/../shared/tools/upstream-tools")}
ferrofs=$here/target/release/ferrofs
[[ -x $ferrofs ]] || (cd "$here" && cargo build --release -q -p ferrofs-cli)
alg=${ALG:-lz4hc}; pcl=${PCL:-65536}
read -r -a extra <<<"${EXTRA:-}"
out=${OUT:-/tmp/profile-bench}; mkdir -p "$out/mnt"
mnt=$out/mnt
# shellcheck source=bench/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
"$ferrofs" mkfs --quiet -z$alg -C$pcl "${extra[@]}" "$out/default.img" "$rootfs"
record_traces "$ferrofs" "$out/default.img" "$mnt" "$out" "$@"
"$ferrofs" mkfs --quiet -z$alg -C$pcl "${extra[@]}" --profile "$out/trace1.txt" --profile "$out/trace2.txt" "$out/profiled.img" "$rootfs"
"$ferrofs" mkfs --quiet -z$alg -C$pcl "${extra[@]}" --profile "$out/trace1.txt" --profile "$out/trace2.txt" \
  --profile-readahead "${RA_KB:-128}K" "$out/profiled-ra.img" "$rootfs"
"$bin/mkfs.erofs" --quiet -z$alg -C$pcl "${extra[@]}" "$out/upstream.img" "$rootfs" >/dev/null 2>&1
echo "options: -z$alg -C$pcl ${EXTRA:-}"
echo "trace: $(wc -l < "$out/trace1.txt") reads of $(cut -f1 "$out/trace1.txt" | sort -u | wc -l) files; command: $*"
echo
echo "| image | image bytes | readahead KiB | device bytes (kernel) | wall s | dump --readahead: device bytes | pclusters | runs | decoded/requested |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for img in default profiled profiled-ra upstream; do
  devs=(); walls=()
  for ((r = 0; r < runs; r++)); do
    mount -o loop,ro "$out/$img.img" "$mnt"
    dev=$(findmnt -n -o SOURCE "$mnt"); dev=${dev##*/}
    [[ -n ${RA_KB:-} ]] && echo "$RA_KB" > "/sys/block/$dev/queue/read_ahead_kb"
    ra=$(cat "/sys/block/$dev/queue/read_ahead_kb")
    sync; echo 3 > /proc/sys/vm/drop_caches
    before=$(awk '{print $3}' "/sys/block/$dev/stat")
    start=$(date +%s.%N)
    chroot "$mnt" "$@" >/dev/null
    end=$(date +%s.%N)
    after=$(awk '{print $3}' "/sys/block/$dev/stat")
    umount "$mnt"
    devs+=($(( (after - before) * 512 )))
    walls+=("$(echo "$end - $start" | bc)")
  done
  d=$("$ferrofs" dump --json --profile "$out/trace1.txt" --readahead "${ra}K" "$out/$img.img")
  field() { echo "$d" | python3 -c "import json,sys; v=json.load(sys.stdin)['$1']; print(round(v,2) if isinstance(v,float) else v)"; }
  printf '| %s | %s | %s | %s | %.3f | %s | %s | %s | %s |\n' "$img" "$(stat -c %s "$out/$img.img")" "$ra" \
    "$(printf '%s\n' "${devs[@]}" | median)" "$(printf '%s\n' "${walls[@]}" | median)" \
    "$(field device_bytes)" "$(field pclusters)" "$(field runs)" "$(field decoded_per_requested)"
done
