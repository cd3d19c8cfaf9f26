// Package model holds rightsize's performance models: what this machine has
// (Probe, the one probe of cores, memory, disk and cache that the engines,
// the Work Queue worker and Makeflow share), how much of it an engine may
// use, and how long a workload would take here versus on a cluster: All-Pairs
// (seed 000's T(c,h)), Wavefront (T_mc, T_dist) and a workflow's makespan
// under list scheduling (Makespan, CriticalPath). Package model/place turns
// their predictions into a decision; model/cluster measures their inputs.
//
// Models are plain functions of measured inputs; they do not run workloads
// or read command lines.
package model

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
)

// MemAvailable returns the memory the kernel estimates is available for new
// work without swapping (MemAvailable in /proc/meminfo), in bytes.
func MemAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseMemAvailable(f)
}

func parseMemAvailable(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("MemAvailable:"))
		if !ok {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) < 1 {
			break
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			break
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no MemAvailable line in /proc/meminfo")
}

// AllPairsBlockSize returns how many items of A to take together in a
// block: as many as fit in half of mem bytes, given the sizes of A's items,
// and at least one. A block's items are read again for every tile of B, so
// they must stay in memory (the page cache) while it runs; half, because
// B's items and the function's own memory need the rest.
func AllPairsBlockSize(mem int64, sizes []int64) int {
	n := len(sizes)
	if n == 0 {
		return 0
	}
	budget := mem / 2
	var total int64
	for i, s := range sizes {
		total += s
		if total > budget {
			return max(i, 1)
		}
	}
	return n
}
