# update-setup.sh -- sourced by base-bench.sh and incremental-bench.sh
# (with their arguments): checks for the one argument TREE, makes the
# scratch directory WORK (removed at exit) with OLD (a copy of TREE) and
# NEW (OLD changed by change-set.py: CHANGED files rewritten, ADDED
# added), and defines `log`, `median` and `timed`.

TMPROOT=${TMPROOT:-/tmp}
CHANGED=${CHANGED:-76}
ADDED=${ADDED:-20}
TIME=/usr/bin/time
(( $# == 1 )) || { echo "usage: $0 TREE" >&2; exit 1; }
TREE=$1
WORK=$(mktemp -d "$TMPROOT/$(basename "$0" .sh).XXXXXX")
trap 'rm -rf "$WORK"' EXIT
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
# timed LOG CMD... -> runs CMD, appends "wall cpu" to LOG
timed() {
    local logf=$1; shift
    local t0=$EPOCHREALTIME
    $TIME -f "%U %S" -o "$WORK/time" "$@" > /dev/null
    local t1=$EPOCHREALTIME
    read -r u s < "$WORK/time"
    echo "$(echo "$t1 - $t0" | bc -l) $(echo "$u + $s" | bc -l)" >> "$logf"
}
# shellcheck source=bench/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

log "copying $TREE"
cp -a "$TREE" "$WORK/old"
cp -a "$WORK/old" "$WORK/new"
python3 "$(dirname "${BASH_SOURCE[0]}")/change-set.py" "$WORK/new" "$CHANGED" "$ADDED"
