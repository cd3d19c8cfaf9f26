#!/usr/bin/env bash
# All-Pairs demo: compare 200 iris-like templates of 100 KB each, every one
# against every other, first with a built-in function and then (on a subset)
# with an external C program, and report how well the distances tell people
# apart.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/bin:$PATH"
TIMEFORMAT='  took %R s'
out=examples/out/biometrics
mkdir -p "$out/bin"
go build -o "$out/bin/" ./examples/biometrics/irisgen ./examples/biometrics/irisreport
gcc -O2 -o "$out/bin/irisdist" examples/biometrics/irisdist.c

echo "generating 200 templates (50 people × 4 captures, 100 KB each) in $out/templates"
rm -rf "$out/templates"
"$out/bin/irisgen" -subjects 50 -captures 4 -size 100000 "$out/templates"

echo
echo "allpairs builtin:bytediff --symmetric (200 × 200, half the matrix):"
time allpairs --symmetric builtin:bytediff "$out/templates" "$out/templates" > "$out/builtin.txt"
echo "  $(wc -l < "$out/builtin.txt") cells"
"$out/bin/irisreport" "$out/builtin.txt"

echo
echo "allpairs $out/bin/irisdist (an external program) on the first 60 templates:"
templates=("$PWD/$out"/templates/*.iris)
printf '%s\n' "${templates[@]:0:60}" > "$out/first60.list"
time allpairs --symmetric "$out/bin/irisdist" "$out/first60.list" "$out/first60.list" > "$out/external.txt"
echo "  $(wc -l < "$out/external.txt") cells"
"$out/bin/irisreport" -compare "$out/external.txt" "$out/builtin.txt"
