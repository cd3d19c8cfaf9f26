#!/usr/bin/env bash
# Issue 12's Work Queue example: one 2-core `workqueue worker` on this same
# 2-core machine, named as the cluster (RIGHTSIZE_CLUSTER="wq port=P hosts=1
# cores=2"), and a CPU-bound function (bench/csrc/busy.c, BUSY_MS of CPU a
# cell). With -T wq the old code predicted the cluster 4× faster and took
# longer than multicore. Here: `allpairs --local`, then auto three times in
# a row with one run history (the first decides from the models alone, the
# next from the corrections the earlier runs call for), then -T wq. Prints
# each run's choice, prediction and wall time. Environment: N (40), BUSY_MS
# (10).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-40}
export BUSY_MS=${BUSY_MS:-10}
out=$PWD/bench/out/placement-wq
rm -rf "$out"
mkdir -p "$out/bin" "$out/A"
make -s build
gcc -O2 -o "$out/bin/busy" bench/csrc/busy.c
for i in $(seq 1 "$N"); do head -c 2000 /dev/urandom > "$out/A/item$i"; done
port=$((20000 + RANDOM % 20000))
export XDG_CACHE_HOME=$out/cache XDG_CONFIG_HOME=$out/config
bin/workqueue worker --cores 2 -t 600 -q 127.0.0.1 "$port" &
worker=$!
trap 'kill $worker 2>/dev/null' EXIT
export RIGHTSIZE_CLUSTER="wq port=$port hosts=1 cores=2"
run() {
  local label=$1; shift
  local start end
  start=$(date +%s.%N)
  bin/allpairs -q -o "$out/out.txt" "$@" "$out/bin/busy" "$out/A" "$out/A" 2> "$out/$label.err"
  end=$(date +%s.%N)
  printf '%-10s %6.2f s  %s\n' "$label" "$(echo "$end - $start" | bc)" \
    "$(grep -E 'placement:|: predicted .* took' "$out/$label.err" | sed 's/^allpairs: //' | tr '\n' ' ')"
}
run local --local -v
run auto-1 -v
run auto-2 -v
run auto-3 -v
run forced -v -T wq
