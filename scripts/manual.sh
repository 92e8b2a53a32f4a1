#!/usr/bin/env bash
# Regenerates the man pages (docs/man/) and shell completions
# (docs/completions/) from the command's definitions. A test
# (crates/cli/tests/read/manual.rs) fails when they are not current.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --profile ci -q -p ferrofs-cli
bin=target/ci/ferrofs
rm -rf docs/man && "$bin" manpages docs/man
mkdir -p docs/completions
"$bin" completions bash >docs/completions/ferrofs.bash
"$bin" completions zsh >docs/completions/_ferrofs
"$bin" completions fish >docs/completions/ferrofs.fish
echo "man pages in docs/man, completions in docs/completions"
