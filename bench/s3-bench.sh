#!/usr/bin/env bash
# Images in S3 (issue #36), on IMAGE served two ways from 127.0.0.1:
# nginx (plain HTTP) and SeaweedFS's S3 gateway (`weed server -s3`,
# identities enforced, every request SigV4-signed), each behind the
# counting proxy (crates/testkit/src/proxy.rs, no delay), measuring
#   (a) the cold start of CMD in a chroot on `ferrofs mount URL DIR` over
#       http:// and over s3:// (alternating, RUNS each, an empty
#       --cache-dir and dropped page caches per run): response body bytes
#       and requests through the proxy (the mount's opening included),
#       wall time from `ferrofs mount` to CMD's end; medians;
#   (b) uploading IMAGE with `ferrofs push` (default: 16 MiB parts, 4 at
#       a time; --part-size 1G: one PUT; --unsigned-payload: the bytes
#       not hashed, as curl signs them) vs `curl --aws-sigv4 -T`
#       (one PUT), straight to weed, alternating runs (3 each):
#       wall and CPU (user + system) seconds, medians;
#   (c) 16 concurrent readers: `ferrofs fsck --remote-stats --json` of
#       the s3:// image, each with its own --cache-dir: requests and bytes
#       per reader (as each counts them) and in total, and the wall time.
# With ROOTFS set (the tree IMAGE was built from) and MKFS_OPTS (its mkfs
# options, default "-zlz4hc,12 -C65536"), (a) also measures a `mkfs
# --profile` image of it (two traces of CMD recorded on a `mount --trace`
# of IMAGE), whose hot-range record the mount prefetches.
# FERROFS, PROXY and WEED name prebuilt binaries (defaults: the ci build,
# its delay-proxy example, upstream-tools --s3's weed).
# Usage: bench/s3-bench.sh RUNS IMAGE CMD...
set -euo pipefail
runs=${1:?RUNS}; img=${2:?IMAGE}; shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
ferrofs=${FERROFS:-$here/target/ci/ferrofs}
proxy=${PROXY:-$here/target/ci/examples/delay-proxy}
[[ -x $ferrofs ]] || (cd "$here" && cargo build --profile ci -q -p ferrofs-cli)
[[ -x $proxy ]] || (cd "$here" && cargo build --profile ci -q -p ferrofs-testkit --example delay-proxy)
weed=${WEED:-$(bash "$here/../shared/tools/upstream-tools" --s3 | tail -1)/weed}
out=${OUT:-/tmp/s3-bench}
rm -rf "$out"; mkdir -p "$out/mnt" "$out/www" "$out/nginx/tmp" "$out/weed"
mnt=$out/mnt
# shellcheck source=bench/lib.sh
source "$here/bench/lib.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() {
  mountpoint -q "$mnt" && umount "$mnt"
  for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
key=BENCHRWKEY000000 secret=bench-rw-secret-0123456789
export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL AWS_REGION AWS_DEFAULT_REGION

# SeaweedFS: one read-write identity, nothing anonymous.
printf '{"identities":[{"name":"rw","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","List","Tagging","Write"]}]}\n' \
  "$key" "$secret" > "$out/weed/ids.json"
p=(); for _ in 1 2 3 4 5 6 7 8; do p+=("$(free_port)"); done
s3=${p[6]}
setsid "$weed" server -ip=127.0.0.1 -dir="$out/weed" -master.port="${p[0]}" -master.port.grpc="${p[1]}" \
  -volume.port="${p[2]}" -volume.port.grpc="${p[3]}" -filer.port="${p[4]}" -filer.port.grpc="${p[5]}" \
  -s3 -s3.port="$s3" -s3.port.grpc="${p[7]}" -s3.port.iceberg=0 -s3.port.lance=0 \
  -s3.config="$out/weed/ids.json" -master.volumeSizeLimitMB=1024 >"$out/weed.log" 2>&1 & pids+=($!)
sigv4=(--aws-sigv4 "aws:amz:us-east-1:s3" --user "$key:$secret")
for _ in $(seq 120); do
  curl -sf -o /dev/null "${sigv4[@]}" -X PUT "http://127.0.0.1:$s3/bench" && break
  sleep 0.5
