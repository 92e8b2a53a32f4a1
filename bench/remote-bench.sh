#!/usr/bin/env bash
# Remote images with trace-guided prefetch (issue #20): the cold start of
# CMD in a chroot on `ferrofs mount URL DIR` (FUSE), the image served by
# nginx on 127.0.0.1 behind a delaying proxy (crates/testkit/src/proxy.rs)
# that holds every request DELAY ms, for each DELAY of DELAYS, from
#   default:  ferrofs mkfs -zALG -CPCL
#   profiled: the same with --profile T1 --profile T2 (the hot-range record
#             in its boot area makes the mount fetch the start's data up
#             front in a few large parallel requests)
# The traces are recorded by running CMD in a chroot on `ferrofs mount
# --trace` of the local default image. Every run starts with an empty
# --cache-dir and dropped page caches; the two images alternate; we report
# medians over RUNS of: response body bytes and requests through the proxy
# (the mount's opening included), wall time from `ferrofs mount` to CMD's
# end, and CPU s of the mount daemon plus CMD.
# FERROFS and PROXY name prebuilt binaries (default: release builds).
# Usage: [ALG=lz4hc] [PCL=65536] [DELAYS="0 20"] bench/remote-bench.sh RUNS ROOTFS CMD...
set -euo pipefail
runs=${1:?RUNS}; rootfs=${2:?ROOTFS}; shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/trace-lib.sh"
ferrofs=${FERROFS:-$here/target/release/ferrofs}
proxy=${PROXY:-$here/target/release/examples/delay-proxy}
[[ -n ${FERROFS:-} ]] || (cd "$here" && cargo build --release -q -p ferrofs-cli)
[[ -n ${PROXY:-} ]] || (cd "$here" && cargo build --release -q -p ferrofs-testkit --example delay-proxy)
alg=${ALG:-lz4hc}; pcl=${PCL:-65536}; delays=${DELAYS:-0 20}
out=${OUT:-/tmp/remote-bench}; mkdir -p "$out/mnt" "$out/www" "$out/nginx/tmp"
mnt=$out/mnt
# shellcheck source=bench/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() {
  mountpoint -q "$mnt" && umount "$mnt"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

"$ferrofs" mkfs --quiet -z$alg -C$pcl "$out/www/default.img" "$rootfs"
record_traces "$ferrofs" "$out/www/default.img" "$mnt" "$out" "$@"
"$ferrofs" mkfs --quiet -z$alg -C$pcl --profile "$out/trace1.txt" --profile "$out/trace2.txt" "$out/www/profiled.img" "$rootfs"

np=$(free_port)
cat > "$out/nginx/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1; user root;
pid $out/nginx/nginx.pid; error_log $out/nginx/error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $out/nginx/tmp/body; proxy_temp_path $out/nginx/tmp/proxy;
  fastcgi_temp_path $out/nginx/tmp/fcgi; uwsgi_temp_path $out/nginx/tmp/uwsgi; scgi_temp_path $out/nginx/tmp/scgi;
  default_type application/octet-stream;
  server { listen 127.0.0.1:$np; root $out/www; }
}
EOF
nginx -p "$out/nginx" -c "$out/nginx/nginx.conf" -e "$out/nginx/error.log" & pids+=($!)
until curl -s -o /dev/null "http://127.0.0.1:$np/"; do sleep 0.1; done

stats() { curl -s "http://127.0.0.1:$1/.proxy-stats"; }
ticks=$(getconf CLK_TCK)
cpu_of() { awk -v t="$ticks" '{print ($14 + $15) / t}' "/proc/$1/stat"; }

echo "options: -z$alg -C$pcl; command: $*; cores: $(nproc); runs: $runs (alternating), medians"
echo "trace: $(wc -l < "$out/trace1.txt") reads of $(cut -f1 "$out/trace1.txt" | sort -u | wc -l) files"
echo
echo "| delay ms/request | image | image bytes | bytes fetched | of image | requests | wall s | CPU s (daemon + command) |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|"
for d in $delays; do
  pp=$(free_port)
  "$proxy" "$pp" "127.0.0.1:$np" "$d" >/dev/null & pids+=($!)
  until curl -s -o /dev/null "http://127.0.0.1:$pp/.proxy-stats"; do sleep 0.1; done
  declare -A bytes=() reqs=() walls=() cpus=()
  for ((r = 0; r < runs; r++)); do
    for img in default profiled; do
      rm -rf "$out/cache"
      sync; echo 3 > /proc/sys/vm/drop_caches
      read -r r0 b0 < <(stats "$pp")
      start=$(date +%s.%N)
      "$ferrofs" mount -f --cache-dir "$out/cache" "http://127.0.0.1:$pp/$img.img" "$mnt" 2>/dev/null &
      daemon=$!
      until mountpoint -q "$mnt"; do sleep 0.005; done
      TIMEFORMAT='%U %S'
      { time chroot "$mnt" "$@" >/dev/null 2>&1; } 2> "$out/cmd-times"
      end=$(date +%s.%N)
      read -r u s < "$out/cmd-times"
      cpu=$(echo "$(cpu_of "$daemon") + $u + $s" | bc)
      read -r r1 b1 < <(stats "$pp")
      umount "$mnt"; wait "$daemon" || true
      bytes[$img]+="$((b1 - b0)) "; reqs[$img]+="$((r1 - r0)) "
      walls[$img]+="$(echo "$end - $start" | bc) "; cpus[$img]+="$cpu "
    done
  done
  for img in default profiled; do
    size=$(stat -c %s "$out/www/$img.img")
    b=$(printf '%s\n' ${bytes[$img]} | median)
    printf '| %s | %s | %s | %s | %.1f %% | %s | %.3f | %.2f |\n' "$d" "$img" "$size" "$b" \
      "$(echo "100 * $b / $size" | bc -l)" "$(printf '%s\n' ${reqs[$img]} | median)" \
      "$(printf '%s\n' ${walls[$img]} | median)" "$(printf '%s\n' ${cpus[$img]} | median)"
  done
  unset bytes reqs walls cpus
done
