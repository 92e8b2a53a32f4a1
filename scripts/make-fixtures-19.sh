#!/usr/bin/env bash
# Regenerates the reference images in testdata/v19/ with the upstream mkfs.erofs 1.9.4
# (installed by ../shared/tools/upstream-tools --next). They cover what erofs-utils 1.9 writes
# and 6.15+ kernels read (see ../shared/erofs-format-2025.md): the 48-bit layout, encoded extents
# of every record size, all-hole files, dot-omitted directories, the metabox, compressed
# directories (--zD), the metadata zone (--MZ), plain long-prefix tables and inode digests.
# testdata/v19/README.md lists each image with the features it really contains.
#
#   scripts/make-fixtures-19.sh            build the images
#   scripts/make-fixtures-19.sh --verify   build, then check every image with fsck.erofs 1.9.4
#                                          and a kernel loop mount (needs root); the report goes
#                                          to stdout, differences are listed per image
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
up=${UPSTREAM_NEXT_BIN:-$(bash "$root/../shared/tools/upstream-tools" --next)}
out=$root/testdata/v19
verify=0; [[ ${1:-} == --verify ]] && verify=1
work=$(mktemp -d)
trap 'mountpoint -q "$work/mnt" && umount "$work/mnt"; rm -rf "$work"' EXIT

# The same tree as the 1.8.6 fixtures, plus new/ with the 1.9 extras (scripts/fixture-tree.sh).
source "$root/scripts/fixture-tree.sh"
full=$work/full
fixture_tree "$full"
fixture_extras "$full"
# Uncompressed images would store new/big.txt as 1 MB, and without 48BIT new/hole1m as 1 MiB of
# zero blocks, so those images are built from trimmed copies (the removal re-dates new/).
nobig=$work/nobig; cp -a "$full" "$nobig"; rm "$nobig/new/big.txt"
small=$work/small; cp -a "$nobig" "$small"; rm "$small/new/hole1m"
# The images with real mtimes only need new/ (without big.txt; times-ext also without hole1m).
times=$work/times; cp -a "$nobig/new" "$times"; rm -r "$times/many"
timesx=$work/timesx; cp -a "$times" "$timesx"; rm "$timesx/hole1m"
# Chunked files never inline their tails: new/many/ would cost 300 blocks there.
chunk=$work/chunk; cp -a "$nobig" "$chunk"; rm -r "$chunk/new/many"
touch -d @1700000000 "$nobig/new" "$small/new" "$times" "$timesx" "$chunk/new"

