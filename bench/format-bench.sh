#!/usr/bin/env bash
# format-bench.sh -- compare image builders (mksquashfs, mkfs.erofs, ferrofs)
# on real directory trees: image size, build wall time, CPU time, and memory.
#
# Usage:
#   format-bench.sh TREE [TREE...]
#
# Environment (all optional):
#   RUNS     timed builds per (tool, options) row               [default: 5]
#   CODECS   space-separated subset of: lz4hc zstd lzma         [default: all three]
#   NEXT     directory holding mksquashfs, mkfs.erofs, fsck.erofs
#                                    [default: what ../shared/tools/upstream-tools --next prints]
#   FERROFS  ferrofs binary            [default: target/release/ferrofs, built if missing]
#   TMPROOT  where the scratch directory is created  [default: /tmp]
#   ROWS     space-separated subset of the rows below, e.g. "sq ferrodense" for
#            the densest preset against mksquashfs alone (issue 32)
#            [default: sq erofs erofs48 erofsmeta ferro ferro48 ferrometa]
#   FSCK_ARGS extra arguments for fsck.erofs, e.g. "--extract" to also decode
#            every file (default: none, i.e. plain `fsck.erofs IMG`)
#   RAW      if set, per-run measurements are also written to this TSV file
#   KEEP     if 1, the scratch directory (with the last images) is kept
#   WARMUP   0: no untimed warm-up build (the first build of a row is timed
#            run 1; read the tree into the page cache beforehand)  [default: 1]
#
# What it does, per TREE and per codec:
#   1. one untimed warm-up build per row (brings the tree into the page cache);
#   2. RUNS timed rounds; in each round every row is built once, so the tools
#      alternate run by run, and the starting row rotates from round to round so
#      no tool is always first (or always right after a given other tool);
#   3. one untimed check of the last image of each EROFS row with fsck.erofs;
#   4. a Markdown table on stdout. Progress goes to stderr.
# Exit status 1 if any build or fsck failed (the table still shows everything);
# rows whose options the ferrofs binary lacks are skipped, not failed.
#
# Each build runs under /usr/bin/time: CPU = user + sys (%U + %S), peak RSS =
# %M (KiB). Wall time is taken by the script with $EPOCHREALTIME around the
# command (microsecond resolution; /usr/bin/time's %e only has 10 ms).
# Table cells: medians over the RUNS timed builds for wall and CPU; "cores" is
# median CPU / median wall; peak RSS is the largest %M seen over the timed runs;
# image bytes is the size of the last timed build (marked "*" if the size was
# not the same in every run); the ratio is image bytes / mksquashfs image bytes
# for the same tree and codec.
#
# The page cache is not dropped: the builds only read the tree, and the warm-up
# build has already pulled it in.

set -euo pipefail

RUNS=${RUNS:-5}
CODECS=${CODECS:-"lz4hc zstd lzma"}
here=$(cd "$(dirname "$0")/.." && pwd)
NEXT=${NEXT:-$(bash "$here/../shared/tools/upstream-tools" --next)}
FERROFS=${FERROFS:-$here/target/release/ferrofs}
[[ -x $FERROFS ]] || (cd "$here" && cargo build --release -q -p ferrofs-cli)
TMPROOT=${TMPROOT:-/tmp}
FSCK_ARGS=${FSCK_ARGS:-}
RAW=${RAW:-}
KEEP=${KEEP:-0}
WARMUP=${WARMUP:-1}
TIME=/usr/bin/time

die() { echo "format-bench: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# ---- sanity checks ------------------------------------------------------------
(( $# >= 1 )) || die "usage: $0 TREE [TREE...]"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer (got '$RUNS')"
(( BASH_VERSINFO[0] >= 5 )) || die "needs bash >= 5 (for \$EPOCHREALTIME)"
[[ -x $TIME ]] || die "$TIME not found (apt-get install time)"
for t in mksquashfs mkfs.erofs fsck.erofs; do
    [[ -x $NEXT/$t ]] || die "$NEXT/$t not found or not executable"
done
[[ -x $FERROFS ]] || die "ferrofs binary $FERROFS not found or not executable"
for c in $CODECS; do
    case $c in lz4hc|zstd|lzma) ;; *) die "unknown codec '$c' (lz4hc, zstd, lzma)";; esac
done
for tree in "$@"; do
    [[ -d $tree ]] || die "not a directory: $tree"
done

# ---- scratch space ----------------------------------------------------------------
mkdir -p "$TMPROOT"
WORK=$(mktemp -d "$TMPROOT/format-bench.XXXXXX")
cleanup() {
    local rc=$?
    if [[ $KEEP == 1 ]]; then
        log "keeping scratch directory $WORK"
    else
        rm -rf -- "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ -n $RAW ]]; then
    printf 'tree\tcodec\trow\trun\timage_bytes\twall_s\tuser_s\tsys_s\tmaxrss_kib\n' >"$RAW"
fi

# ---- which ferrofs options exist ---------------------------------------------
# Rows whose options the ferrofs binary does not know are skipped (and shown
# as skipped in the table) instead of failing the whole run.
FERRO_HELP=$("$FERROFS" mkfs --help 2>&1 || true)
ferro_has() { grep -q -- "$1" <<<"$FERRO_HELP"; }

# ---- row definitions ----------------------------------------------------------
# A row is: an id, a tool label, the option label printed in the table, and
# how to build it (a function filling the array CMD for codec $codec, image
# $img, tree $tree).
# ferrodense is the densest preset (ztailpacking as well), run when asked.
read -r -a ROWS <<<"${ROWS:-sq erofs erofs48 erofsmeta ferro ferro48 ferrometa}"

row_tool() {
    case $1 in
        sq)      echo "mksquashfs 4.7.5" ;;
        erofs*)  echo "mkfs.erofs 1.9.4" ;;
        ferro*)  echo "ferrofs" ;;
    esac
}

