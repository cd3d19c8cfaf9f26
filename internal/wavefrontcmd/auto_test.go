package wavefrontcmd_test

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
)

// TestPlacement runs the real command with no placement flag and no
// cluster, then forced onto a local "cluster": each says where it ran and
// why, computes the same cells, and leaves a record in the history.
func TestPlacement(t *testing.T) {
	const n = 8
	// A function slow enough (20 ms a cell) that the runs are recorded.
	nap := testutil.BuildProgram(t, "../../bench/csrc/nap.c")
	for _, tc := range []struct {
		name    string
		cluster string
		flags   []string
		want    []string
		mode    string
	}{
		{"no cluster", "none", []string{"-v"}, []string{"wavefront: placement: multicore: predicted", "there is no cluster", "wavefront: multicore: predicted"}, `"mode":"multicore"`},
		{"forced", "local hosts=4", []string{"--explain", "-T", "local"},
			[]string{"* distributed", "-T local asks for it (the models chose ", "blocks of ", "as placement chose", "wavefront: distributed: predicted"}, `"mode":"distributed","backend":"local"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			dir := makeRdir(t, n, n)
			cmd := wavefront(t, append(tc.flags, nap, dir)...)
			cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "XDG_CONFIG_HOME="+t.TempDir(), "RIGHTSIZE_CLUSTER="+tc.cluster, "NAP_MS=20")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			clean := makeRdir(t, n, n)
			multicore := wavefront(t, "-M", nap, clean)
			multicore.Env = append(os.Environ(), "NAP_MS=0")
			if out, err := multicore.CombinedOutput(); err != nil {
				t.Fatalf("multicore run: %v\n%s", err, out)
			}
			if got, want := load(t, filepath.Join(dir, "R.matrix")), load(t, filepath.Join(clean, "R.matrix")); !maps.EqualFunc(got, want, bytes.Equal) {
				t.Errorf("%d cells, want %d, or values differ", len(got), len(want))
			}
			hist, err := os.ReadFile(filepath.Join(cache, "rightsize", "runs.jsonl"))
			if err != nil || !strings.Contains(string(hist), tc.mode) {
				t.Errorf("history %q (%v), want a record with %s", hist, err, tc.mode)
			}
		})
	}
}

// TestSampleKept: the cell that placement's sample computes (the region's
// first, the one whose inputs include the corner R.0.0) is kept, not
// computed again by the run; every other cell is computed once.
func TestSampleKept(t *testing.T) {
	const n = 4
	dir := makeRdir(t, n, n)
	log := filepath.Join(t.TempDir(), "calls")
	fn := filepath.Join(t.TempDir(), "logged.sh")
	script := "#!/bin/sh\necho \"$3\" >> " + log + "\ncat \"$1\" \"$2\" | wc -c\n"
	if err := os.WriteFile(fn, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := wavefront(t, "--explain", fn, dir)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir(), "RIGHTSIZE_CLUSTER=none")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "computed 16 cells") {
		t.Errorf("summary does not count the sampled cell:\n%s", out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	first, others := 0, 0
	for line := range strings.Lines(string(b)) {
		if strings.HasSuffix(strings.TrimSpace(line), "R.0.0") {
			first++
		} else {
			others++
		}
	}
	if others != n*n-1 || first < 1 {
		t.Errorf("the first cell computed %d times, the %d others %d times in all:\n%s", first, n*n-1, others, out)
	}
	// The run's result is a whole-run's.
	clean := makeRdir(t, n, n)
	if out, err := wavefront(t, "-M", fn, clean).CombinedOutput(); err != nil {
		t.Fatalf("multicore run: %v\n%s", err, out)
	}
	if got, want := load(t, filepath.Join(dir, "R.matrix")), load(t, filepath.Join(clean, "R.matrix")); !maps.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("%d cells, want %d, or values differ", len(got), len(want))
	}
}
