#!/usr/bin/env bash
# Reading a composefs image (issue #37): `tar cf - . | wc -c` of the
# kernel's overlay mount (the image loop-mounted as EROFS, the object
# store as its data-only layer, as mount.composefs mounts it without
# verity) against `ferrofs mount --basedir STORE` (FUSE), and against
# `--basedir --verify-objects` (every object's fs-verity digest checked
# on first read). The image and store are mkcomposefs 1.0.8's of TREE.
# Each run: page cache dropped, a fresh mount, the mounts alternating.
# Prints one Markdown row per mount: median wall seconds, the daemon's
# CPU seconds (for the kernel: tar's sys+user), bytes, ratio to the
# kernel's wall.
# Usage: [RUNS=5] bench/composefs-mount-bench.sh TREE   (root)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup
tree=${1:?TREE}
runs=${RUNS:-5}
out=${OUT:-/tmp/composefs-mount-bench}
rm -rf "$out"; mkdir -p "$out/meta" "$out/m"
"$bin/mkcomposefs" --digest-store="$out/store" "$tree" "$out/img.cfs"
tick=$(getconf CLK_TCK)
cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }
mount_it() { # kind
  case $1 in
    kernel)
      mount -t erofs -o loop,ro "$out/img.cfs" "$out/meta"
      mount -t overlay overlay -o "ro,metacopy=on,redirect_dir=on,lowerdir=$out/meta::$out/store" "$out/m" ;;
    fuse) "$ferrofs" mount --basedir "$out/store" "$out/img.cfs" "$out/m" ;;
    verify) "$ferrofs" mount --basedir "$out/store" --verify-objects "$out/img.cfs" "$out/m" ;;
  esac
}
unmount_it() { # kind
  umount "$out/m"
  [[ $1 == kernel ]] && umount "$out/meta"
  for _ in $(seq 50); do mountpoint -q "$out/m" || return 0; sleep 0.1; done
}
kinds=(kernel fuse verify)
for k in "${kinds[@]}"; do : >"$out/$k.wall"; : >"$out/$k.cpu"; done
for ((r = 0; r < runs; r++)); do
  for k in "${kinds[@]}"; do
    cold
    mount_it "$k"
    pid=$(pgrep -n -f "ferrofs mount" || true)
    /usr/bin/time -o "$out/t" -f "%e %U %S" bash -c "tar cf - -C '$out/m' . | wc -c > '$out/bytes'"
    read -r w u s <"$out/t"
    if [[ $k == kernel ]]; then
      cpu=$(echo "$u + $s" | bc)
    else
      cpu=$(awk -v t="$tick" '{printf "%.2f", ($14 + $15) / t}' "/proc/$pid/stat")
    fi
    unmount_it "$k"
    echo "$w" >>"$out/$k.wall"; echo "$cpu" >>"$out/$k.cpu"
    cp "$out/bytes" "$out/$k.bytes"
  done
done
base=$(median <"$out/kernel.wall")
echo "| mount | wall s | CPU s | bytes | wall vs kernel |"
echo "|---|---:|---:|---:|---:|"
for k in "${kinds[@]}"; do
  w=$(median <"$out/$k.wall")
  echo "| $k | $w | $(median <"$out/$k.cpu") | $(cat "$out/$k.bytes") | $(echo "scale=3; $w / $base" | bc) |"
done
