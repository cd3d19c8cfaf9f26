#!/usr/bin/env bash
# A single-node Grid Engine (Debian's gridengine 8.1.9) on this machine, for the
# batch-driver tests and benchmarks.
#
#   scripts/sge.sh start    install (under CI=true or RIGHTSIZE_INSTALL=1), configure,
#                           start sge_qmaster and sge_execd, wait until the queue is up
#   scripts/sge.sh stop     stop the daemons
#   scripts/sge.sh status   print the queue; exit 0 only if it takes jobs
#
# What it configures, and why (each of these stops a stock Debian install from
# running a job here):
#   - act_qmaster is this host (`hostname -s`); the package leaves it empty when
#     installed non-interactively.
#   - host_aliases says `hostname -s` and localhost are one host: the host name
#     resolves to 127.0.0.1, which resolves back to "localhost", and commlib refuses
#     clients whose names disagree.
#   - min_uid/min_gid 0, so that root (CI) may run jobs.
#   - an execution and submit host, a parallel environment "smp" ($pe_slots, what
#     the driver asks for with -pe smp N), and a queue all.q with one slot per core.
#   - the scheduler runs every second and on every submission and completion
#     (the default is every 15 s).
# A cell whose act_qmaster names another host is never touched. Start needs root.
set -euo pipefail
# shellcheck source=scripts/daemons.sh
. "$(dirname "$0")/daemons.sh"

