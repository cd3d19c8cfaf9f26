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
// plan deciding (D1 to D6) on the capacity the real master advertises,
// measured as it measures it (its network time shared out among
// overlapping transfers, a shared input's first copy to a worker
// included): D6 spends far less worker time than D1, at a turnaround
// close to D1's on P1 and no worse on the others. Worker time counts, as
// the seed's does, the time the workers stay idle after the last task
// until their idle timeout (the seed's D1 on P1 spent 57024 worker-seconds
// in a 209 s run of at most 200 workers).
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
			results[p][d] = cell{r.Makespan, r.WorkerSeconds + r.IdleAfterSeconds}
			line += fmt.Sprintf("  %s %5.0f s %7.0f+%5.0f w-s", d, r.Makespan, r.WorkerSeconds, r.IdleAfterSeconds)
		}
		t.Log(line)
	}
	// The seed: D6 uses 34% of D1's worker time on P1 at +22% turnaround
	// (it ramps up conservatively), and is as fast or faster on P2–P5.
	// Here: 35% at +27% on P1 (D6 254 s, the seed's 255 s; D1 200 s, the
	// link's bound, against the seed's 209 s), within ±3% on P2–P5. On
	// P4, whose bursts are shorter than the workers' 120 s idle timeout,
	// D1 keeps 108 workers on average (the seed 143; 140 with a 300 s
	// timeout) and D6 uses 60% of its worker time (the seed 42%).
	for p, row := range results {
		d1, d6 := row["D1"], row["D6"]
		share := 0.4
		if p == "P4" {
			share = 0.65
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

// TestFactoryReadsAdvertisedCapacity: the factory decides on the capacity
// the real master advertises (capacity_tasks: the workers it keeps busy,
// (t_e + t_io)/(t_io + t_think), in whole workers), with the master's
// transfer time of a task counting a shared input it sent the worker for
// the first time, as the real master times every input it sends.
func TestFactoryReadsAdvertisedCapacity(t *testing.T) {
	for _, tc := range []struct {
		name        string
		tasks       string
		first, last int
	}{
		// t_e 9 s, 1 MB in and out at 1 MB/s, 0.5 ms think:
		// 11/2.0005 = 5.5, read as 5; Eq. 4.5 would say 4.5, read as 4.
		{"own input", `{"count": 4, "runtime": 9, "input_mb": 1, "output_mb": 1}`, 5, 5},
		// The first task sends the shared 2 MB too: 12/3.0005 = 3.99;
		// the others 10/1.0005 = 9.995.
		{"shared input", `{"count": 12, "runtime": 9, "shared_input_mb": 2, "output_mb": 1}`, 3, 9},
	} {
		sc := parse(t, fmt.Sprintf(`{"master": {"bandwidth": 1}, "tasks": [%s],
			"factory": {"max": 1, "worker": {"cores": 1}, "queue_wait": 0, "decision": "D3"}}`, tc.tasks))
		r := run(t, sc)
		first := 0
		for _, s := range r.Timeline {
			if s.Capacity > 0 {
				first = s.Capacity
				break
			}
		}
		last := r.Timeline[len(r.Timeline)-1].Capacity
		if r.Finished != r.Tasks || first != tc.first || last != tc.last {
			t.Errorf("%s: %d of %d tasks; capacity read first %d, last %d; want %d, %d",
				tc.name, r.Finished, r.Tasks, first, last, tc.first, tc.last)
		}
	}
}

// TestSchedulerPrefersCachedInput: the scheduler is told of a task's shared
// input, as the real master tells it, and gives the task to a worker that
// holds it rather than to one that would need it sent.
func TestSchedulerPrefersCachedInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shared string
		sentMB float64
	}{
		// Worker 2 arrives first and takes the first task; then both are
		// idle when each later task comes, and worker 1 has the lower ID.
		{"shared input", `"shared_input_mb": 100, "shared_input": "ref"`, 100},
		{"no shared input", `"input_mb": 1`, 3},
	} {
		sc := parse(t, fmt.Sprintf(`{"workers": [{"count": 1, "arrive": 5}, {"count": 1}], "tasks": [
			{"count": 1, "runtime": 1, %[1]s},
			{"count": 1, "runtime": 1, %[1]s, "submit": 300},
			{"count": 1, "runtime": 1, %[1]s, "submit": 600}]}`, tc.shared))
		r := run(t, sc)
		if r.Finished != 3 || r.MBToWorkers != tc.sentMB {
			t.Errorf("%s: %d tasks, %g MB sent; want 3, %g MB", tc.name, r.Finished, r.MBToWorkers, tc.sentMB)
		}
	}
}

// TestIdleAfter: the factory's workers connected at the end are counted
// until their idle timeout would end them, from when each went idle.
func TestIdleAfter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tasks string
		want  float64
	}{
		{"one worker", `{"count": 1, "runtime": 10}`, 120},
		// The 5 s task's worker has been idle for 5 s at the end.
		{"two workers", `{"count": 1, "runtime": 5}, {"count": 1, "runtime": 10}`, 235},
	} {
		sc := parse(t, fmt.Sprintf(`{"tasks": [%s], "factory": {"max": 2, "worker": {"cores": 1},
			"queue_wait": 0, "idle_timeout": 120, "decision": "D1"}}`, tc.tasks))
		r := run(t, sc)
		if r.Unfinished || math.Abs(r.IdleAfterSeconds-tc.want) > 0.01 {
			t.Errorf("%s: idle after %.3f s (unfinished %v); want %g", tc.name, r.IdleAfterSeconds, r.Unfinished, tc.want)
		}
	}
}