done

# nginx serving the same file.
ln -f "$img" "$out/www/image.img" 2>/dev/null || cp "$img" "$out/www/image.img"
images=(image)
if [[ -n ${ROOTFS:-} ]]; then
  # shellcheck source=bench/trace-lib.sh
  source "$here/bench/trace-lib.sh"
  record_traces "$ferrofs" "$img" "$mnt" "$out" "$@"
  # shellcheck disable=SC2086
  "$ferrofs" mkfs --quiet ${MKFS_OPTS:--zlz4hc,12 -C65536} --profile "$out/trace1.txt" \
    --profile "$out/trace2.txt" "$out/www/profiled.img" "$ROOTFS"
  images+=(profiled)
fi
np=$(free_port)
{
  echo "daemon off; master_process off; worker_processes 1; user root;"
  echo "pid $out/nginx/nginx.pid; error_log $out/nginx/error.log;"
  echo "events { worker_connections 256; }"
  echo "http { access_log off; default_type application/octet-stream;"
  echo "  client_body_temp_path $out/nginx/tmp/body; proxy_temp_path $out/nginx/tmp/proxy;"
  echo "  fastcgi_temp_path $out/nginx/tmp/fcgi; uwsgi_temp_path $out/nginx/tmp/uwsgi; scgi_temp_path $out/nginx/tmp/scgi;"
  echo "  server { listen 127.0.0.1:$np; root $out/www; } }"
} > "$out/nginx/nginx.conf"
setsid nginx -p "$out/nginx" -c "$out/nginx/nginx.conf" -e "$out/nginx/error.log" & pids+=($!)
until curl -s -o /dev/null "http://127.0.0.1:$np/"; do sleep 0.1; done
for i in "${images[@]}"; do
  "$ferrofs" push --s3-endpoint "http://127.0.0.1:$s3" "$out/www/$i.img" "s3://bench/$i.img" >/dev/null
done

ph=$(free_port); ps=$(free_port)
setsid "$proxy" "$ph" "127.0.0.1:$np" 0 >/dev/null & pids+=($!)
setsid "$proxy" "$ps" "127.0.0.1:$s3" 0 >/dev/null & pids+=($!)
until curl -s -o /dev/null "http://127.0.0.1:$ph/.proxy-stats" && curl -s -o /dev/null "http://127.0.0.1:$ps/.proxy-stats"; do sleep 0.1; done
stats() { curl -s "http://127.0.0.1:$1/.proxy-stats"; }
size=$(stat -c %s "$img")
echo "image: $img, $size bytes; cores: $(nproc); weed $("$weed" version 2>/dev/null | awk '{print $3}')"
echo
echo "### (a) cold start over http:// (nginx) and s3:// (SeaweedFS)"
echo
echo "command: $*; runs: $runs (alternating), medians"
echo
echo "| image | source | bytes fetched | of image | requests | wall s |"
echo "|---|---|---:|---:|---:|---:|"
declare -A bytes=() reqs=() walls=()
for ((r = 0; r < runs; r++)); do
  for i in "${images[@]}"; do
    for src in http s3; do
      case $src in
        http) port=$ph; url=http://127.0.0.1:$ph/$i.img; extra=() ;;
        s3) port=$ps; url=s3://bench/$i.img; extra=(--s3-endpoint "http://127.0.0.1:$ps") ;;
      esac
      rm -rf "$out/cache"
      sync; echo 3 > /proc/sys/vm/drop_caches
      read -r r0 b0 < <(stats "$port")
      start=$(date +%s.%N)
      "$ferrofs" mount -f --cache-dir "$out/cache" "${extra[@]}" "$url" "$mnt" 2>/dev/null &
      daemon=$!
      until mountpoint -q "$mnt"; do sleep 0.005; done
      chroot "$mnt" "$@" >/dev/null 2>&1
      end=$(date +%s.%N)
      read -r r1 b1 < <(stats "$port")
      umount "$mnt"; wait "$daemon" || true
      k=$i-$src
      bytes[$k]+="$((b1 - b0)) "; reqs[$k]+="$((r1 - r0)) "; walls[$k]+="$(echo "$end - $start" | bc) "
    done
  done
