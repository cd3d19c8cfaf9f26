#!/usr/bin/env bash
# A single-node SLURM on this machine, for the batch-driver tests and benchmarks.
#
#   scripts/slurm.sh start    install (under CI=true or RIGHTSIZE_INSTALL=1), configure,
#                             start slurmctld and slurmd, wait until the node is idle
#   scripts/slurm.sh stop     stop the daemons this script started
#   scripts/slurm.sh status   print sinfo; exit 0 only if the node is up
#
# No systemd is needed: the daemons run in the background with pid files in /run.
# The configuration is written to /etc/slurm/slurm.conf from `hostname -s` and what
# `slurmd -C` reports, with auth/none (loopback tests only) and no accounting
# database, so `sacct` is unavailable and the drivers fall back to squeue and the
# jobs' own exit-status files. A slurm.conf that this script did not write is never
# overwritten: on a real cluster node, point the tests at the real SLURM instead.
# Processes are tracked by process group (proctrack/pgid): with linuxproc, the
# reference recipe's choice, a job's child that outlived its shell once escaped
# scancel and ran on after the job.
# Start needs root (it writes /etc/slurm and runs slurmd as root).
set -euo pipefail
# shellcheck source=scripts/daemons.sh
. "$(dirname "$0")/daemons.sh"

conf=/etc/slurm/slurm.conf
marker="# written by rightsize scripts/slurm.sh"
ctld_pid=/run/slurmctld.pid
slurmd_pid=/run/slurmd.pid

say() { echo "slurm.sh: $*" >&2; }

node_up() {
  # sinfo prints one state per node, long form: "idle", "mixed", "allocated",
  # "completing", "planned"..., with "+" flags. The node takes jobs unless it
  # does not respond (a trailing "*") or is down, drained, failing or unknown.
  local state
  state=$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1) || return 1
  case "$state" in
    "" | *'*'* | *down* | *drain* | *fail* | *unknown* | *not_responding*) return 1 ;;
    *) return 0 ;;
  esac
}

install() {
  command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 &&
    command -v sbatch >/dev/null 2>&1 && return 0
  if [ "${CI:-}" != "true" ] && [ "${RIGHTSIZE_INSTALL:-}" != "1" ]; then
    say "SLURM is not installed; run with RIGHTSIZE_INSTALL=1 (as root) to install it, or:"
    say "  apt-get install -y --no-install-recommends slurmctld slurmd slurm-client"
    exit 1
  fi
  say "installing slurmctld slurmd slurm-client"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d may refuse to start the services from the package scripts; that is
  # fine, this script starts them itself.
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client >/dev/null
}

write_conf() {
  if [ -e "$conf" ] && ! grep -qF "$marker" "$conf"; then
    say "$conf exists and was not written by this script; not touching it"
    exit 1
  fi
  local host cpus mem tmp
  host=$(hostname -s)
  # slurmd -C prints this node's line as slurmd sees it; the node must not claim
  # more than that or slurmd registers it as invalid.
  cpus=$(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' | head -n 1)
  mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -n 1)
  [ -n "$cpus" ] && [ -n "$mem" ] || { say "cannot read CPUs and RealMemory from slurmd -C"; exit 1; }
  # Without TmpDisk in the node line every job asking for scratch disk (--tmp)
  # is refused. slurmd drains a node that claims more than the size of /tmp, so
  # claim what is free there now.
  tmp=$(df -Pm /tmp | awk 'NR == 2 {print $4}')
  mkdir -p /etc/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
  chown -R slurm:slurm /var/lib/slurm/slurmctld /var/log/slurm
  cat >"$conf" <<EOF
$marker
ClusterName=local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
MpiDefault=none
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldPidFile=$ctld_pid
SlurmdPidFile=$slurmd_pid
SlurmdSpoolDir=/var/lib/slurm/slurmd
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem TmpDisk=$tmp State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,default_queue_depth=1000
EOF
}

start() {
  if node_up; then
    say "SLURM is already up"
    sinfo
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || { say "start needs root"; exit 1; }
  install
  write_conf
  # -c starts from an empty job table, so that jobs left by an earlier run do not
  # occupy the node.
  running "$ctld_pid" || /usr/sbin/slurmctld -c
  running "$slurmd_pid" || /usr/sbin/slurmd
  local i
  for i in $(seq 1 60); do
    if node_up; then
      sinfo
      return 0
    fi
    sleep 1
  done
  say "the node did not come up within 60 s"
  sinfo || true
  tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
  exit 1
}

stop() { stop_daemons "$slurmd_pid" "$ctld_pid"; }

status() {
  command -v sinfo >/dev/null 2>&1 || { say "SLURM is not installed"; exit 1; }
  sinfo || true
  node_up
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
