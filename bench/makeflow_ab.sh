#!/usr/bin/env bash
# Two makeflow binaries against each other, for a change too small to see
# in makeflow_bench.sh's ratios to make, which move by ±0.15 with the load:
#
#   bench/makeflow_ab.sh BEFORE AFTER [ROUNDS [SHAPES]]
#
# runs the flat and chain workflows of makeflow_bench.sh (2000 rules, or
# MAKEFLOW_AB_RULES) with each binary in turn every round, the order
# turning each round, in a fresh directory, -T local -j 2, and prints the
# medians of the wall time and of the CPU time (user and system, the
# rules' included, from /usr/bin/time) and their ratios AFTER / BEFORE.
# Build the two binaries first (go build -o ... ./cmd/makeflow at the two
# commits); run it under the bench lock.
set -euo pipefail
before=$1 after=$2 rounds=${3:-11} shapes=${4:-flat chain} n=${MAKEFLOW_AB_RULES:-2000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
awk -v n="$n" 'BEGIN {
  for (i = 1; i <= n; i++) printf "out_%d:\n\techo %d > out_%d\n", i, i, i
  printf "gather:"; for (i = 1; i <= n; i++) printf " out_%d", i
  printf "\n\tcat out_* > gather\n" }' > "$work/flat.mf"
awk -v n="$n" 'BEGIN {
  printf "c_1:\n\techo 1 > c_1\n"
  for (i = 2; i <= n; i++) printf "c_%d: c_%d\n\tcp c_%d c_%d\n", i, i-1, i-1, i }' > "$work/chain.mf"

# run BINARY SHAPE prints "wall cpu", in seconds.
run() {
  local dir
  dir=$(mktemp -d "$work/run.XXXXXX")
  cp "$work/$2.mf" "$dir/Makeflow"
  (cd "$dir" && /usr/bin/time -f "%e %U %S" -o "$work/time" "$1" -T local -j 2 Makeflow >/dev/null)
  rm -rf "$dir"
  awk '{ printf "%.2f %.2f\n", $1, $2 + $3 }' "$work/time"
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

echo "start $(date -u +%FT%TZ); load average $(cut -d' ' -f1-3 /proc/loadavg)"
for shape in $shapes; do
  declare -A wall=() cpu=()
  for ((r = 0; r < rounds; r++)); do
    order="before after"
    ((r % 2)) && order="after before"
    for which in $order; do
      read -r w c < <(run "${!which}" "$shape")
      wall[$which]+="$w " cpu[$which]+="$c "
    done
  done
  wb=$(echo "${wall[before]}" | median) wa=$(echo "${wall[after]}" | median)
  cb=$(echo "${cpu[before]}" | median) ca=$(echo "${cpu[after]}" | median)
  echo "$shape $n rules, $rounds rounds ($(date -u +%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)):" \
    "wall $wb s -> $wa s (after/before $(ratio "$wa" "$wb")), cpu $cb s -> $ca s (after/before $(ratio "$ca" "$cb"))"
  for which in before after; do
    echo "  $which wall: ${wall[$which]% }"
    echo "  $which cpu:  ${cpu[$which]% }"
  done
  unset wall cpu
done
echo "end $(date -u +%FT%TZ); load average $(cut -d' ' -f1-3 /proc/loadavg)"
