#!/usr/bin/env bash
# Work Queue dispatch throughput, side by side, in interleaved rounds:
#
#   ours:    rightsize's `makeflow -T wq` with two `workqueue worker`s on this
#            machine, running N trivial rules (echo i > out.i), each output
#            fetched back to the master;
#   xargs:   the floor: the same N commands by `xargs -P2` (fork/exec of
#            /bin/sh, two at a time, each writing its file in place);
#   cctools: CCTools' `makeflow -T wq` with two `work_queue_worker`s, the
#            same Makeflow file (skipped, and said so, if not installed).
#
# A side's time runs from the start of its makeflow (or xargs) to its end;
# the workers are started once the master listens, so their connection is
# counted, their exit after the master releases them is not. Directories
# are removed only at the end, and each side starts after a sync, so that
# no side pays for the disk work another left. Every round
# runs each side once, in a fresh directory under $TMPDIR (default /tmp),
# so that the machine's load falls on all of them alike; the medians over
# the rounds and the ratios to xargs and CCTools measured in the same run
# are printed, with the CPU time (user+system) each side's processes used
# per task, from the children's rusage.
#
#   WQ_BENCH_ROUNDS  rounds (default 5)
#   WQ_BENCH_TASKS   rules per workflow (default 2000)
#   WQ_BENCH_LOAD    busy loops kept running during every side, to measure
#                    on a busy machine (default 0)
#   WQ_BENCH_SIDES   the sides to run (default "ours xargs cctools")
#   WQ_BENCH_SETTLE  seconds to wait after a side that removed files
#                    (default 61)
#
# Why the wait: on ext4 without a journal (this machine's /), each inode
# allocation skips, one buffer lookup each, every inode of its block group
# freed in the last 60 s (360 s until its inode table is written back, so
# a sync comes first). The workers of both Work Queue sides remove about
# 4000 files and directories a run (CCTools' as it goes, ours at the end),
# which made the next side's every file cost 100-200 µs more: xargs took
# 0.68 s after ours but 2.08 s after CCTools in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${WQ_BENCH_ROUNDS:-5}
n=${WQ_BENCH_TASKS:-2000}
load=${WQ_BENCH_LOAD:-0}
settle=${WQ_BENCH_SETTLE:-61}
sides=(${WQ_BENCH_SIDES:-ours xargs cctools})
ours="$PWD/bin/makeflow"
worker="$PWD/bin/workqueue"
cctools=/usr/bin/makeflow # CCTools' own, not ours (bench/run.sh puts bin/ first on PATH)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# What is benchmarked is always this tree.
go build -o bin/ ./cmd/makeflow
CGO_ENABLED=0 go build -o bin/ ./cmd/workqueue
# The build removed its temporary files under $TMPDIR: rest, as after a
# Work Queue side, so that the first side does not pay for them (ours took
# 1.33 s in the first round of a run, 1.11-1.12 s in the next two; with the
# rest, 1.02 s in the first of 1.02, 1.15 and 1.46 s).
if [ "$settle" != 0 ]; then
  sync
  sleep "$settle"
fi

if [[ " ${sides[*]} " == *" cctools "* ]] && ! { [ -x "$cctools" ] && command -v work_queue_worker >/dev/null; }; then
  echo "CCTools not installed: skipping its side (CI=true ./scripts/deps.sh installs it)"
  sides=("${sides[@]/cctools/}")
fi

