#!/usr/bin/env bash
# ferrofs as containerd's mkfs.erofs (issue #33): the time of `ctr images
# import --snapshotter erofs` of a three-layer OCI image (the EROFS differ
# runs `mkfs.erofs --tar=f --aufs --quiet -Enoinline_data -U UUID
# .../layer.erofs` per layer, the layer's tar on its standard input) and the
# size of the layer images it writes, with ferrofs and with upstream
# erofs-utils 1.9.4 as the mkfs.erofs on containerd's PATH, alternating run
# by run, a fresh containerd root for every run.
# Usage: [RUNS=3] [OUT=/tmp/containerd-bench] bench/containerd-bench.sh [ROOTFS]
#   ROOTFS (default /work/bench/rootfs): the image is made from it with
#   umoci once (kept in OUT): layer 1 the tree without /usr/share and
#   /usr/lib/python3*, layer 2 /usr/share, layer 3 /usr/lib/python3* and a
#   few deleted files (whiteouts).
# Needs root, the erofs and overlay file systems, and the containers tools
# (UPSTREAM_CONTAINERS_BIN, else ../shared/tools/upstream-tools --containers).
# Prints a Markdown table: median wall seconds of the import, median CPU
# seconds (containerd and its children, from /proc/PID/stat: the
# decompression and digests in containerd, and mkfs.erofs), median CPU
# seconds of the mkfs.erofs children alone (the children's time
# containerd reaped: mkfs.erofs and its wrapper), and the layer images'
# total bytes; then ferrofs over upstream.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup
runs=${RUNS:-3}
out=${OUT:-/tmp/containerd-bench}
rootfs=${1:-/work/bench/rootfs}
cbin=${UPSTREAM_CONTAINERS_BIN:-$(bash "$here/../shared/tools/upstream-tools" --containers | tail -1)}
mkdir -p "$out"
export PATH=$cbin:$PATH
tck=$(getconf CLK_TCK)

# The image, made once.
if [[ ! -f $out/image.tar ]]; then
  rm -rf "$out/L" "$out/B"
  (
    cd "$out"
    umoci init --layout L
    umoci new --image L:empty
    umoci unpack --image L:empty B >/dev/null
    R=B/rootfs
    tar -C "$rootfs" --exclude=./usr/share --exclude='./usr/lib/python3*' -cf - . | tar -C "$R" -xpf -
    umoci repack --refresh-bundle --image L:l1 B
    mkdir -p "$R/usr"
    tar -C "$rootfs" -cf - ./usr/share | tar -C "$R" -xpf -
    umoci repack --refresh-bundle --image L:l2 B
    (cd "$rootfs" && tar -cf - ./usr/lib/python3*) | tar -C "$R" -xpf -
    # A few deletions: whiteouts in layer 3.
    rm -f "$R/etc/motd" "$R/etc/issue.net"
    find "$R/usr/bin" -maxdepth 1 -type f | sort | head -n 5 | xargs rm -f
    rm -rf "$R/var/lib/apt/lists"
    umoci repack --refresh-bundle --image L:v3 B
    umoci rm --image L:empty
    umoci rm --image L:l1
    umoci rm --image L:l2
    umoci gc --layout L
    rm -rf B
    tar -C L -cf image.tar.part . && mv image.tar.part image.tar
  ) >"$out/make.log" 2>&1
fi

# A mkfs.erofs directory per maker: ferrofs through a symlink named
# mkfs.erofs (its drop-in), upstream 1.9.4's own wrapper; each logs its
# arguments.
for m in ferrofs upstream; do
  mkdir -p "$out/$m/bin" "$out/$m/real"
  case $m in
    ferrofs) ln -sfn "$ferrofs" "$out/$m/real/mkfs.erofs" ;;
    upstream) ln -sfn "$bin/mkfs.erofs" "$out/$m/real/mkfs.erofs" ;;
  esac
  printf '#!/bin/sh\nprintf "%%s\\n" "$*" >>"%s"\nexec "%s" "$@"\n' \
    "$out/$m/mkfs.log" "$out/$m/real/mkfs.erofs" >"$out/$m/bin/mkfs.erofs"
  chmod 755 "$out/$m/bin/mkfs.erofs"
  : >"$out/$m.wall"; : >"$out/$m.cpu"; : >"$out/$m.mkfscpu"; : >"$out/$m.bytes"
