#!/usr/bin/env bash
# All-Pairs benchmarks (issue: All-Pairs on this machine): seed 000 Fig. 3.4
# and the per-cell overhead of program functions, each against its floor in
# the same run. Needs gcc and about 1.1 GB of disk under bench/out/.
#
#   bench/allpairs_bench.sh [fig34,overhead] [-kinds builtin,lib,prog]
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out/allpairs
mkdir -p "$out/bin"
go build -o bin/ ./cmd/allpairs
go build -o "$out/bin/allpairs-bench" ./bench/allpairs
gcc -O2 -shared -fPIC -o "$out/bin/bytediff.so" funcs/testdata/bytediff.c
gcc -O2 -o "$out/bin/bytediff" multicore/testdata/bytediff_prog.c
gcc -O2 -o "$out/bin/noop" bench/csrc/noop.c
gcc -O2 -o "$out/bin/forkloop" bench/csrc/forkloop.c
"$out/bin/allpairs-bench" -dir "$out" -run "${1:-fig34,overhead}" "${@:2}" \
  -lib "$out/bin/bytediff.so" -prog "$out/bin/bytediff" \
  -noop "$out/bin/noop" -forkloop "$out/bin/forkloop" -allpairs bin/allpairs
