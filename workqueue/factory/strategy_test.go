package factory

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/batchtest"
	"github.com/rightsize/rightsize/batch/shape"
	"github.com/rightsize/rightsize/workqueue"
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

// TestShapedRequests: with candidate shapes, a request of k workers is
// submitted as the candidate, scaled by k, predicted to finish first, and
// counts as its cores over a worker's, never more than the room left.
func TestShapedRequests(t *testing.T) {
	// 4 cores free for the first 3 hours, 16 after.
	p := shape.Profile{{Start: 0, End: 3 * time.Hour, Free: 4}, {Start: 3 * time.Hour, End: shape.Forever, Free: 16}}
	cfg := Config{Master: "127.0.0.1:9123", Worker: Worker{Command: []string{"worker"}, Cores: 1},
		Shapes:  []shape.Shape{{Cores: 1, Wall: 2 * time.Hour}, {Cores: 4, Wall: 20 * time.Minute}},
		Chooser: p.Chooser()}
	f := &factory{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	for _, tt := range []struct {
		k, room, cores, workers int
		wall                    time.Duration
	}{
		{1, 100, 4, 4, 20 * time.Minute}, // 4 cores now for 20 min beat 1 for 2 h
		{4, 100, 4, 4, 2 * time.Hour},    // 16 cores only at 3 h: 4 for 2 h now finish first
		{2, 100, 2, 2, 2 * time.Hour},    // likewise 8 cores against 2
		{1, 2, 2, 2, 20 * time.Minute},   // 4 cores cut to the 2 workers --max leaves
		{4, 3, 3, 3, 20 * time.Minute},   // 16 and 4 cores cut to 3: both fit now, 20 min first
		{1, 0, 1, 1, 20 * time.Minute},   // no room: still one worker, not four
	} {
		job, n := f.shaped(context.Background(), tt.k, tt.room)
		if job.Resources.Cores != tt.cores || job.Resources.WallTime != tt.wall || n != tt.workers ||
			!strings.Contains(job.Command, "'--cores' '"+strconv.Itoa(tt.cores)+"'") {
			t.Errorf("request of %d with room %d: %d cores for %v counted as %d (%s); want %d cores for %v as %d",
				tt.k, tt.room, job.Resources.Cores, job.Resources.WallTime, n, job.Command, tt.cores, tt.wall, tt.workers)
		}
	}
}

// TestShapedWorkersWithinMax: with real workers, a shape wider than --max
// leaves room for is cut to it: 4 cores with a maximum of 3 is one
// worker of 3 cores, counted as 3, and the factory submits nothing more.
func TestShapedWorkersWithinMax(t *testing.T) {
	m := startMaster(t, workqueue.Config{})
	r := startFactory(t, Config{
		Driver: batchtest.Local(t, 8),
		Master: masterAddr(m),
		Worker: Worker{Cores: 1, IdleTimeout: time.Minute},
		Limits: Limits{Max: 3},
		Shapes: []shape.Shape{{Cores: 4, Wall: time.Hour}},
	}, t.TempDir())
	submitTasks(t, m, 6, "sleep 0.2")
	waitResults(t, m, 6)
	c, maxActive := r.snapshot()
	if maxActive != 3 || c.Submitted != 3 || c.Requests != 1 {
		t.Errorf("at most %d workers, %d submitted in %d requests; want 3 in 1 (a 4-core shape cut to --max 3)",
			maxActive, c.Submitted, c.Requests)
	}
	if ws := m.Workers(); len(ws) != 1 || ws[0].Cores != 3 {
		t.Errorf("workers %+v, want one of 3 cores", ws)
	}
}

// TestShapedRequestsWithinMax: requests shaped by a candidate whose cores
// are not a multiple of a worker's (6 cores, workers of 4) never take the
// factory past --max in cores: a job counts as the workers its cores fill,
// rounded up, so that the jobs' cores stay within --max workers' worth.
func TestShapedRequestsWithinMax(t *testing.T) {
	for _, tt := range []struct {
		name         string
		unit, max, k int
		shapes       []shape.Shape
	}{
		{"6 cores for workers of 4, one at a time", 4, 4, 1, []shape.Shape{{Cores: 6, Wall: time.Hour}}},
		{"6 cores for workers of 4, by 3", 4, 5, 3, []shape.Shape{{Cores: 6, Wall: time.Hour}}},
		{"3 cores for workers of 2", 2, 7, 1, []shape.Shape{{Cores: 3, Wall: time.Hour}}},
		{"2 cores for workers of 4", 4, 3, 1, []shape.Shape{{Cores: 2, Wall: time.Hour}}},
		{"4 cores for workers of 1", 1, 6, 1, []shape.Shape{{Cores: 4, Wall: time.Hour}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := NewPlan(Limits{Max: tt.max}, time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Master: "127.0.0.1:9123", Worker: Worker{Command: []string{"worker"}, Cores: tt.unit},
				Shapes: tt.shapes, Chooser: shape.First{}}
			f := &factory{cfg: cfg, log: slog.New(slog.DiscardHandler)}
			cores, jobs := 0, 0
			for plan.Room() > 0 {
				job, n := f.shaped(context.Background(), min(tt.k, plan.Room()), plan.Room())
				if n > plan.Room() {
					t.Fatalf("job %d: %d cores counted as %d workers with room for %d", jobs, job.Resources.Cores, n, plan.Room())
				}
				plan.Submitted(strconv.Itoa(jobs), n)
				cores += job.Resources.Cores
				jobs++
			}
			if limit := tt.max * tt.unit; cores > limit {
				t.Errorf("%d jobs of %d cores in all; --max %d workers of %d cores is %d", jobs, cores, tt.max, tt.unit, limit)
			}
		})
	}
}
