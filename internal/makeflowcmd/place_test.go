package makeflowcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/model/place"
)

// fanWorkflow writes a workflow of n rules that sleep secs and write a
// number each, and one that gathers them.
func fanWorkflow(t *testing.T, dir string, n int, secs string) {
	t.Helper()
	var b strings.Builder
	var all []string
	for i := range n {
		name := "part." + string(rune('a'+i))
		all = append(all, name)
		b.WriteString(name + ":\n\tsleep " + secs + "; echo " + name + " > " + name + "\n")
	}
	b.WriteString("all: " + strings.Join(all, " ") + "\n\tcat " + strings.Join(all, " ") + " > all\n")
	if err := os.WriteFile(filepath.Join(dir, "fan.mf"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPlacementLearnsRuleTimes runs a workflow with no cluster twice,
// cleaning it between: the first run's times are assumed, the second's
// come from the first, and only the second is recorded in the history.
// The first removes the rule-cost cache of earlier versions.
func TestPlacementLearnsRuleTimes(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("RIGHTSIZE_CLUSTER", "none")
	fanWorkflow(t, dir, 3, "0.2")
	// An earlier version's cache, which this one replaces.
	old := filepath.Join(cache, "rightsize", "makeflow-rules.json")
	if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte(`{"0123": {"seconds": 5}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mf(t, dir, "--explain", "fan.mf")
	if r.code != 0 || !strings.Contains(r.err, "4 from assumed 1 s (no earlier run)") || !strings.Contains(r.err, "choice: multicore, because there is no cluster") {
		t.Fatalf("first run: %v", r)
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the earlier versions' cache is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "rightsize", "runs.jsonl")); err == nil {
		t.Error("a run on assumed times was recorded in the history")
	}
	if r := mf(t, dir, "-c", "fan.mf"); r.code != 0 {
		t.Fatalf("clean: %v", r)
	}
	r = mf(t, dir, "--explain", "fan.mf")
	if r.code != 0 || !strings.Contains(r.err, "4 from its earlier runs") || !strings.Contains(r.err, "multicore: predicted") {
		t.Fatalf("second run: %v", r)
	}
	if got := readFile(t, filepath.Join(dir, "all")); got != "part.a\npart.b\npart.c\n" {
		t.Errorf("all = %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "rightsize", "runs.jsonl")); err != nil || !strings.Contains(string(b), `"tool":"makeflow"`) {
		t.Errorf("history after the second run: %q, %v", b, err)
	}
}

// TestPlacementOnSlurm names a SLURM cluster wider than this one (the
// user's own hosts= and dispatch=) for a workflow whose times are known:
// placement sends it there, with this machine's cores taking rules too
// (hybrid) and the gathering rule, shorter than a dispatch, kept here; the
// run on the real SLURM gives the right result.
func TestPlacementOnSlurm(t *testing.T) {
	testutil.NeedBatchSystem(t, "slurm")
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	fanWorkflow(t, dir, 6, "2")
	t.Setenv("RIGHTSIZE_CLUSTER", "none")
	if r := mf(t, dir, "--verbose", "fan.mf"); r.code != 0 {
		t.Fatalf("first run, to learn the rules' times: %v", r)
	} else if w := "makeflow: placement: multicore: predicted"; !strings.Contains(r.err, w) {
		// --verbose says the choice to stay here, which is otherwise silent.
		t.Errorf("--verbose: stderr lacks %q:\n%s", w, r.err)
	}
	mf(t, dir, "-c", "fan.mf")
	// A dispatch far longer than the gathering rule, however loaded the
	// machine was when its time was learned, and far shorter than the
	// rules it gathers.
	t.Setenv("RIGHTSIZE_CLUSTER", "slurm hosts=8 cores=1 dispatch=0.5")
	r := mf(t, dir, "--explain", "fan.mf")
	for _, want := range []string{"hosts           8 (RIGHTSIZE_CLUSTER)", "rules kept here, shorter than their dispatch: 1", "* hybrid", "choice: hybrid, because",
		"cores take rules too, while slurm's queue holds them"} {
		if !strings.Contains(r.err, want) {
			t.Errorf("--explain lacks %q:\n%s", want, r.err)
		}
	}
	if r.code != 0 || readFile(t, filepath.Join(dir, "all")) != "part.a\npart.b\npart.c\npart.d\npart.e\npart.f\n" {
		t.Fatalf("run on SLURM: %v", r)
	}
	checkNoSpool(t, dir)
}

func TestLocalFlag(t *testing.T) {
	if r := mf(t, t.TempDir(), "--local", "-T", "slurm", "x.mf"); r.code != 2 || !strings.Contains(r.err, "--local runs every rule here") {
		t.Errorf("--local with -T: %v", r)
	}
}

// TestPlacementOnALocalCluster learns a wide workflow's times on this
// machine, then offers it a local "cluster" (this machine's local batch
// driver standing for one) wider than this machine and quick to start
// jobs: placement sends the slow rules there, with this machine's cores
// taking them too (hybrid), and keeps the short gathering rule here; the
// next run's prediction is corrected by the first's. --local keeps every
// rule here whatever the models say; --verbose says the choice to stay here.
func TestPlacementOnALocalCluster(t *testing.T) {
	const width = 16
	if runtime.NumCPU() > width/2 {
		t.Skipf("%d CPUs: this machine is about as wide as the workflow, the cluster would not be faster", runtime.NumCPU())
	}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	fanWorkflow(t, dir, width, "0.2")
	var all strings.Builder
	for i := range width {
		fmt.Fprintf(&all, "part.%c\n", 'a'+i)
	}
	t.Setenv("RIGHTSIZE_CLUSTER", "none")
	if r := mf(t, dir, "--verbose", "fan.mf"); r.code != 0 {
		t.Fatalf("first run, to learn the rules' times: %v", r)
	} else if w := "makeflow: placement: multicore: predicted"; !strings.Contains(r.err, w) {
		// --verbose says the choice to stay here, which is otherwise silent.
		t.Errorf("--verbose: stderr lacks %q:\n%s", w, r.err)
	}
	t.Setenv("RIGHTSIZE_CLUSTER", "local hosts=32 dispatch=0.01")
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string // in standard error
		not   []string
		mode  string // recorded; "" for none
	}{
		{name: "explained", flags: []string{"--explain"},
			want: []string{"17 from its earlier runs (1 run each, the last ", "cluster         local (RIGHTSIZE_CLUSTER)",
				"* hybrid", "rules kept here, shorter than their dispatch: 1", "choice: hybrid, because predicted",
				fmt.Sprintf("this machine's %d cores take rules too", runtime.NumCPU()), "hybrid: predicted "},
			mode: "hybrid"},
		{name: "quiet", want: []string{"makeflow: placement: hybrid: predicted", "on local (RIGHTSIZE_CLUSTER); --explain says more"},
			not: []string{"inputs:"}, mode: "hybrid"},
		{name: "corrected", flags: []string{"--explain"},
			want: []string{"17 from its earlier runs (3 runs each, the last ", "from 2 earlier runs, spread"}, mode: "hybrid"},
		// -T local runs on the local "cluster" RIGHTSIZE_CLUSTER names.
		{name: "forced there", flags: []string{"-T", "local", "--explain"},
			want: []string{"cluster         local (-T, with the settings of RIGHTSIZE_CLUSTER)", "choice: distributed, because -T local asks for it"},
			not:  []string{"take rules too"}, mode: "distributed"},
		{name: "forced hybrid", flags: []string{"-T", "local", "--hybrid", "--explain"},
			want: []string{"choice: hybrid, because -T local asks for it", "take rules too"}, mode: "hybrid"},
		{name: "forced here", flags: []string{"--local"}, not: []string{"placement"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := mf(t, dir, "-c", "fan.mf"); r.code != 0 {
				t.Fatalf("clean: %v", r)
			}
			before := runHistory(t, cache)
			r := mf(t, dir, append(tc.flags, "fan.mf")...)
			if r.code != 0 || readFile(t, filepath.Join(dir, "all")) != all.String() {
				t.Fatalf("run: %v", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.err, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.err)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(r.err, w) {
					t.Errorf("stderr has %q:\n%s", w, r.err)
				}
			}
			recs := runHistory(t, cache)[len(before):]
			switch {
			case tc.mode == "" && len(recs) != 0:
				t.Errorf("recorded %+v", recs)
			case tc.mode != "" && (len(recs) != 1 || recs[0].Mode != tc.mode || recs[0].Backend != "local"):
				t.Errorf("recorded %+v, want one %s run on local", recs, tc.mode)
			}
		})
	}
}

// runHistory returns the run history's records.
func runHistory(t *testing.T, cache string) []place.Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cache, "rightsize", "runs.jsonl"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var recs []place.Record
	for line := range strings.Lines(string(b)) {
		var r place.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestHybridOnWorkQueue: placement on a Work Queue cluster with no
// worker connected yet chooses hybrid, and the master's own worker (this
// machine's cores) runs the rules.
func TestHybridOnWorkQueue(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	dir := t.TempDir()
	fanWorkflow(t, dir, 8, "0.2")
	t.Setenv("RIGHTSIZE_CLUSTER", "none")
	if r := mf(t, dir, "--verbose", "fan.mf"); r.code != 0 {
		t.Fatalf("first run, to learn the rules' times: %v", r)
	} else if w := "makeflow: placement: multicore: predicted"; !strings.Contains(r.err, w) {
		// --verbose says the choice to stay here, which is otherwise silent.
		t.Errorf("--verbose: stderr lacks %q:\n%s", w, r.err)
	}
	if r := mf(t, dir, "-c", "fan.mf"); r.code != 0 {
		t.Fatalf("clean: %v", r)
	}
	t.Setenv("RIGHTSIZE_CLUSTER", "wq port="+freePort(t)+" hosts=8 cores=2")
	r := mf(t, dir, "fan.mf")
	if r.code != 0 || readFile(t, filepath.Join(dir, "all")) == "" {
		t.Fatalf("run: %v", r)
	}
	for _, w := range []string{"makeflow: placement: hybrid: predicted", "cores take tasks too, as a worker of this master"} {
		if !strings.Contains(r.err, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.err)
		}
	}
	// The first run, on assumed times, is not recorded.
	if recs := runHistory(t, cache); len(recs) != 1 || recs[0].Mode != "hybrid" || recs[0].Backend != "wq" {
		t.Errorf("recorded %+v, want the second run, hybrid on wq", recs)
	}
}

// TestHybridKeepsShortRulesHere: on a first run the rules' times are
// assumed (1 s), so placement picks hybrid on a cluster with a 3 s
// dispatch; the rules take milliseconds, this machine's cores finish each
// before the cluster could start it, and none reaches the cluster's queue.
// Slow rules on a quick cluster do go there. A hybrid run that -T local
// --hybrid forces holds its rules so too.
func TestHybridKeepsShortRulesHere(t *testing.T) {
	if runtime.NumCPU() > 8 {
		t.Skipf("%d CPUs: the first run would stay here", runtime.NumCPU())
	}
	for _, tc := range []struct {
		name, secs, cluster string
		forced              bool // -T local --hybrid: the same hold, without a decision
		want                string
	}{
		{"short rules, slow cluster", "0", "local hosts=16 dispatch=3", false, ", 0 on local"},
		{"slow rules, quick cluster", "0.5", "local hosts=16 dispatch=0.01", false, "(0 of them taken from local's queue)"},
		{"short rules, slow cluster, forced", "0", "local hosts=16 dispatch=3", true, ", 0 on local"},
		{"slow rules, quick cluster, forced", "0.5", "local hosts=16 dispatch=0.01", true, "(0 of them taken from local's queue)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			t.Setenv("XDG_CONFIG_HOME", t.TempDir())
			t.Setenv("RIGHTSIZE_CLUSTER", tc.cluster)
			dir := t.TempDir()
			fanWorkflow(t, dir, 24, tc.secs)
			args, chose := []string{"--explain", "fan.mf"}, "choice: hybrid"
			if tc.forced {
				// --verbose rather than --explain: a forced hybrid run measures
				// the cluster for its hold whether or not it is asked
				// to say so.
				args, chose = []string{"-T", "local", "--hybrid", "--verbose", "fan.mf"}, "hybrid: predicted"
			}
			r := mf(t, dir, args...)
			if r.code != 0 {
				t.Fatalf("run: %v", r)
			}
			for _, w := range []string{chose, tc.want} {
				if !strings.Contains(r.err, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.err)
				}
			}
			if tc.secs != "0" && strings.Contains(r.err, ", 0 on local") {
				t.Errorf("slow rules: none ran on the cluster:\n%s", r.err)
			}
		})
	}
}
