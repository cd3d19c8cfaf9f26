#!/usr/bin/env bash
# Makeflow on a cluster, side by side (issue 6).
#
# Part 1, Work Queue: 2000 trivial rules (echo i > out_i) and one rule gathering
# them, run by
#   ours     bin/makeflow -T wq with two bin/workqueue workers
#   cctools  /usr/bin/makeflow -T wq with two CCTools work_queue_workers
#   make     GNU make -j2 on the same DAG (the floor: no network, no transfers)
# Each makeflow listens on a free port (-Z); its two workers start as soon as the
# port file appears; the time is from starting makeflow to its end, worker
# start-up included. Every round runs each tool once, in turn, in a fresh
# directory; medians over the rounds and ratios are printed.
#
# Part 2, SLURM (needs scripts/slurm.sh; started here if it is not running): a
# chain of 20 rules (per-job latency) and 100 independent rules (throughput) run
#   slurm    bin/makeflow -T slurm: one SLURM job per rule
#   wq       two bin/workqueue workers submitted to SLURM with
#            sbatch --wrap "bin/workqueue worker 127.0.0.1 PORT", then
#            bin/makeflow -T wq (worker placement included in the time)
#   local    bin/makeflow -T local -j 2 (the floor)
#
#   MAKEFLOW_REMOTE_ROUNDS  rounds of each part (default 3)
#   MAKEFLOW_REMOTE_RULES   rules in part 1 (default 2000)
#   MAKEFLOW_REMOTE_PARTS   "wq slurm" (default both)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
ours=$root/bin/makeflow
wqbin=$root/bin/workqueue
cctools=/usr/bin/makeflow
rounds=${MAKEFLOW_REMOTE_ROUNDS:-3}
n=${MAKEFLOW_REMOTE_RULES:-2000}
parts=${MAKEFLOW_REMOTE_PARTS:-wq slurm}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

go build -o bin/ ./cmd/makeflow ./cmd/workqueue # what is benchmarked is always this tree

work=$(mktemp -d)
pids=()
slurm_jobs=()
stop_slurm=0
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ ${#slurm_jobs[@]} -gt 0 ] && scancel "${slurm_jobs[@]}" 2>/dev/null || true
  [ "$stop_slurm" = 1 ] && scripts/slurm.sh stop || true
  rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s%N; }
secs() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.3f\n", (e - s) / 1e9 }'; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# wait_port FILE waits for a port file and prints the port.
wait_port() {
  local i
  for ((i = 0; i < 600; i++)); do
    if [ -s "$1" ]; then
      cat "$1"
      return
    fi
    sleep 0.01
  done
  echo "makeflow_remote_bench: no port file $1" >&2
  exit 1
}

# stop_pids kills the background processes started since the mark.
stop_pids() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}

# load prints the machine's load averages, to say how busy it was.
load() { cut -d' ' -f1-3 /proc/loadavg; }

# --- Part 1: Work Queue -----------------------------------------------------

gen_flat() {
  awk -v n="$n" 'BEGIN {
    for (i = 1; i <= n; i++) printf "out_%d:\n\techo %d > out_%d\n", i, i, i
    printf "gather:"; for (i = 1; i <= n; i++) printf " out_%d", i
    printf "\n\tcat out_* > gather\n" }' > "$work/flat.mf"
  awk -v n="$n" 'BEGIN {
    printf "all: gather\ngather:"; for (i = 1; i <= n; i++) printf " out_%d", i
    printf "\n\tcat out_* > gather\n"
    for (i = 1; i <= n; i++) printf "out_%d:\n\techo %d > out_%d\n", i, i, i }' > "$work/flat.mk"
}

# run_wq TOOL prints the seconds one run takes, in a fresh directory.
run_wq() {
  local tool=$1 dir start end port mf
  dir=$(mktemp -d "$work/run.XXXXXX")
  cp "$work/flat.mf" "$dir/Makeflow"
  cp "$work/flat.mk" "$dir/Makefile"
  start=$(now)
  case $tool in
    ours | cctools)
      if [ "$tool" = ours ]; then
        (cd "$dir" && exec "$ours" -T wq -Z port Makeflow >/dev/null 2>"$dir/err") &
      else
        (cd "$dir" && exec "$cctools" -T wq -Z port Makeflow >/dev/null 2>"$dir/err") &
      fi
      mf=$!
      port=$(wait_port "$dir/port")
      for w in 1 2; do
        if [ "$tool" = ours ]; then
          "$wqbin" worker -q -t 60 -s "$dir" 127.0.0.1 "$port" >/dev/null 2>&1 &
        else
          work_queue_worker -t 60 -s "$dir" 127.0.0.1 "$port" >/dev/null 2>&1 &
        fi
        pids+=($!)
      done
      if ! wait "$mf"; then
        echo "makeflow_remote_bench: $tool failed:" >&2
        cat "$dir/err" >&2
        exit 1
      fi
      ;;
    make) (cd "$dir" && make -s -j2 >/dev/null) ;;
  esac
  end=$(now)
  stop_pids
  [ "$(wc -l < "$dir/gather")" = "$n" ] || { echo "makeflow_remote_bench: $tool made a wrong gather" >&2; exit 1; }
  rm -rf "$dir"
  secs "$start" "$end"
}

