#!/usr/bin/env bash
# Runs CCTools' own Makeflow tests (makeflow/test/TR_*.sh of a CCTools
# source tree) against this project's makeflow, and prints each test's
# result and the totals: how close a CCTools user's workflows come to
# running unchanged (issue 14's target).
#
#   scripts/cctools-makeflow-tests.sh CCTOOLS_SRC [PATTERN]
#   MAKEFLOW_DIR=/usr/bin scripts/cctools-makeflow-tests.sh CCTOOLS_SRC  # CCTools' own
#
# CCTOOLS_SRC is a CCTools source tree (git clone or release tarball); only
# makeflow/test, makeflow/example, makeflow/src's files but its programs
# (some tests read them as inputs) and dttools/test are read, in a copy. Tests whose
# check_needed fails (a tool or service not here) are counted apart. Each
# test gets 120 s. Not part of `make test`: the suite is not in this
# repository, and CI may not reach GitHub.
set -uo pipefail
src=${1:?usage: $0 CCTOOLS_SRC [PATTERN]}
pattern=${2:-TR_}
root=$(cd "$(dirname "$0")/.." && pwd)
# MAKEFLOW_DIR=DIR takes makeflow and makeflow_analyze from DIR instead
# (MAKEFLOW_DIR=/usr/bin: CCTools' own, for comparison).
bindir=${MAKEFLOW_DIR:-$root/bin}
if [ -z "${MAKEFLOW_DIR:-}" ]; then
  (cd "$root" && go build -o bin/ ./cmd/makeflow ./cmd/makeflow_analyze) || exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/makeflow/src" "$work/dttools/test" "$work/work_queue/src"
cp -r "$src/makeflow/test" "$work/makeflow/"
# Some tests read the example workflows, and some name the files of
# makeflow/src as inputs; none of CCTools' programs is taken from there
# (a built tree's binaries are left out).
[ -d "$src/makeflow/example" ] && cp -r "$src/makeflow/example" "$work/makeflow/"
for f in "$src"/makeflow/src/*; do
  [ -f "$f" ] && [ "$(head -c 4 "$f")" != $'\x7fELF' ] && cp "$f" "$work/makeflow/src/"
done
rm -f "$work/makeflow/src/makeflow" "$work/makeflow/src/makeflow_analyze"
cp "$src/dttools/test/test_runner_common.sh" "$work/dttools/test/"
touch "$work/config.mk"
ln -s "$bindir/makeflow" "$work/makeflow/src/makeflow"
ln -s "$bindir/makeflow_analyze" "$work/makeflow/src/makeflow_analyze"
# The tests that start workers take CCTools' own, if installed.
if command -v work_queue_worker >/dev/null; then
  ln -s "$(command -v work_queue_worker)" "$work/work_queue/src/work_queue_worker"
fi
cd "$work/makeflow/test" || exit 1
# step SECONDS ARGS...: runs `sh ARGS` in a process group of its own for at
# most SECONDS, then kills whatever of the group is left: a test that gives
# up leaves its makeflow behind (waiting for a worker that never came).
step() {
  local secs=$1 pid rc
  shift
  setsid timeout -k 5 "$secs" sh "$@" &
  pid=$!
  wait "$pid"
  rc=$?
  kill -KILL -- -"$pid" 2>/dev/null
  return "$rc"
}
pass=0 fail=0 skip=0
for t in ${pattern}*.sh; do
  [ -e "$t" ] || continue
  if ! step 30 "$t" check_needed >/dev/null 2>&1; then
    echo "skip  $t"
    skip=$((skip + 1))
    continue
  fi
  if step 60 "$t" prepare >/dev/null 2>&1 && step 120 "$t" run >"$t.log" 2>&1; then
    echo "pass  $t"
    pass=$((pass + 1))
  else
    echo "FAIL  $t"
    fail=$((fail + 1))
  fi
  step 60 "$t" clean >/dev/null 2>&1
done
echo "$pass passed, $fail failed, $skip skipped (check_needed) of $((pass + fail + skip))"
