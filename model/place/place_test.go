package place

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rightsize/rightsize/model"
)

var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func measured(v float64, src string) Value { return Value{V: v, Source: src} }

func slurm(hosts, cores, dispatch float64) *Cluster {
	return &Cluster{
		Kind: "slurm", Named: "RIGHTSIZE_CLUSTER",
		Hosts: measured(hosts, "sinfo"), CoresPerHost: measured(cores, "sinfo"),
		Dispatch:  Value{V: dispatch, Source: "probe job", Measured: now.Add(-2 * time.Hour)},
		Bandwidth: Value{V: DefaultBandwidth},
	}
}

func TestDecideAllPairs(t *testing.T) {
	two := Machine{Cores: measured(2, "probed")}
	for _, tc := range []struct {
		name    string
		work    AllPairsWork
		cluster *Cluster
		cs      map[string]Correction
		want    Mode
		reason  string
	}{
		{"no cluster", AllPairsWork{N: 1000, M: 1000, Cells: 1e6, CellTime: measured(0.01, "s")}, nil, nil, Multicore, "no cluster"},
		{"tiny problem", AllPairsWork{N: 10, M: 10, Cells: 100, CellTime: measured(0.001, "s")}, slurm(100, 1, 2), nil, Multicore, "fastest"},
		{"big problem, wide cluster", AllPairsWork{N: 1000, M: 1000, Cells: 1e6, CellTime: measured(0.05, "s"), ItemBytes: 1e5}, slurm(100, 2, 2), nil, Hybrid, "faster than this machine"},
		{"cluster with nothing free", AllPairsWork{N: 1000, M: 1000, Cells: 1e6, CellTime: measured(0.05, "s")}, slurm(0, 2, 2), nil, Multicore, "no hosts free"},
		// One 2-core worker and a slow dispatch: not worth leaving here.
		{"one small worker, slow dispatch", AllPairsWork{N: 100, M: 100, Cells: 1e4, CellTime: measured(0.002, "s")}, slurm(1, 2, 30), nil, Multicore, "fastest"},
		// Earlier hybrid runs took 4× their prediction on this cluster
		// (its hosts are slower): multicore wins now.
		{"corrected by history", AllPairsWork{N: 200, M: 200, Cells: 4e4, CellTime: measured(0.01, "s")}, slurm(4, 1, 0.05),
			map[string]Correction{"hybrid/slurm": {Factor: 4, Runs: 3, Spread: 1.1}, "distributed/slurm": {Factor: 4, Runs: 3, Spread: 1.1}}, Multicore, "fastest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideAllPairs(tc.work, two, tc.cluster, tc.cs, now)
			if d.Mode != tc.want || !strings.Contains(d.Reason, tc.reason) {
				var b strings.Builder
				d.Explain(&b)
				t.Fatalf("chose %v (%s), want %v (%q)\n%s", d.Mode, d.Reason, tc.want, tc.reason, b.String())
			}
			if h := d.Predictions[2].Model; d.Predictions[1].Model > 0 && h > d.Predictions[1].Model*1.0001 {
				t.Errorf("hybrid model %v slower than distributed %v", h, d.Predictions[1].Model)
			}
			if d.Mode != Multicore && d.JobCells < 1 {
				t.Errorf("chose %v with no job size", d.Mode)
			}
			if tc.cluster.Slots() > 0 && tc.work.Cells > 100 {
				d.Force(Distributed, "-T slurm asks for it")
				if d.Mode != Distributed || d.JobCells < 1 || d.Block != 0 || !strings.HasPrefix(d.Reason, "-T slurm asks for it") {
					t.Errorf("forced: %v, %d cells a job, block %d, %q", d.Mode, d.JobCells, d.Block, d.Reason)
				}
			}
		})
	}
}

