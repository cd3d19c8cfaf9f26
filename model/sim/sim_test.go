package sim

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func run(t *testing.T, sc *Scenario) *Result {
	t.Helper()
	r, err := Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func parse(t *testing.T, js string) *Scenario {
	t.Helper()
	sc, err := Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestGolden runs each scenario in testdata and compares its result with
// the one recorded: a change in the scheduler's or factory's decisions
// shows up here (run with -update to accept it).
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		if strings.HasSuffix(f, "scale.json") {
			continue // BenchmarkScale
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			sc, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			got := run(t, sc).String()
			golden := strings.TrimSuffix(f, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("%s:\ngot\n%s\nwant\n%s", f, got, want)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	sc, err := Load("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	a, b := run(t, sc), run(t, sc)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs of one scenario differ:\n%s\n%s", a, b)
	}
	sc.Seed++
	if c := run(t, sc); c.Makespan == a.Makespan {
		t.Errorf("another seed gave the same makespan %g", c.Makespan)
	}
}

// TestAgainstArithmetic checks runs whose makespan can be worked out by
// hand.
func TestAgainstArithmetic(t *testing.T) {
	cases := []struct {
		name     string
		scenario string
		want     float64 // makespan, within tol
		tol      float64
	}{
		// 4 workers × 2 cores, 80 tasks of 10 s, no slow start: 10 rounds.
		{"rounds of tasks", `{"scheduler": {"slow_start": -1},
			"workers": [{"count": 4, "cores": 2}],
			"tasks": [{"count": 80, "runtime": 10}]}`, 100, 0.1},
		// Slow start: a 16-core worker holds 4, then 8, then 16 tasks:
		// rounds of 4, 8 and 16, then (64-28)/16: 3 rounds of 16 (the
		// last partly full) — 6 rounds of 1 s.
		{"slow start", `{"workers": [{"count": 1, "cores": 16}],
			"tasks": [{"count": 64, "runtime": 1}]}`, 6, 0.1},
		// 100 MB each to 1000 tasks of no time over a 100 MB/s master
		// link: the interface carries one at a time, 1000 s.
		{"the master's link", `{"master": {"bandwidth": 100},
			"workers": [{"count": 50, "cores": 4, "bandwidth": 1000}],
			"tasks": [{"count": 1000, "runtime": 0, "input_mb": 100}]}`, 1000, 1},
		// A worker's own 10 MB/s link: each of its tasks waits 10 s for
		// its 100 MB.
		{"a worker's link", `{"scheduler": {"slow_start": -1},
			"workers": [{"count": 1, "cores": 1, "bandwidth": 10}],
			"tasks": [{"count": 3, "runtime": 5, "input_mb": 100}]}`, 45, 0.1},
		// A shared input is sent once per worker: 2 workers × 500 MB at
		// 100 MB/s, then 20 rounds of 1 s.
		{"a cached input", `{"master": {"bandwidth": 100}, "scheduler": {"slow_start": -1},
			"workers": [{"count": 2, "cores": 1}],
			"tasks": [{"count": 40, "runtime": 1, "shared_input_mb": 500}]}`, 10 + 20, 5.1},
		// All-Pairs 100×100 in blocks of 10×10 (100 blocks), 0.01 s a
		// cell: 1 s a block, 4 one-core workers, no slow start: 25 rounds.
		{"all-pairs blocks", `{"scheduler": {"slow_start": -1}, "workers": [{"count": 4, "cores": 1}],
			"blocks": {"kind": "allpairs", "rows": 100, "cols": 100, "block_rows": 10, "block_cols": 10, "cell_time": 0.01}}`, 25, 0.1},
		// A wavefront of 5×5 blocks of 2 s on plenty of cores: its 9
		// diagonals one after the other.
		{"wavefront blocks", `{"workers": [{"count": 10, "cores": 1}],
			"blocks": {"kind": "wavefront", "rows": 50, "block_rows": 10, "cell_time": 0.02}}`, 18, 0.1},
		// ... and on one core, the 25 blocks in turn.
		{"wavefront blocks on one core", `{"workers": [{"count": 1, "cores": 1}],
			"blocks": {"kind": "wavefront", "rows": 50, "block_rows": 10, "cell_time": 0.02}}`, 50, 0.1},
		// The tracker keeps MaxJobs out: 2 at a time on 8 cores.
		{"max jobs", `{"scheduler": {"slow_start": -1}, "workers": [{"count": 8, "cores": 1}],
			"blocks": {"kind": "allpairs", "rows": 40, "cols": 10, "block_rows": 10, "block_cols": 10, "cell_time": 0.01, "max_jobs": 2}}`, 2, 0.1},
		// Half-speed workers take twice as long.
		{"speed", `{"workers": [{"count": 1, "cores": 1, "speed": 0.5}],
			"tasks": [{"count": 5, "runtime": 2}]}`, 20, 0.1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, parse(t, tc.scenario))
			if r.Finished != r.Tasks || math.Abs(r.Makespan-tc.want) > tc.tol {
				t.Errorf("%d of %d tasks finished by %.3f s; want all by %g ± %g\n%s", r.Finished, r.Tasks, r.Makespan, tc.want, tc.tol, r)
			}
		})
	}
}

