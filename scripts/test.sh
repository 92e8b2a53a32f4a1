#!/usr/bin/env bash
# Runs the whole test suite. Kernel-oracle tests need root, loop devices,
# Debian's erofs-utils and the upstream reference tools; this script installs
# what is missing when it can, and says what it installs:
#   - as root on Debian: the oracle's system packages (apt-get);
#   - pytest and matplotlib for the benchmark runner's tests: Debian's
#     python3-pytest and python3-matplotlib as root, else a private venv in
#     target/pyenv (no system-wide pip, which Debian refuses: PEP 668);
#   - erofs-utils 1.8.6 and 1.9.4 through ../shared/tools/upstream-tools,
#     and (as root) containerd 2.1, ctr, runc and umoci for the containerd
#     test through its --containers, and SeaweedFS's weed for the S3 tests
#     through its --s3, the CNCF registry (--registry) and containerd 2.4
#     (--containerd-next) for the registry tests (each built from the Go
#     module proxy once, minutes).
# The build is the `ci` profile, the one ./scripts/demo.sh builds, so a
# test run after the demo only compiles the tests themselves.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
say() { echo "test.sh: $*" >&2; }
is_root=0
[[ $(id -u) == 0 ]] && command -v apt-get >/dev/null && is_root=1
if ((is_root)); then
  need=()
  for pkg in erofs-utils squashfs-tools fuse3 acl attr libarchive-tools fio time util-linux lzip xz-utils nginx-light umoci zstd strace busybox-static skopeo openssl python3-venv patchelf qemu-system-x86 cpio dmsetup; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  if ((${#need[@]})); then
    say "installing Debian packages for the kernel-oracle tests: ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi

# A python3 with pytest and matplotlib: the one on PATH if it has them,
# else Debian's with its packages (root), else a private venv.
python=python3
if ! "$python" -c 'import pytest, matplotlib' 2>/dev/null; then
  if ((is_root)) && [[ -x /usr/bin/python3 ]]; then
    python=/usr/bin/python3
    if ! "$python" -c 'import pytest, matplotlib' 2>/dev/null; then
      say "installing Debian packages for the benchmark runner's tests: python3-pytest python3-matplotlib"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pytest python3-matplotlib >/dev/null
    fi
  else
    venv=$root/target/pyenv
    if ! "$venv/bin/python" -c 'import pytest, matplotlib' 2>/dev/null; then
      say "installing pytest and matplotlib into a private venv: $venv"
      python3 -m venv "$venv" || {
        say "cannot make a venv: install python3-venv (Debian), or python3-pytest and python3-matplotlib"
        exit 1
      }
      "$venv/bin/python" -m pip install -q pytest matplotlib
    fi
    python=$venv/bin/python
  fi
fi

if [[ -z ${UPSTREAM_TOOLS_BIN:-} && -x $root/../shared/tools/upstream-tools ]]; then
  say "installing the reference tools (erofs-utils 1.8.6, squashfs-tools 4.6.1) with ../shared/tools/upstream-tools"
  UPSTREAM_TOOLS_BIN=$(bash "$root/../shared/tools/upstream-tools")
  export UPSTREAM_TOOLS_BIN
fi
if [[ -z ${UPSTREAM_NEXT_BIN:-} && -x $root/../shared/tools/upstream-tools ]]; then
  say "installing the reference tools (erofs-utils 1.9.4, squashfs-tools 4.7.5, composefs) with ../shared/tools/upstream-tools --next"
  UPSTREAM_NEXT_BIN=$(bash "$root/../shared/tools/upstream-tools" --next)
  export UPSTREAM_NEXT_BIN
fi
if ((is_root)) && [[ -z ${UPSTREAM_CONTAINERS_BIN:-} && -x $root/../shared/tools/upstream-tools ]]; then
  say "installing the containers tools (containerd 2.1, ctr, runc, umoci) with ../shared/tools/upstream-tools --containers"
  UPSTREAM_CONTAINERS_BIN=$(bash "$root/../shared/tools/upstream-tools" --containers)
  export UPSTREAM_CONTAINERS_BIN
fi
if [[ -z ${UPSTREAM_S3_BIN:-} && -x $root/../shared/tools/upstream-tools ]] && ((is_root)); then
  say "building SeaweedFS's weed (S3 tests) with ../shared/tools/upstream-tools --s3"
  UPSTREAM_S3_BIN=$(bash "$root/../shared/tools/upstream-tools" --s3)
  export UPSTREAM_S3_BIN
fi
if [[ -z ${UPSTREAM_REGISTRY_BIN:-} && -x $root/../shared/tools/upstream-tools ]] && ((is_root)); then
  say "building the CNCF registry (registry tests) with ../shared/tools/upstream-tools --registry"
  UPSTREAM_REGISTRY_BIN=$(bash "$root/../shared/tools/upstream-tools" --registry | tail -n 1)
  export UPSTREAM_REGISTRY_BIN
fi
if [[ -z ${UPSTREAM_CONTAINERD_NEXT_BIN:-} && -x $root/../shared/tools/upstream-tools ]] && ((is_root)); then
  say "building containerd 2.4 (EROFS-native layers) with ../shared/tools/upstream-tools --containerd-next"
  UPSTREAM_CONTAINERD_NEXT_BIN=$(bash "$root/../shared/tools/upstream-tools" --containerd-next | tail -n 1)
  export UPSTREAM_CONTAINERD_NEXT_BIN
fi
say "building and running the tests (cargo test --workspace --profile ci)"
cargo test --workspace --profile ci "$@"
# The Python package (python/, PyO3 and maturin, outside the workspace):
# its wheel built into target/wheels, installed into a private venv, and
# its tests run (they compare with the kernel's mount as root).
say "building the Python package's wheel and running its tests (python/)"
pyenv=$root/target/pyenv-bindings
if [[ ! -x $pyenv/bin/maturin ]]; then
  python3 -m venv "$pyenv" || {
    say "cannot make a venv: install python3-venv (Debian)"
    exit 1
  }
  "$pyenv/bin/pip" install -q maturin pytest
fi
rm -rf "$root/target/wheels"
"$pyenv/bin/maturin" build -q --release -m "$root/python/Cargo.toml" -o "$root/target/wheels"
"$pyenv/bin/pip" install -q --force-reinstall "$root"/target/wheels/ferrofs-*.whl
(cd "$root/target" && "$pyenv/bin/pytest" -q "$root/python/tests")
# The benchmark runner and its end-to-end check run `python3`: the chosen one.
[[ $python == */* ]] && PATH=$(dirname "$python"):$PATH
say "the benchmark runner's tests ($(command -v python3) -m pytest bench/tests)"
python3 -m pytest -q bench/tests
say "end-to-end: bench/e2e.sh"
FERROFS=$root/target/ci/ferrofs bash bench/e2e.sh