func TestHybridTime(t *testing.T) {
	for _, tc := range []struct {
		work, local, remote, start float64
		want                       float64
	}{
		{work: 100, local: 2, remote: 0, start: 1, want: 50}, // no cluster
		{work: 10, local: 2, remote: 8, start: 10, want: 5},  // done before the cluster starts
		{work: 100, local: 2, remote: 8, start: 0, want: 10}, // all at once
		{work: 100, local: 2, remote: 8, start: 5, want: 14}, // 10 core-seconds here first, then 10 cores share 90
	} {
		if got := hybridTime(tc.work, tc.local, tc.remote, tc.start); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("hybridTime(%+v) = %v, want %v", tc, got, tc.want)
		}
	}
}

func TestDecideWavefront(t *testing.T) {
	two := Machine{Cores: measured(2, "probed")}
	for _, tc := range []struct {
		name    string
		n       int
		tau     float64
		cluster *Cluster
		want    Mode
	}{
		{"no cluster", 500, 1, nil, Multicore},
		{"cheap cells", 100, 0.001, slurm(50, 1, 2), Multicore},
		{"costly cells, wide cluster", 200, 0.5, slurm(50, 1, 2), Hybrid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideWavefront(WavefrontWork{N: tc.n, CellTime: measured(tc.tau, "sampled")}, two, tc.cluster, nil, now)
			if d.Mode != tc.want {
				var b strings.Builder
				d.Explain(&b)
				t.Fatalf("chose %v, want %v\n%s", d.Mode, tc.want, b.String())
			}
			if d.Mode != Multicore && d.Block < 1 {
				t.Errorf("chose %v with no block size", d.Mode)
			}
			// More slots never hurt in the model.
			if h := d.Predicted(Hybrid); h > d.Predicted(Distributed)*1.0001 {
				t.Errorf("hybrid predicted %v, slower than distributed %v", h, d.Predicted(Distributed))
			}
		})
	}
}

// A hybrid Wavefront's blocks run here free of dispatch while the
// cluster's slots start a dispatch later, and a core here takes a block
// still in its dispatch: on seed 000's crossover (a 20×20 Wavefront of
// 0.2 s cells, 16 slots a second away, 2 cores here) it is predicted
// faster than either alone, and no faster than the work spread over every
// slot or the critical path allow.
func TestDecideWavefrontHybridBlocks(t *testing.T) {
	two := Machine{Cores: measured(2, "probed")}
	const n, tau = 20, 0.2
	d := DecideWavefront(WavefrontWork{N: n, CellTime: measured(tau, "sampled")}, two, slurm(16, 1, 1), nil, now)
	mc, dist, hy := d.Predicted(Multicore), d.Predicted(Distributed), d.Predicted(Hybrid)
	if hy >= min(mc, dist) {
		t.Errorf("hybrid predicted %.2f s, multicore %.2f s, distributed %.2f s: want hybrid fastest", hy, mc, dist)
	}
	if floor := max(n*n*tau/(16+2), (2*n-1)*tau); hy < floor {
		t.Errorf("hybrid predicted %.2f s, below the floor %.2f s", hy, floor)
	}
	if d.Mode != Hybrid {
		t.Errorf("chose %v, want hybrid", d.Mode)
	}
}

// A hybrid Wavefront's cores here take cells, the cluster blocks
// (model.WavefrontHybrid), on a batch system and on Work Queue alike: on
// the placement benchmark's crossovers (2 cores here, 16 slots a second
// away) it is predicted faster than multicore and than distributed, and
// the decision chooses it, in blocks small enough that several go away; a
// region too large to simulate cell by cell is predicted by its blocks.
func TestDecideWavefrontHybridCells(t *testing.T) {
	two := Machine{Cores: measured(2, "probed")}
	for _, tc := range []struct {
		name      string
		kind      string
		n         int
		tau       float64
		wantCells bool
	}{
		{"20×20 of 50 ms", "local", 20, 0.05, true},
		{"12×12 of 200 ms", "slurm", 12, 0.2, true},
		{"20×20 of 200 ms", "slurm", 20, 0.2, true},
		{"work queue", "wq", 20, 0.2, true},
		{"work queue, 80×80", "wq", 80, 0.2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := slurm(16, 1, 1)
			c.Kind = tc.kind
			d := DecideWavefront(WavefrontWork{N: tc.n, CellTime: measured(tc.tau, "sampled")}, two, c, nil, now)
			var b strings.Builder
			d.Explain(&b)
			hy := d.Predicted(Hybrid)
			if byCells := strings.Contains(b.String(), "cells on 2 cores here"); byCells != tc.wantCells {
				t.Fatalf("hybrid by cells: %v, want %v\n%s", byCells, tc.wantCells, b.String())
			}
			if hy >= min(d.Predicted(Multicore), d.Predicted(Distributed)) || d.Mode != Hybrid {
				t.Errorf("chose %v; want hybrid predicted fastest\n%s", d.Mode, b.String())
			}
			if tc.wantCells && (d.Block < 1 || d.Block >= tc.n/2) {
				t.Errorf("blocks of %d×%d for a %d×%d region: want several", d.Block, d.Block, tc.n, tc.n)
			}
		})
	}
}