// TestProperties checks, over varied scenarios, what must hold of any run.
func TestProperties(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		js := fmt.Sprintf(`{"seed": %d, "scheduler": {"fast_abort": %d, "keepalive_interval": 30, "keepalive_timeout": 10},
			"workers": [
				{"count": %d, "cores": %d, "arrive": {"dist": "exp", "mean": 10}},
				{"count": 3, "cores": 2, "speed": 0.3, "lifetime": {"dist": "exp", "mean": 200}, "silent": 0.5}],
			"tasks": [
				{"count": %d, "runtime": {"dist": "lognormal", "mean": 5, "sd": 3}, "input_mb": 2, "shared_input_mb": 20, "output_mb": 1, "hang": %g},
				{"count": 50, "category": "big", "cores": 2, "runtime": {"dist": "exp", "mean": 8}}]}`,
			// Attempts that hang hold their cores for ever without fast abort.
			seed, seed%2*3, 2+seed%5, 2+seed%3, 100*seed, float64(seed%2)*0.01)
		sc := parse(t, js)
		r := run(t, sc)
		tasks := 50 + 100*int(seed)
		if r.Tasks != tasks || r.Finished+r.Failed != tasks || r.Unfinished {
			t.Errorf("seed %d: %d finished, %d failed of %d; want all ended\n%s", seed, r.Finished, r.Failed, tasks, r)
		}
		if r.Utilisation <= 0 || r.Utilisation > 1 {
			t.Errorf("seed %d: utilisation %g", seed, r.Utilisation)
		}
		if r.BusyCoreSeconds > r.CoreSeconds || r.WorkerSeconds <= 0 {
			t.Errorf("seed %d: busy %g of %g core-seconds, %g worker-seconds", seed, r.BusyCoreSeconds, r.CoreSeconds, r.WorkerSeconds)
		}
		// Every task's input went out at least once, its output came back
		// once per finished task at least.
		if r.MBToWorkers < 2*float64(tasks-50) || r.MBFromWorkers < float64(r.Finished-50) {
			t.Errorf("seed %d: %g MB sent, %g MB received", seed, r.MBToWorkers, r.MBFromWorkers)
		}
		if r.Attempts < tasks {
			t.Errorf("seed %d: %d attempts for %d tasks", seed, r.Attempts, tasks)
		}
		for i := 1; i < len(r.Timeline); i++ {
			a, b := r.Timeline[i-1], r.Timeline[i]
			if b.Time < a.Time || b.Finished < a.Finished || b.Running < 0 || b.Waiting < 0 {
				t.Fatalf("seed %d: timeline goes from %+v to %+v", seed, a, b)
			}
		}
	}
}

// TestSilentDeaths: workers that vanish without a word hold their tasks
// until keepalive gives them up; the tasks then run elsewhere.
func TestSilentDeaths(t *testing.T) {
	r := run(t, parse(t, `{"scheduler": {"keepalive_interval": 20, "keepalive_timeout": 5},
		"workers": [{"count": 4, "cores": 1},
			{"count": 4, "cores": 1, "lifetime": 7, "silent": 1}],
		"tasks": [{"count": 40, "runtime": 5}]}`))
	if r.Finished != 40 || r.WorkersDied != 4 || r.WorkersDropped != 4 {
		t.Errorf("%d tasks finished, %d workers died, %d dropped; want 40, 4, 4\n%s", r.Finished, r.WorkersDied, r.WorkersDropped, r)
	}
	// The silent workers' last tasks come back only after 25 s of silence.
	if r.Makespan < 7+25 {
		t.Errorf("makespan %g: the dead workers' tasks ran before keepalive could find them", r.Makespan)
	}
}

