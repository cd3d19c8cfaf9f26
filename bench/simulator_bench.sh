#!/usr/bin/env bash
# The simulator against reality (issue 11): three workloads run for real on
# this machine with two one-core Work Queue workers, and simulated
# (`workqueue sim`) from parameters measured here beforehand on other,
# smaller runs — never from the runs being predicted:
#
#   calibration                                   parameter
#   busy (BUSY_MS) run 20 times in a row          a rule's run time
#   allpairs -c 1 on 20×20                        an All-Pairs cell's time
#   wavefront -c 1 on 20×20                       a Wavefront cell's time
#   makeflow -T wq, 200 empty rules, 1 worker     a task's cost, master and worker
#   makeflow -T wq, 200 empty rules, 2 workers    the master's share of it
#   allpairs -T wq, 10×10 jobs of one cell        a distributed job's own cost
#   wavefront -T wq, 10×10 jobs of one cell       the same for Wavefront
#
#   workload                                      what is compared
#   makeflow -T wq, RULES rules running busy      wall time, makeflow's start to exit
#   allpairs -T wq, N×N, jobs of J×J              wall time, master's start to exit
#   wavefront -T wq, N×N, jobs of J×J             wall time, master's start to exit
#
# Prints the measured and simulated times and their ratio; the target is
# within ±15%. Environment: BUSY_MS (default 5: the cells' CPU time; rules
# take 10 times as long), N (60), J (10), RULES (200).
set -euo pipefail
cd "$(dirname "$0")/.."
export BUSY_MS=${BUSY_MS:-5}
N=${N:-60} J=${J:-10} RULES=${RULES:-200}
out=$PWD/bench/out/simulator
bin=$PWD/bin
rm -rf "$out"
mkdir -p "$out/bin" "$out/items" "$out/mf" "$out/w"
go build -o bin/ ./cmd/allpairs ./cmd/wavefront ./cmd/makeflow ./cmd/workqueue
gcc -O2 -o "$out/bin/busy" bench/csrc/busy.c
for i in $(seq -w 1 "$N"); do head -c 1024 /dev/urandom > "$out/items/item$i"; done
mkdir -p "$out/items20"
cp $(ls "$out"/items/* | head -20) "$out/items20/"

workers=()
cleanup() { for p in "${workers[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
calc() { awk "BEGIN {print $*}"; }

# with_workers K PORTFILE CMD...: runs CMD (a master writing its port to
# PORTFILE) with K one-core workers; prints its wall time in seconds.
with_workers() {
  local k=$1 portfile=$2
  shift 2
  rm -f "$portfile"
  local t0=$EPOCHREALTIME
  "$@" > "$out/master.log" 2>&1 &
  local master=$!
  while [ ! -s "$portfile" ]; do
    kill -0 "$master" 2>/dev/null || { echo "master exited before listening: $*" >&2; exit 1; }
    sleep 0.01
  done
  workers=()
  for w in $(seq 1 "$k"); do
    mkdir -p "$out/w/$w"
    "$bin/workqueue" worker --cores 1 --single-shot -q -s "$out/w/$w" localhost "$(cat "$portfile")" 2>/dev/null &
    workers+=($!)
  done
  wait "$master"
  local t
  t=$(calc "$EPOCHREALTIME - $t0")
  wait "${workers[@]}" 2>/dev/null || true
  workers=()
  echo "$t"
}

# wavefront_dir DIR SIZE: boundary files for a SIZE×SIZE Wavefront.
wavefront_dir() {
  rm -rf "$1" && mkdir -p "$1"
  for i in $(seq 0 "$2"); do echo "$i" > "$1/R.$i.0"; echo "$i" > "$1/R.0.$i"; done
}

# makeflow_dir DIR K MS: a Makeflow of K rules running busy for MS ms.
makeflow_dir() {
  rm -rf "$1" && mkdir -p "$1"
  cp "$out/bin/busy" "$out/items/item01" "$out/items/item02" "$1/"
  {
    echo "export BUSY_MS=$3"
    for i in $(seq 1 "$2"); do
      printf 'out_%d: busy item01 item02\n\t./busy item01 item02 > out_%d\n\n' "$i" "$i"
    done
  } > "$1/Makeflow"
}

echo "simulator validation: BUSY_MS=$BUSY_MS, N=$N, J=$J, RULES=$RULES; load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# --- calibration ---
rule_ms=$((BUSY_MS * 10))
t0=$EPOCHREALTIME
for _ in $(seq 20); do BUSY_MS=$rule_ms "$out/bin/busy" "$out/items/item01" "$out/items/item02" > /dev/null; done
rule_time=$(calc "($EPOCHREALTIME - $t0) / 20")

t0=$EPOCHREALTIME
bin/allpairs -q -c 1 "$out/bin/busy" "$out/items20" "$out/items20" -o "$out/cal-ap.txt"
cell_ap=$(calc "($EPOCHREALTIME - $t0) / 400")

wavefront_dir "$out/cal-wf" 20
t0=$EPOCHREALTIME
bin/wavefront -c 1 "$out/bin/busy" "$out/cal-wf" 2> /dev/null
cell_wf=$(calc "($EPOCHREALTIME - $t0) / 400")

makeflow_dir "$out/mf-empty1" 200 0
sed -i 's|\./busy item01 item02 > |: > |' "$out/mf-empty1/Makeflow"
cp -r "$out/mf-empty1" "$out/mf-empty2"
t1=$(cd "$out/mf-empty1" && with_workers 1 "$PWD/port" "$bin/makeflow" -T wq -p 0 -Z "$PWD/port" Makeflow)
t2=$(cd "$out/mf-empty2" && with_workers 2 "$PWD/port" "$bin/makeflow" -T wq -p 0 -Z "$PWD/port" Makeflow)
task1=$(calc "$t1 / 200")
task2=$(calc "$t2 / 200")
# One worker: the master's and the worker's costs in turn. Two: the master's
# alone if it is the bottleneck, else half the sum.
master_cost=$(calc "($task2 > 0.6 * $task1) ? $task2 : 0.0005")
worker_cost=$(calc "($task1 - $master_cost > 0) ? $task1 - $master_cost : 0")

mkdir -p "$out/items10"
cp $(ls "$out"/items/* | head -10) "$out/items10/"
t=$(with_workers 1 "$out/port" bin/allpairs -T wq -p 0 -Z "$out/port" -q --job-size 1 "$out/bin/busy" "$out/items10" "$out/items10" -o "$out/cal-apj.txt")
job_ap=$(calc "$t / 100 - $task1 - $cell_ap")
job_ap=$(calc "($job_ap > 0) ? $job_ap : 0")

wavefront_dir "$out/cal-wfj" 10
t=$(with_workers 1 "$out/port" bin/wavefront -T wq -p 0 -Z "$out/port" --job-size 1 "$out/bin/busy" "$out/cal-wfj")
job_wf=$(calc "$t / 100 - $task1 - $cell_wf")
job_wf=$(calc "($job_wf > 0) ? $job_wf : 0")

printf 'calibration: rule %.4f s, All-Pairs cell %.4f s, Wavefront cell %.4f s, task %.4f s (1 worker) %.4f s (2), master %.4f s, worker %.4f s, job %.4f s (All-Pairs) %.4f s (Wavefront)\n' \
  "$rule_time" "$cell_ap" "$cell_wf" "$task1" "$task2" "$master_cost" "$worker_cost" "$job_ap" "$job_wf"

# --- the workloads, for real ---
makeflow_dir "$out/mf" "$RULES" "$rule_ms"
real_mf=$(cd "$out/mf" && with_workers 2 "$PWD/port" "$bin/makeflow" -T wq -p 0 -Z "$PWD/port" Makeflow)
real_ap=$(with_workers 2 "$out/port" bin/allpairs -T wq -p 0 -Z "$out/port" -q --job-size "$J" "$out/bin/busy" "$out/items" "$out/items" -o "$out/ap.txt")
wavefront_dir "$out/wf" "$N"
real_wf=$(with_workers 2 "$out/port" bin/wavefront -T wq -p 0 -Z "$out/port" --job-size "$J" "$out/bin/busy" "$out/wf")

# --- and simulated ---
common="\"master\": {\"task_cost\": $master_cost}, \"workers\": [{\"count\": 2, \"cores\": 1, \"task_cost\": $worker_cost}]"
cat > "$out/makeflow.json" <<EOF
{"name": "makeflow -T wq, $RULES rules of busy $rule_ms ms", $common,
 "tasks": [{"count": $RULES, "runtime": $rule_time}]}
EOF
cat > "$out/allpairs.json" <<EOF
{"name": "allpairs -T wq, ${N}×${N}, jobs of ${J}×${J}", $common,
 "blocks": {"kind": "allpairs", "rows": $N, "cols": $N, "block_rows": $J, "block_cols": $J,
            "cell_time": $cell_ap, "job_cost": $job_ap, "item_mb": 0.001, "cell_mb": 0.00002}}
EOF
cat > "$out/wavefront.json" <<EOF
{"name": "wavefront -T wq, ${N}×${N}, jobs of ${J}×${J}", $common,
 "blocks": {"kind": "wavefront", "rows": $N, "block_rows": $J,
            "cell_time": $cell_wf, "job_cost": $job_wf, "cell_mb": 0.00002}}
EOF
fails=0
for w in makeflow allpairs wavefront; do
  sim=$(bin/workqueue sim "$out/$w.json" | awk '$1 == "makespan" {print $2}')
  [ "$w" = makeflow ] && real=$real_mf
  [ "$w" = allpairs ] && real=$real_ap
  [ "$w" = wavefront ] && real=$real_wf
  ratio=$(calc "$sim / $real")
  ok=$(calc "($ratio >= 0.85 && $ratio <= 1.15) ? \"within ±15%\" : \"OFF\"")
  [ "$ok" = OFF ] && fails=$((fails + 1))
  printf '%-10s measured %6.2f s, simulated %6.2f s, simulated/measured %.3f  %s\n' "$w" "$real" "$sim" "$ratio" "$ok"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$fails"