work=$(mktemp -d)
spinners=()
cleanup() {
  for p in "${spinners[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
for ((i = 0; i < load; i++)); do
  sh -c 'while :; do :; done' &
  spinners+=($!)
done

awk -v n="$n" 'BEGIN { for (i = 1; i <= n; i++) printf "out.%d:\n\techo %d > out.%d\n", i, i, i }' > "$work/bench.mf"

# waitport FILE PATTERN prints the port a master wrote to FILE (a port file,
# or its log matching PATTERN), waiting up to 10 s for it.
waitport() {
  local port=""
  for _ in $(seq 200); do
    port=$(sed -n "$2" "$1" 2>/dev/null | head -1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { cat "$1" >&2; echo "the master did not start" >&2; return 1; }
  echo "$port"
}

# run SIDE runs one side in a fresh directory and prints its seconds and
# the CPU seconds of the processes it started.
run() {
  local side=$1 dir start end port mf
  dir=$(mktemp -d "$work/run.XXXXXX")
  cp "$work/bench.mf" "$dir/"
  # What earlier sides left to the disk (writeback, the discards of files
  # removed; / is mounted with discard) is done before this side starts.
  sync
  start=$(date +%s%N)
  case $side in
    xargs)
      (cd "$dir" && seq 1 "$n" | xargs -P2 -I{} sh -c 'echo {} > out.{}')
      end=$(date +%s%N)
      ;;
    ours)
      (cd "$dir" && exec "$ours" -T wq -Z port bench.mf > mf.out 2>&1) &
      mf=$!
      port=$(waitport "$dir/port" 's/^\([0-9][0-9]*\).*/\1/p')
      for w in 1 2; do
        "$worker" worker --single-shot -q -t 60 -s "$dir" 127.0.0.1 "$port" >/dev/null 2>&1 &
      done
      wait "$mf" || { cat "$dir/mf.out" >&2; return 1; }
      end=$(date +%s%N)
      wait
      ;;
    cctools)
      (cd "$dir" && exec "$cctools" -T wq -p 0 bench.mf > mf.out 2>&1) &
      mf=$!
      port=$(waitport "$dir/mf.out" 's/.*listening for workers on port \([0-9]*\).*/\1/p')
      for w in 1 2; do
        work_queue_worker --single-shot -t 60 -s "$dir" 127.0.0.1 "$port" >/dev/null 2>&1 &
      done
      wait "$mf" || { cat "$dir/mf.out" >&2; return 1; }
      end=$(date +%s%N)
      wait
      ;;
  esac
  local missing=0
  for ((i = 1; i <= n; i += n / 10 + 1)); do
    [ "$(cat "$dir/out.$i" 2>/dev/null)" = "$i" ] || missing=$((missing + 1))
  done
  [ "$missing" = 0 ] || { echo "$side: outputs missing or wrong" >&2; return 1; }
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", (e - s) / 1e9 }'
}

# cpu FILE prints the user+system seconds of reaped children that the
# output of `times` in FILE says (times runs in this shell, not in $(...),
# where it would count the subshell's).
cpu() { awk 'NR == 2 { split($1, u, "m"); split($2, s, "m"); printf "%.3f\n", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$1"; }

median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "workqueue bench: $n trivial tasks, two local workers (-P2 for xargs), $rounds rounds, $load busy loops, files under ${TMPDIR:-/tmp}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A secs=() cpus=()
for ((r = 1; r <= rounds; r++)); do
  for side in "${sides[@]}"; do
    [ -n "$side" ] || continue
    times > "$work/times0"
    t=$(run "$side")
    times > "$work/times1"
    c0=$(cpu "$work/times0") c1=$(cpu "$work/times1")
    secs[$side]+="$t "
    cpus[$side]+="$(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN { printf "%.0f", (b - a) / n * 1e6 }') "
    if [ "$side" != xargs ] && [ "$settle" != 0 ]; then
      sync
      sleep "$settle"
    fi
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

declare -A med=()
for side in "${sides[@]}"; do
  [ -n "$side" ] || continue
  med[$side]=$(printf '%s\n' ${secs[$side]} | median)
  printf '%-8s %7s s  %7.1f tasks/s  CPU %5s µs/task   (rounds: %s)\n' "$side" "${med[$side]}" \
    "$(awk -v n="$n" -v t="${med[$side]}" 'BEGIN { print n / t }')" \
    "$(printf '%s\n' ${cpus[$side]} | median)" "${secs[$side]% }"
done
if [ -n "${med[ours]:-}" ] && [ -n "${med[xargs]:-}" ]; then
  awk -v a="${med[ours]}" -v b="${med[xargs]}" 'BEGIN { printf "ours / xargs -P2 speed: %.2fx (target >= 0.9x)\n", b / a }'
fi
if [ -n "${med[ours]:-}" ] && [ -n "${med[cctools]:-}" ]; then
  awk -v a="${med[ours]}" -v b="${med[cctools]}" 'BEGIN { printf "ours / CCTools speed: %.1fx (target >= 10x)\n", b / a }'
fi
