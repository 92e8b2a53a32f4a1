#!/usr/bin/env bash
# The kernel matrix: every image of the matrix test (crates/cli/tests/kernels)
# mounted under this machine's kernel, Linux 7.2 as a user-mode kernel and
# Linux 7.2 in a qemu VM, printed as one table (option set x kernel ->
# equal / differs / refused, with the kernel's log line for anything but
# "equal"). Sets up what it can first (upstream-tools --kernel and --next,
# scripts/kernel-vm.sh); a kernel that cannot run here is left out with
# the reason.
#
#   scripts/kernel-matrix.sh [TABLE.md]    (default: target/kernel-matrix.md)
#
# Needs root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
table=${1:-$root/target/kernel-matrix.md}
tools=$root/../shared/tools/upstream-tools
if [[ -x $tools ]]; then
  command -v patchelf >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq patchelf >/dev/null || true
  "$tools" --next >/dev/null || echo "kernel-matrix: no mkfs.erofs 1.9.x" >&2
  "$tools" --kernel >/dev/null || echo "kernel-matrix: no user-mode Linux 7.2" >&2
fi
bash "$root/scripts/kernel-vm.sh" >/dev/null || echo "kernel-matrix: no Linux 7.2 VM" >&2
cd "$root"
FERROFS_KERNEL_MATRIX=full FERROFS_KERNEL_TABLE=$table cargo test -q --profile ci -p ferrofs-cli --test kernels -- --nocapture
echo "table: $table"