row_opts() {   # what distinguishes the row, for the table
    case $1 in
        sq)                 echo "-b 128K" ;;
        erofs|ferro)        echo "-C131072 -Efragments,dedupe" ;;
        erofs48|ferro48)    echo "-C131072 -Efragments,dedupe,48bit" ;;
        erofsmeta|ferrometa) echo "-C131072 -Efragments,dedupe -m4096 --zD" ;;
        ferrodense)         echo "-C131072 -Efragments,dedupe,ztailpacking -m4096 --zD" ;;
    esac
}

# Option sets for the codec: squashfs compressor options and the EROFS -z value.
sq_comp() {
    case $1 in
        lz4hc) echo "-comp lz4 -Xhc" ;;
        zstd)  echo "-comp zstd -Xcompression-level 15" ;;
        lzma)  echo "-comp xz" ;;
    esac
}
erofs_z() {
    case $1 in
        lz4hc) echo "lz4hc,12" ;;
        zstd)  echo "zstd,15" ;;
        lzma)  echo "lzma,6" ;;
    esac
}

# Prints a reason and returns 1 if the row cannot be run with these binaries.
row_unsupported() {
    case $1 in
        ferrometa|ferrodense)
            ferro_has '^ *-m ' || { echo "ferrofs mkfs has no -m"; return 0; }
            ferro_has '--zD'   || { echo "ferrofs mkfs has no --zD"; return 0; }
            ;;
        ferro48)
            ferro_has '48bit'  || { echo "ferrofs mkfs has no -E48bit"; return 0; }
            ;;
    esac
    return 1
}

# build_cmd ROW CODEC IMG TREE -> fills the global array CMD
build_cmd() {
    local row=$1 codec=$2 img=$3 tree=$4 z
    z=$(erofs_z "$codec")
    local -a sqc
    read -r -a sqc <<<"$(sq_comp "$codec")"
    case $row in
        sq)        CMD=("$NEXT/mksquashfs" "$tree" "$img" -b 128K "${sqc[@]}"
                        -quiet -no-progress -noappend -processors 2) ;;
        erofs)     CMD=("$NEXT/mkfs.erofs" --quiet "-z$z" -C131072
                        -Efragments,dedupe "$img" "$tree") ;;
        erofs48)   CMD=("$NEXT/mkfs.erofs" --quiet "-z$z" -C131072
                        -Efragments,dedupe,48bit "$img" "$tree") ;;
        erofsmeta) CMD=("$NEXT/mkfs.erofs" --quiet "-z$z" -C131072
                        -Efragments,dedupe -m4096 --zD "$img" "$tree") ;;
        ferro)     CMD=("$FERROFS" mkfs --quiet "-z$z" -C131072
                        -Efragments,dedupe "$img" "$tree") ;;
        ferro48)   CMD=("$FERROFS" mkfs --quiet "-z$z" -C131072
                        -Efragments,dedupe,48bit "$img" "$tree") ;;
        ferrometa) CMD=("$FERROFS" mkfs --quiet "-z$z" -C131072
                        -Efragments,dedupe -m4096 --zD "$img" "$tree") ;;
        ferrodense) CMD=("$FERROFS" mkfs --quiet "-z$z" -C131072
                        -Efragments,dedupe,ztailpacking -m4096 --zD "$img" "$tree") ;;
    esac
}

# ---- small numeric helpers -------------------------------------------------------
# shellcheck source=bench/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
maxof() { printf '%s\n' "$@" | sort -g | tail -n 1; }

