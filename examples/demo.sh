#!/usr/bin/env bash
# Runs every example's demo (examples/*/demo.sh) on this machine. Each writes
# its generated data and results under examples/out/ and prints a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/bin:$PATH"
mkdir -p examples/out
for demo in examples/*/demo.sh; do
  [ -e "$demo" ] || continue
  echo "== $demo"
  "$demo"
done