mkdir -p "$out"
rm -f "$out"/*.erofs
declare -A srcof optsof
names=() rejected=()
build() { # name tree(full|nobig|small|times|timesx|chunk) mkfs-options...
  local name=$1 tree=$2; shift 2
  local src=$work/$tree
  # -T fixes the build time and, without --mkfs-time, also every mtime (so only the
  # *times* images, which add --mkfs-time, keep the special mtimes of new/).
  if "$up/mkfs.erofs" --quiet -T1700000000 -U 11111111-2222-3333-4444-555555555555 \
      "$@" "$out/$name.erofs" "$src" >"$work/mkfs.log" 2>&1; then
    names+=("$name"); srcof[$name]=$src; optsof[$name]="$*"
  else
    rejected+=("$name: $* ($(tail -1 "$work/mkfs.log"))"); rm -f "$out/$name.erofs"
  fi
}

# 48-bit layout and encoded extents
build e48                  nobig -E48bit
build e48-zstd-C128k       full  -E48bit -zzstd -C131072     # byte-granular, recsz 4
build e48-lz4hc-C64k       full  -E48bit -zlz4hc -C65536     # recsz 16
build e48-lz4hc-C64k-frag  full  -E48bit -zlz4hc -C65536 -Efragments
build e48-lz4-ztail        full  -E48bit -zlz4 -Eztailpacking  # tails keep lcluster indexes
build e48-libdeflate       full  -E48bit -zlibdeflate
build e48-zstd-dedupe      full  -E48bit -zzstd -Ededupe     # recsz 8 where records jump
build e48-lzma-C128k       full  -E48bit -zlzma -C131072
build e48-chunk8k          chunk -E48bit --chunksize=8192
build e48-lz4hc-maxext64k  full  -E48bit -zlz4hc --max-extent-bytes=65536
# real mtimes (no clamping): pre-1970, 2200 and nanoseconds; see README for what the kernel shows
build e48-times            times  -E48bit --mkfs-time
build e48-times-T5e9       times  -E48bit --mkfs-time -T5000000000  # epoch 705032705
build times-ext            timesx --mkfs-time                       # no 48BIT: extended inodes
# directories without "."
build dot-omitted          nobig -Edot-omitted
build dot-omitted-lz4hc    full  -Edot-omitted -zlz4hc
# metabox
build m4k                  nobig -m4096
build m4k-lz4hc            nobig -m4096:lz4hc
build m16k-zstd            full  -m16384 -zzstd   # rejected by 1.9.4: the default -C (4096) is below -m
build m16k-zstd-C16k       full  -m16384 -zzstd -C16384
build m4k-lz4hc-ztail-frag-xp        full -m4096 -zlz4hc -Eztailpacking,fragments --xattr-prefix=trusted.overlay.
build m4k-lz4hc-ztail-frag-xp-plain  full -m4096 -zlz4hc -Eztailpacking,fragments --xattr-prefix=trusted.overlay. -Eplain-xattr-prefixes
# compressed directories (1.9.4 parses --zD inverted: plain --zD enables it, --zD=1 disables it)
build zD                   small --zD
build zD-lz4hc             full  --zD -zlz4hc
build zD-m4k-zstd          full  --zD -m4096 -zzstd
# metadata zone
build MZ                   small --MZ
build MZ-i                 small --MZ=i
build MZ-e48-lz4           full  --MZ -E48bit -zlz4
# inode fingerprints (hidden default name, then a visible user.* one)
build digest               small --xattr-inode-digest
build digest-user-fp       small --xattr-inode-digest=user.fp.
# everything at once
build kitchen-sink         full  -E48bit -Edot-omitted -m4096:zstd --zD -zzstd -C65536 -Efragments,dedupe,ztailpacking

for r in "${rejected[@]}"; do echo "mkfs.erofs 1.9.4 rejected $r" >&2; done
ls -l "$out"/*.erofs | awk '{s += $5; print $5, $9} END {print s, "bytes in total"}'
((verify)) || exit 0

# ---- verification: fsck, extraction, kernel mount; differences are printed, not fatal ----
meta() { # DIR: one line per entry: path type mode uid gid mtime nlink size(non-dirs) target
  (cd "$1" && find . -printf '%p %y %m %U %G %T@ %n ' \( -type d -printf '-' -o -printf '%s' \) -printf ' %l\n' | sort)
}
xattrs() { (cd "$1" && getfattr -h -d -m - -R . 2>/dev/null | awk 'NF' | sort); }
# diff -r, minus its note for every FIFO pair; prints the differences, fails if there are any
ddiff() { ! diff -r --no-dereference "$1" "$2" 2>&1 | grep -v 'is a fifo while file .* is a fifo$'; }
set +e +o pipefail
mkdir -p "$work/mnt"
for name in "${names[@]}"; do
  img=$out/$name.erofs src=${srcof[$name]}
  echo "=== $name  [${optsof[$name]}]  $(stat -c %s "$img") bytes"
  fsckopts=(); [[ $name == digest* ]] && fsckopts=(--xattr-inode-digest)
  "$up/fsck.erofs" "${fsckopts[@]}" "$img" >"$work/fsck.log" 2>&1 && echo "fsck ${fsckopts[*]}: ok" || { echo "fsck: FAILED"; cat "$work/fsck.log"; }
  rm -rf "$work/x"
  "$up/fsck.erofs" --extract="$work/x" "$img" >"$work/fsck.log" 2>&1 && echo "fsck --extract: ok" || { echo "fsck --extract: FAILED"; tail -3 "$work/fsck.log"; }
  ddiff "$work/x" "$src" >"$work/d" && echo "extracted data: same" || { echo "extracted data: DIFFERS"; head "$work/d"; }
  "$up/dump.erofs" -s "$img" | grep -Ei 'features|epoch|build time|meta|root nid|packed|prefix' | sed 's/^/  sb: /'
  if mount -o loop,ro "$img" "$work/mnt" 2>"$work/mount.log"; then
    ddiff "$work/mnt" "$src" >"$work/d" && echo "kernel data: same" || { echo "kernel data: DIFFERS"; head "$work/d"; }
    diff <(meta "$src") <(meta "$work/mnt") >"$work/meta.diff" && echo "kernel metadata: same" || { echo "kernel metadata: differs (< source, > kernel)"; grep '^[<>]' "$work/meta.diff"; }
    diff <(xattrs "$src") <(xattrs "$work/mnt") >"$work/xattr.diff" && echo "kernel xattrs: same" || { echo "kernel xattrs: differ (< source, > kernel; first 20 of $(grep -c '^[<>]' "$work/xattr.diff"))"; grep '^[<>]' "$work/xattr.diff" | head -20; }
    umount "$work/mnt"
  else
    echo "kernel mount: FAILED $(cat "$work/mount.log")"
  fi
done
