package sim

import (
	"context"
	"fmt"
	"testing"
)

// allocationScenario is seed 004's allocation experiment (§4, Table 1): a
// factory asks at once for 48 one-core workers with strategy, from an LRM
// with slots free over time, and the run stops at 180 s; its core-seconds
// are the CPU time the workers had accumulated by then.
func allocationScenario(strategy string, slots []SlotStep, seed uint64) *Scenario {
	return &Scenario{
		Seed:  seed,
		Limit: 180,
		Factory: &Factory{Max: 48, Decision: "D1", Strategy: strategy, Worker: WorkerGroup{Cores: 1},
			IdleTimeout: 1000, LRM: &LRM{Slots: slots}},
		Tasks: []TaskGroup{{Count: 48, Runtime: Dist{Kind: "const", Mean: 1000}}},
	}
}

var (
	// idle: 2 of the site's 96 processors busy.
	idleSlots = []SlotStep{{At: 0, Slots: 94}}
	// busy: 47 free until 160 s, then 48.
	busySlots = []SlotStep{{At: 0, Slots: 47}, {At: 160, Slots: 48}}
)

// allocationTable runs the experiment for every strategy in both cases,
// the mean of runs seeds, and returns CPU-seconds at 180 s by case and
// strategy.
func allocationTable(t *testing.T, runs int) map[string]map[string]float64 {
	t.Helper()
	out := map[string]map[string]float64{}
	for name, slots := range map[string][]SlotStep{"idle": idleSlots, "busy": busySlots} {
		out[name] = map[string]float64{}
		for _, s := range strategies {
			sum := 0.0
			for seed := range uint64(runs) {
				r, err := Run(context.Background(), allocationScenario(s, slots, seed))
				if err != nil {
					t.Fatal(err)
				}
				sum += r.CoreSeconds
			}
			out[name][s] = sum / float64(runs)
		}
	}
	return out
}

var strategies = []string{"one-at-a-time", "additive", "exponential", "all-at-once", "optimal"}

// TestAllocationStrategies reproduces the ordering of seed 004's Table 1
// on the mock LRM: on an idle site the coarse strategies come within a few
// per cent of one another and one-at-a-time far behind; on a busy one
// (47 free until 160 s) additive leads, exponential and one-at-a-time
// come close together behind it, and all-at-once, whose one request of 48
// waits for the 48th slot, gets almost nothing.
func TestAllocationStrategies(t *testing.T) {
	tab := allocationTable(t, 20)
	for _, c := range []string{"idle", "busy"} {
		line := c + ":"
		for _, s := range strategies {
			line += fmt.Sprintf("  %s %.0f", s, tab[c][s])
		}
		t.Log(line)
	}
	idle, busy := tab["idle"], tab["busy"]
	near := func(a, b, tol float64) bool { return a >= b*(1-tol) && a <= b*(1+tol) }
	for _, s := range []string{"optimal", "additive", "exponential"} {
		if !near(idle[s], idle["all-at-once"], 0.07) {
			t.Errorf("idle: %s %.0f CPU-s, not within 7%% of all-at-once's %.0f", s, idle[s], idle["all-at-once"])
		}
		if idle[s] < 1.15*idle["one-at-a-time"] {
			t.Errorf("idle: %s %.0f CPU-s, not 15%% above one-at-a-time's %.0f", s, idle[s], idle["one-at-a-time"])
		}
	}
	if busy["additive"] <= busy["exponential"] || busy["additive"] <= busy["one-at-a-time"] {
		t.Errorf("busy: additive %.0f does not lead exponential %.0f and one-at-a-time %.0f",
			busy["additive"], busy["exponential"], busy["one-at-a-time"])
	}
	if !near(busy["exponential"], busy["one-at-a-time"], 0.15) {
		t.Errorf("busy: exponential %.0f and one-at-a-time %.0f are not within 15%%", busy["exponential"], busy["one-at-a-time"])
	}
	if busy["all-at-once"] > 0.15*busy["additive"] {
		t.Errorf("busy: all-at-once %.0f, not far behind additive's %.0f", busy["all-at-once"], busy["additive"])
	}
}

// TestLRMTimes checks the mock against the seed's timings: the first
// worker about 40 s after the first submission, 48 one-worker requests
// all running after about 105 s.
func TestLRMTimes(t *testing.T) {
	sc := allocationScenario("one-at-a-time", idleSlots, 1)
	sc.Limit = 400
	r, err := Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	first, full := -1.0, -1.0
	for _, s := range r.Timeline {
		if s.Workers > 0 && first < 0 {
			first = s.Time
		}
		if s.Workers == 48 && full < 0 {
			full = s.Time
		}
	}
	if first < 35 || first > 45 || full < 95 || full > 125 {
		t.Errorf("first worker at %.0f s (want about 40), all 48 at %.0f s (want about 105)", first, full)
	}
}
