# Shell functions shared by scripts/slurm.sh and scripts/sge.sh, which start
# and stop batch-system daemons without systemd; sourced, not run.

# running PIDFILE: whether the process named in PIDFILE is alive.
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# stop_daemons PIDFILE...: SIGTERM to each live daemon, then SIGKILL to one
# still there after 10 s.
stop_daemons() {
  local f pid
  for f in "$@"; do
    running "$f" || continue
    pid=$(cat "$f")
    kill "$pid"
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  done
  return 0
}
