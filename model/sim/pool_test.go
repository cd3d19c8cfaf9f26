package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// poolWorkloads are seed 000's Table 4.2 workloads P1–P5 (§4.7.1): tasks
// with their input, run time and output, in batches over time. P1's tasks
// all read the same 2 MB input (the seed's capacity for P1 "first
// increases ... because the tasks all share the same input data"), and so
// do P2's and P4's, made of the same tasks; P3's and P5's inputs differ.
func poolWorkloads() map[string][]TaskGroup {
	task := func(n int, in, run, out float64, at float64) TaskGroup {
		return TaskGroup{Count: n, InputMB: in, Runtime: Dist{Kind: "const", Mean: run}, OutputMB: out,
			Submit: Dist{Kind: "const", Mean: at}}
	}
	p1 := func(n int, at float64) TaskGroup {
		return TaskGroup{Count: n, SharedInputMB: 2, SharedInput: "p1", Runtime: Dist{Kind: "const", Mean: 15},
			OutputMB: 2, Submit: Dist{Kind: "const", Mean: at}}
	}
	w := map[string][]TaskGroup{
		"P1": {p1(500, 0)},
	}
	ins, outs := []float64{3, 1, 5, 1, 10}, []float64{2, 1, 3, 1, 2}
	for i := range 5 {
		w["P2"] = append(w["P2"], p1(200, 400*float64(i)))
		w["P3"] = append(w["P3"], task(200, ins[i], 15, outs[i], 400*float64(i)))
	}
	// P4 and P5: 50 batches of 1 to 100 tasks, 1 to 50 s apart.
	rng := rand.New(rand.NewPCG(4, 5))
	at := 0.0
	for range 50 {
		n := 1 + rng.IntN(100)
		w["P4"] = append(w["P4"], p1(n, at))
		g := TaskGroup{Count: n, Submit: Dist{Kind: "const", Mean: at},
			Runtime: Dist{Kind: "uniform", Min: 5, Max: 15}, InputMB: 1 + 4*rng.Float64(), OutputMB: 1 + 4*rng.Float64()}
		w["P5"] = append(w["P5"], g)
		at += 1 + 49*rng.Float64()
	}
	return w
}

// poolScenario runs workload tasks through a factory with policy, as seed
// 000's experiment did: at most 200 one-core workers, a minute's wait in
// the batch queue, a master whose link carries 10 MB/s.
func poolScenario(tasks []TaskGroup, policy string) *Scenario {
	return &Scenario{
		Master: Master{Bandwidth: 10},
		Factory: &Factory{Max: 200, Worker: WorkerGroup{Cores: 1}, QueueWait: Dist{Kind: "const", Mean: 60},
			IdleTimeout: 120, Decision: policy},
		Tasks: tasks,
	}
}

// TestPoolDecisions reproduces seed 000's Table 4.2 with the factory's
// plan deciding (D1 to D6) and the master's capacity measured as the real
// master measures it (its network time shared out among overlapping
// transfers): D6 spends far less worker time than D1, at a turnaround
// close to D1's on P1 and no worse on the others.
func TestPoolDecisions(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of simulation")
	}
	w := poolWorkloads()
	type cell struct{ turnaround, workerTime float64 }
	results := map[string]map[string]cell{}
	for _, p := range []string{"P1", "P2", "P3", "P4", "P5"} {
		results[p] = map[string]cell{}
		line := fmt.Sprintf("%s:", p)
		for _, d := range []string{"D1", "D2", "D3", "D4", "D5", "D6"} {
			r, err := Run(context.Background(), poolScenario(w[p], d))
			if err != nil {
				t.Fatal(err)
			}
			if r.Unfinished || r.Finished != r.Tasks {
				t.Fatalf("%s %s: %s", p, d, r)
			}
			results[p][d] = cell{r.Makespan, r.WorkerSeconds}
			line += fmt.Sprintf("  %s %5.0f s %7.0f w-s", d, r.Makespan, r.WorkerSeconds)
		}
		t.Log(line)
	}
	// The seed: D6 uses 34% of D1's worker time on P1 at +22% turnaround
	// (it ramps up conservatively), and is as fast or faster on P2–P5.
	// Here: 29% at +27.5% on P1 (D6 255 s, as the seed's; D1 200 s against
	// its 209 s), within ±3% on P2–P5. P4's bursts of shared-input tasks
	// leave D6's workers idle between bursts more than the seed's (59% of
	// D1's worker time; the seed 42%), and D1's fewer (108 workers on
	// average; the seed 143).
	for p, row := range results {
		d1, d6 := row["D1"], row["D6"]
		share := 0.4
		if p == "P4" {
			share = 0.6
		}
		if d6.workerTime > share*d1.workerTime {
			t.Errorf("%s: D6 used %.0f worker-seconds, D1 %.0f", p, d6.workerTime, d1.workerTime)
		}
		limit := 1.05
		if p == "P1" {
			limit = 1.3
		}
		if d6.turnaround > limit*d1.turnaround {
			t.Errorf("%s: D6's turnaround %.0f s against D1's %.0f s", p, d6.turnaround, d1.turnaround)
		}
	}
	// P1's turnarounds are the seed's Table 4.2 within 10%, but for D4,
	// whose default capacity (20) the seed's run kept longer (294 s).
	seedP1 := map[string]float64{"D1": 209, "D2": 213, "D3": 208, "D5": 212, "D6": 255}
	for d, want := range seedP1 {
		if got := results["P1"][d].turnaround; math.Abs(got-want) > 0.1*want {
			t.Errorf("P1 %s: turnaround %.0f s, the seed's %.0f s", d, got, want)
		}
	}
}

// TestSharedInputByName: groups that name the same shared input share a
// worker's cached copy; groups without a name each send their own.
func TestSharedInputByName(t *testing.T) {
	for _, tc := range []struct {
		names  [2]string
		sentMB float64
	}{
		{[2]string{"ref", "ref"}, 100},
		{[2]string{"ref", "other"}, 200},
		{[2]string{"", ""}, 200},
	} {
		sc, err := Parse(fmt.Appendf(nil, `{"workers": [{"count": 1}], "tasks": [
			{"count": 3, "runtime": 1, "shared_input_mb": 100, "shared_input": %q},
			{"count": 3, "runtime": 1, "shared_input_mb": 100, "shared_input": %q, "submit": 10}]}`,
			tc.names[0], tc.names[1]))
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), sc)
		if err != nil {
			t.Fatal(err)
		}
		if r.Finished != 6 || r.MBToWorkers != tc.sentMB {
			t.Errorf("shared inputs %q: %d tasks, %g MB sent; want 6, %g MB", tc.names, r.Finished, r.MBToWorkers, tc.sentMB)
		}
	}
}
