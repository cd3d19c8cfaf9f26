#!/usr/bin/env bash
# Economics wavefront: a two-firm R&D race solved backwards from its end
# (seed 000 §5.3). State (x, y) has firm 1 x steps and firm 2 y steps from
# the frontier; the first to arrive wins a prize of 1 (shared if they arrive
# together). The rdgame built-in finds each state's Nash equilibrium from the
# three states the race can move to.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/bin:$PATH"
command -v wavefront >/dev/null || go build -o bin/ ./cmd/wavefront

n=${N:-200}
prize=${PRIZE:-100}
out=examples/out/economics
rm -rf "$out" && mkdir -p "$out/R"
echo "$((prize / 2)) $((prize / 2))" > "$out/R/R.0.0"
for k in $(seq 1 "$n"); do
  echo "$prize 0" > "$out/R/R.0.$k"   # firm 1 has arrived first
  echo "0 $prize" > "$out/R/R.$k.0"   # firm 2 has
done
echo "economics: solving a ${n}×${n} R&D race"
wavefront --bitmap "$out/progress.png" builtin:rdgame "$out/R" 2>"$out/log"
cat "$out/log"
wavefront export --format tsv "$out/R" >"$out/race.tsv"

echo "economics: values and equilibrium efforts (v1 v2 e1 e2) in a few states:"
awk -F'\t' '
  ($1 == 1 && $2 == 1) || ($1 == 5 && $2 == 5) || ($1 == 5 && $2 == 10) ||
  ($1 == 10 && $2 == 5) || ($1 == 20 && $2 == 40) || ($1 == 100 && $2 == 100) {
    split($3, f, " ")
    printf "  state (%3d,%3d): firm 1 worth %.4f, firm 2 worth %.4f, efforts %.3f and %.3f\n", $1, $2, f[1], f[2], f[3], f[4]
  }' "$out/race.tsv"
echo "economics: the firm ahead is worth more and both try hardest when the race is close; full table in $out/race.tsv"
