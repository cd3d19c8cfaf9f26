#!/usr/bin/env bash
# Makeflow engine overhead, side by side with GNU make and CCTools makeflow,
# at several workflow sizes:
#
#   flat:  N trivial rules (echo i > out_i) and one rule gathering them, -j 2
#   chain: N rules, each copying the previous rule's output, -j 2
#
# Every round runs each tool once, in a fresh directory, in turn, the order
# turning by one tool each round, so that the machine's load falls on all of
# them alike; the medians over the rounds and the ratios to make are
# printed. Both makeflows run with -T local: ours would otherwise first
# look for a cluster to place the rules on (running sinfo where SLURM is
# installed). Builds bin/makeflow; GNU make and CCTools' /usr/bin/makeflow
# are used when installed.
#
#   MAKEFLOW_BENCH_SIZES        rules per workflow (default "500 2000 10000 50000")
#   MAKEFLOW_BENCH_SHAPES       workflows (default "flat chain")
#   MAKEFLOW_BENCH_ROUNDS       rounds up to 2000 rules (default 5)
#   MAKEFLOW_BENCH_BIG_ROUNDS   rounds above 2000 rules (default 1)
#   MAKEFLOW_BENCH_CCTOOLS_MAX  largest size CCTools runs at (default 10000:
#                               it takes minutes from there on)
#   MAKEFLOW_BENCH_RULES        one size, as MAKEFLOW_BENCH_SIZES (older name)
#   MAKEFLOW_BENCH_BASELINE     another build of ours (a path), run as "base"
#                               in the same rounds, to compare a change
#   MAKEFLOW_BENCH_NO_CCTOOLS   1: leave CCTools out
set -euo pipefail
cd "$(dirname "$0")/.."
ours="$PWD/bin/makeflow"
cctools=/usr/bin/makeflow
sizes=${MAKEFLOW_BENCH_SIZES:-${MAKEFLOW_BENCH_RULES:-500 2000 10000 50000}}
shapes=${MAKEFLOW_BENCH_SHAPES:-flat chain}
small_rounds=${MAKEFLOW_BENCH_ROUNDS:-5}
big_rounds=${MAKEFLOW_BENCH_BIG_ROUNDS:-1}
cctools_max=${MAKEFLOW_BENCH_CCTOOLS_MAX:-10000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

go build -o bin/ ./cmd/makeflow # what is benchmarked is always this tree
all_tools=(ours)
command -v make >/dev/null && all_tools+=(make)
[ -x "$cctools" ] && [ "${MAKEFLOW_BENCH_NO_CCTOOLS:-0}" != 1 ] && "$cctools" -v >/dev/null 2>&1 && all_tools+=(cctools)
base=${MAKEFLOW_BENCH_BASELINE:-}
[ -n "$base" ] && all_tools+=(base)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# gen SHAPE N writes the workflow as $work/SHAPE.N.mf and the same as a
# Makefile, $work/SHAPE.N.mk.
gen() {
  local shape=$1 n=$2
  case $shape in
    flat)
      awk -v n="$n" 'BEGIN {
        for (i = 1; i <= n; i++) printf "out_%d:\n\techo %d > out_%d\n", i, i, i
        printf "gather:"; for (i = 1; i <= n; i++) printf " out_%d", i
        printf "\n\tcat out_* > gather\n" }' > "$work/flat.$n.mf"
      awk -v n="$n" 'BEGIN {
        printf "all: gather\ngather:"; for (i = 1; i <= n; i++) printf " out_%d", i
        printf "\n\tcat out_* > gather\n"
        for (i = 1; i <= n; i++) printf "out_%d:\n\techo %d > out_%d\n", i, i, i }' > "$work/flat.$n.mk" ;;
    chain)
      awk -v n="$n" 'BEGIN {
        printf "c_1:\n\techo 1 > c_1\n"
        for (i = 2; i <= n; i++) printf "c_%d: c_%d\n\tcp c_%d c_%d\n", i, i-1, i-1, i }' > "$work/chain.$n.mf"
      awk -v n="$n" 'BEGIN {
        printf "all: c_%d\nc_1:\n\techo 1 > c_1\n", n
        for (i = 2; i <= n; i++) printf "c_%d: c_%d\n\tcp c_%d c_%d\n", i, i-1, i-1, i }' > "$work/chain.$n.mk" ;;
    *) echo "unknown shape $shape" >&2; exit 2 ;;
  esac
}

