package model

import (
	"math"
	"slices"
	"testing"
)

func TestAllPairsJobs(t *testing.T) {
	for _, tc := range []struct {
		name string
		n, m int
		c    float64
		want []int
	}{
		{"6×6 in jobs of 4: 2×2 blocks", 6, 6, 4, []int{4, 4, 4, 4, 4, 4, 4, 4, 4}},
		{"6×6 in jobs of 6: 3×2 blocks", 6, 6, 6, []int{6, 6, 6, 6, 6, 6}},
		{"6×6 in jobs of 2: 2×1 blocks", 6, 6, 2, slices.Repeat([]int{2}, 18)},
		{"5×3 in jobs of 4: edges cut short", 5, 3, 4, []int{4, 4, 2, 2, 2, 1}},
		{"a job larger than the matrix is the matrix", 3, 2, 100, []int{6}},
		{"a job of less than a cell is a cell", 2, 2, 0.3, []int{1, 1, 1, 1}},
		{"no items, no jobs", 0, 5, 4, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AllPairsJobs(tc.n, tc.m, tc.c)
			if !slices.Equal(got, tc.want) {
				t.Errorf("AllPairsJobs(%d, %d, %v) = %v, want %v", tc.n, tc.m, tc.c, got, tc.want)
			}
			sum := 0
			for _, c := range got {
				sum += c
			}
			if sum != tc.n*tc.m && tc.n > 0 {
				t.Errorf("the jobs have %d cells, want the matrix's %d", sum, tc.n*tc.m)
			}
		})
	}
}

func TestAllPairsEvents(t *testing.T) {
	nine := slices.Repeat([]int{4}, 9) // a 6×6 in 2×2 blocks
	for _, tc := range []struct {
		name string
		in   AllPairsEventInputs
		want float64
	}{
		{"nine jobs on eight slots end in two rounds", AllPairsEventInputs{Jobs: nine, CellTime: 0.05, Slots: 8}, 0.4},
		{"the slots join once, after the start-up", AllPairsEventInputs{Jobs: nine, CellTime: 0.05, Slots: 8, Start: 0.25}, 0.65},
		{"each job on the cluster pays its job cost", AllPairsEventInputs{Jobs: nine, CellTime: 0.05, Slots: 8, JobCost: 0.05}, 0.5},
		{"nine jobs on nine slots, one round", AllPairsEventInputs{Jobs: nine, CellTime: 0.05, Slots: 9}, 0.2},
		// 18 jobs of 0.4 s, 16 slots with a 1 s dispatch from each job's
		// submission (the batch stand-in's 6×6 of 200 ms, which took
		// 1.85 s): 16 start at 1 s, the last 2 when the first end.
		{"a batch system's queue waits in parallel", AllPairsEventInputs{Jobs: slices.Repeat([]int{2}, 18), CellTime: 0.2, Slots: 16, Dispatch: 1, JobCost: 0.03}, 1.86},
		// Hybrid: the cores here take jobs until the cluster's start
		// earlier (1.45 s measured, 7 jobs here).
		{"hybrid on a batch system", AllPairsEventInputs{Jobs: slices.Repeat([]int{2}, 18), CellTime: 0.2, LocalCores: 2, Slots: 16, Dispatch: 1, JobCost: 0.03}, 1.43},
		{"the serial submission of the first round", AllPairsEventInputs{Jobs: []int{1, 1, 1}, CellTime: 1, Slots: 3, Dispatch: 1, Submit: 0.5}, 3},
		// One job here runs on both cores: 4 cells of 0.05 s in 0.1 s.
		{"a lone job here runs on every core", AllPairsEventInputs{Jobs: []int{4}, CellTime: 0.05, LocalCores: 2}, 0.1},
		// The own worker takes a job per core as it connects, and no
		// more once a worker joins from here at 0.01 s: the other seven
		// wait for the cluster's four slots at 0.5 s, two rounds.
		{"the own worker drains when a worker joins from here", AllPairsEventInputs{Jobs: nine, CellTime: 0.05, LocalCores: 2, LocalStops: true, LocalUntil: 0.01, Slots: 4, Start: 0.5}, 0.9},
		{"without the drain the cores here keep taking jobs", AllPairsEventInputs{Jobs: nine, CellTime: 0.05, LocalCores: 2, Slots: 4, Start: 0.5}, 0.7},
		{"no slot anywhere never ends", AllPairsEventInputs{Jobs: nine, CellTime: 0.05}, math.Inf(1)},
		{"no jobs end at once", AllPairsEventInputs{CellTime: 0.05, Slots: 1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AllPairsEvents(tc.in)
			if math.Abs(got-tc.want) > 1e-9 && !(math.IsInf(got, 1) && math.IsInf(tc.want, 1)) {
				t.Errorf("AllPairsEvents = %v, want %v", got, tc.want)
			}
		})
	}
}