// A hybrid Wavefront whose cluster gains nothing (small problems: the
// cores here reach every block before a dispatch of a second ends) is
// planned to send no block, rather than blocks that the cores take back
// from the queue, each a submission and a removal on the batch system.
func TestDecideWavefrontHybridSendsNothingForNothing(t *testing.T) {
	two := Machine{Cores: measured(2, "probed")}
	for _, tc := range []struct {
		n   int
		tau float64
	}{{6, 0.05}, {6, 0.2}, {12, 0.05}} {
		t.Run(fmt.Sprintf("%d×%d of %g s", tc.n, tc.n, tc.tau), func(t *testing.T) {
			d := DecideWavefront(WavefrontWork{N: tc.n, CellTime: measured(tc.tau, "sampled")}, two, slurm(16, 1, 1), nil, now)
			if hb := d.blocks[Hybrid]; hb != tc.n {
				var b strings.Builder
				d.Explain(&b)
				t.Errorf("hybrid in blocks of %d×%d, want the whole region\n%s", hb, hb, b.String())
			}
		})
	}
}

// A hybrid run's share here is done in the master's process, on a batch
// system and on Work Queue (by the master's own worker) alike, so a costly
// job (a slow program start) costs this machine's cores nothing: hybrid is
// then never predicted much slower than multicore.
func TestHybridJobCostHere(t *testing.T) {
	two := Machine{Cores: measured(2, "probed")}
	costly := func(kind string) *Cluster {
		c := slurm(16, 1, 1)
		c.Kind, c.JobCost = kind, measured(0.5, "measured in a run")
		return c
	}
	for _, tc := range []struct {
		name    string
		kind    string
		decide  func(c *Cluster) Decision
		atMost  float64 // hybrid / multicore
		atLeast float64
	}{
		{"allpairs, batch", "slurm", func(c *Cluster) Decision {
			return DecideAllPairs(AllPairsWork{N: 6, M: 6, Cells: 36, CellTime: measured(0.05, "s")}, two, c, nil, now)
		}, 1.0001, 0},
		{"wavefront, batch", "local", func(c *Cluster) Decision {
			return DecideWavefront(WavefrontWork{N: 20, CellTime: measured(0.05, "s")}, two, c, nil, now)
		}, 1.1, 0},
		{"allpairs, work queue", "wq", func(c *Cluster) Decision {
			return DecideAllPairs(AllPairsWork{N: 6, M: 6, Cells: 36, CellTime: measured(0.05, "s")}, two, c, nil, now)
		}, 1.0001, 0},
		{"wavefront, work queue", "wq", func(c *Cluster) Decision {
			return DecideWavefront(WavefrontWork{N: 20, CellTime: measured(0.05, "s")}, two, c, nil, now)
		}, 1.1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.decide(costly(tc.kind))
			r := d.Predicted(Hybrid) / d.Predicted(Multicore)
			if r > tc.atMost || r < tc.atLeast {
				var b strings.Builder
				d.Explain(&b)
				t.Errorf("hybrid/multicore predicted %.2f, want within [%v, %v]\n%s", r, tc.atLeast, tc.atMost, b.String())
			}
		})
	}
}

