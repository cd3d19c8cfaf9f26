package distmaster

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch/batchtest"
	"github.com/rightsize/rightsize/batch/shape"
)

// failingChooser predicts nothing.
type failingChooser struct{}

func (failingChooser) Choose(context.Context, []shape.Shape) (shape.Choice, error) {
	return shape.Choice{Index: -1}, errors.New("sbatch: not found")
}

func TestChooseShape(t *testing.T) {
	// 2 cores free for the first hour, 8 after.
	prof := shape.Profile{{Start: 0, End: time.Hour, Free: 2}, {Start: time.Hour, End: shape.Forever, Free: 8}}
	shapes := []shape.Shape{{Cores: 8, Wall: 10 * time.Minute}, {Cores: 2, Wall: 4 * time.Minute}}
	for _, tc := range []struct {
		name    string
		chooser shape.Chooser
		shapes  []shape.Shape
		cores   int
		wall    time.Duration
		limit   time.Duration
		explain string
	}{
		{"no shapes", prof.Chooser(), nil, 3, 0, maxJobTime, ""},
		{"the one that ends first", prof.Chooser(), shapes, 2, 4 * time.Minute, 2 * time.Minute, "jobs of shape 2x4m0s: of 2 candidates"},
		{"no prediction: the first", failingChooser{}, shapes, 8, 10 * time.Minute, maxJobTime, "taking the first, 8x10m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var explained bytes.Buffer
			cfg := Config{Driver: localDriver(t), WorkDir: t.TempDir(), JobCores: 3, Shapes: tc.shapes, Chooser: tc.chooser, Explain: &explained}
			if err := cfg.fill(); err != nil {
				t.Fatal(err)
			}
			cfg.chooseShape(context.Background())
			if cfg.JobCores != tc.cores || cfg.wallTime != tc.wall || cfg.jobTimeLimit() != tc.limit {
				t.Errorf("jobs of %d cores for %v, sized to %v; want %d for %v, sized to %v",
					cfg.JobCores, cfg.wallTime, cfg.jobTimeLimit(), tc.cores, tc.wall, tc.limit)
			}
			if !strings.Contains(explained.String(), tc.explain) {
				t.Errorf("explanation %q lacks %q", explained.String(), tc.explain)
			}
		})
	}
}

// TestShapedJobs: a run with shapes submits every block job with the
// chosen shape's cores and wall time, and its results are multicore's.
func TestShapedJobs(t *testing.T) {
	set := itemSet(t, 6)
	fn := openPair(t, pairScript(t, t.TempDir(), ""))
	d := &batchtest.Submissions{Driver: localDriver(t)}
	cfg := testConfig(t, d, "allpairs")
	cfg.Kind = "local"
	cfg.Shapes = []shape.Shape{{Cores: 64, Wall: time.Hour}, {Cores: 1, Wall: 30 * time.Minute}}
	cfg.Chooser = shape.Profile{{Start: 0, End: shape.Forever, Free: 2}}.Chooser()
	got, _, err := runAllPairs(context.Background(), t, cfg, AllPairs{A: set, B: set, Func: FunctionOf(fn.Info(), "", 0), Pair: fn, JobW: 3, JobH: 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := multicoreLines(t, set, set, fn, false); !slices.Equal(got, want) {
		t.Errorf("%s", firstDiff(got, want))
	}
	jobs := d.Resources()
	if len(jobs) != 4 {
		t.Errorf("%d jobs, want 4 blocks of 3×3", len(jobs))
	}
	for _, r := range jobs {
		if r.Cores != 1 || r.WallTime != 30*time.Minute {
			t.Errorf("job asked for %+v, want 1 core for 30m (64 cores never fit in 2)", r)
		}
	}
}
