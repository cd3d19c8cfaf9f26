#!/usr/bin/env bash
# Runs the BLAST-like example: generates a small random DNA database and
# queries (half of them mutated copies of database sequences), then checks,
# runs, partly re-runs and cleans the workflow with makeflow.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../out/blast"
rm -rf "$out"
mkdir -p "$out"
cp "$here/Makeflow" "$here/split.sh" "$here/search.sh" "$out/"
cd "$out"

# 300 database sequences of 400 bases; 60 queries of 200 bases.
awk -v seed=42 'BEGIN {
  srand(seed); split("ACGT", base, "")
  for (d = 1; d <= 300; d++) {
    s = ""; for (i = 0; i < 400; i++) s = s base[int(rand() * 4) + 1]
    db[d] = s; printf ">db%03d\n%s\n", d, s > "db.fa"
  }
  for (q = 1; q <= 60; q++) {
    if (q % 2) {        # a piece of a database sequence, with 5% mutations
      d = int(rand() * 300) + 1; s = substr(db[d], int(rand() * 200) + 1, 200)
      t = ""; for (i = 1; i <= 200; i++) t = t (rand() < 0.05 ? base[int(rand() * 4) + 1] : substr(s, i, 1))
      printf ">q%02d_from_db%03d\n%s\n", q, d, t > "query.fa"
    } else {            # unrelated
      t = ""; for (i = 0; i < 200; i++) t = t base[int(rand() * 4) + 1]
      printf ">q%02d_random\n%s\n", q, t > "query.fa"
    }
  }
}'

echo "-- makeflow --check"
makeflow --check Makeflow
echo "-- makeflow -j 2"
makeflow -j 2 Makeflow
echo "-- results (first 5 of $(wc -l < results.txt))"
head -5 results.txt
cat summary.txt
correct=$(awk '$1 ~ /_from_/ { split($1, a, "_from_"); if (a[2] == $2) ok++ } END { print ok + 0 }' results.txt)
echo "$correct of 30 mutated queries found the sequence they came from"

echo "-- hits.2 lost: makeflow reruns only what depends on it"
rm hits.2
makeflow -j 2 Makeflow
cp results.txt results.local
echo "-- makeflow -c"
makeflow -c Makeflow | tail -3

# The same workflow on Work Queue workers: the searches run on two workers
# (here on this machine; on a cluster, anywhere that can reach it), with
# db.fa and search.sh, which every search reads, sent once to each worker.
echo "-- makeflow -T wq, with two workers"
makeflow -T wq -Z wq.port Makeflow > wq.log 2>&1 &
mf=$!
for _ in $(seq 500); do [ -s wq.port ] && break; sleep 0.01; done
workers=()
for _ in 1 2; do
  workqueue worker -q -t 30 127.0.0.1 "$(cat wq.port)" 2>> wq.workers.log &
  workers+=($!)
done
status=0
wait "$mf" || status=$?
kill "${workers[@]}" 2>/dev/null || true
wait "${workers[@]}" 2>/dev/null || true
grep -E "listening|workflow complete" wq.log
[ "$status" = 0 ] || { cat wq.log; exit "$status"; }
if cmp -s results.txt results.local; then
  echo "the same results as on this machine"
else
  echo "the results differ from this machine's" >&2
  exit 1
fi
makeflow -c Makeflow > /dev/null