func TestExplainSaysWhereInputsCameFrom(t *testing.T) {
	d := DecideAllPairs(AllPairsWork{N: 1000, M: 1000, Cells: 1e6, CellTime: measured(0.05, "sampled here: 20 calls")},
		Machine{Cores: measured(2, "probed")}, slurm(100, 2, 2),
		map[string]Correction{"hybrid/slurm": {Factor: 1.5, Runs: 2, Spread: 1.05}}, now)
	var b strings.Builder
	d.Explain(&b)
	for _, want := range []string{
		"cell time", "sampled here: 20 calls",
		"dispatch", "probe job, 2 h old",
		"bandwidth", "assumed: nothing measured yet",
		"×1.50 from 2 earlier runs",
		"* hybrid", "choice: hybrid, because", "no faster than the hybrid run, as ×1.50 from 2 earlier runs", // distributed is bounded by hybrid's runs
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("--explain lacks %q:\n%s", want, b.String())
		}
	}
}

func TestHistory(t *testing.T) {
	h := History{Path: filepath.Join(t.TempDir(), "sub", "runs.jsonl")}
	key := Key("builtin:bytediff", "")
	for _, r := range []Record{
		{Tool: "allpairs", Key: key, Mode: "multicore", Predicted: 10, Measured: 20},
		{Tool: "allpairs", Key: key, Mode: "multicore", Predicted: 10, Measured: 5},
		{Tool: "allpairs", Key: key, Mode: "hybrid", Backend: "wq", Predicted: 10, Measured: 12},
		{Tool: "allpairs", Key: "other", Mode: "multicore", Predicted: 10, Measured: 100},
		{Tool: "allpairs", Key: key, Mode: "multicore", Predicted: 10, Measured: 0.01}, // too short to say anything
	} {
		if err := h.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	// A torn last line, as a killed run might leave.
	f, _ := os.OpenFile(h.Path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"tool":"allpairs","key":"` + key + `","mo`)
	f.Close()
	cs, err := h.Corrections("allpairs", key)
	if err != nil {
		t.Fatal(err)
	}
	mc := cs[CorrectionKey(Multicore, "wq")]
	if mc.Runs != 2 || math.Abs(mc.Factor-1) > 1e-9 || math.Abs(mc.Spread-math.Exp(math.Ln2*math.Sqrt2)) > 1e-9 {
		t.Errorf("multicore correction %+v, want ×1 (geometric mean of 2 and 0.5) from 2 runs, spread ×2.67 (sample standard deviation of the logs)", mc)
	}
	if hy := cs[CorrectionKey(Hybrid, "wq")]; hy.Runs != 1 || math.Abs(hy.Factor-1.2) > 1e-9 {
		t.Errorf("hybrid correction %+v, want ×1.2 from 1 run", hy)
	}
	if len(cs) != 2 {
		t.Errorf("corrections %v, want multicore and hybrid/wq only", cs)
	}
}

// TestHistoryCompacts: a history past MaxBytes keeps only what corrections
// use, the latest runs of each group, and corrects as the whole one did.
func TestHistoryCompacts(t *testing.T) {
	h := History{Path: filepath.Join(t.TempDir(), "runs.jsonl"), MaxBytes: 3000}
	var all []Record
	for i := range 60 {
		r := Record{Time: time.Unix(int64(i), 0), Tool: "makeflow", Key: "wf", Mode: "multicore", Predicted: 10, Measured: float64(5 + i)}
		if i%20 == 0 {
			r.Key = "other <&>" // escaped in JSON; found all the same
		}
		all = append(all, r)
		if err := h.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(h.Path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 3000 {
		t.Errorf("history of %d bytes, past MaxBytes 3000", st.Size())
	}
	for _, key := range []string{"wf", "other <&>"} {
		recs, err := h.Records("makeflow", key)
		if err != nil {
			t.Fatal(err)
		}
		var want []Record
		for _, r := range all {
			if r.Key == key {
				want = append(want, r)
			}
		}
		got, exp := Corrections(recs)[CorrectionKey(Multicore, "")], Corrections(want)[CorrectionKey(Multicore, "")]
		if got.Runs != exp.Runs || math.Abs(got.Factor-exp.Factor) > 1e-9 || math.Abs(got.Spread-exp.Spread) > 1e-9 {
			t.Errorf("%s: correction %+v after compacting, %+v from every run", key, got, exp)
		}
	}
}

func TestNewSample(t *testing.T) {
	flat := NewSample([]float64{1, 1.1, 0.9, 1, 1}, []float64{100, 100, 100, 100, 100})
	if flat.Slope != 0 || math.Abs(flat.At(1e6)-1) > 1e-9 {
		t.Errorf("same sizes: %+v, At(1e6) = %v, want the mean", flat, flat.At(1e6))
	}
	// Time grows with size: 1 ms per kB.
	sizes := []float64{1000, 2000, 3000, 4000, 5000, 6000}
	var secs []float64
	for _, s := range sizes {
		secs = append(secs, s/1e6+0.0001)
	}
	lin := NewSample(secs, sizes)
	if got := lin.At(10000); math.Abs(got-0.0101) > 1e-6 {
		t.Errorf("linear sample At(10000) = %v, want 0.0101 (%+v)", got, lin)
	}
	if !strings.Contains(lin.Value(10000).Source, "per MB of input") {
		t.Errorf("source %q does not say the time scales with input", lin.Value(10000).Source)
	}
}

func TestDecideFlow(t *testing.T) {
	two := Machine{Cores: measured(2, "probed")}
	// A fan of n rules of secs each, then one that gathers them.
	fan := func(n int, secs float64) []model.FlowRule {
		rules := make([]model.FlowRule, n+1)
		for i := range n {
			rules[i] = model.FlowRule{Seconds: secs}
			rules[n].Parents = append(rules[n].Parents, i)
		}
		rules[n].Seconds = 0.01
		return rules
	}
	for _, tc := range []struct {
		name    string
		rules   []model.FlowRule
		cluster *Cluster
		want    Mode
		kept    int
		sendAll bool
	}{
		{"no cluster", fan(100, 60), nil, Multicore, 0, false},
		{"wide and long", fan(100, 60), slurm(50, 1, 10), Hybrid, 1, false},
		{"short rules", fan(10, 0.5), slurm(50, 1, 10), Multicore, 0, false},
		// Shorter than their dispatch, but so many that the cluster's
		// slots, once they start, take the tail: every rule is sent.
		{"many short rules", fan(100, 0.5), slurm(50, 1, 10), Hybrid, 0, false},
		{"work queue", fan(100, 60), &Cluster{Kind: "wq", Hosts: measured(10, "the catalog"), CoresPerHost: measured(4, "the catalog"),
			Dispatch: measured(0.05, "probed"), JobCost: measured(0.05, "probed"), Bandwidth: measured(1e8, "assumed")}, Hybrid, 1, false},
		{"a chain gains nothing", []model.FlowRule{{Seconds: 60}, {Seconds: 60, Parents: []int{0}}}, slurm(50, 1, 10), Multicore, 0, false},
		// -T without --auto-local: the short gathering rule goes too.
		{"sent all", fan(100, 60), slurm(50, 1, 10), Hybrid, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideFlow(FlowWork{Rules: tc.rules, Estimates: "given", SendAll: tc.sendAll}, two, tc.cluster, nil, now)
			kept := 0
			for _, k := range d.KeepHere {
				if k {
					kept++
				}
			}
			if d.Mode != tc.want || kept != tc.kept {
				var b strings.Builder
				d.Explain(&b)
				t.Fatalf("chose %v keeping %d rules here, want %v keeping %d\n%s", d.Mode, kept, tc.want, tc.kept, b.String())
			}
		})
	}
}

func TestHybridJobCells(t *testing.T) {
	for _, tc := range []struct {
		name               string
		total              int64
		cells, slots       int
		cellTime, dispatch float64
		want               int
	}{
		// 1600 cells on 4 slots: 12 jobs of 133 cells, 1.3 s each,
		// worth a 50 ms dispatch.
		{"three jobs a slot", 1600, 400, 4, 0.01, 0.05, 133},
		// A 2 s dispatch needs jobs of 40 s: 4000 cells, as the cluster's.
		{"dispatch bounds it", 100000, 4000, 4, 0.01, 2, 4000},
		{"three jobs a slot of a larger problem", 100000, 20000, 4, 0.01, 2, 8333},
		{"never larger than the cluster's", 1600, 100, 4, 0.01, 0.05, 100},
		{"at least a cell", 2, 1, 8, 0.01, 0, 1},
	} {
		if got := hybridJobCells(tc.total, tc.cells, tc.slots, tc.cellTime, tc.dispatch); got != tc.want {
			t.Errorf("%s: %d cells a job, want %d", tc.name, got, tc.want)
		}
	}
}

func TestSampleCallsRunsInParallel(t *testing.T) {
	const parallel, maxSamples = 3, 50
	// The first round's calls wait for each other: the sample finishes
	// only if they run at once.
	var (
		arrived atomic.Int32
		first   = make(chan struct{})
		failed  atomic.Value
		mu      sync.Mutex
		seen    = map[int]int{}
	)
	call := func(_ context.Context, i int) (float64, error) {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		if i < parallel {
			if arrived.Add(1) == parallel {
				close(first)
			}
			select {
			case <-first:
			case <-time.After(time.Minute):
				failed.Store(fmt.Errorf("call %d: the other calls of the first round did not come", i))
			}
		}
		return 10, nil
	}
	// A huge problem: only the limit of samples stops it. The calls take
	// microseconds, so each sample after the first round is many calls.
	s := SampleCalls(context.Background(), time.Hour, 1<<50, parallel, call)
	if err := failed.Load(); err != nil {
		t.Fatal(err)
	}
	if s.Calls <= maxSamples-parallel || s.MeanBytes != 10 {
		t.Errorf("sample of %d calls on %v bytes, want more than %d (several a sample, the first round not counted) on 10", s.Calls, s.MeanBytes, maxSamples-parallel)
	}
	// Every call had inputs of its own: the indices are 0, 1, 2, … once each.
	for i := range len(seen) {
		if seen[i] != 1 {
			t.Fatalf("call %d made %d times, want once (of %d calls)", i, seen[i], len(seen))
		}
	}
	// A problem of one call: one round is more than its share, and it
	// counts.
	arrived.Store(0)
	first = make(chan struct{})
	if s := SampleCalls(context.Background(), time.Hour, 1, parallel, call); s.Calls != parallel {
		t.Errorf("sample of %d calls for a problem of one, want %d", s.Calls, parallel)
	}
}

// On Work Queue the wait a run measures beyond the send is its workers'
// connection to the master, once (Cluster.startDispatch); on a batch
// system every job waits in the queue. A Wavefront's predictions say so:
// on Work Queue they are the models' with the wait at the start, on SLURM
// with it for every block.
func TestDecideWavefrontDispatchOnce(t *testing.T) {
	const n, tau, wait, cost = 12, 0.05, 0.032, 0.031
	two := Machine{Cores: measured(2, "probed")}
	for _, tc := range []struct {
		kind        string
		start, each float64
	}{
		{"wq", wait, 0},
		{"slurm", 0, wait},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			c := slurm(8, 1, wait)
			c.Kind = tc.kind
			c.JobCost = measured(cost, "measured in a run")
			d := DecideWavefront(WavefrontWork{N: n, CellTime: measured(tau, "sampled")}, two, c, nil, now)
			limit := max(int(math.Sqrt(maxJobSeconds/tau)), 1)
			hy, _ := model.BestWavefrontHybrid(model.WavefrontHybridInputs{
				W: n, H: n, LocalCores: 2, Slots: 8, JobCores: 1,
				CellTime: tau, Dispatch: tc.each, JobCost: cost, Start: tc.start,
			}, limit)
			if got := d.Predicted(Hybrid); math.Abs(got-hy.Seconds) > 1e-9 {
				t.Errorf("hybrid predicted %.3f s, want %.3f s", got, hy.Seconds)
			}
			dist, _ := model.BestWavefrontDistributed(n, limit, 8, 1, tau, tc.each+cost)
			if got := d.Predicted(Distributed); math.Abs(got-(tc.start+dist)) > 1e-9 {
				t.Errorf("distributed predicted %.3f s, want %.3f s", got, tc.start+dist)
			}
		})
	}
}

// TestChooseMargins: to leave this machine a cluster mode must be
// predicted more than 5% faster; a distributed run must save half a
// second too, and so must a hybrid one on a cluster whose width or
// dispatch is assumed, while a hybrid run on a measured cluster, whose
// cores here work from its start, needs only the 5%.
func TestChooseMargins(t *testing.T) {
	known := func() *Cluster {
		c := slurm(8, 1, 0.03)
		c.Kind, c.Named = "wq", "RIGHTSIZE_CLUSTER"
		c.Hosts = measured(8, "RIGHTSIZE_CLUSTER")
		return c
	}
	assumedDispatch := known()
	assumedDispatch.Dispatch = Value{V: 0.05}
	assumedHosts := known()
	assumedHosts.Hosts = Value{V: 8}
	for _, tc := range []struct {
		name                string
		c                   *Cluster
		local, dist, hybrid float64
		want                Mode
		reason              string
	}{
		// The Work Queue grid's 6×6 of 50 ms: hybrid 0.71 s against 0.98 s.
		{"hybrid saves 0.3 s on a measured cluster", known(), 1.08, 1.44, 0.69, Hybrid, "needs only the 5%"},
		{"hybrid saves 0.3 s, dispatch assumed", assumedDispatch, 1.08, 1.44, 0.69, Multicore, "width or dispatch is assumed"},
		{"hybrid saves 0.3 s, hosts assumed", assumedHosts, 1.08, 1.44, 0.69, Multicore, "width or dispatch is assumed"},
		{"hybrid under 5% faster", known(), 1.0, 1.44, 0.96, Multicore, "less than 5% faster"},
		{"hybrid slower", known(), 1.0, 1.44, 1.1, Multicore, "this machine is predicted fastest"},
		{"distributed saves 0.3 s", known(), 1.08, 0.7, 0.9, Hybrid, "needs only the 5%"},
		{"distributed saves 0.3 s, hybrid too little", known(), 1.08, 0.7, 1.05, Multicore, "distributed run is predicted to save less than 0.5 s"},
		{"distributed saves 0.3 s, cluster assumed", assumedDispatch, 1.08, 0.7, 0.9, Multicore, "distributed run is predicted to save less than 0.5 s"},
		{"distributed saves 2 s", assumedDispatch, 4, 2, 2.5, Distributed, "2.0× faster"},
		{"hybrid saves 2 s, cluster assumed", assumedDispatch, 4, 2.5, 2, Hybrid, "2.0× faster than this machine alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decision{Cluster: tc.c, Predictions: []Prediction{
				{Mode: Multicore, Seconds: tc.local}, {Mode: Distributed, Seconds: tc.dist}, {Mode: Hybrid, Seconds: tc.hybrid},
			}}
			d.choose()
			if d.Mode != tc.want || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("chose %v (%s), want %v (%q)", d.Mode, d.Reason, tc.want, tc.reason)
			}
		})
	}
}

