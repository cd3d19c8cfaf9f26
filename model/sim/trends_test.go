package sim

import (
	"fmt"
	"math"
	"testing"

	"github.com/rightsize/rightsize/model"
)

// TestWavefrontCrossover reproduces seed 000's choice between this
// machine's cores and a cluster for a Wavefront (its Fig. 3.13, with the
// Fig. 3.6 setting: 1 s cells, a 30 s dispatch latency per job, 100
// one-core nodes), running the production Wavefront block scheduler and
// distributed tracker in the simulator against the closed-form models
// (model.WavefrontMulticore, model.WavefrontDistributed): small problems
// belong on the two local cores, large ones on the cluster, and the
// simulator and the models cross over at the same size.
func TestWavefrontCrossover(t *testing.T) {
	const (
		tau   = 1.0  // s per cell
		delta = 30.0 // s of dispatch latency per job
		local = 2    // this machine's cores
		nodes = 100
	)
	simulate := func(js string) float64 {
		r := run(t, parse(t, js))
		if r.Unfinished || r.BlocksDone != r.Blocks {
			t.Fatalf("%s", r)
		}
		return r.Makespan
	}
	crossSim, crossModel := 0, 0
	t.Logf("%5s %6s %12s %12s %12s %12s", "N", "block", "model here", "sim here", "model dist", "sim dist")
	for _, n := range []int{10, 20, 30, 40, 50, 60, 70, 80, 100, 150, 200} {
		c := model.ChooseWavefront(n, local, nodes, 1, tau, delta)
		here := simulate(fmt.Sprintf(`{"scheduler": {"slow_start": -1}, "workers": [{"count": 1, "cores": %d}],
			"blocks": {"kind": "wavefront", "rows": %d, "block_rows": 1, "cell_time": %g}}`, local, n, tau))
		dist := simulate(fmt.Sprintf(`{"workers": [{"count": %d, "cores": 1, "task_cost": %g}],
			"blocks": {"kind": "wavefront", "rows": %d, "block_rows": %d, "cell_time": %g}}`, nodes, delta, n, c.Block, tau))
		t.Logf("%5d %6d %12.0f %12.0f %12.0f %12.0f", n, c.Block, c.Multicore, here, c.Cluster, dist)
		// The multicore model waits for each anti-diagonal to finish;
		// the block scheduler starts a cell as soon as its neighbours are
		// done, so a core left over on one diagonal starts the next: it
		// may only do better, by up to about N/2 rounds on two cores.
		if here > c.Multicore+1e-6 || here < c.Multicore-float64(n)/2*tau {
			t.Errorf("N=%d here: simulated %.0f s, modelled %.0f s", n, here, c.Multicore)
		}
		if math.Abs(dist-c.Cluster) > 0.02*c.Cluster {
			t.Errorf("N=%d distributed: simulated %.0f s, modelled %.0f s", n, dist, c.Cluster)
		}
		if crossSim == 0 && dist < here {
			crossSim = n
		}
		if crossModel == 0 && c.Cluster < c.Multicore {
			crossModel = n
		}
	}
	t.Logf("the cluster wins from N = %d (simulated) and N = %d (modelled)", crossSim, crossModel)
	if crossSim == 0 || crossSim != crossModel {
		t.Errorf("crossover at N = %d simulated, %d modelled", crossSim, crossModel)
	}
}

// TestWorkStealingTrend reproduces seed 001's trend (MATRIX against a
// centralised dispatcher such as Falkon, its Figs. on 256 to 160K cores):
// one-second tasks, ten per core, on four-core workers; every master
// spends 1 ms on each task (SimMatrix's model of a centralised
// dispatcher). One master's efficiency falls as the cores grow past what
// 1000 tasks/s can feed; a master per worker, all tasks submitted to the
// first and spread by work stealing, stays efficient.
func TestWorkStealingTrend(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of simulation")
	}
	type config struct {
		name    string
		masters string
	}
	configs := []config{
		{"one master", ``},
		{"a master per worker, tasks spread", `, "masters": {"count": %d}`},
		{"a master per worker, all to one, stealing", `, "masters": {"count": %d, "submit": "one", "steal": true}`},
	}
	scales := []int{256, 1024, 4096, 16384}
	eff := map[string][]float64{}
	for _, cores := range scales {
		workers := cores / 4
		for _, c := range configs {
			masters := c.masters
			if masters != "" {
				masters = fmt.Sprintf(masters, workers)
			}
			r := run(t, parse(t, fmt.Sprintf(`{"master": {"task_cost": 0.001},
				"workers": [{"count": %d, "cores": 4}],
				"tasks": [{"count": %d, "runtime": 1}]%s}`, workers, 10*cores, masters)))
			if r.Unfinished || r.Finished != 10*cores {
				t.Fatalf("%s, %d cores: %s", c.name, cores, r)
			}
			e := 10 / r.Makespan // the ideal is ten rounds of 1 s
			eff[c.name] = append(eff[c.name], e)
			t.Logf("%-44s %6d cores: makespan %8.2f s, efficiency %5.1f%%, %d steals", c.name, cores, r.Makespan, 100*e, r.Steals)
		}
	}
	one, steal := eff[configs[0].name], eff[configs[2].name]
	if one[0] < 0.85 || one[len(one)-1] > 0.2 {
		t.Errorf("one master: efficiency %.2f at %d cores, %.2f at %d; want ≥ 0.85 falling below 0.2", one[0], scales[0], one[len(one)-1], scales[len(scales)-1])
	}
	for i, e := range steal {
		if e < 0.8 {
			t.Errorf("work stealing: efficiency %.2f at %d cores; want ≥ 0.8 at every scale", e, scales[i])
		}
	}
}

// TestOneMasterWithLongerTasks is the other side of the trend: one master
// spending 1 ms a task keeps up with 16,384 cores once tasks last longer
// than about 16 s (cores × cost per task), and is efficient well beyond,
// so a master that sizes its jobs (the distributed All-Pairs and Wavefront
// do) needs no peers to steal from; only short tasks at that width do.
func TestOneMasterWithLongerTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of simulation")
	}
	const cores = 16384
	for _, tc := range []struct {
		runtime  float64
		min, max float64 // efficiency
	}{
		{1, 0, 0.1},
		{4, 0.2, 0.3},
		{16, 0.7, 0.9}, // the master just keeps up: 16 s feeds 16,000 cores
		{64, 0.9, 1},
	} {
		r := run(t, parse(t, fmt.Sprintf(`{"master": {"task_cost": 0.001},
			"workers": [{"count": %d, "cores": 4}],
			"tasks": [{"count": %d, "runtime": %g}]}`, cores/4, 4*cores, tc.runtime)))
		e := 4 * tc.runtime / r.Makespan
		t.Logf("%5.0f s tasks on %d cores, one master: efficiency %5.1f%%", tc.runtime, cores, 100*e)
		if e < tc.min || e > tc.max {
			t.Errorf("%g s tasks: efficiency %.3f, want %g to %g", tc.runtime, e, tc.min, tc.max)
		}
	}
}
