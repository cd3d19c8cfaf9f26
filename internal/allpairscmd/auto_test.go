package allpairscmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/model/place"
)

// napItems writes n one-line items into a new directory.
func napItems(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("i%02d", i)), []byte{byte('a' + i)}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// history reads the run records the commands appended under cache.
func history(t *testing.T, cache string) []place.Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cache, "rightsize", "runs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []place.Record
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r place.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("history line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestPlacement runs the real command with no placement flag (or -T) on
// clusters named in RIGHTSIZE_CLUSTER: this machine's local batch driver
// standing for one, with a function that sleeps, so that its slots are
// real. Each decision is checked in --explain's words, the result against
// the function's, and the run's record in the history.
func TestPlacement(t *testing.T) {
	nap := testutil.BuildProgram(t, "../../bench/csrc/nap.c")
	for _, tc := range []struct {
		name    string
		cluster string
		napMS   int
		items   int
		flags   []string
		want    []string // in standard error
		mode    string   // recorded; "" for a run too short to say
		probed  bool     // a probe job measured the dispatch
		needs   string   // a batch system the case runs on
	}{
		{name: "no cluster", cluster: "none", napMS: 20, items: 4, flags: []string{"-v"},
			want: []string{"allpairs: placement: multicore: predicted", "there is no cluster"}, mode: "multicore"},
		{name: "tiny problem, a cluster", cluster: "local hosts=8", napMS: 1, items: 2, flags: []string{"--explain"},
			want: []string{"* multicore", "choice: multicore, because", "dispatch        0.02 s (assumed: nothing measured yet)", "job cost        0.05 s (assumed"}},
		{name: "slow cells, a wide cluster", cluster: "local hosts=8 delay=0.05", napMS: 200, items: 6, flags: []string{"--explain"},
			want: []string{"hosts           8 (RIGHTSIZE_CLUSTER)", "(probe job", "* hybrid", "choice: hybrid, because predicted",
				"this machine's ", "cores take jobs too", "as placement chose", "done here (", "hybrid: predicted"},
			mode: "hybrid", probed: true},
		{name: "forced", cluster: "local hosts=8", napMS: 100, items: 3, flags: []string{"--explain", "-T", "local"},
			want: []string{"* distributed", "-T local asks for it (the models chose "}, mode: "distributed", probed: true},
		// This machine's SLURM has one node of two cores: each job takes
		// both (the multicore node option).
		{name: "jobs of whole nodes", cluster: "slurm", napMS: 1, items: 4, flags: []string{"--explain", "-T", "slurm"},
			want: []string{"cores per host  2 (sinfo)", "2 cores each, on 1 of 1 hosts", "distributed: predicted"}, mode: "distributed", probed: true, needs: "slurm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needs != "" {
				testutil.NeedBatchSystem(t, tc.needs)
			}
			cache := t.TempDir()
			t.Setenv("XDG_CACHE_HOME", cache)
			t.Setenv("XDG_CONFIG_HOME", t.TempDir())
			t.Setenv("RIGHTSIZE_CLUSTER", tc.cluster)
			t.Setenv("NAP_MS", fmt.Sprint(tc.napMS))
			dir, items := t.TempDir(), napItems(t, tc.items)
			args := append(tc.flags, "-q", "-o", "out.txt", nap, items, items)
			code, _, errs := runBinary(t, dir, args...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
			out, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
			if n := strings.Count(string(out), "\t1\n"); n != tc.items*tc.items {
				t.Errorf("%d cells of 1, want %d:\n%s", n, tc.items*tc.items, out)
			}
			_, err := os.Stat(filepath.Join(cache, "rightsize", "cluster.json"))
			if probed := err == nil; probed != tc.probed {
				t.Errorf("probe job submitted: %v, want %v", probed, tc.probed)
			}
			if tc.mode == "" {
				// Whether a run this short is recorded depends on how long
				// it took (History.Append skips those under 0.1 s).
				return
			}
			recs := history(t, cache)
			if len(recs) != 1 || recs[0].Tool != "allpairs" || recs[0].Mode != tc.mode || !(recs[0].Predicted > 0) {
				t.Errorf("history %+v, want one %s run with a prediction", recs, tc.mode)
			}
		})
	}
}

// TestPlacementLearns runs the same function twice: the second run's
// predictions are corrected by the first's record.
func TestPlacementLearns(t *testing.T) {
	nap := testutil.BuildProgram(t, "../../bench/csrc/nap.c")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("RIGHTSIZE_CLUSTER", "none")
	t.Setenv("NAP_MS", "20")
	items := napItems(t, 4)
	var errs string
	for range 2 {
		var code int
		if code, _, errs = runBinary(t, t.TempDir(), "--explain", "-q", "-o", "out.txt", nap, items, items); code != 0 {
			t.Fatalf("exit %d:\n%s", code, errs)
		}
	}
	if !strings.Contains(errs, "from 1 earlier run, spread ×1.00)") || !strings.Contains(errs, "multicore: predicted") {
		t.Errorf("the second run's --explain does not show the first run's correction:\n%s", errs)
	}
}
