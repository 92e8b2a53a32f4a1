#!/usr/bin/env bash
# Runs the whole test suite. Kernel-oracle tests need root, loop devices,
# Debian's erofs-utils and the upstream reference tools; this script installs
# what is missing (apt-get, ../shared/tools/upstream-tools) when it can.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [[ $(id -u) == 0 ]]; then
  need=()
  for pkg in erofs-utils squashfs-tools fuse3 acl attr libarchive-tools fio time util-linux lzip xz-utils nginx-light umoci zstd; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  if ((${#need[@]})); then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi
# The benchmark runner's tests need pytest and matplotlib.
python3 -c 'import pytest, matplotlib' 2>/dev/null || python3 -m pip install -q matplotlib pytest
if [[ -z ${UPSTREAM_TOOLS_BIN:-} && -x $root/../shared/tools/upstream-tools ]]; then
  UPSTREAM_TOOLS_BIN=$(bash "$root/../shared/tools/upstream-tools")
  export UPSTREAM_TOOLS_BIN
fi
if [[ -z ${UPSTREAM_NEXT_BIN:-} && -x $root/../shared/tools/upstream-tools ]]; then
  UPSTREAM_NEXT_BIN=$(bash "$root/../shared/tools/upstream-tools" --next)
  export UPSTREAM_NEXT_BIN
fi
cargo test --workspace --profile ci "$@"
python3 -m pytest -q bench/tests
FERROFS=$root/target/ci/ferrofs bash bench/e2e.sh
