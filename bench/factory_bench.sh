#!/usr/bin/env bash
# Worker-factory benchmark (issue: distributed execution): 100 trivial tasks on
# the single-node SLURM of scripts/slurm.sh, run through two Work Queue workers
# that `workqueue factory` placed with sbatch (timed from the factory's start),
# side by side with the same tasks as one SLURM job each through the batch
# driver. SLURM is started if it is not running (and stopped again at the end);
# if it cannot be started here the benchmark is skipped, with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out/factory
mkdir -p "$out"
stop=no
if ! scripts/slurm.sh status >/dev/null 2>&1; then
  if scripts/slurm.sh start >/dev/null; then
    stop=yes
  else
    echo "factory_bench: SLURM could not be started here; skipping" >&2
    exit 0
  fi
fi
cleanup() { if [ "$stop" = yes ]; then scripts/slurm.sh stop; fi; }
trap cleanup EXIT
go test -run '^$' -bench BenchmarkSlurmTasks -benchtime 1x -count "${COUNT:-3}" ./workqueue/factory | tee "$out/go-bench.txt"