// TestDecideWavefrontSmallHybrid: the Work Queue grid's 6×6 Wavefront of
// 50 ms cells, on eight one-core workers whose dispatch and job cost
// earlier runs measured, goes hybrid (it took 0.71 s against multicore's
// 0.98 s), though it saves less than half a second.
func TestDecideWavefrontSmallHybrid(t *testing.T) {
	two := Machine{Cores: measured(2, "this machine's CPUs")}
	wq := slurm(8, 1, 0.03)
	wq.Kind, wq.Hosts = "wq", measured(8, "RIGHTSIZE_CLUSTER")
	wq.Dispatch = Value{V: 0.03, Source: "measured in a run", Measured: now.Add(-time.Minute)}
	wq.JobCost = Value{V: 0.015, Source: "measured in a run of wavefront", Measured: now.Add(-time.Minute)}
	d := DecideWavefront(WavefrontWork{N: 6, CellTime: measured(0.05, "sampled")}, two, wq, nil, now)
	if d.Mode != Hybrid || d.Block < 1 {
		var b strings.Builder
		d.Explain(&b)
		t.Fatalf("chose %v, block %d; want hybrid\n%s", d.Mode, d.Block, b.String())
	}
	if gain := d.Predicted(Multicore) - d.Predicted(Hybrid); gain >= localMinGain {
		t.Errorf("hybrid predicted to save %.2f s: not a case of the smaller gain", gain)
	}
}