part_wq() {
  local tools=(ours) tool r
  [ -x "$cctools" ] && command -v work_queue_worker >/dev/null && "$cctools" -v >/dev/null 2>&1 && tools+=(cctools)
  command -v make >/dev/null && tools+=(make)
  gen_flat
  declare -A times=() med=()
  echo "wq: $n rules + gather, two workers (make: -j2), median of $rounds rounds; load before: $(load)"
  for ((r = 1; r <= rounds; r++)); do
    for tool in "${tools[@]}"; do
      times[$tool]+="$(run_wq "$tool") "
    done
  done
  for tool in "${tools[@]}"; do
    med[$tool]=$(echo "${times[$tool]}" | median)
    printf '  %-8s %7.2f s   (%s)\n' "$tool" "${med[$tool]}" "${times[$tool]% }"
  done
  for tool in "${tools[@]}"; do
    [ "$tool" = ours ] && continue
    awk -v t="$tool" -v a="${med[$tool]}" -v b="${med[ours]}" 'BEGIN { printf "  %s / ours = %.2f\n", t, a / b }'
  done
  echo "  load after: $(load)"
}

# --- Part 2: SLURM ------------------------------------------------------------

gen_slurm() {
  awk 'BEGIN { printf "c_1:\n\techo 1 > c_1\n"
    for (i = 2; i <= 20; i++) printf "c_%d: c_%d\n\tcat c_%d > c_%d\n", i, i-1, i-1, i }' > "$work/chain.mf"
  awk 'BEGIN { for (i = 1; i <= 100; i++) printf "f_%d:\n\techo %d > f_%d\n", i, i, i }' > "$work/flat100.mf"
}

# run_slurm MODE SHAPE prints the seconds one run takes.
run_slurm() {
  local mode=$1 shape=$2 dir start end port mf id
  # The spool and the workflow must be on a filesystem SLURM's node sees;
  # here that is this machine's.
  dir=$(mktemp -d "$work/slurm.XXXXXX")
  cp "$work/$shape.mf" "$dir/Makeflow"
  start=$(now)
  case $mode in
    slurm) (cd "$dir" && "$ours" -T slurm Makeflow >/dev/null 2>"$dir/err") || { cat "$dir/err" >&2; exit 1; } ;;
    local) (cd "$dir" && "$ours" -T local -j 2 Makeflow >/dev/null 2>"$dir/err") || { cat "$dir/err" >&2; exit 1; } ;;
    wq)
      (cd "$dir" && exec "$ours" -T wq -Z port Makeflow >/dev/null 2>"$dir/err") &
      mf=$!
      port=$(wait_port "$dir/port")
      for w in 1 2; do
        id=$(sbatch --parsable --chdir="$dir" --output=/dev/null --error=/dev/null \
          --wrap "exec $wqbin worker -q -t 60 -s $dir 127.0.0.1 $port")
        slurm_jobs+=("$id")
      done
      wait "$mf" || { cat "$dir/err" >&2; exit 1; }
      scancel "${slurm_jobs[@]}"
      slurm_jobs=()
      ;;
  esac
  end=$(now)
  rm -rf "$dir"
  secs "$start" "$end"
}

part_slurm() {
  if ! scripts/slurm.sh status >/dev/null 2>&1; then
    if scripts/slurm.sh start >/dev/null; then
      stop_slurm=1
    else
      echo "makeflow_remote_bench: SLURM could not be started here; part 2 left out" >&2
      return
    fi
  fi
  gen_slurm
  local shape mode r rules
  for shape in chain flat100; do
    rules=20
    [ "$shape" = flat100 ] && rules=100
    declare -A times=() med=()
    echo "slurm: $shape ($rules rules), median of $rounds rounds; load before: $(load)"
    for ((r = 1; r <= rounds; r++)); do
      for mode in slurm wq local; do
        times[$mode]+="$(run_slurm "$mode" "$shape") "
      done
    done
    for mode in slurm wq local; do
      med[$mode]=$(echo "${times[$mode]}" | median)
      printf '  %-6s %7.2f s  %7.0f ms per rule   (%s)\n' "$mode" "${med[$mode]}" \
        "$(awk -v s="${med[$mode]}" -v n="$rules" 'BEGIN { print s * 1000 / n }')" "${times[$mode]% }"
    done
    awk -v a="${med[slurm]}" -v b="${med[wq]}" 'BEGIN { printf "  slurm / wq-on-slurm = %.1f\n", a / b }'
    echo "  load after: $(load)"
    unset times med
  done
}

for part in $parts; do
  case $part in
    wq) part_wq ;;
    slurm) part_slurm ;;
    *) echo "makeflow_remote_bench: unknown part $part" >&2; exit 2 ;;
  esac
done
