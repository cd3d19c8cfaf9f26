package makeflowcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
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
func TestPlacementLearnsRuleTimes(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("RIGHTSIZE_CLUSTER", "none")
	fanWorkflow(t, dir, 3, "0.2")
	r := mf(t, dir, "--explain", "fan.mf")
	if r.code != 0 || !strings.Contains(r.err, "4 from assumed 1 s (no earlier run)") || !strings.Contains(r.err, "choice: multicore, because there is no cluster") {
		t.Fatalf("first run: %v", r)
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
	fanWorkflow(t, dir, 6, "1")
	t.Setenv("RIGHTSIZE_CLUSTER", "none")
	if r := mf(t, dir, "fan.mf"); r.code != 0 {
		t.Fatalf("first run, to learn the rules' times: %v", r)
	}
	mf(t, dir, "-c", "fan.mf")
	t.Setenv("RIGHTSIZE_CLUSTER", "slurm hosts=8 cores=1 dispatch=0.1")
	r := mf(t, dir, "--explain", "fan.mf")
	for _, want := range []string{"hosts           8 (RIGHTSIZE_CLUSTER)", "rules kept here, shorter than their dispatch: 1", "* hybrid", "choice: hybrid, because",
		"cores take rules too, while slurm's queue holds them"} {
		if !strings.Contains(r.err, want) {
			t.Errorf("--explain lacks %q", want)
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
