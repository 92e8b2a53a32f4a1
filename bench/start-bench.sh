#!/usr/bin/env bash
# Cold starts through the kernel (issue #58): what a program's start reads
# from images of one tree built by ferrofs, mkfs.erofs 1.9.4 and mksquashfs
# 4.7.5 with the same codec and block size.
#
# Usage: [RUNS=3] [IMAGES="..."] [PROFILE=START] [OUT=dir] \
#          bench/start-bench.sh TREE STARTS
#   TREE    the directory the images are built from
#   STARTS  a file of starts, one a line: `label<TAB>how<TAB>command`, where
#           how is `chroot` (command run by sh in a chroot on the mount) or
#           `host` (command run by sh on this machine, $M the mount point).
#           Lines starting with `#` are skipped. A label starting with `hidden:`
#           marks a start that was not looked at while the layout was chosen.
#
# Images (IMAGES picks and orders them; default: all but the profiled one):
#   ff-lz4hc     ferrofs -zlz4hc,12 -C131072 -Efragments,dedupe,ztailpacking
#   ff-lz4hc-25  the same, 2025 format: -m4096 --zD
#   ff-lzma      ferrofs --preset dense (-zlzma,6 -C131072 -Efragments,dedupe,ztailpacking)
#   ff-lzma-25   the same, 2025 format: -m4096 --zD
#   ff-lzma-prof ff-lzma-25 with --profile of a trace of start PROFILE (a label),
#                recorded on `ferrofs mount --trace` of ff-lzma-25, and
#                --profile-readahead 128K (the kernel's default read-ahead:
#                the image is read by a kernel mount)
#   up-lz4hc     mkfs.erofs 1.9.4, the ff-lz4hc options
#   up-lzma      mkfs.erofs 1.9.4, the ff-lzma options
#   sq-lz4       mksquashfs 4.7.5 -comp lz4 -Xhc -b 128K
#   sq-xz        mksquashfs 4.7.5 -comp xz -b 128K
#
# Each round mounts every image in turn (loop, read-only), drops caches and
# runs each start once; rounds alternate the image order. Reported per start
# and image: the loop device's bytes read (/sys/block/loopN/stat), wall
# seconds and the start's CPU seconds (user + system: the kernel decodes in
# the reading process), medians of RUNS; then the image sizes. The loop
# device's read-ahead is left as the kernel sets it (RA_KB sets it) and printed.
set -euo pipefail
tree=${1:?TREE}; starts=${2:?STARTS}
# shellcheck source=bench/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
bench_setup
[[ $(id -u) == 0 ]] || { echo "start-bench: needs root (loop mounts, drop_caches)" >&2; exit 2; }
runs=${RUNS:-3}
out=${OUT:-/tmp/start-bench}; mkdir -p "$out/mnt" "$out/img"
mnt=$out/mnt
images=(${IMAGES:-ff-lz4hc ff-lz4hc-25 ff-lzma ff-lzma-25 up-lz4hc up-lzma sq-lz4 sq-xz})
frag=(-C131072 -Efragments,dedupe,ztailpacking)

labels=(); hows=(); cmds=()
while IFS=$'\t' read -r label how cmd; do
  [[ -z $label || $label == \#* ]] && continue
  labels+=("$label"); hows+=("$how"); cmds+=("$cmd")
done < "$starts"

# run_start I: runs start I on the mount $mnt, discarding its output.
run_start() {
  if [[ ${hows[$1]} == chroot ]]; then
    chroot "$mnt" /bin/sh -c "${cmds[$1]}" >/dev/null 2>&1
  else
    M=$mnt /bin/sh -c "${cmds[$1]}" >/dev/null 2>&1
  fi
}

build() {
  local name=$1 img=$out/img/$1.img
  [[ -f $img && -z ${REBUILD:-} ]] && return
  rm -f "$img"
  case $name in
    ff-lz4hc) "$ferrofs" mkfs --quiet -zlz4hc,12 "${frag[@]}" "$img" "$tree" ;;
    ff-lz4hc-25) "$ferrofs" mkfs --quiet -zlz4hc,12 "${frag[@]}" -m4096 --zD "$img" "$tree" ;;
    ff-lzma) "$ferrofs" mkfs --quiet -zlzma,6 "${frag[@]}" "$img" "$tree" ;;
    ff-lzma-25) "$ferrofs" mkfs --quiet -zlzma,6 "${frag[@]}" -m4096 --zD "$img" "$tree" ;;
    ff-lzma-prof)
      local i t=$out/trace.txt found=
      for i in "${!labels[@]}"; do [[ ${labels[$i]} == "${PROFILE:?PROFILE names the start to trace}" ]] && found=$i; done
      [[ -n $found ]] || { echo "start-bench: no start labelled $PROFILE" >&2; exit 2; }
      build ff-lzma-25
      rm -f "$t"; sync; echo 3 > /proc/sys/vm/drop_caches
      "$ferrofs" mount --trace "$t" "$out/img/ff-lzma-25.img" "$mnt"
      run_start "$found" || true
      umount "$mnt"; sleep 1
      "$ferrofs" mkfs --quiet -zlzma,6 "${frag[@]}" -m4096 --zD --profile "$t" \
        --profile-readahead 128K "$img" "$tree" ;;
    up-lz4hc) "$bin/mkfs.erofs" --quiet -zlz4hc,12 "${frag[@]}" "$img" "$tree" >/dev/null ;;
    up-lzma) "$bin/mkfs.erofs" --quiet -zlzma,6 "${frag[@]}" "$img" "$tree" >/dev/null ;;
    sq-lz4) "$bin/mksquashfs" "$tree" "$img" -comp lz4 -Xhc -b 128K -quiet -no-progress >/dev/null ;;
    sq-xz) "$bin/mksquashfs" "$tree" "$img" -comp xz -b 128K -quiet -no-progress >/dev/null ;;
    *) echo "start-bench: unknown image $name" >&2; exit 2 ;;
  esac
}
for name in "${images[@]}"; do build "$name"; done

