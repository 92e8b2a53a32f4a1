#!/usr/bin/env bash
# The papers' read experiments on this machine: builds EROFS and SquashFS
# images of a corpus with ferrofs mkfs, mkfs.erofs and mksquashfs, mounts
# them (loop, kernel), measures builds and reads, and writes CSV, a Markdown
# report and plots (bench/README.md). Runs the ferrofs_bench package beside
# this script; the ferrofs binary is $FERROFS, else target/release/ferrofs
# of this checkout. `bash bench/ferrofs-bench.sh --help` lists the options.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
exec python3 -m ferrofs_bench "$@"