// TestDecideAllPairsOnWorkQueue: on Work Queue the workers' start-up is
// paid once, not per job or per host; jobs end in rounds; and this
// machine's own worker stops taking jobs once a worker joins from here.
func TestDecideAllPairsOnWorkQueue(t *testing.T) {
	two := Machine{Cores: measured(2, "probed")}
	wq := func(startup float64, joins []float64, here float64) *Cluster {
		return &Cluster{
			Kind: "wq", Named: "RIGHTSIZE_CLUSTER",
			Hosts: measured(8, "given"), CoresPerHost: measured(1, "given"),
			Dispatch: measured(startup, "joins"), Joins: joins,
			JobCost: measured(0.05, "measured in a run"), Bandwidth: Value{V: DefaultBandwidth},
			HereWorkers: measured(here, "joins"), HereJoin: 0.01,
		}
	}
	sixBySix := AllPairsWork{N: 6, M: 6, Cells: 36, CellTime: measured(0.05, "s")}
	twelve := AllPairsWork{N: 12, M: 12, Cells: 144, CellTime: measured(0.05, "s")}
	for _, tc := range []struct {
		name        string
		w           AllPairsWork
		c           *Cluster
		distributed float64 // the model's figure
		hybrid      float64
		detail      string // in the hybrid's
	}{
		// Six jobs of 3×2 cells (0.3 s and 0.05 s of job cost) on six
		// of the eight workers, in one round, after the start-up;
		// hybrid, nine jobs of 2×2 on the eight workers and the two
		// cores here, one round.
		{"no start-up", sixBySix, wq(0, nil, 0), 0.35, 0.25, "2 cores here from the start, 8 slots after 0 s"},
		{"the start-up is paid once", sixBySix, wq(0.25, nil, 0), 0.6, 0.5, "8 slots after 0.25 s"},
		// The cores here do the whole as one job on both, 0.9 s,
		// before the workers join.
		{"a longer start-up, once", sixBySix, wq(1, nil, 0), 1.35, 0.9, "8 slots after 1 s"},
		// The workers join one by one, 0.05 s apart: nine jobs of 2×2
		// cells (0.25 s each) on the eight, each job to the first slot
		// free, an early joiner's second before a late one's first: the
		// last end at 0.6 s. Hybrid: the cores here take four of them
		// by 0.2 s.
		{"the joins as measured", sixBySix, wq(0.25, []float64{0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4}, 0), 0.6, 0.5, ""},
		// A 12×12 with workers joining after 2 s: distributed, nine jobs
		// of 5×4 items, the last of 8 cells on the first worker free.
		// Hybrid: the cores here keep taking jobs of 5×5 until 1.75 s
		// and end at 2.75 s; with workers joining from here at 0.01 s
		// they take one job of 4×4 each as the own worker connects and
		// no more, and the other seven end at 2.85 s.
		{"the cores here keep taking jobs", twelve, wq(2, nil, 0), 3.05, 2.75, "8 slots after 2 s"},
		{"the own worker drains", twelve, wq(2, nil, 8), 3.05, 2.85, "which stop taking jobs after 0.01 s (8 of the cluster's workers run here)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideAllPairs(tc.w, two, tc.c, nil, now)
			var b strings.Builder
			d.Explain(&b)
			if got := d.Predicted(Distributed); math.Abs(got-tc.distributed) > 1e-9 {
				t.Errorf("distributed predicted %v, want %v\n%s", got, tc.distributed, b.String())
			}
			if got := d.Predicted(Hybrid); math.Abs(got-tc.hybrid) > 1e-9 {
				t.Errorf("hybrid predicted %v, want %v\n%s", got, tc.hybrid, b.String())
			}
			if !strings.Contains(b.String(), tc.detail) || !strings.Contains(b.String(), "start-up") {
				t.Errorf("the explanation says no %q or no start-up:\n%s", tc.detail, b.String())
			}
		})
	}
}