# ---- one build --------------------------------------------------------------------
# run_build ROW CODEC IMG TREE: builds once under /usr/bin/time; on success sets
# R_WALL R_USER R_SYS R_RSS R_BYTES and returns 0; on failure returns 1 and
# leaves the tool's error output in $WORK/last.err.
run_build() {
    local row=$1 codec=$2 img=$3 tree=$4 t0 t1 tf="$WORK/time.out"
    build_cmd "$row" "$codec" "$img" "$tree"
    rm -f -- "$img" "$tf"
    t0=$EPOCHREALTIME
    if ! "$TIME" -f '%U %S %M' -o "$tf" "${CMD[@]}" >"$WORK/last.out" 2>"$WORK/last.err"; then
        return 1
    fi
    t1=$EPOCHREALTIME
    read -r R_USER R_SYS R_RSS < <(tail -n 1 "$tf")
    R_WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    R_BYTES=$(stat -c %s -- "$img")
}

# ---- header --------------------------------------------------------------------
echo "# format-bench $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
echo
echo "- cores: $(nproc); RUNS=$RUNS; codecs: $CODECS"
echo "- $("$NEXT/mksquashfs" -version 2>&1 | head -n 1)"
echo "- $("$NEXT/mkfs.erofs" --version 2>&1 | head -n 1)"
echo "- ferrofs: $FERROFS ($("$FERROFS" --version 2>&1 | head -n 1 || true))"
echo "- fsck: $NEXT/fsck.erofs ${FSCK_ARGS:-(no extra args)} IMG"
for tree in "$@"; do
    echo "- tree $tree: $(du -sb -- "$tree" | cut -f1) bytes (du -sb)," \
         "$(find "$tree" | wc -l) entries, $(find "$tree" -type f | wc -l) regular files"
done
echo

# ---- main loop ----------------------------------------------------------------------
TABLE_HEAD='| tree | codec | tool | options | image bytes | ratio to mksquashfs | median wall s | median CPU s | wall / mksquashfs | CPU / mksquashfs | cores | peak RSS KiB | fsck |
|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|'
TABLE_ROWS=()
NOTES=()
FAILED=0   # set to 1 by any failed build or fsck; the script then exits 1