// TestStalls: a run where nothing more can happen stops, unfinished.
func TestStalls(t *testing.T) {
	cases := []struct{ name, scenario string }{
		{"every worker dies", `{"workers": [{"count": 2, "lifetime": 3}],
			"tasks": [{"count": 10, "runtime": 5}]}`},
		{"no worker fits", `{"workers": [{"count": 2, "cores": 1}],
			"tasks": [{"count": 10, "runtime": 5}, {"count": 1, "cores": 2}]}`},
		{"attempts hang without fast abort", `{"workers": [{"count": 2, "cores": 1}],
			"tasks": [{"count": 1000, "runtime": 1, "hang": 0.05}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, parse(t, tc.scenario))
			if !r.Unfinished || !r.Stalled || r.Makespan > 10000 {
				t.Errorf("%s", r)
			}
		})
	}
}

func TestFactory(t *testing.T) {
	sc, err := Load("testdata/factory.json")
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, sc)
	if r.Finished != r.Tasks || r.JobsSubmitted == 0 || r.WorkersJoined > r.JobsSubmitted {
		t.Fatalf("%s", r)
	}
	peak := 0
	for _, s := range r.Timeline {
		peak = max(peak, s.Workers)
	}
	if peak > sc.Factory.Max {
		t.Errorf("%d workers at once, more than the factory's max %d", peak, sc.Factory.Max)
	}
	// The first wave's workers leave at their idle timeout before the
	// late tasks come, and new ones are submitted for those.
	gap := false
	for _, s := range r.Timeline {
		if s.Time > 180 && s.Time < 200 && s.Workers == 0 {
			gap = true
		}
	}
	if !gap || r.JobsSubmitted <= sc.Factory.Max {
		t.Errorf("no worker left between the waves, or no second wave (%d jobs)", r.JobsSubmitted)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ js, want string }{
		{"{\n\"tasks\": [\n{\"count\": \"ten\"}]}", `:3: "tasks[0].count" must be a whole number, not a string`},
		{"{\"tasks\": 3}", `:1: "tasks" must be a list, not a number`},
		{"{\"tasks\": [{\"count\": 1,\n\"runtime\": {\"mean\": \"x\"}}]}", `:2: "tasks[0].runtime.mean" must be a number, not a string`},
		{"{\n\"tasks\": [}", ":2: "},
		{`{"tasks": [{"count": 1}], "workers": [{"count": 1, "cores": 1}], "wrokers": []}`, `unknown key "wrokers" (did you mean "workers"?)`},
		{`{"tasks": [{"count": 1}]}`, "no workers"},
		{`{"workers": [{"count": 1}]}`, "no tasks"},
		{`{"tasks": [{"count": 1, "runtime": {"dist": "weibull"}}], "workers": [{"count": 1}]}`, `tasks[0].runtime: unknown distribution "weibull"`},
		{`{"tasks": [{"count": 1}], "workers": [{"count": 1}], "factory": {"min": 3, "max": 2}}`, "factory: min 3, max 2"},
	}
	for _, tc := range cases {
		if _, err := Parse([]byte(tc.js)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.js, err, tc.want)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.json")
	os.WriteFile(path, []byte("{\n\n\"seed\": -1}"), 0o644)
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+":3: ") {
		t.Errorf("Load = %v, want %s:3: ...", err, path)
	}
}

func TestTimelinePNG(t *testing.T) {
	sc, err := Load("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := run(t, sc).WriteTimeline(&b); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if sz := img.Bounds().Size(); sz.X < 400 || sz.Y < 200 {
		t.Errorf("timeline is %v", sz)
	}
}

func TestCancel(t *testing.T) {
	sc, err := Load("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, sc); err != context.Canceled {
		t.Errorf("Run with a cancelled context: %v", err)
	}
}

// BenchmarkScale runs the scale scenario: 10,000 workers, 1,000,000 tasks.
func BenchmarkScale(b *testing.B) {
	sc, err := Load("testdata/scale.json")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := Run(context.Background(), sc)
		if err != nil || r.Finished != r.Tasks {
			b.Fatal(err, r)
		}
	}
}

// TestBlocksSurviveDeaths: the blocks of workers that die run again, as the
// scheduler re-queues them, and every block is done; a Wavefront's blocks
// never start before the blocks they depend on.
func TestBlocksSurviveDeaths(t *testing.T) {
	for _, kind := range []string{"allpairs", "wavefront"} {
		r := run(t, parse(t, fmt.Sprintf(`{"seed": 3,
			"workers": [{"count": 3, "cores": 2}, {"count": 6, "cores": 2, "lifetime": {"dist": "exp", "mean": 30}, "silent": 0.3}],
			"blocks": {"kind": %q, "rows": 60, "cols": 60, "block_rows": 6, "block_cols": 6, "cell_time": {"dist": "exp", "mean": 0.5}, "item_mb": 1, "cell_mb": 0.001}}`, kind)))
		if r.Unfinished || r.BlocksDone != 100 || r.Blocks != 100 || r.WorkersDied == 0 || r.Attempts <= 100 {
			t.Errorf("%s: %s", kind, r)
		}
	}
}
