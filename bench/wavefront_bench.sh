#!/usr/bin/env bash
# Wavefront benchmarks (figures published in bench/RESULTS.md, "Wavefront"):
#   1. the wavefront command with builtin:sum on 1000×1000, end to end
#      (boundary files in, every cell appended to R.matrix on disk);
#   2. the engine's Go benchmarks in multicore/, each beside its anchor in
#      the same run: sum and a cheap bounded function (anchor: a plain
#      sequential loop), an external C program on 200×200 (anchor: a bare
#      fork/exec loop on two goroutines), and a 5 ms function on 300×300 on
#      two cores against seed 000's model Σ ⌈s_k/P⌉·τ (about 4 minutes).
# WAVEFRONT_BENCH_SCALE=0.2 shrinks every side for a quick look;
# WAVEFRONT_BENCH=REGEXP picks among the Go benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/bin:$PATH"
command -v wavefront >/dev/null || go build -o bin/ ./cmd/wavefront
out=bench/out/wavefront
rm -rf "$out" && mkdir -p "$out"
scale=${WAVEFRONT_BENCH_SCALE:-1}
n=$(awk -v s="$scale" 'BEGIN { n = int(1000 * s); print (n < 2 ? 2 : n) }')

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
mkdir -p "$out/R"
for i in $(seq 0 "$n"); do echo "$i" >"$out/R/R.$i.0"; echo "$i" >"$out/R/R.0.$i"; done
start=$(date +%s.%N)
wavefront -c 2 builtin:sum "$out/R" 2>"$out/sum.log"
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v n="$n" 'BEGIN {
  printf "wavefront -c 2 builtin:sum, %d×%d: %.1f s, %.0f cells/s\n", n, n, e - s, n * n / (e - s) }'
echo "R.matrix: $(du -h "$out/R/R.matrix" | cut -f1); $(tail -1 "$out/sum.log" | cut -c1-60)"
rm -rf "$out/R"

go test -run '^$' -bench "${WAVEFRONT_BENCH:-Wavefront}" -benchtime 1x -timeout 60m ./multicore/ | tee "$out/go-bench.txt"
awk '
  /^BenchmarkWavefront/ {
    split($1, p, "/"); key = p[1] "/" p[3]; sub(/-[0-9]+$/, "", key)
    for (i = 2; i < NF; i++) {
      if ($(i+1) == "cells/s") rate[key] = $i
      if ($(i+1) == "x-ideal") ideal[p[5]] = $i
      if ($(i+1) == "x-ideal-measured") measured[p[5]] = $i
    }
  }
  END {
    for (k in rate) if (k ~ /Cheap\/block/ && rate["BenchmarkWavefrontCheap/sequential-loop"] > 0)
      printf "%s: %.2f× the sequential loop\n", k, rate[k] / rate["BenchmarkWavefrontCheap/sequential-loop"]
    if (rate["BenchmarkWavefrontProgram/bare-fork-exec"] > 0)
      printf "program engine: %.2f× the bare fork/exec loop\n", rate["BenchmarkWavefrontProgram/engine"] / rate["BenchmarkWavefrontProgram/bare-fork-exec"]
    for (k in ideal) printf "efficiency, %s: measured = %s × ideal with the nominal τ, %s × ideal with the τ the calls took (target ≤ 1.10)\n", k, ideal[k], measured[k]
  }' "$out/go-bench.txt"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
