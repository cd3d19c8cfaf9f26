#!/usr/bin/env bash
# Distributed All-Pairs against the multicore master, side by side in one run
# (issue 6): an N×N All-Pairs (default 300×300) with a program function that
# spends BUSY_MS (default 10) ms of CPU per cell,
#   1. multicore: `allpairs -c 2` on this machine's two cores;
#   2. distributed: `allpairs -T wq` (this same program sizing the jobs with
#      its models and shipping them) with two local one-core
#      `workqueue worker`s, timed from the master's start to its exit,
#      benchmark of the function and workers' connection included.
# ROUNDS rounds (default 3), the two sides taking turns to go first; the
# outputs are compared line for line every round. Prints each side's
# cells/s, the medians and their ratio, and the load average around the run
# (the machine is shared).
#
#   bench/distributed_bench.sh            N=100 ROUNDS=1 for a quick look
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-300}
ROUNDS=${ROUNDS:-3}
export BUSY_MS=${BUSY_MS:-10}
out=bench/out/distributed
rm -rf "$out"
mkdir -p "$out/bin" "$out/items" "$out/workers"
go build -o bin/ ./cmd/allpairs ./cmd/workqueue
gcc -O2 -o "$out/bin/busy" bench/csrc/busy.c
for i in $(seq -w 1 "$N"); do head -c 1024 /dev/urandom > "$out/items/item$i"; done

workers=()
cleanup() { for p in "${workers[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
calc() { awk "BEGIN {print $*}"; }
cells=$((N * N))

multicore() {
  local t0=$EPOCHREALTIME
  bin/allpairs -q -c 2 "$out/bin/busy" "$out/items" "$out/items" -o "$out/mc.txt"
  calc "$EPOCHREALTIME - $t0"
}

distributed() {
  rm -f "$out/dist.txt"* "$out/port"
  local t0=$EPOCHREALTIME
  bin/allpairs -T wq -p 0 -Z "$out/port" -q -v "$out/bin/busy" "$out/items" "$out/items" \
    -o "$out/dist.txt" 2> "$out/dist.log" &
  local master=$!
  while [ ! -s "$out/port" ]; do sleep 0.01; done
  workers=()
  for w in 1 2; do
    bin/workqueue worker --cores 1 --single-shot -q -s "$out/workers" localhost "$(cat "$out/port")" &
    workers+=($!)
  done
  wait "$master"
  local t
  t=$(calc "$EPOCHREALTIME - $t0")
  wait "${workers[@]}" 2>/dev/null || true
  workers=()
  echo "$t"
}

echo "distributed bench: ${N}×${N} All-Pairs, ${BUSY_MS} ms of CPU per cell, $ROUNDS rounds; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
mc_rates=() dist_rates=()
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then
    tm=$(multicore); td=$(distributed)
  else
    td=$(distributed); tm=$(multicore)
  fi
  if ! cmp -s <(sort "$out/mc.txt") <(sort "$out/dist.txt"); then
    echo "round $r: the distributed output differs from the multicore output" >&2
    exit 1
  fi
  rm=$(calc "$cells / $tm") rd=$(calc "$cells / $td")
  mc_rates+=("$rm") dist_rates+=("$rd")
  printf 'round %d: multicore %.1f s (%.1f cells/s), distributed %.1f s (%.1f cells/s), ratio %.3f; load %s\n' \
    "$r" "$tm" "$rm" "$td" "$rd" "$(calc "$rd / $rm")" "$(cut -d' ' -f1-3 /proc/loadavg)"
done
grep -E 'jobs of|jobs \(mean' "$out/dist.log" | sed 's/^/  last distributed run: /'
mc=$(printf '%s\n' "${mc_rates[@]}" | median)
dist=$(printf '%s\n' "${dist_rates[@]}" | median)
printf 'medians: multicore %.1f cells/s, distributed %.1f cells/s: distributed/multicore = %.3f (target >= 0.85)\n' \
  "$mc" "$dist" "$(calc "$dist / $mc")"
