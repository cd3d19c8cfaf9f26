package factory

import (
	"slices"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
)

// TestSplit checks seed 004's request sequences for a deficit of 48
// workers, the last request cut to what remains.
func TestSplit(t *testing.T) {
	ones := make([]int, 48)
	for i := range ones {
		ones[i] = 1
	}
	tests := []struct {
		s       Strategy
		n, free int
		want    []int
	}{
		{OneAtATime, 48, -1, ones},
		{Additive, 48, -1, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 3}},
		{Exponential, 48, -1, []int{1, 2, 4, 8, 16, 17}},
		{AllAtOnce, 48, -1, []int{48}},
		{Optimal, 48, 47, []int{47}},
		{Optimal, 48, 96, []int{48}},
		{Optimal, 48, 0, nil},
		{Optimal, 48, -1, nil},
		{Additive, 1, -1, []int{1}},
		{Exponential, 3, -1, []int{1, 2}},
		{Exponential, 0, -1, nil},
	}
	for _, tt := range tests {
		if got := tt.s.Split(tt.n, tt.free); !slices.Equal(got, tt.want) {
			t.Errorf("%v.Split(%d, %d) = %v, want %v", tt.s, tt.n, tt.free, got, tt.want)
		}
	}
	for _, s := range []Strategy{OneAtATime, Additive, Exponential, AllAtOnce, Optimal} {
		if got, err := ParseStrategy(s.String()); err != nil || got != s {
			t.Errorf("ParseStrategy(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseStrategy("greedy"); err == nil {
		t.Error("ParseStrategy took greedy")
	}
}

// TestPlanStrategies drives plans on logical time: each strategy turns a
// deficit of 48 into its requests, a request of k counts as k workers
// queued and then running, and when one ends only its workers are asked
// for again.
func TestPlanStrategies(t *testing.T) {
	for _, tt := range []struct {
		s    Strategy
		want []int
	}{
		{Additive, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 3}},
		{Exponential, []int{1, 2, 4, 8, 16, 17}},
		{AllAtOnce, []int{48}},
	} {
		t.Run(tt.s.String(), func(t *testing.T) {
			s := newSim(t, Limits{Max: 100, Policy: D1, Strategy: tt.s})
			s.p.Observe(Demand{Masters: 1, Tasks: 48}, s.now)
			d := s.p.Next(s.now)
			if d.Submit != 48 || !slices.Equal(d.Requests, tt.want) {
				t.Fatalf("decision %+v, want 48 in %v", d, tt.want)
			}
			s.wantFill(48)
			if c := s.p.Counts(); c.Queued != 48 || c.Requests != len(tt.want) {
				t.Fatalf("counts %+v", c)
			}
			s.startAll()
			s.now = s.now.Add(time.Minute)
			s.p.Observe(Demand{Masters: 1, Tasks: 48, Workers: 48}, s.now)
			s.wantFill(0)
			// The last request dies: its workers are asked for again, split
			// afresh.
			last := s.jobs[len(s.jobs)-1]
			s.p.Ended(batch.Event{ID: last, Status: batch.Status{State: batch.Done, ExitCode: 137}}, s.now)
			k := tt.want[len(tt.want)-1]
			s.p.Observe(Demand{Masters: 1, Tasks: 48, Workers: 48 - k}, s.now)
			if d := s.p.Next(s.now); d.Submit != k || !slices.Equal(d.Requests, tt.s.Split(k, -1)) {
				t.Errorf("after a request of %d died: %+v", k, d)
			}
		})
	}
}

// TestPlanOptimal: the optimal strategy asks for what the batch system
// has free, and the rest once more is free.
func TestPlanOptimal(t *testing.T) {
	s := newSim(t, Limits{Max: 100, Policy: D1, Strategy: Optimal})
	s.p.Observe(Demand{Masters: 1, Tasks: 48}, s.now)
	if d := s.p.Next(s.now); d.Submit != 0 {
		t.Fatalf("submitted %+v without knowing what is free", d)
	}
	s.p.ObserveFree(47)
	s.wantFill(47)
	s.p.ObserveFree(0)
	s.wantFill(0)
	s.p.ObserveFree(1)
	s.wantFill(1)
}
