#!/usr/bin/env bash
# Work Queue dispatch throughput, side by side in one run:
#   1. rightsize: 2000 trivial tasks (echo i > out, the output fetched back)
#      through the workqueue master library with two `workqueue worker`
#      processes (BenchmarkMaster2000), with the master's CPU time per task;
#   2. CCTools: the same 2000 rules as a Makeflow run by CCTools
#      `makeflow -T wq` with two CCTools `work_queue_worker`s;
#   3. the floor: the same 2000 commands by plain fork/exec of /bin/sh, two at
#      a time (BenchmarkForkExec2000).
# Prints each throughput and the ratios. Needs CCTools (coop-computing-tools,
# openmpi-bin) for part 2; without it, part 2 is skipped and said so.
#
# Every side keeps its files (outputs, worker workspaces) under $TMPDIR
# (default /tmp). Creating and deleting a file costs about a millisecond of
# CPU on these machines' disks, and a dispatched task creates two files and
# deletes one where fork/exec creates one, so run it again with
# TMPDIR=/dev/shm to see the dispatch cost without the disk's.
set -euo pipefail
cd "$(dirname "$0")/.."
N=2000
runs=${WQ_BENCH_RUNS:-3}
tmp=$(mktemp -d)
cleanup() {
  for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "workqueue bench: $N trivial tasks, two workers, $runs runs each (medians), files under ${TMPDIR:-/tmp}"
go test -c -o "$tmp/wq.test" ./workqueue >/dev/null
(cd workqueue && "$tmp/wq.test" -test.run '^$' -test.bench 'Master2000|ForkExec2000' \
  -test.benchtime 1x -test.count "$runs") > "$tmp/go.out"
ours=$(awk '/^BenchmarkMaster2000/ {for (i=1;i<=NF;i++) if ($(i+1)=="tasks/s") print $i}' "$tmp/go.out" | median)
cpu=$(awk '/^BenchmarkMaster2000/ {for (i=1;i<=NF;i++) if ($(i+1)=="master-cpu-µs/task") print $i}' "$tmp/go.out" | median)
loopus=$(awk '/^BenchmarkMaster2000/ {for (i=1;i<=NF;i++) if ($(i+1)=="loop-µs/task") print $i}' "$tmp/go.out" | median)
fork=$(awk '/^BenchmarkForkExec2000/ {for (i=1;i<=NF;i++) if ($(i+1)=="tasks/s") print $i}' "$tmp/go.out" | median)

cctools=""
# CCTools' own makeflow, not rightsize's (bench/run.sh puts bin/ first on PATH).
cc_makeflow=/usr/bin/makeflow
if [ -x "$cc_makeflow" ] && command -v work_queue_worker >/dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  rates=()
  for r in $(seq "$runs"); do
    d="$tmp/cc$r"; mkdir -p "$d"
    for i in $(seq 1 $N); do printf 'out.%d:\n\techo %d > out.%d\n' "$i" "$i" "$i"; done > "$d/bench.mf"
    start=$(date +%s.%N)
    (cd "$d" && "$cc_makeflow" -T wq -p 0 bench.mf > mf.out 2>&1) &
    mf=$!
    port=""
    for _ in $(seq 200); do
      port=$(sed -n 's/.*listening for workers on port \([0-9]*\).*/\1/p' "$d/mf.out" 2>/dev/null | head -1)
      [ -n "$port" ] && break
      sleep 0.05
    done
    [ -n "$port" ] || { cat "$d/mf.out"; echo "makeflow did not start" >&2; exit 1; }
    for w in 1 2; do
      work_queue_worker --single-shot -t 60 -s "$d" 127.0.0.1 "$port" >/dev/null 2>&1 &
    done
    wait "$mf"
    end=$(date +%s.%N)
    wait
    rates+=("$(awk -v n=$N -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", n/(b-a)}')")
  done
  cctools=$(printf '%s\n' "${rates[@]}" | median)
else
  echo "CCTools not installed: skipping the CCTools side (apt-get install coop-computing-tools openmpi-bin)"
fi

printf '%-46s %8s tasks/s\n' "rightsize master + 2 workqueue workers" "$ours"
[ -n "$cctools" ] && printf '%-46s %8s tasks/s\n' "CCTools makeflow -T wq + 2 work_queue_workers" "$cctools"
printf '%-46s %8s tasks/s\n' "fork/exec of /bin/sh, 2 at a time" "$fork"
printf 'master CPU per task: %s µs (event loop alone: %s µs)\n' "$cpu" "$loopus"
[ -n "$cctools" ] && awk -v a="$ours" -v b="$cctools" 'BEGIN {printf "rightsize / CCTools throughput: %.2fx (target >= 5x)\n", a/b}'
awk -v a="$ours" -v b="$fork" 'BEGIN {printf "rightsize / fork-exec throughput: %.2fx\n", a/b}'
