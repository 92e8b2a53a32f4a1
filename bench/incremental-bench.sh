#!/usr/bin/env bash
# incremental-bench.sh -- an update of a real tree (about 1 % of its files
# changed, 20 added) as an incremental build, by ferrofs and by mkfs.erofs
# 1.9.x, beside a full build and a `--base` rebuild: time, bytes appended,
# blocks of the old image rewritten, and the size of a binary delta from
# the old image to the new one (`zstd --patch-from`).
#
# Usage: incremental-bench.sh TREE
#
# Environment (all optional):
#   RUNS        timed builds per row (the rows of a pair alternate) [default: 3]
#   FERROFS     ferrofs binary                  [default: target/release/ferrofs]
#   MKFS_EROFS  mkfs.erofs 1.9.x  [default: from bash /work/shared/tools/upstream-tools --next]
#   TMPROOT     where the scratch directory is created               [default: /tmp]
#   CHANGED     files rewritten                                      [default: 76]
#   ADDED       files added                                          [default: 20]
#   OPTSETS     ';'-separated option sets    [default: "-zlz4hc,12 -C65536;-E48bit"]
#   ZSTD_LEVEL  level of the delta                                   [default: 19]
#
# What it does: copies TREE (OLD) and changes a copy of it (NEW) with
# bench/change-set.py. Per option set: OLD.img by ferrofs and by
# mkfs.erofs (same options); then RUNS rounds, alternating, of ferrofs
# `--incremental` and mkfs.erofs `--incremental` of NEW onto fresh copies
# of their OLD images (the copy is not timed), and of a full ferrofs build
# of NEW and a `--base=OLD.img` rebuild. Prints a Markdown table: medians
# of wall and CPU (user+sys) seconds, cores, image bytes, bytes appended
# to the old image, blocks of the old image's length that differ (block 0
# counted too; `+0` says whether it is among them), and the zstd delta
# from the old image. Sizes do not depend on the machine; times do: run
# it on a quiet machine.

set -euo pipefail
RUNS=${RUNS:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
FERROFS=${FERROFS:-$here/target/release/ferrofs}
MKFS_EROFS=${MKFS_EROFS:-$(bash /work/shared/tools/upstream-tools --next)/mkfs.erofs}
OPTSETS=${OPTSETS:-"-zlz4hc,12 -C65536;-E48bit"}
ZSTD_LEVEL=${ZSTD_LEVEL:-19}
source "$here/bench/update-setup.sh" "$@"
# The build of each row; the incremental ones start from a fresh copy of
# their old image.
build() { # ROW OPTS...
    local row=$1; shift
    case $row in
        full) timed "$WORK/full.log" "$FERROFS" mkfs --quiet "$@" "$WORK/full.img" "$WORK/new" ;;
        base) timed "$WORK/base.log" "$FERROFS" mkfs --quiet "$@" --base="$WORK/old.img" \
                  "$WORK/base.img" "$WORK/new" ;;
        incr) cp "$WORK/old.img" "$WORK/incr.img"
              timed "$WORK/incr.log" "$FERROFS" mkfs --quiet "$@" --incremental \
                  "$WORK/incr.img" "$WORK/new" ;;
        upincr) cp "$WORK/upold.img" "$WORK/upincr.img"
              timed "$WORK/upincr.log" "$MKFS_EROFS" -d0 "$@" --incremental=data \
                  "$WORK/upincr.img" "$WORK/new" ;;
    esac
}
# blocks OLD NEW -> "differing blocks of OLD's length [+0 if block 0 is one]"
blocks() {
    python3 - "$1" "$2" <<'PY'
import sys
bs = 4096
with open(sys.argv[1], "rb") as a, open(sys.argv[2], "rb") as b:
    n, zero = 0, False
    k = 0
    while True:
        x = a.read(bs)
        if not x:
            break
        if b.read(bs) != x:
            n += 1
            zero = zero or k == 0
        k += 1
print("%d%s" % (n, " (+0)" if zero else ""))
PY
}
delta() { # OLD NEW -> bytes of a zstd delta
    zstd -q -f -"$ZSTD_LEVEL" --long=31 --patch-from="$1" "$2" -o "$WORK/delta.zst"
    stat -c %s "$WORK/delta.zst"
}

echo "| options | build | wall s | CPU s | cores | image bytes | appended bytes | old blocks differing | zstd delta bytes |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
IFS=';' read -ra sets <<< "$OPTSETS"
for set in "${sets[@]}"; do
    read -ra opts <<< "$set"
    log "OLD images: $set"
    "$FERROFS" mkfs --quiet "${opts[@]}" "$WORK/old.img" "$WORK/old"
    "$MKFS_EROFS" -d0 "${opts[@]}" "$WORK/upold.img" "$WORK/old" > /dev/null
    for row in full base incr upincr; do : > "$WORK/$row.log"; done
    for r in $(seq 1 "$RUNS"); do
        for pair in "full base" "incr upincr"; do
            read -r a b <<< "$pair"
            if (( r % 2 )); then build "$a" "${opts[@]}"; build "$b" "${opts[@]}";
            else build "$b" "${opts[@]}"; build "$a" "${opts[@]}"; fi
        done
        log "round $r done"
    done
    for row in full base incr upincr; do
        old=$WORK/old.img
        [[ $row == upincr ]] && old=$WORK/upold.img
        img=$WORK/$row.img
        w=$(cut -d' ' -f1 "$WORK/$row.log" | median)
        c=$(cut -d' ' -f2 "$WORK/$row.log" | median)
        size=$(stat -c %s "$img")
        appended=-
        if [[ $row == *incr ]]; then appended=$(( size - $(stat -c %s "$old") )); fi
        printf '| %s | %s | %.2f | %.2f | %.2f | %d | %s | %s | %d |\n' "${set:-(none)}" "$row" \
            "$w" "$c" "$(echo "$c / $w" | bc -l)" "$size" "$appended" \
            "$(blocks "$old" "$img")" "$(delta "$old" "$img")"
    done
done