for tree_arg in "$@"; do
    # Resolve symlinks once, so every tool packs the directory itself and not a
    # symlink that happens to name it.
    tree=$(realpath -- "$tree_arg")
    tname=$(basename -- "$tree_arg")

    for codec in $CODECS; do
        declare -A OK=() SKIP=() WALLS=() CPUS=() RSSES=() SIZES=() FSCK=()
        active=()

        # Warm-up: one untimed build per row. A row failing here is reported and
        # dropped for this tree/codec.
        for row in "${ROWS[@]}"; do
            if reason=$(row_unsupported "$row"); then
                SKIP[$row]="skipped: $reason"
                continue
            fi
            img="$WORK/$row.img"
            log "$tname $codec $row: first build"
            if run_build "$row" "$codec" "$img" "$tree"; then
                active+=("$row")
                OK[$row]=1
                if [[ $WARMUP == 0 ]]; then
                    # No warm-up: this build is timed run 1.
                    WALLS[$row]+="$R_WALL "
                    CPUS[$row]+="$(awk -v u="$R_USER" -v s="$R_SYS" 'BEGIN { printf "%.2f", u + s }') "
                    RSSES[$row]+="$R_RSS "
                    SIZES[$row]+="$R_BYTES "
                fi
            else
                SKIP[$row]="build FAILED: $(tail -n 1 "$WORK/last.err" | tr '|' '/')"
                FAILED=1
                log "$tname $codec $row: build failed: $(tail -n 3 "$WORK/last.err")"
            fi
        done

        # Timed rounds. Round r starts at row index r mod N and goes round.
        n=${#active[@]}
        for (( r = (WARMUP == 0 ? 1 : 0); r < RUNS; r++ )); do
            for (( k = 0; k < n; k++ )); do
                row=${active[$(( (r + k) % n ))]}
                [[ ${OK[$row]:-} == 1 ]] || continue
                img="$WORK/$row.img"
                if run_build "$row" "$codec" "$img" "$tree"; then
                    cpu=$(awk -v u="$R_USER" -v s="$R_SYS" 'BEGIN { printf "%.2f", u + s }')
                    WALLS[$row]+="$R_WALL "
                    CPUS[$row]+="$cpu "
                    RSSES[$row]+="$R_RSS "
                    SIZES[$row]+="$R_BYTES "
                    log "$tname $codec $row: run $((r + 1))/$RUNS: ${R_WALL}s wall, ${cpu}s CPU, ${R_RSS} KiB, $R_BYTES bytes"
                    if [[ -n $RAW ]]; then
                        printf '%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n' "$tree" "$codec" "$row" \
                            $((r + 1)) "$R_BYTES" "$R_WALL" "$R_USER" "$R_SYS" "$R_RSS" >>"$RAW"
                    fi
                else
                    OK[$row]=0
                    SKIP[$row]="build FAILED in run $((r + 1)): $(tail -n 1 "$WORK/last.err" | tr '|' '/')"
                    FAILED=1
                    log "$tname $codec $row: build failed: $(tail -n 3 "$WORK/last.err")"
                fi
            done
        done

        # Check the last image of each EROFS row (untimed).
        for row in "${active[@]}"; do
            [[ ${OK[$row]:-} == 1 ]] || continue
            if [[ $row == sq ]]; then
                FSCK[$row]="n/a"
                continue
            fi
            log "$tname $codec $row: fsck.erofs"
            # FSCK_ARGS is split on purpose (it may hold several options).
            # shellcheck disable=SC2086
            if "$NEXT/fsck.erofs" $FSCK_ARGS "$WORK/$row.img" >"$WORK/fsck.out" 2>&1; then
                FSCK[$row]="ok"
            else
                rc=$?
                FSCK[$row]="**FAIL (exit $rc)**"
                FAILED=1
                NOTES+=("fsck.erofs failed on $tname/$codec/$row (exit $rc): $(tail -n 2 "$WORK/fsck.out" | tr '\n|' ' /')")
            fi
        done

        # Reference size, wall and CPU for the ratio columns.
        sq_bytes="" sq_wall="" sq_cpu=""
        if [[ ${OK[sq]:-} == 1 ]]; then
            read -r -a s <<<"${SIZES[sq]}"
            sq_bytes=${s[-1]}
            read -r -a w <<<"${WALLS[sq]}"
            read -r -a c <<<"${CPUS[sq]}"
            sq_wall=$(printf '%s\n' "${w[@]}" | median)
            sq_cpu=$(printf '%s\n' "${c[@]}" | median)
        fi

        for row in "${ROWS[@]}"; do
            tool=$(row_tool "$row")
            opts=$(row_opts "$row")
            if [[ ${OK[$row]:-} != 1 ]]; then
                TABLE_ROWS+=("| $tname | $codec | $tool | \`$opts\` | ${SKIP[$row]:-} | | | | | | | | |")
                continue
            fi
            read -r -a w <<<"${WALLS[$row]}"
            read -r -a c <<<"${CPUS[$row]}"
            read -r -a m <<<"${RSSES[$row]}"
            read -r -a s <<<"${SIZES[$row]}"
            bytes=${s[-1]}
            mark=""
            [[ $(printf '%s\n' "${s[@]}" | sort -u | wc -l) == 1 ]] || mark="*"
            mw=$(printf '%s\n' "${w[@]}" | median)
            mc=$(printf '%s\n' "${c[@]}" | median)
            cores=$(awk -v c="$mc" -v w="$mw" 'BEGIN { if (w > 0) printf "%.2f", c / w; else print "nan" }')
            ratio="—" wratio="—" cratio="—"
            if [[ -n $sq_bytes ]]; then
                ratio=$(awk -v a="$bytes" -v b="$sq_bytes" 'BEGIN { printf "%.3f", a / b }')
                wratio=$(awk -v a="$mw" -v b="$sq_wall" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }')
                cratio=$(awk -v a="$mc" -v b="$sq_cpu" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }')
            fi
            TABLE_ROWS+=("| $tname | $codec | $tool | \`$opts\` | $bytes$mark | $ratio | $(printf '%.3f' "$mw") | $(printf '%.2f' "$mc") | $wratio | $cratio | $cores | $(maxof "${m[@]}") | ${FSCK[$row]} |")
        done

        rm -f -- "$WORK"/*.img
        unset OK SKIP WALLS CPUS RSSES SIZES FSCK
    done
done

echo "$TABLE_HEAD"
printf '%s\n' "${TABLE_ROWS[@]}"
echo
echo "Codecs: lz4hc = mkfs -zlz4hc,12 / mksquashfs -comp lz4 -Xhc; zstd = -zzstd,15 /"
echo "-comp zstd -Xcompression-level 15; lzma = -zlzma,6 / -comp xz. mksquashfs always"
echo "runs with -quiet -no-progress -noappend -processors 2; mkfs.erofs and ferrofs with"
echo "--quiet and their default number of worker threads."
echo "\"*\" after the image size: the size differed between runs (last run shown)."
if (( ${#NOTES[@]} )); then
    echo
    printf -- '- %s\n' "${NOTES[@]}"
fi

# Exit status: 0 if every build and every fsck succeeded (skipped rows do not
# count as failures), 1 otherwise -- the table above is printed either way.
exit "$FAILED"
