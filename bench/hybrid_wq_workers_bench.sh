#!/usr/bin/env bash
# A hybrid Wavefront on Work Queue and a worker on this machine's own
# cores: `wavefront -T wq -p 0 --hybrid` on an N×N region of busy.c
# (BUSY_MS of CPU a cell) with no worker, with a one-core `workqueue
# worker` on 127.0.0.1 started as soon as the master listens, and with one
# started LATE seconds after the run, against `wavefront --local` (the
# anchor), interleaved, ROUNDS times. OLD=path/to/wavefront adds the
# worker runs of another build (e.g. one whose cells here did not give way
# to the worker, and whose late worker got the blocks cut for none).
# Placement's cache is fresh for every run, so that no run learns from
# another. Environment: N (20), BUSY_MS (50), ROUNDS (2), LATE (1), OLD.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20}
ROUNDS=${ROUNDS:-2}
LATE=${LATE:-1}
export BUSY_MS=${BUSY_MS:-50}
out=$PWD/bench/out/hybrid-wq-workers
rm -rf "$out"
mkdir -p "$out/bin"
make -s build
gcc -O2 -o "$out/bin/busy" bench/csrc/busy.c
export RIGHTSIZE_CLUSTER=none
# run LABEL PROG WORKER ARGS...: WORKER is none, start or late. It prints
# the wall time, the CPU time (user + system) of every process of the run
# (the tool's, the worker's and their children's, which bash's times
# counts once they are reaped), the hybrid model's last prediction (the
# blocks cut again for the workers that joined, if they were) and what
# the run said of its blocks.
run() {
  local label=$1 prog=$2 when=$3; shift 3
  rm -rf "$out/R" "$out/port" "$out/end" "$out/times" "$out/cache" "$out/config" "$out/w"
  mkdir -p "$out/R" "$out/w"
  for i in $(seq 0 "$N"); do echo "$i" > "$out/R/R.$i.0"; echo "$i" > "$out/R/R.0.$i"; done
  local start end cpu
  start=$(date +%s.%N)
  cpu=$(
    XDG_CACHE_HOME=$out/cache XDG_CONFIG_HOME=$out/config "$prog" "$@" "$out/bin/busy" "$out/R" 2> "$out/$label.err" > /dev/null &
    pid=$!
    worker=
    if [ "$when" != none ]; then
      # Not forever: a run that fails before it listens writes no port.
      until [ -s "$out/port" ] || ! kill -0 "$pid" 2> /dev/null; do sleep 0.01; done
      [ "$when" = late ] && sleep "$LATE"
    fi
    if [ "$when" != none ] && [ -s "$out/port" ]; then
      bin/workqueue worker --cores 1 -t 120 -i 0.05 -b 0.2 -q -s "$out/w" 127.0.0.1 "$(cat "$out/port")" 2> /dev/null &
      worker=$!
    fi
    wait "$pid"
    date +%s.%N > "$out/end"
    if [ -n "$worker" ]; then
      kill "$worker"
      wait "$worker" || true
    fi
    # The children's user and system time, "XmY.YYYs XmY.YYYs" on the
    # second line; times itself in this shell (in a pipe, it would be a
    # new process's, with no children).
    times > "$out/times"
    tail -1 "$out/times" | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.2f", u[1]*60 + u[2] + s[1]*60 + s[2] }'
  )
  end=$(cat "$out/end")
  printf '%-14s %6.2f s  cpu %6.2f s  %s  %s %s\n' "$label" "$(echo "$end - $start" | bc)" "$cpu" \
    "$(grep -o 'predicted [0-9.]* s, cells on' "$out/$label.err" | tail -1 | cut -d, -f1)" \
    "$(grep -o 'blocks of [0-9]*×[0-9]*: [0-9]* cells computed here, [0-9]* blocks sent' "$out/$label.err" | head -1)" \
    "$(grep -o 'cells here take [0-9]* of [0-9]* cores' "$out/$label.err" | head -1)"
}
hybrid=(-T wq -p 0 -Z "$out/port" --hybrid -v)
echo "start $(date -u +%H:%M:%S) $(uptime)"
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r"
  run local bin/wavefront none --local
  run hybrid bin/wavefront none "${hybrid[@]}"
  run hybrid+worker bin/wavefront start "${hybrid[@]}"
  run hybrid+late bin/wavefront late "${hybrid[@]}"
  if [ -n "${OLD:-}" ]; then
    run old+worker "$OLD" start "${hybrid[@]}"
    run old+late "$OLD" late "${hybrid[@]}"
  fi
done
echo "end $(date -u +%H:%M:%S) $(uptime)"
