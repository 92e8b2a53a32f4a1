#!/usr/bin/env bash
# A short fuzzing run of every target in fuzz/ (default 60 s each): the
# hostile-input promise ("errors, never panics, bounded memory") checked by
# libFuzzer on each CI run, starting from the seed corpora (fuzz/seeds.sh).
# Needs the nightly toolchain; installs cargo-fuzz when it is missing.
# Builds without a sanitizer (ferrofs has no unsafe code) in the dev profile
# (quick to compile; overflow checks on, so arithmetic overflow panics too).
# Exit status 1 on any crash; the crashing input is left in
# fuzz/artifacts/TARGET/.
#   SECS=60 scripts/fuzz-smoke.sh [TARGET...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${SECS:-60}
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz-smoke: skipped: no nightly toolchain (rustup toolchain install nightly)" >&2
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo +nightly install --locked -q cargo-fuzz
fi
cd "$root/fuzz"
targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
sh "$root/fuzz/seeds.sh"
for t in "${targets[@]}"; do
  cargo +nightly fuzz build -s none --dev "$t" 2>&1 | tail -1
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${targets[@]}"; do
  echo "fuzz-smoke: $t for ${secs}s"
  status=0
  cargo +nightly fuzz run -s none --dev "$t" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=60 -print_final_stats=1 >"$log" 2>&1 || status=$?
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|SUMMARY)|panicked' "$log" || true
  if ((status != 0)); then
    tail -40 "$log" >&2
    echo "fuzz-smoke: $t found a crash (see fuzz/artifacts/$t/)" >&2
    exit 1
  fi
done
