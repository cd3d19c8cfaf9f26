package model

import (
	"math"
	"testing"
)

func TestMakespan(t *testing.T) {
	// A fan: 8 independent rules of 10 s, then one of 1 s that needs them.
	fan := make([]FlowRule, 9)
	for i := range 8 {
		fan[i] = FlowRule{Seconds: 10}
		fan[8].Parents = append(fan[8].Parents, i)
	}
	fan[8].Seconds = 1
	chain := []FlowRule{{Seconds: 5}, {Seconds: 5, Parents: []int{0}}, {Seconds: 5, Parents: []int{1}}}
	short := make([]FlowRule, 10)
	for i := range short {
		short[i] = FlowRule{Seconds: 0.1}
	}
	for _, tc := range []struct {
		name  string
		rules []FlowRule
		p     FlowPlaces
		want  float64
	}{
		{"fan on 2 cores", fan, FlowPlaces{LocalSlots: 2}, 41},
		{"fan on 8 remote slots", fan, FlowPlaces{LocalSlots: 2, RemoteSlots: 8, Dispatch: 2}, 12 + 3},
		{"chain does not widen", chain, FlowPlaces{LocalSlots: 1, RemoteSlots: 100, Dispatch: 1}, 18},
		{"short rules pay the dispatch", short, FlowPlaces{LocalSlots: 2, RemoteSlots: 10, Dispatch: 1}, 1.1},
		{"short rules kept here", func() []FlowRule {
			r := append([]FlowRule(nil), short...)
			for i := range r {
				r[i].Here = true
			}
			return r
		}(), FlowPlaces{LocalSlots: 2, RemoteSlots: 10, Dispatch: 1}, 0.5},
		{"data over the link", []FlowRule{{Seconds: 1, Bytes: 250e6}}, FlowPlaces{LocalSlots: 1, RemoteSlots: 1, Dispatch: 1, Bandwidth: 125e6}, 4},
		// Hybrid: the two local cores take fan rules at once, the eight
		// remote slots the other six after their dispatch.
		{"fan, hybrid", fan, FlowPlaces{LocalSlots: 2, RemoteSlots: 8, Dispatch: 2, Hybrid: true}, 12 + 1},
		// The two cores take the rules still in the cluster's dispatch, two
		// every 0.1 s, and are done before the cluster starts any.
		{"short rules, hybrid", short, FlowPlaces{LocalSlots: 2, RemoteSlots: 10, Dispatch: 1, Hybrid: true}, 0.5},
		// Twenty rules of 0.2 s on 2 cores and 16 slots with a dispatch of
		// 1 s: the cores take 2 at once and then 8 in dispatch (two every
		// 0.2 s until 1 s); the cluster runs the last 10 from 1 s.
		{"longer rules, hybrid", func() []FlowRule {
			r := make([]FlowRule, 20)
			for i := range r {
				r[i] = FlowRule{Seconds: 0.2}
			}
			return r
		}(), FlowPlaces{LocalSlots: 2, RemoteSlots: 16, Dispatch: 1, Hybrid: true}, 1.2},
		// Cores: the 2-core rule, longest, holds both slots, then the two
		// 1-core rules run beside each other (5 + 2); one asking for more
		// than there are runs alone rather than never.
		{"cores held", []FlowRule{{Seconds: 5, Cores: 2}, {Seconds: 2}, {Seconds: 2}}, FlowPlaces{LocalSlots: 2}, 7},
		{"more cores than there are", []FlowRule{{Seconds: 3, Cores: 8}, {Seconds: 1}}, FlowPlaces{LocalSlots: 4}, 4},
		// The short rule fills the core the 3-core rule leaves free.
		{"backfill", []FlowRule{{Seconds: 4, Cores: 3}, {Seconds: 4, Cores: 3}, {Seconds: 1}}, FlowPlaces{LocalSlots: 4}, 8},
		{"cores count here only", []FlowRule{{Seconds: 5, Cores: 4}, {Seconds: 5, Cores: 4}}, FlowPlaces{LocalSlots: 4, RemoteSlots: 2, Dispatch: 1}, 6},
		// Longest tail first: the 9 s chain starts at once, beside the
		// two 4 s rules, for 9 s in all (file order would take 12).
		{"critical path first", []FlowRule{{Seconds: 4}, {Seconds: 4}, {Seconds: 3}, {Seconds: 6, Parents: []int{2}}}, FlowPlaces{LocalSlots: 2}, 9},
	} {
		if got := Makespan(tc.rules, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: makespan %v, want %v", tc.name, got, tc.want)
		}
	}
	if cp, _ := CriticalPath(fan); cp != 11 {
		t.Errorf("fan's critical path %v, want 11", cp)
	}
	if w := TotalWork(fan); w != 81 {
		t.Errorf("fan's work %v, want 81", w)
	}
}
