#!/usr/bin/env bash
# Batch-driver benchmarks (issue: distributed execution): per-job latency and
# submission throughput of the SLURM and Grid Engine drivers on the single-node
# systems that scripts/slurm.sh and scripts/sge.sh start, against the
# local-process driver and a bare sbatch loop in the same run.
#
#   bench/batch_bench.sh [KINDS]     KINDS defaults to local,slurm,sge
#
# A batch system that is not running is started (and stopped again at the end);
# one that cannot be started here is left out, with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out/batch
mkdir -p "$out/bin"
go build -o "$out/bin/batch-bench" ./bench/batch

kinds=local
stop=()
for k in $(echo "${1:-local,slurm,sge}" | tr , ' '); do
  case "$k" in
    local) continue ;;
    slurm | sge) ;;
    *) echo "batch_bench: unknown kind $k" >&2; exit 2 ;;
  esac
  if ! scripts/$k.sh status >/dev/null 2>&1; then
    if scripts/$k.sh start >/dev/null; then
      stop+=("$k")
    else
      echo "batch_bench: $k could not be started here; leaving it out" >&2
      continue
    fi
  fi
  kinds="$kinds,$k"
done
cleanup() { for k in "${stop[@]}"; do scripts/$k.sh stop; done; }
trap cleanup EXIT

"$out/bin/batch-bench" -kinds "$kinds" -spool "$out" -seq "${SEQ:-20}" -n "${N:-200}"
