#!/usr/bin/env bash
# Makeflow engine overhead, side by side with GNU make and CCTools makeflow.
#
#   flat:  2000 trivial rules (echo i > out_i) and one rule gathering them, -j 2
#   chain: 2000 rules, each copying the previous rule's output, -j 2
#
# Every round runs each tool once, in a fresh directory, in turn, so that the
# machine's load falls on all of them alike; the medians over the rounds and
# the ratios to make are printed. Builds bin/makeflow; GNU make
# and CCTools' /usr/bin/makeflow are used when installed.
#
#   MAKEFLOW_BENCH_ROUNDS  rounds (default 5)
#   MAKEFLOW_BENCH_RULES   rules per workflow (default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
ours="$PWD/bin/makeflow"
cctools=/usr/bin/makeflow
rounds=${MAKEFLOW_BENCH_ROUNDS:-5}
n=${MAKEFLOW_BENCH_RULES:-2000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

go build -o bin/ ./cmd/makeflow # what is benchmarked is always this tree
tools=(ours)
command -v make >/dev/null && tools+=(make)
[ -x "$cctools" ] && "$cctools" -v >/dev/null 2>&1 && tools+=(cctools)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Workflow definitions, written once.
gen_flat() {
  awk -v n="$n" 'BEGIN {
    for (i = 1; i <= n; i++) printf "out_%d:\n\techo %d > out_%d\n", i, i, i
    printf "gather:"; for (i = 1; i <= n; i++) printf " out_%d", i
    printf "\n\tcat out_* > gather\n" }' > "$work/flat.mf"
  awk -v n="$n" 'BEGIN {
    printf "all: gather\ngather:"; for (i = 1; i <= n; i++) printf " out_%d", i
    printf "\n\tcat out_* > gather\n"
    for (i = 1; i <= n; i++) printf "out_%d:\n\techo %d > out_%d\n", i, i, i }' > "$work/flat.mk"
}
gen_chain() {
  awk -v n="$n" 'BEGIN {
    printf "c_1:\n\techo 1 > c_1\n"
    for (i = 2; i <= n; i++) printf "c_%d: c_%d\n\tcp c_%d c_%d\n", i, i-1, i-1, i }' > "$work/chain.mf"
  awk -v n="$n" 'BEGIN {
    printf "all: c_%d\nc_1:\n\techo 1 > c_1\n", n
    for (i = 2; i <= n; i++) printf "c_%d: c_%d\n\tcp c_%d c_%d\n", i, i-1, i-1, i }' > "$work/chain.mk"
}
gen_flat
gen_chain

# run TOOL SHAPE prints the seconds one run takes, in a fresh directory.
run() {
  local tool=$1 shape=$2 dir
  dir=$(mktemp -d "$work/run.XXXXXX")
  cp "$work/$shape.mf" "$dir/Makeflow"
  cp "$work/$shape.mk" "$dir/Makefile"
  local start end
  start=$(date +%s%N)
  case $tool in
    ours) (cd "$dir" && "$ours" -j 2 Makeflow >/dev/null) ;;
    make) (cd "$dir" && make -s -j2 >/dev/null) ;;
    cctools) (cd "$dir" && "$cctools" -j 2 Makeflow >/dev/null 2>&1) ;;
  esac
  end=$(date +%s%N)
  rm -rf "$dir"
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", (e - s) / 1e9 }'
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

for shape in flat chain; do
  declare -A times=()
  for ((r = 1; r <= rounds; r++)); do
    for tool in "${tools[@]}"; do
      times[$tool]+="$(run "$tool" "$shape") "
    done
  done
  echo "$shape: $n rules, -j 2, median of $rounds rounds"
  declare -A med=()
  for tool in "${tools[@]}"; do
    med[$tool]=$(echo "${times[$tool]}" | tr ' ' '\n' | grep . | median)
    printf '  %-8s %6.2f s   (%s)\n' "$tool" "${med[$tool]}" "${times[$tool]% }"
  done
  if [ -n "${med[make]:-}" ]; then
    for tool in "${tools[@]}"; do
      [ "$tool" = make ] && continue
      awk -v t="$tool" -v a="${med[$tool]}" -v b="${med[make]}" 'BEGIN { printf "  %s / make = %.2f\n", t, a / b }'
    done
  fi
  for tool in "${tools[@]}"; do
    awk -v t="$tool" -v s="${med[$tool]}" -v n="$n" 'BEGIN { printf "  %-8s %6.0f µs per rule\n", t, s * 1e6 / n }'
  done
  unset times med
done
