#!/usr/bin/env bash
# Runs every benchmark script under bench/ (files named *_bench.sh), one after
# the other so that they do not compete for this machine's cores. Each script
# prints its figures as ratios against the anchors it names; the published
# numbers, with the commands that produced them, are in bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/bin:$PATH"
for script in bench/*_bench.sh; do
  [ -e "$script" ] || continue
  echo "== $script"
  "$script"
done
