package pool

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/rightsize/rightsize/workqueue/factory"
)

// Master is what the pool knows of one master, from its catalog record.
type Master struct {
	Project string
	Addr    string // "host:port", as the workers reach it
	// Name and Port identify it as its record does (Name is the host
	// name it advertises), for the masters to find their decision.
	Name string
	Port int
	// Tasks is the master's tasks waiting or running.
	Tasks int
	// Connected is the workers connected to it, from any source.
	Connected int
	// Received is the workers connected to it from this pool (its
	// workers_by_pool), or -1 when the master does not say: the plan then
	// counts this pool's running workers submitted for it, at most
	// Connected.
	Received int
	// Capacity is the tasks it can keep running at once (capacity_tasks),
	// or 0 if it has not reported one.
	Capacity int
	// Cores is the cores of its connected workers (cores_total), and
	// PoolCores those of its workers from this pool (cores_by_pool); 0
	// if it has none or does not say. Where they are known, the plan
	// counts Connected and Received by them (Plan.inUnits), so that a
	// worker of many cores is not taken for one.
	Cores     float64
	PoolCores float64
}

// need is the workers master m needs from this pool, W_max_needed of
// Eqs. 4.6–4.8, in workers of tpw tasks each, as decision d reads
// capacities: D1 and D2 ignore them, D3 and D5 use those reported (none:
// Eq. 4.7), D4, D6 and D7 also assume defaultCap for a master that has not
// reported one.
//
// The tasks a master still needs workers for are its tasks not yet held by
// a connected worker: the seed's worked example counts them so (proj2-B's
// 300 tasks, 100 of them held by another pool's workers, leave 200), where
// a strict reading of Eq. 4.8 would give 300.
func need(m Master, d factory.Policy, defaultCap, tpw int) int {
	tasks := (m.Tasks + tpw - 1) / tpw
	still := max(0, tasks-m.Connected) // Eq. 4.7
	capacity := m.Capacity
	switch d {
	case factory.D1, factory.D2:
		capacity = 0
	case factory.D4, factory.D6, factory.D7:
		if capacity <= 0 {
			capacity = defaultCap
		}
	}
	if capacity > 0 {
		// Eq. 4.8: never below zero, so that a falling capacity alone
		// does not take workers away.
		still = min(max(0, (capacity+tpw-1)/tpw-m.Connected), still)
	}
	return still + max(m.Received, 0) // Eq. 4.6
}

// distribute shares total workers between masters of needs needs (Eqs.
// 4.9–4.15): share[i] is the index of master i's distribution entry in
// shares. Masters that need less than their default share get what they
// need; the others share the rest in proportion to their default shares,
// never more than they need. The decisions sum to at most total.
func distribute(shares []Share, share []int, needs []int, total int) []int {
	n := len(needs)
	out := make([]int, n)
	if n == 0 || total <= 0 {
		return out
	}
	// Eqs. 4.9–4.11: each entry's workers, scaled so that the entries
	// that match a master sum to total, split evenly between its masters.
	matched := map[int]int{}
	for _, e := range share {
		matched[e]++
	}
	sum := 0
	for e := range matched {
		sum += shares[e].Workers
	}
	scale := float64(total) / float64(sum) // Eq. 4.10
	defMax := make([]float64, n)
	for i, e := range share {
		defMax[i] = scale * float64(shares[e].Workers) / float64(matched[e]) // Eq. 4.9
	}

	decided := 0
	hungry := []int{}
	for i := range needs {
		if float64(needs[i]) < defMax[i] {
			out[i] = needs[i] // full
			decided += needs[i]
		} else {
			hungry = append(hungry, i)
		}
	}
	for len(hungry) > 0 {
		needed := 0 // Eq. 4.12
		weights := 0.0
		for _, i := range hungry {
			needed += needs[i]
			weights += defMax[i]
		}
		undecided := total - decided // Eq. 4.13
		if needed <= undecided {
			for _, i := range hungry {
				out[i] = needs[i]
			}
			return out
		}
		potential := make([]float64, len(hungry))
		var still []int
		for k, i := range hungry {
			potential[k] = float64(undecided) * defMax[i] / weights // Eqs. 4.14, 4.15
			if potential[k] > float64(needs[i]) {
				out[i] = needs[i]
				decided += needs[i]
			} else {
				still = append(still, i)
			}
		}
		if len(still) == len(hungry) {
			// No master can take more than its potential: each gets
			// it, in whole workers summing to what is left.
			round(out, hungry, potential, undecided)
			return out
		}
		hungry = still
	}
	return out
}

// round gives masters idx the whole part of their potentials, and what the
// fractions leave of total to those of the largest fractions (the first on
// ties).
func round(out, idx []int, potential []float64, total int) {
	given := 0
	for k, i := range idx {
		out[i] = int(math.Floor(potential[k] + 1e-9))
		given += out[i]
	}
	order := make([]int, len(idx))
	for k := range order {
		order[k] = k
	}
	sort.SliceStable(order, func(a, b int) bool {
		fa := potential[order[a]] - math.Floor(potential[order[a]]+1e-9)
		fb := potential[order[b]] - math.Floor(potential[order[b]]+1e-9)
		return fa > fb
	})
	for _, k := range order {
		if given >= total {
			break
		}
		out[idx[k]]++
		given++
	}
}

// Assignment is the pool's decision for one master.
type Assignment struct {
	Project string
	Addr    string
	Name    string
	Port    int
	Need    int // W_max_needed
	Workers int // the decision
}

// FormatDecision writes a decision as the seed publishes it:
// "proj1:800, proj2-A:1000, proj2-B:200".
func FormatDecision(as []Assignment) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = fmt.Sprintf("%s:%d", a.Project, a.Workers)
	}
	return strings.Join(parts, ", ")
}