done

# Whatever a failed run leaves: containerd stopped by its pid, mounts under
# its root unmounted.
ctd_pid=
cleanup() {
  [[ -n $ctd_pid ]] && kill "$ctd_pid" 2>/dev/null && wait "$ctd_pid" 2>/dev/null
  grep " $out/ctd/" /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount 2>/dev/null
  true
}
trap cleanup EXIT

# One import with maker $1: appends wall, CPU, mkfs CPU and bytes.
import_once() {
  local m=$1 d=$out/ctd pid
  rm -rf "$d"; mkdir -p "$d"
  ctd_config "$d" erofs
  : >"$out/$m/mkfs.log"
  PATH=$out/$m/bin:$PATH containerd --config "$d/config.toml" >"$d/log" 2>&1 &
  pid=$!
  ctd_pid=$pid
  for _ in $(seq 100); do
    ctr -a "$d/ctd.sock" version >/dev/null 2>&1 && break
    sleep 0.1
  done
  # utime stime cutime cstime: fields 14-17 of /proc/PID/stat.
  read -r u0 s0 cu0 cs0 < <(cut -d' ' -f14-17 "/proc/$pid/stat")
  /usr/bin/time -o "$out/time" -f "%e" \
    ctr -a "$d/ctd.sock" -n bench images import --snapshotter erofs \
    --base-name bench/rootfs "$out/image.tar" >/dev/null
  read -r u1 s1 cu1 cs1 < <(cut -d' ' -f14-17 "/proc/$pid/stat")
  cat "$out/time" >>"$out/$m.wall"
  echo "scale=3; ($u1 + $s1 + $cu1 + $cs1 - $u0 - $s0 - $cu0 - $cs0) / $tck" | bc >>"$out/$m.cpu"
  echo "scale=3; ($cu1 + $cs1 - $cu0 - $cs0) / $tck" | bc >>"$out/$m.mkfscpu"
  find "$d/root" -name '*.erofs' -type f -printf '%s\n' | awk '{s += $1} END {print s}' >>"$out/$m.bytes"
  n=$(grep -c -- '--tar=f' "$out/$m/mkfs.log" || true)
  [[ $n == 3 ]] || { echo "containerd-bench: $m: expected 3 mkfs.erofs --tar=f calls, got $n" >&2; exit 1; }
  kill "$pid"; wait "$pid" 2>/dev/null || true
  ctd_pid=
  grep " $d/" /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount
  rm -rf "$d"
}

for ((r = 0; r < runs; r++)); do
  for m in ferrofs upstream; do import_once "$m"; done
done

echo "| mkfs.erofs | import wall s | CPU s (containerd + children) | mkfs.erofs CPU s | layer images bytes |"
echo "|---|---:|---:|---:|---:|"
for m in ferrofs upstream; do
  echo "| $m | $(median <"$out/$m.wall") | $(median <"$out/$m.cpu") | $(median <"$out/$m.mkfscpu") | $(median <"$out/$m.bytes") |"
done
python3 - "$(median <"$out/ferrofs.wall")" "$(median <"$out/upstream.wall")" \
  "$(median <"$out/ferrofs.cpu")" "$(median <"$out/upstream.cpu")" \
  "$(median <"$out/ferrofs.mkfscpu")" "$(median <"$out/upstream.mkfscpu")" \
  "$(median <"$out/ferrofs.bytes")" "$(median <"$out/upstream.bytes")" <<'EOF'
import sys
fw, uw, fc, uc, fm, um, fb, ub = map(float, sys.argv[1:])
print()
print(f"ferrofs / upstream: wall {fw / uw:.3f}, CPU {fc / uc:.3f}, "
      f"mkfs.erofs CPU {fm / um:.3f}, bytes {fb / ub:.4f}")
EOF