done
for i in "${images[@]}"; do
  isize=$(stat -c %s "$out/www/$i.img")
  for src in http s3; do
    k=$i-$src
    b=$(printf '%s\n' ${bytes[$k]} | median)
    printf '| %s | %s | %s | %.1f %% | %s | %.3f |\n' "$i" "$src" "$b" "$(echo "100 * $b / $isize" | bc -l)" \
      "$(printf '%s\n' ${reqs[$k]} | median)" "$(printf '%s\n' ${walls[$k]} | median)"
  done
done
echo
for k in "${!bytes[@]}"; do echo "per run, $k: bytes ${bytes[$k]}; requests ${reqs[$k]}"; done | sort
echo
echo "### (b) upload of the image: ferrofs push (multipart; one PUT) vs curl --aws-sigv4 (one PUT)"
echo
TIMEFORMAT='%R %U %S'
declare -A wall=() cpu=()
for ((r = 0; r < 3; r++)); do
  for tool in push push-1-put push-unsigned curl; do
    case $tool in
      push) c=("$ferrofs" push --s3-endpoint "http://127.0.0.1:$s3" "$img" s3://bench/up-push.img) ;;
      push-1-put) c=("$ferrofs" push --part-size 1G --s3-endpoint "http://127.0.0.1:$s3" "$img" s3://bench/up-push1.img) ;;
      push-unsigned) c=("$ferrofs" push --unsigned-payload --s3-endpoint "http://127.0.0.1:$s3" "$img" s3://bench/up-pushu.img) ;;
      curl) c=(curl -sf -o /dev/null "${sigv4[@]}" -T "$img" "http://127.0.0.1:$s3/bench/up-curl.img") ;;
    esac
    sync
    { time "${c[@]}" >/dev/null; } 2> "$out/t"
    read -r w u s < "$out/t"
    wall[$tool]+="$w "; cpu[$tool]+="$(echo "$u + $s" | bc) "
  done
done
echo "| tool | wall s (median of 3) | CPU s (user + sys) | MB/s | runs (wall s) |"
echo "|---|---:|---:|---:|---|"
for tool in push push-1-put push-unsigned curl; do
  w=$(printf '%s\n' ${wall[$tool]} | median)
  printf '| %s | %.3f | %.3f | %.0f | %s|\n' "$tool" "$w" "$(printf '%s\n' ${cpu[$tool]} | median)" \
    "$(echo "$size / $w / 1000000" | bc -l)" "${wall[$tool]}"
done
if cmp -s <(curl -sf "${sigv4[@]}" "http://127.0.0.1:$s3/bench/up-push.img") "$img"; then
  echo; echo "(the pushed object reads back equal to the image)"
fi

echo
echo "### (c) 16 concurrent readers: ferrofs fsck of s3://bench/image.img, separate caches"
echo
start=$(date +%s.%N)
readers=()
for i in $(seq 0 15); do
  "$ferrofs" fsck --json --remote-stats --s3-endpoint "http://127.0.0.1:$s3" --cache-dir "$out/c$i" \
    s3://bench/image.img > "$out/r$i.json" 2> "$out/r$i.err" & readers+=($!)
done
fails=0
for j in "${readers[@]}"; do wait "$j" || fails=$((fails + 1)); done
end=$(date +%s.%N)
echo "| reader | requests | bytes | problems |"
echo "|---:|---:|---:|---:|"
tq=0; tb=0
for i in $(seq 0 15); do
  read -r q b n < <(python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); print(v["remote"]["requests"], v["remote"]["bytes"], len(v["problems"]))' "$out/r$i.json")
  echo "| $i | $q | $b | $n |"
  tq=$((tq + q)); tb=$((tb + b))
done
echo "| total | $tq | $tb | |"
echo
printf 'failed readers: %s; wall %.1f s for all 16; %.1f MB/s served in all\n' "$fails" \
  "$(echo "$end - $start" | bc)" "$(echo "$tb / ($end - $start) / 1000000" | bc -l)"
