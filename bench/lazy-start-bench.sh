#!/usr/bin/env bash
# A container's first command straight from a registry (issue #59):
# `ferrofs mount docker://…` (lazy, every block checked by the layers'
# dm-verity trees) against containerd 2.4's full `ctr images pull` of the
# same EROFS-native image plus `ctr run`, both through a proxy that holds
# every request DELAY ms (the remote bench's delay-proxy) in front of the
# CNCF registry on 127.0.0.1.
# Usage: [RUNS=3] [DELAY=20] [OUT=/tmp/lazy-bench] bench/lazy-start-bench.sh [ROOTFS [CMD...]]
#   ROOTFS (default /work/bench/rootfs) becomes a three-layer OCI image
#   (convert-bench.sh's, kept in its OUT), pushed with skopeo and
#   converted by `ferrofs convert --verity` (raw, uncompressed layers,
#   containerd's default). CMD (default python3 -c 'import json, email')
#   runs in a chroot of the mount, and in a container.
# Every run starts cold: an empty --cache-dir (merged image included), a
# fresh containerd root, dropped page caches; the two alternate. Reported,
# medians: wall s from the mount (pull) to the command's end, body bytes
# through the proxy, requests, and the bytes of all layers.
# Needs root, FUSE, containerd 2.4 (UPSTREAM_CONTAINERD_NEXT_BIN), the
# registry (UPSTREAM_REGISTRY_BIN), skopeo.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup
runs=${RUNS:-3}; delay=${DELAY:-20}
out=${OUT:-/tmp/lazy-bench}
rootfs=${1:-/work/bench/rootfs}; shift || true
cmd=("$@"); ((${#cmd[@]})) || cmd=(python3 -c 'import json, email')
cbin=${UPSTREAM_CONTAINERD_NEXT_BIN:-$(bash "$here/../shared/tools/upstream-tools" --containerd-next | tail -1)}
rbin=${UPSTREAM_REGISTRY_BIN:-$(bash "$here/../shared/tools/upstream-tools" --registry | tail -1)}
proxy=${PROXY:-$here/target/release/examples/delay-proxy}
[[ -n ${PROXY:-} ]] || (cd "$here" && cargo build --release -q -p ferrofs-testkit --example delay-proxy)
# containerd's EROFS differ loads only with a mkfs.erofs that has --tar
# (it runs none for EROFS-native layers): ferrofs's drop-in.
mkdir -p "$out/mnt" "$out/mkfs"
ln -sfn "$ferrofs" "$out/mkfs/mkfs.erofs"
export PATH=$out/mkfs:$cbin:$PATH
mnt=$out/mnt
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=(); ctd_pid=
cleanup() {
  mountpoint -q "$mnt" && umount "$mnt"
  [[ -n $ctd_pid ]] && kill "$ctd_pid" 2>/dev/null && wait "$ctd_pid" 2>/dev/null
  grep " $out/ctd/" /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# The image: as convert-bench.sh makes it.
# The image: the one convert-bench.sh made (CONVERT_OUT, default
# /tmp/convert-bench), made by it here if missing.
made=${CONVERT_OUT:-/tmp/convert-bench}/$(basename "$rootfs")/L
if [[ ! -d $made ]]; then
  OUT=${CONVERT_OUT:-/tmp/convert-bench} RUNS=1 bash "$here/bench/convert-bench.sh" "$rootfs" >/dev/null
fi
[[ -d $made ]] || { echo "lazy-start-bench: no image at $made" >&2; exit 1; }
rm -rf "$out/L"; cp -r "$made" "$out/L"

rp=$(free_port)
rm -rf "$out/registry"; mkdir -p "$out/registry"
cat >"$out/registry/config.yml" <<EOF
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $out/registry/data}}
http: {addr: 127.0.0.1:$rp}
EOF
OTEL_TRACES_EXPORTER=none "$rbin/registry" serve "$out/registry/config.yml" >"$out/registry/log" 2>&1 & pids+=($!)
until curl -s -o /dev/null "http://127.0.0.1:$rp/v2/"; do sleep 0.1; done
pp=$(free_port)
"$proxy" "$pp" "127.0.0.1:$rp" "$delay" >/dev/null & pids+=($!)
until curl -s -o /dev/null "http://127.0.0.1:$pp/.proxy-stats"; do sleep 0.1; done
stats() { curl -s "http://127.0.0.1:$pp/.proxy-stats"; }

skopeo copy -q --dest-tls-verify=false "oci:$out/L:v3" "docker://127.0.0.1:$rp/bench/app:v3"
"$ferrofs" convert --verity --json "docker://127.0.0.1:$rp/bench/app:v3" "docker://127.0.0.1:$rp/bench/app:erofs" >"$out/convert.json"
# The profiled image: the command's reads recorded on a lazy mount of the
# plain one (no proxy), its layers built with --profile (their hot ranges
# fetched up front when mounted).
rm -rf "$out/cache" "$out/trace.txt"
"$ferrofs" mount -f --trace "$out/trace.txt" --cache-dir "$out/cache" "docker://127.0.0.1:$rp/bench/app:erofs" "$mnt" 2>/dev/null &
daemon=$!
until mountpoint -q "$mnt"; do sleep 0.005; done
chroot "$mnt" "${cmd[@]}" >/dev/null
umount "$mnt"; wait "$daemon" || true
"$ferrofs" convert --verity --mkfs-options "--profile $out/trace.txt" \
  "docker://127.0.0.1:$rp/bench/app:v3" "docker://127.0.0.1:$rp/bench/app:profiled" >/dev/null
layer_bytes=$(skopeo inspect --raw --tls-verify=false "docker://127.0.0.1:$rp/bench/app:erofs" |
  python3 -c 'import json,sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))')
image=127.0.0.1:$pp/bench/app:erofs

start_containerd() {
  local d=$out/ctd
  rm -rf "$d"; mkdir -p "$d"
  ctd_config "$d" erofs
  containerd --config "$d/config.toml" >"$d/log" 2>&1 &
  ctd_pid=$!
  for _ in $(seq 100); do
    ctr -a "$d/ctd.sock" version >/dev/null 2>&1 && break
    sleep 0.1
  done
}
stop_containerd() {
  kill "$ctd_pid"; wait "$ctd_pid" 2>/dev/null || true
  ctd_pid=
  grep " $out/ctd/" /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount 2>/dev/null || true
}

for m in ferrofs profiled containerd; do : >"$out/$m.wall"; : >"$out/$m.bytes"; : >"$out/$m.reqs"; done
for ((r = 0; r < runs; r++)); do
  # ferrofs: the lazy mount, then the command in a chroot of it.
  for m in ferrofs profiled; do
    tag=erofs; [[ $m == profiled ]] && tag=profiled
    rm -rf "$out/cache"
    sync; echo 3 >/proc/sys/vm/drop_caches
    read -r r0 b0 < <(stats)
    start=$(date +%s.%N)
    "$ferrofs" mount -f --cache-dir "$out/cache" "docker://127.0.0.1:$pp/bench/app:$tag" "$mnt" 2>"$out/mount.log" &
    daemon=$!
    until mountpoint -q "$mnt"; do
      kill -0 "$daemon" 2>/dev/null || { cat "$out/mount.log" >&2; exit 1; }
      sleep 0.005
    done
    chroot "$mnt" "${cmd[@]}" >/dev/null
    end=$(date +%s.%N)
    read -r r1 b1 < <(stats)
    umount "$mnt"; wait "$daemon" || true
    echo "$end - $start" | bc >>"$out/$m.wall"
    echo $((b1 - b0)) >>"$out/$m.bytes"; echo $((r1 - r0)) >>"$out/$m.reqs"
  done
  # containerd: pull (the EROFS layers copied into snapshots), then run.
  start_containerd
  sync; echo 3 >/proc/sys/vm/drop_caches
  read -r r0 b0 < <(stats)
  start=$(date +%s.%N)
  ctr -a "$out/ctd/ctd.sock" -n bench images pull --plain-http --snapshotter erofs "$image" >/dev/null
  ctr -a "$out/ctd/ctd.sock" -n bench run --rm --snapshotter erofs --runc-root "$out/ctd/runc" \
    "$image" "run$r" "${cmd[@]}" >/dev/null
  end=$(date +%s.%N)
  read -r r1 b1 < <(stats)
  stop_containerd
  echo "$end - $start" | bc >>"$out/containerd.wall"
  echo $((b1 - b0)) >>"$out/containerd.bytes"; echo $((r1 - r0)) >>"$out/containerd.reqs"
done

echo "image: $rootfs in 3 layers, EROFS-native (ferrofs convert --verity, raw), $layer_bytes bytes of layers;"
echo "command: ${cmd[*]}; $delay ms per request; runs: $runs (alternating, cold), medians"
echo
echo "| start | wall s | bytes fetched | of the layers | requests |"
echo "|---|---:|---:|---:|---:|"
for m in ferrofs profiled containerd; do
  b=$(median <"$out/$m.bytes")
  case $m in
    ferrofs) what="ferrofs mount docker://… + chroot" ;;
    profiled) what="the same, layers built --profile (a trace of this command)" ;;
    containerd) what="ctr images pull + ctr run (containerd 2.4.2)" ;;
  esac
  printf '| %s | %.3f | %s | %.1f %% | %s |\n' "$what" "$(median <"$out/$m.wall")" "$b" \
    "$(echo "100 * $b / $layer_bytes" | bc -l)" "$(median <"$out/$m.reqs")"
done
python3 -c 'import sys; f, p, c = map(float, sys.argv[1:]); print(f"\nferrofs / containerd: wall {f / c:.3f}; profiled / containerd: wall {p / c:.3f}")' \
  "$(median <"$out/ferrofs.wall")" "$(median <"$out/profiled.wall")" "$(median <"$out/containerd.wall")"
