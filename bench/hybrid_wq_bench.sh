#!/usr/bin/env bash
# A Work Queue hybrid run with no other worker: `allpairs -T wq --hybrid`,
# whose blocks all go to the master's own worker (this machine's cores),
# against `allpairs --local` on the same problem, interleaved, ROUNDS times.
# What it measures is what a hybrid run costs when the cluster brings
# nothing. OLD=path/to/allpairs adds another build's hybrid run (e.g. one
# whose own worker ran each block as a process). FUNC=builtin:bytediff
# (with SIZE bytes an item, default 2000) times a fast function instead of
# busy.c. Environment: N (40), BUSY_MS (10), ROUNDS (2), FUNC, SIZE.
# TOOL=wavefront runs `wavefront` on an N×N region instead (-T wq --hybrid
# against --local), whose cells this machine's cores take one by one.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-40}
ROUNDS=${ROUNDS:-2}
export BUSY_MS=${BUSY_MS:-10}
out=$PWD/bench/out/hybrid-wq
rm -rf "$out"
mkdir -p "$out/bin" "$out/A"
make -s build
gcc -O2 -o "$out/bin/busy" bench/csrc/busy.c
for i in $(seq 1 "$N"); do head -c "${SIZE:-2000}" /dev/urandom > "$out/A/item$i"; done
fn=${FUNC:-$out/bin/busy}
export XDG_CACHE_HOME=$out/cache XDG_CONFIG_HOME=$out/config RIGHTSIZE_CLUSTER=none
tool=${TOOL:-allpairs}
run() {
  local label=$1 prog=$2; shift 2
  local start end
  start=$(date +%s.%N)
  if [ "$tool" = wavefront ]; then
    rm -rf "$out/R" && mkdir "$out/R"
    for i in $(seq 0 "$N"); do echo "$i" > "$out/R/R.$i.0"; echo "$i" > "$out/R/R.0.$i"; done
    "$prog" -q "$@" "$fn" "$out/R" 2> "$out/$label.err"
  else
    "$prog" -q -o "$out/out.txt" "$@" "$fn" "$out/A" "$out/A" 2> "$out/$label.err"
  fi
  end=$(date +%s.%N)
  printf '%-12s %6.2f s  %s\n' "$label" "$(echo "$end - $start" | bc)" "$(grep -o '[0-9]* jobs.*\|[0-9]* cells computed here.*' "$out/$label.err" | head -1)"
}
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r"
  run local "bin/$tool" --local
  run hybrid "bin/$tool" -T wq -p 0 --hybrid -v
  if [ -n "${OLD:-}" ]; then
    run hybrid-old "$OLD" -T wq -p 0 --hybrid -v
  fi
done
