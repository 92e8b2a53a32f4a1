#!/usr/bin/env bash
# base-bench.sh -- full build vs `mkfs --base` rebuild on a real tree with
# about 1 % of its files changed: time (wall, CPU) and image size.
#
# Usage: base-bench.sh TREE
#
# Environment (all optional):
#   RUNS     timed builds per row (full and rebuild alternate)   [default: 3]
#   FERROFS  ferrofs binary               [default: target/release/ferrofs]
#   TMPROOT  where the scratch directory is created              [default: /tmp]
#   CHANGED  files rewritten                                     [default: 76]
#   ADDED    files added                                         [default: 20]
#   OPTSETS  ';'-separated option sets [default: "-zlz4hc,12 -C65536;-zlz4hc,12 -C65536 -Efragments,dedupe"]
#
# What it does: copies TREE to a scratch dir (OLD), builds OLD.img from it
# per option set; copies OLD to NEW and changes it: CHANGED regular files
# (every Nth in path order; half get bytes overwritten in the middle, same
# size, same mtime; half get a line appended) and ADDED new files (copies
# of other files with a line in front, in usr/local/new/). Then RUNS rounds
# of: full build of NEW, --base=OLD.img rebuild of NEW (order alternating).
# The two images should be byte-identical (a warning says when not). Prints a Markdown table: medians of wall
# and CPU (user+sys) seconds, cores (CPU/wall), image bytes, and the
# rebuild's reuse summary.

set -euo pipefail
RUNS=${RUNS:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
FERROFS=${FERROFS:-$here/target/release/ferrofs}
OPTSETS=${OPTSETS:-"-zlz4hc,12 -C65536;-zlz4hc,12 -C65536 -Efragments,dedupe"}
source "$here/bench/update-setup.sh" "$@"
run() { # OUT LOG ARGS... -> appends "wall cpu" to LOG
    local out=$1 logf=$2; shift 2
    timed "$logf" "$FERROFS" mkfs --quiet "$@" "$out" "$WORK/new"
}

echo "| options | build | wall s | CPU s | cores | image bytes | reused |"
echo "|---|---|---:|---:|---:|---:|---|"
IFS=';' read -ra sets <<< "$OPTSETS"
for set in "${sets[@]}"; do
    read -ra opts <<< "$set"
    log "OLD image: $set"
    "$FERROFS" mkfs --quiet "${opts[@]}" "$WORK/old.img" "$WORK/old"
    : > "$WORK/full.log"; : > "$WORK/base.log"
    for r in $(seq 1 "$RUNS"); do
        if (( r % 2 )); then
            run "$WORK/full.img" "$WORK/full.log" "${opts[@]}"
            run "$WORK/base.img" "$WORK/base.log" "${opts[@]}" --base="$WORK/old.img"
        else
            run "$WORK/base.img" "$WORK/base.log" "${opts[@]}" --base="$WORK/old.img"
            run "$WORK/full.img" "$WORK/full.log" "${opts[@]}"
        fi
        log "round $r: full $(tail -1 "$WORK/full.log"), base $(tail -1 "$WORK/base.log")"
    done
    cmp -s "$WORK/full.img" "$WORK/base.img" || log "WARNING: rebuild and full build differ"
    summary=$("$FERROFS" mkfs --json "${opts[@]}" --base="$WORK/old.img" "$WORK/check.img" "$WORK/new" \
        | python3 -c 'import json,sys; b=json.load(sys.stdin)["base"]; print("%d files / %d MiB reused, %d files / %d MiB compressed, %d changed" % (b["reused_files"], b["reused_bytes"]>>20, b["compressed_files"], b["compressed_bytes"]>>20, b["changed_files"]))')
    for row in full base; do
        w=$(cut -d' ' -f1 "$WORK/$row.log" | median)
        c=$(cut -d' ' -f2 "$WORK/$row.log" | median)
        printf '| %s | %s | %.2f | %.2f | %.2f | %d | %s |\n' "$set" "$row" "$w" "$c" \
            "$(echo "$c / $w" | bc -l)" "$(stat -c %s "$WORK/$row.img")" \
            "$([[ $row == base ]] && echo "$summary" || echo "")"
    done
done