export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
common=$SGE_ROOT/$SGE_CELL/common
qmaster_pid=/var/spool/gridengine/qmaster/qmaster.pid
host=$(hostname -s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

say() { echo "sge.sh: $*" >&2; }

queue_up() {
  # qstat -f lists the queue instance; its states column is empty when it takes
  # jobs ("u" unknown: execd not heard from; "E" error; "d" disabled).
  local line
  line=$(qstat -f -q all.q 2>/dev/null | grep "^all.q@") || return 1
  [ "$(echo "$line" | awk '{print NF}')" -eq 5 ]
}

install() {
  command -v qsub >/dev/null 2>&1 && [ -x /usr/sbin/sge_qmaster ] && [ -x /usr/sbin/sge_execd ] && return 0
  if [ "${CI:-}" != "true" ] && [ "${RIGHTSIZE_INSTALL:-}" != "1" ]; then
    say "Grid Engine is not installed; run with RIGHTSIZE_INSTALL=1 (as root) to install it, or:"
    say "  apt-get install -y --no-install-recommends gridengine-master gridengine-exec gridengine-client"
    exit 1
  fi
  say "installing gridengine-master gridengine-exec gridengine-client"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The package scripts create the cell; policy-rc.d may refuse to start the
  # daemons from them, which is fine: this script starts them.
  apt-get install -y -qq --no-install-recommends gridengine-master gridengine-exec gridengine-client >/dev/null
}

execd_pidfiles() { ls /var/spool/gridengine/execd/*/execd.pid 2>/dev/null || true; }

start_qmaster() {
  local current
  current=$(cat "$common/act_qmaster" 2>/dev/null || true)
  if [ -n "$current" ] && [ "$current" != "$host" ]; then
    say "$common/act_qmaster names $current, not this host; not touching that cell"
    exit 1
  fi
  echo "$host" >"$common/act_qmaster"
  [ "$host" = localhost ] || echo "$host localhost" >"$common/host_aliases"
  mkdir -p /var/run/gridengine
  chown sgeadmin:sgeadmin /var/run/gridengine
  running "$qmaster_pid" || /usr/sbin/sge_qmaster
  local i
  for i in $(seq 1 60); do
    qconf -sh >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  say "sge_qmaster did not answer within 30 s"
  tail -n 20 /var/spool/gridengine/qmaster/messages >&2 || true
  exit 1
}

configure() {
  # Global configuration: let root run jobs.
  qconf -sconf global >"$work/global"
  sed -i -e 's/^min_uid .*/min_uid 0/' -e 's/^min_gid .*/min_gid 0/' "$work/global"
  (cd "$work" && qconf -Mconf global >/dev/null) # -Mconf takes the name of a file named after the configuration

  # Scheduler: every second, and at once on submission and completion.
  qconf -ssconf >"$work/sconf"
  sed -i -e 's/^schedule_interval .*/schedule_interval 0:0:1/' \
    -e 's/^flush_submit_sec .*/flush_submit_sec 1/' \
    -e 's/^flush_finish_sec .*/flush_finish_sec 1/' "$work/sconf"
  qconf -Msconf "$work/sconf" >/dev/null

  if ! qconf -sel 2>/dev/null | grep -qx "$host"; then
    cat >"$work/exec" <<EOF
hostname $host
load_scaling NONE
complex_values NONE
user_lists NONE
xuser_lists NONE
projects NONE
xprojects NONE
usage_scaling NONE
report_variables NONE
EOF
    qconf -Ae "$work/exec" >/dev/null
  fi
  qconf -ss 2>/dev/null | grep -qx "$host" || qconf -as "$host" >/dev/null

  if ! qconf -spl 2>/dev/null | grep -qx smp; then
    cat >"$work/pe" <<'EOF'
pe_name            smp
slots              9999
user_lists         NONE
xuser_lists        NONE
start_proc_args    NONE
stop_proc_args     NONE
allocation_rule    $pe_slots
control_slaves     FALSE
job_is_first_task  TRUE
urgency_slots      min
accounting_summary FALSE
qsort_args         NONE
EOF
    qconf -Ap "$work/pe" >/dev/null
  fi

  if ! qconf -sql 2>/dev/null | grep -qx all.q; then
    local cores
    cores=$(nproc)
    {
      echo "qname all.q"
      echo "hostlist $host"
      echo "seq_no 0"
      # No load threshold: a busy shared machine must still take test jobs.
      echo "load_thresholds NONE"
      echo "suspend_thresholds NONE"
      echo "nsuspend 1"
      echo "suspend_interval 00:05:00"
      echo "priority 0"
      echo "min_cpu_interval 00:05:00"
      echo "processors UNDEFINED"
      echo "qtype BATCH INTERACTIVE"
      echo "ckpt_list NONE"
      echo "pe_list smp"
      echo "rerun FALSE"
      echo "slots $cores"
      echo "tmpdir /tmp"
      echo "shell /bin/sh"
      echo "prolog NONE"
      echo "epilog NONE"
      echo "shell_start_mode unix_behavior"
      echo "starter_method NONE"
      echo "suspend_method NONE"
      echo "resume_method NONE"
      echo "terminate_method NONE"
      echo "notify 00:00:60"
      echo "owner_list NONE"
      echo "user_lists NONE"
      echo "xuser_lists NONE"
      echo "subordinate_list NONE"
      echo "complex_values NONE"
      echo "projects NONE"
      echo "xprojects NONE"
      echo "calendar NONE"
      echo "initial_state default"
      for l in s_rt h_rt s_cpu h_cpu s_fsize h_fsize s_data h_data s_stack h_stack \
        s_core h_core s_rss h_rss s_vmem h_vmem; do
        echo "$l INFINITY"
      done
    } >"$work/queue"
    qconf -Aq "$work/queue" >/dev/null
  fi
}

start() {
  if command -v qstat >/dev/null 2>&1 && queue_up; then
    say "Grid Engine is already up"
    qstat -f
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || { say "start needs root"; exit 1; }
  install
  start_qmaster
  configure
  local f up=""
  for f in $(execd_pidfiles); do running "$f" && up=1; done
  if [ -z "$up" ]; then
    mkdir -p /var/spool/gridengine/execd
    chown sgeadmin:sgeadmin /var/spool/gridengine/execd
    # execd reads the global configuration when it starts, so it starts after
    # configure.
    /usr/sbin/sge_execd
  fi
  local i
  for i in $(seq 1 120); do
    # A queue left in an error state by an earlier failed job takes no jobs.
    qmod -c all.q >/dev/null 2>&1 || true
    if queue_up; then
      qstat -f
      return 0
    fi
    sleep 0.5
  done
  say "the queue did not come up within 60 s"
  qstat -f >&2 || true
  tail -n 20 /var/spool/gridengine/qmaster/messages >&2 || true
  exit 1
}

stop() { stop_daemons $(execd_pidfiles) "$qmaster_pid"; }

status() {
  command -v qstat >/dev/null 2>&1 || { say "Grid Engine is not installed"; exit 1; }
  qstat -f || true
  queue_up
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
