#!/usr/bin/env bash
# Installs what rightsize's build and tests need on a Debian machine.
#
# Always: a C compiler for cgo (shared-library functions and their tests).
# Under CI=true (or with RIGHTSIZE_INSTALL=1): the real components that the
# interop tests run against — Debian's CCTools (coop-computing-tools, with
# openmpi-bin, which its makeflow links), GNU make, and the batch systems the
# batch tests use (SLURM and Grid Engine; scripts/slurm.sh and
# scripts/sge.sh configure and start them), and Chromium, in which the
# status page's tests load it.
# Outside CI nothing optional is installed; tests that need it skip and say so.
set -euo pipefail

need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ "${CI:-}" = "true" ] || [ "${RIGHTSIZE_INSTALL:-}" = "1" ]; then
  command -v work_queue_worker >/dev/null 2>&1 || need+=(coop-computing-tools openmpi-bin)
  command -v make >/dev/null 2>&1 || need+=(make)
  command -v slurmd >/dev/null 2>&1 || need+=(slurmctld slurmd slurm-client)
  command -v qsub >/dev/null 2>&1 || need+=(gridengine-master gridengine-exec gridengine-client)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
fi
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
