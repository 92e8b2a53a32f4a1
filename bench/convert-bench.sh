#!/usr/bin/env bash
# `ferrofs convert` against containerd 2.4's `ctr images convert --erofs
# raw` (issue #59): the total bytes of the EROFS layers and the wall and
# CPU seconds of the conversion, for two images of different shapes, with
# the same compressor, alternating run by run.
# Usage: [RUNS=3] [OUT=/tmp/convert-bench] [Z=lz4hc] bench/convert-bench.sh [TREE...]
#   Each TREE (default: /work/bench/rootfs and /usr/local/go) becomes an OCI
#   image made with umoci once (kept in OUT): a distro root in three layers
#   (the tree without /usr/share and /usr/lib/python3*; /usr/share;
#   /usr/lib/python3* and a few deletions), any other tree in one layer.
#   containerd runs mkfs.erofs 1.9.4 (its converter: `mkfs.erofs --tar=f
#   --aufs --quiet -Enoinline_data -z$Z -C 65536 -b4096 -U UUID`, layers in
#   parallel); ferrofs converts the same layout (`ferrofs convert
#   oci:L:v3 oci:OUT -z$Z`). Both read the gzip layers and write the EROFS
#   blobs locally (containerd into its content store, which already holds
#   the source image; ferrofs into an OCI layout).
# Needs root and containerd 2.4 (UPSTREAM_CONTAINERD_NEXT_BIN, else
# ../shared/tools/upstream-tools --containerd-next). Prints a Markdown
# table per tree: median wall s, median CPU s (containerd and its children
# for ctr; the process for ferrofs), total EROFS layer bytes; then ferrofs
# over containerd.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup
runs=${RUNS:-3}
out=${OUT:-/tmp/convert-bench}
z=${Z:-lz4hc}
cbin=${UPSTREAM_CONTAINERD_NEXT_BIN:-$(bash "$here/../shared/tools/upstream-tools" --containerd-next | tail -1)}
trees=("$@")
((${#trees[@]})) || trees=(/work/bench/rootfs /usr/local/go)
mkdir -p "$out/mkfs"
export PATH=$cbin:$PATH
tck=$(getconf CLK_TCK)
ln -sfn "$bin/mkfs.erofs" "$out/mkfs/mkfs.erofs"

# make_image TREE NAME: OUT/NAME/L (tag v3) and OUT/NAME/image.tar, once.
make_image() {
  local tree=$1 d=$out/$2
  [[ -f $d/image.tar ]] && return
  rm -rf "$d"; mkdir -p "$d"
  (
    cd "$d"
    umoci init --layout L
    umoci new --image L:empty
    umoci unpack --image L:empty B >/dev/null
    R=B/rootfs
    if [[ -d $tree/usr/share && -d $tree/etc ]]; then
      tar -C "$tree" --exclude=./usr/share --exclude='./usr/lib/python3*' -cf - . | tar -C "$R" -xpf -
      umoci repack --refresh-bundle --image L:l1 B
      mkdir -p "$R/usr"
      tar -C "$tree" -cf - ./usr/share | tar -C "$R" -xpf -
      umoci repack --refresh-bundle --image L:l2 B
      (cd "$tree" && tar -cf - ./usr/lib/python3*) | tar -C "$R" -xpf -
      rm -f "$R/etc/motd" "$R/etc/issue.net"
      find "$R/usr/bin" -maxdepth 1 -type f | sort | head -n 5 | xargs rm -f
      rm -rf "$R/var/lib/apt/lists"
      umoci rm --image L:l1
      umoci rm --image L:l2
    else
      tar -C "$tree" -cf - . | tar -C "$R" -xpf -
    fi
    umoci repack --refresh-bundle --image L:v3 B
    umoci rm --image L:empty
    umoci gc --layout L
    rm -rf B
    tar -C L -cf image.tar.part . && mv image.tar.part image.tar
  ) >"$d.make.log" 2>&1
}

ctd_pid=
cleanup() {
  [[ -n $ctd_pid ]] && kill "$ctd_pid" 2>/dev/null && wait "$ctd_pid" 2>/dev/null
  grep " $out/ctd/" /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount 2>/dev/null
  true
}
trap cleanup EXIT

# start_containerd: a fresh containerd under OUT/ctd, mkfs.erofs 1.9.4 first
# on its PATH.
start_containerd() {
  local d=$out/ctd
  rm -rf "$d"; mkdir -p "$d"
  ctd_config "$d"
  PATH=$out/mkfs:$PATH containerd --config "$d/config.toml" >"$d/log" 2>&1 &
  ctd_pid=$!
  for _ in $(seq 100); do
    ctr -a "$d/ctd.sock" version >/dev/null 2>&1 && break
    sleep 0.1
  done
}
c() { ctr -a "$out/ctd/ctd.sock" -n bench "$@"; }

for tree in "${trees[@]}"; do
  name=$(basename "$tree")
  make_image "$tree" "$name"
  start_containerd
  c images import --no-unpack --base-name bench/src "$out/$name/image.tar" >/dev/null
  for m in ferrofs containerd; do : >"$out/$m.wall"; : >"$out/$m.cpu"; : >"$out/$m.bytes"; done
  for ((r = 0; r < runs; r++)); do
    # containerd: the conversion in its content store.
    read -r u0 s0 cu0 cs0 < <(cut -d' ' -f14-17 "/proc/$ctd_pid/stat")
    # The converter runs in ctr (the client), mkfs.erofs from its PATH.
    PATH=$out/mkfs:$PATH /usr/bin/time -o "$out/time" -f "%e %U %S" \
      ctr -a "$out/ctd/ctd.sock" -n bench images convert --erofs raw --erofs-compressors "$z" \
      bench/src:v3 "bench/up$r:v3" >/dev/null
    read -r u1 s1 cu1 cs1 < <(cut -d' ' -f14-17 "/proc/$ctd_pid/stat")
    read -r wall cu cs <"$out/time"
    echo "$wall" >>"$out/containerd.wall"
    echo "scale=3; ($u1 + $s1 + $cu1 + $cs1 - $u0 - $s0 - $cu0 - $cs0) / $tck + $cu + $cs" | bc >>"$out/containerd.cpu"
    digest=$(c images ls | awk -v r="bench/up$r:v3" '$1 == r {print $3}')
    c content get "$digest" | python3 -c 'import json,sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))' >>"$out/containerd.bytes"
    c images rm "bench/up$r:v3" >/dev/null
    # ferrofs: the layout to a layout.
    rm -rf "$out/ff-out"
    /usr/bin/time -o "$out/time" -f "%e %U %S" \
      "$ferrofs" convert "oci:$out/$name/L:v3" "oci:$out/ff-out" -z"$z" --json >"$out/ff.json"
    read -r wall cu cs <"$out/time"
    echo "$wall" >>"$out/ferrofs.wall"
    echo "$cu + $cs" | bc >>"$out/ferrofs.cpu"
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["erofs_layer_bytes"])' "$out/ff.json" >>"$out/ferrofs.bytes"
  done
  kill "$ctd_pid"; wait "$ctd_pid" 2>/dev/null || true
  ctd_pid=
  layers=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"])' "$out/ff.json")
  src=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["source_layer_bytes"])' "$out/ff.json")
  echo
  echo "### $tree ($layers layers, $src bytes of gzip layers; -z$z; runs: $runs)"
  echo
  echo "| converter | wall s | CPU s | EROFS layer bytes |"
  echo "|---|---:|---:|---:|"
  for m in ferrofs containerd; do
    echo "| $m | $(median <"$out/$m.wall") | $(median <"$out/$m.cpu") | $(median <"$out/$m.bytes") |"
  done
  python3 - "$(median <"$out/ferrofs.wall")" "$(median <"$out/containerd.wall")" \
    "$(median <"$out/ferrofs.cpu")" "$(median <"$out/containerd.cpu")" \
    "$(median <"$out/ferrofs.bytes")" "$(median <"$out/containerd.bytes")" <<'EOF'
import sys
fw, cw, fc, cc, fb, cb = map(float, sys.argv[1:])
print()
print(f"ferrofs / containerd: wall {fw / cw:.3f}, CPU {fc / cc:.3f}, bytes {fb / cb:.4f}")
EOF
done
