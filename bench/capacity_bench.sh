#!/usr/bin/env bash
# Issue 13's real capacity figures (bench/capacity/main.go): a master whose
# link is limited to BANDWIDTH bytes a second (workqueue.Config.Bandwidth)
# runs sleep tasks on real `workqueue worker` processes.
#   1. sweep: workloads of capacity about 3, 6 and 12 (TARGETS), each on a
#      range of worker counts; the best count and the knee of the measured
#      throughput against the master's estimates.
#   2. converge: a workload of capacity about 100 whose tasks share a cached
#      input, started with 50 and with 150 workers (STARTS); the weighted
#      estimate after every task (bench/out/capacity/converge-N.csv and
#      converge.png).
# Prints Markdown tables, with the load average before and after. Run it
# under the shared lock: flock /tmp/rightsize-bench.lock bench/capacity_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out/capacity
mkdir -p "$out"
make -s build
go build -o "$out/capacity-bench" ./bench/capacity
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), load before: $(uptime | sed 's/.*load average: //')"
echo
"$out/capacity-bench" -dir "$out" -bandwidth "${BANDWIDTH:-2000000}" -targets "${TARGETS:-3,6,12}"
echo
"$out/capacity-bench" -dir "$out" -bandwidth "${BANDWIDTH:-2000000}" -mode converge -start "${STARTS:-50,150}" -tol 0.15
echo
echo "load after: $(uptime | sed 's/.*load average: //')"
