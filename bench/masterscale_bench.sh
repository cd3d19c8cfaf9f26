#!/usr/bin/env bash
# Issue 13: does a real workqueue.Master lose time with many workers
# connected? (bench/masterscale/main.go). Real one-core `workqueue worker`
# processes on 127.0.0.1, WORKERS of them (default 10,50,100,200): the
# master's CPU idle, and its CPU and throughput on waves of sleep tasks
# that keep every worker busy and with a few tasks in flight.
# Prints a Markdown table, with the load average before and after. Run it
# under the shared lock: flock /tmp/rightsize-bench.lock bench/masterscale_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out/masterscale
mkdir -p "$out"
make -s build
go build -o "$out/masterscale-bench" ./bench/masterscale
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), load before: $(uptime | sed 's/.*load average: //')"
echo
"$out/masterscale-bench" -dir "$out" -workers "${WORKERS:-10,50,100,200}" "$@"
echo
echo "load after: $(uptime | sed 's/.*load average: //')"
