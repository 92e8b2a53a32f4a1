#!/usr/bin/env bash
# Runs containerd's own EROFS snapshotter test package (TestErofs,
# TestErofsDifferWithTarIndexMode, the fsmeta merges and the rest;
# containerd v2.2.9 from the Go module proxy, or the VERSION given) with
# ferrofs as its mkfs.erofs, and again with upstream's mkfs.erofs 1.9.4,
# and compares the two lists of results. Needs root, Go and the erofs kernel
# module; about 3 minutes the first time (download and build), seconds
# after. Not part of CI (network and build time); the containerd test in
# crates/cli/tests/containerd/main.rs is.
#
#   bash scripts/containerd-go-tests.sh [VERSION]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:-v2.2.9}
work=${WORK:-$root/target/containerd-go}
export GOPATH=$work/gopath GOFLAGS=-mod=mod
mkdir -p "$work"
dir=$(go mod download -json "github.com/containerd/containerd/v2@$version" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
src=$work/src-$version
if [[ ! -d $src ]]; then
  cp -r "$dir" "$src"
  chmod -R u+w "$src"
fi
test_bin=$work/erofs-$version.test
[[ -x $test_bin ]] || (cd "$src" && go test -c -o "$test_bin" ./plugins/snapshots/erofs/)
cargo build --profile ci -q -p ferrofs-cli --manifest-path "$root/Cargo.toml"
next=$(bash "$root/../shared/tools/upstream-tools" --next)
status=0
for who in ferrofs upstream; do
  bin=$work/bin-$who
  mkdir -p "$bin"
  case $who in
    ferrofs) ln -sf "$root/target/ci/ferrofs" "$bin/mkfs.erofs" ;;
    upstream) ln -sf "$next/mkfs.erofs" "$bin/mkfs.erofs" ;;
  esac
  echo "== containerd $version erofs tests, mkfs.erofs: $who"
  (cd "$src/plugins/snapshots/erofs" &&
    PATH=$bin:$PATH "$test_bin" -test.root -test.v 2>&1 |
    grep -E '^(--- |PASS$|FAIL|ok)' | tee "$work/results-$who.txt") || status=1
done
if diff <(sed 's/ (.*//' "$work/results-ferrofs.txt") <(sed 's/ (.*//' "$work/results-upstream.txt"); then
  echo "the same results with ferrofs and with mkfs.erofs 1.9.4"
else
  echo "results differ (above: ferrofs <, upstream >)"
  status=1
fi
exit "$status"