# run TOOL SHAPE N prints the seconds one run takes, in a fresh directory,
# or "failed" if the tool failed. GNU make recurses once per rule of a
# chain: it gets an unlimited stack (at 50,000 rules 8 MiB overflows).
run() {
  local tool=$1 shape=$2 n=$3 dir status=0
  dir=$(mktemp -d "$work/run.XXXXXX")
  cp "$work/$shape.$n.mf" "$dir/Makeflow"
  cp "$work/$shape.$n.mk" "$dir/Makefile"
  local start end
  start=$(date +%s%N)
  case $tool in
    ours) (cd "$dir" && "$ours" -T local -j 2 Makeflow >/dev/null) || status=$? ;;
    base) (cd "$dir" && "$base" -T local -j 2 Makeflow >/dev/null) || status=$? ;;
    make) (ulimit -s unlimited 2>/dev/null; cd "$dir" && make -s -j2 >/dev/null) || status=$? ;;
    cctools) (cd "$dir" && "$cctools" -T local -j 2 Makeflow >/dev/null 2>&1) || status=$? ;;
  esac
  end=$(date +%s%N)
  rm -rf "$dir"
  if [ "$status" -ne 0 ]; then
    echo failed
    return
  fi
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", (e - s) / 1e9 }'
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "start $(date -u +%FT%TZ); load average $(cut -d' ' -f1-3 /proc/loadavg)"
for shape in $shapes; do
  for n in $sizes; do
    gen "$shape" "$n"
    tools=()
    for tool in "${all_tools[@]}"; do
      [ "$tool" = cctools ] && [ "$n" -gt "$cctools_max" ] && continue
      tools+=("$tool")
    done
    rounds=$small_rounds
    [ "$n" -gt 2000 ] && rounds=$big_rounds
    declare -A times=()
    for ((r = 0; r < rounds; r++)); do
      for ((k = 0; k < ${#tools[@]}; k++)); do
        tool=${tools[(k + r) % ${#tools[@]}]}
        times[$tool]+="$(run "$tool" "$shape" "$n") "
      done
    done
    echo "$shape: $n rules, -j 2, median of $rounds rounds ($(date -u +%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg))"
    declare -A med=()
    for tool in "${tools[@]}"; do
      if [[ "${times[$tool]}" == *failed* ]]; then
        printf '  %-8s failed   (%s)\n' "$tool" "${times[$tool]% }"
        continue
      fi
      med[$tool]=$(echo "${times[$tool]}" | tr ' ' '\n' | grep . | median)
      awk -v t="$tool" -v s="${med[$tool]}" -v n="$n" -v all="${times[$tool]% }" \
        'BEGIN { printf "  %-8s %7.2f s  %6.0f µs per rule   (%s)\n", t, s, s * 1e6 / n, all }'
    done
    if [ -n "${med[make]:-}" ]; then
      for tool in "${tools[@]}"; do
        [ "$tool" = make ] || [ -z "${med[$tool]:-}" ] && continue
        awk -v t="$tool" -v a="${med[$tool]}" -v b="${med[make]}" 'BEGIN { printf "  %s / make = %.2f\n", t, a / b }'
      done
    fi
    unset times med
    rm -f "$work/$shape.$n.mf" "$work/$shape.$n.mk"
  done
done
echo "end $(date -u +%FT%TZ); load average $(cut -d' ' -f1-3 /proc/loadavg)"