# measure NAME I: one cold run of start I on image NAME; appends
# "bytes wall cpu" to $out/res/NAME.I.
mkdir -p "$out/res"; rm -f "$out"/res/*
measure() {
  local name=$1 i=$2 dev before after t0 t1 c0 c1
  if [[ $name == sq-* ]]; then mount -t squashfs -o loop,ro "$out/img/$name.img" "$mnt"
  else mount -t erofs -o loop,ro "$out/img/$name.img" "$mnt"; fi
  dev=$(findmnt -n -o SOURCE "$mnt"); dev=${dev##*/}
  [[ -n ${RA_KB:-} ]] && echo "$RA_KB" > "/sys/block/$dev/queue/read_ahead_kb"
  cat "/sys/block/$dev/queue/read_ahead_kb" > "$out/ra_kb"
  sync; echo 3 > /proc/sys/vm/drop_caches
  before=$(awk '{print $3}' "/sys/block/$dev/stat")
  c0=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$$/stat")
  t0=$(date +%s.%N)
  # (A subshell so that its children's CPU time is counted when it is reaped.)
  ( run_start "$i" ) || echo "start-bench: ${labels[$i]} failed on $name" >&2
  t1=$(date +%s.%N)
  c1=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$$/stat")
  after=$(awk '{print $3}' "/sys/block/$dev/stat")
  umount "$mnt"
  echo "$(( (after - before) * 512 )) $(echo "$t1 - $t0" | bc) $(echo "($c1 - $c0) / $(getconf CLK_TCK)" | bc -l)" \
    >> "$out/res/$name.$i"
}
for ((r = 0; r < runs; r++)); do
  order=("${images[@]}")
  (( r % 2 )) && order=($(printf '%s\n' "${images[@]}" | tac))
  for name in "${order[@]}"; do
    for i in "${!labels[@]}"; do measure "$name" "$i"; done
  done
done

col() { awk -v c="$1" '{print $c}' "$2" | median; }
echo "tree: $tree ($(du -s --apparent-size -B1 "$tree" | cut -f1) bytes); runs: $runs; $(uname -r);" \
  "loop read-ahead $(cat "$out/ra_kb") KiB"
echo
# Each image's bytes and wall time against mksquashfs's image with the same
# codec (sq-xz for lzma, sq-lz4 for lz4hc), when that image was measured.
echo "| start | image | device KiB | wall s | CPU s | bytes / squashfs | wall / squashfs |"
echo "|---|---|---:|---:|---:|---:|---:|"
for i in "${!labels[@]}"; do
  for name in "${images[@]}"; do
    b=$(col 1 "$out/res/$name.$i"); w=$(col 2 "$out/res/$name.$i")
    case $name in *lzma*|sq-xz) ref=sq-xz ;; *) ref=sq-lz4 ;; esac
    rb=-; rw=-
    if [[ -f $out/res/$ref.$i ]]; then
      rb=$(printf '%.2f' "$(echo "$b / $(col 1 "$out/res/$ref.$i")" | bc -l)")
      rw=$(printf '%.2f' "$(echo "$w / $(col 2 "$out/res/$ref.$i")" | bc -l)")
    fi
    printf '| %s | %s | %s | %.3f | %.3f | %s | %s |\n' "${labels[$i]}" "$name" "$(( ${b%.*} / 1024 ))" \
      "$w" "$(col 3 "$out/res/$name.$i")" "$rb" "$rw"
  done
done
echo
echo "| image | bytes |"
echo "|---|---:|"
for name in "${images[@]}"; do echo "| $name | $(stat -c %s "$out/img/$name.img") |"; done
