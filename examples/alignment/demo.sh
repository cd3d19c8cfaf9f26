#!/usr/bin/env bash
# Alignment wavefront: the Smith-Waterman score of two related DNA sequences
# of 12,000 letters, cut into chunks of 500 (a 24×24 wavefront of blocks of
# the dynamic programme), with the swcell built-in (seed 000 §5.1). Then the
# run is interrupted half-way and resumed from its checkpoint, and the score
# is checked against the uninterrupted run.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/bin:$PATH"
command -v wavefront >/dev/null || go build -o bin/ ./cmd/wavefront

out=examples/out/alignment
rm -rf "$out" && mkdir -p "$out/R"

# Two sequences: B is A with about 4% of its letters changed, a few short
# insertions and deletions, and its own ends (a fixed seed, so every run is
# the same).
awk -v n=12000 -v chunk=500 -v dir="$out/R" 'BEGIN {
  srand(42)
  split("A C G T", base, " ")
  for (i = 0; i < n; i++) a = a base[int(rand() * 4) + 1]
  b = ""
  for (i = 0; i < 300; i++) b = b base[int(rand() * 4) + 1]
  for (i = 1; i <= n; i++) {
    r = rand()
    if (r < 0.04) b = b base[int(rand() * 4) + 1]        # substitution
    else if (r < 0.045) continue                         # deletion
    else if (r < 0.05) b = b substr(a, i, 1) "T"         # insertion
    else b = b substr(a, i, 1)
  }
  for (i = 0; i < 200; i++) b = b base[int(rand() * 4) + 1]
  printf "" > (dir "/R.0.0")
  for (k = 1; (k - 1) * chunk < length(a); k++) print ">A chunk " k "\n" substr(a, (k - 1) * chunk + 1, chunk) > (dir "/R." k ".0")
  for (k = 1; (k - 1) * chunk < length(b); k++) print ">B chunk " k "\n" substr(b, (k - 1) * chunk + 1, chunk) > (dir "/R.0." k)
}'
nx=$(ls "$out/R" | grep -c '^R\.[1-9][0-9]*\.0$')
ny=$(ls "$out/R" | grep -c '^R\.0\.[1-9][0-9]*$')
echo "alignment: A has $nx chunks and B has $ny chunks of 500 letters: a ${nx}×${ny} wavefront"

wavefront --bitmap "$out/progress.png" builtin:swcell "$out/R" 2>"$out/log"
cat "$out/log"
score=$(wavefront export "$out/R" | awk -F'\t' -v x="$nx" -v y="$ny" '$1 == x && $2 == y { sub(/\\n.*/, "", $3); split($3, f, " "); print f[3] }')
echo "alignment: Smith-Waterman score of A against B: $score (progress picture: $out/progress.png)"

# Interrupt a second run part-way (SIGINT, as Ctrl-C would), then resume it.
mkdir -p "$out/R2" && cp "$out"/R/R.*.0 "$out"/R/R.0.[1-9]* "$out/R2/"
wavefront -c 1 builtin:swcell "$out/R2" 2>"$out/log2" &
pid=$!
sleep 0.3
kill -INT "$pid" 2>/dev/null || true
wait "$pid" && status=0 || status=$?
echo "alignment: interrupted run exited with status $status: $(grep -o 'the [0-9]* finished cells are kept' "$out/log2" || echo 'it had already finished')"
wavefront builtin:swcell "$out/R2" 2>"$out/log3"
grep -E 'resuming|computed' "$out/log3" || true
score2=$(wavefront export "$out/R2" | awk -F'\t' -v x="$nx" -v y="$ny" '$1 == x && $2 == y { sub(/\\n.*/, "", $3); split($3, f, " "); print f[3] }')
if [ "$score2" != "$score" ]; then
  echo "alignment: the resumed run's score $score2 differs from $score" >&2
  exit 1
fi
echo "alignment: the resumed run gives the same score, $score2"
