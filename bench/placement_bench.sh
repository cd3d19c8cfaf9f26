#!/usr/bin/env bash
# Automatic placement against the forced modes (issue 12): All-Pairs and
# Wavefront problems of several sizes and function costs, each run by
# `allpairs`/`wavefront` with no flag (auto), on this machine only, on a
# cluster (-T) and hybrid (-T --hybrid); predicted against measured seconds
# for every run, and auto's time against the fastest forced mode's. The
# cluster is the local batch driver standing for one with 16 slots and a
# 1 s dispatch (RIGHTSIZE_CLUSTER, bench/placement/main.go); the function
# sleeps (bench/csrc/nap.c). Draws bench/placement.png.
#
# WQ_WORKERS=N makes the cluster Work Queue instead: N one-core `workqueue
# worker`s on this machine, connecting to each run's master on one port
# (RIGHTSIZE_CLUSTER="wq port=P hosts=N cores=1"), and back within half a
# second of a run's end for the next. A worker's tasks nap as its own
# NAP_MS says, so the problems run in two passes, of 50 ms and of 200 ms,
# each with workers of its own (two tables); PNG (default
# bench/placement.png) names the plot, one per pass (-50, -200).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/bench/out/placement
mkdir -p "$out/bin"
make -s build
gcc -O2 -o "$out/bin/nap" bench/csrc/nap.c
png=${PNG:-bench/placement.png}
if [ -z "${WQ_WORKERS:-}" ]; then
  go run ./bench/placement -bin bin -nap "$out/bin/nap" -dir "$out" -png "$png" "$@"
  exit
fi
go build -o "$out/bin/placement" ./bench/placement
workers=()
trap 'kill "${workers[@]}" 2>/dev/null || true' EXIT
for ms in 50 200; do
  port=$((20000 + RANDOM % 20000))
  workers=()
  for i in $(seq 1 "$WQ_WORKERS"); do
    mkdir -p "$out/worker$i"
    NAP_MS=$ms bin/workqueue worker --cores 1 -t 3600 -i 0.1 -b 0.5 -s "$out/worker$i" -q 127.0.0.1 "$port" &
    workers+=($!)
  done
  "$out/bin/placement" -bin bin -nap "$out/bin/nap" -dir "$out" -png "${png%.png}-$ms.png" -ms "$ms" \
    -cluster "wq port=$port hosts=$WQ_WORKERS cores=1" "$@"
  kill "${workers[@]}"
  wait "${workers[@]}" 2>/dev/null || true
done
