#!/bin/sh
# split.sh FASTA N PREFIX: deals the FASTA records of FASTA round robin into
# PREFIX.0 ... PREFIX.(N-1).
set -eu
fasta=$1 n=$2 prefix=$3
i=0
while [ "$i" -lt "$n" ]; do : > "$prefix.$i"; i=$((i + 1)); done
awk -v n="$n" -v prefix="$prefix" '
  /^>/ { part = (rec++) % n }
  { print > (prefix "." part) }' "$fasta"
