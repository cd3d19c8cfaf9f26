#!/usr/bin/env bash
# Automatic placement against the forced modes (issue 12): All-Pairs and
# Wavefront problems of several sizes and function costs, each run by
# `allpairs`/`wavefront` with no flag (auto), on this machine only, on a
# cluster (-T) and hybrid (-T --hybrid); predicted against measured seconds
# for every run, and auto's time against the fastest forced mode's. The
# cluster is the local batch driver standing for one with 16 slots and a
# 1 s dispatch (RIGHTSIZE_CLUSTER, bench/placement/main.go); the function
# sleeps (bench/csrc/nap.c). Draws bench/placement.png.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/bench/out/placement
mkdir -p "$out/bin"
make -s build
gcc -O2 -o "$out/bin/nap" bench/csrc/nap.c
go run ./bench/placement -bin bin -nap "$out/bin/nap" -dir "$out" -png bench/placement.png "$@"
