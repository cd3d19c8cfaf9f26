package distcmd

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/model/cluster"
	"github.com/rightsize/rightsize/model/place"
)

// transferred is a driver that reports its transfers.
type transferred struct {
	batch.Driver
	bytes int64
	took  time.Duration
}

func (d transferred) Transferred() (int64, time.Duration) { return d.bytes, d.took }

// TestSaveBandwidth: a run's transfers are kept as the cluster's
// bandwidth when there were enough of them to say.
func TestSaveBandwidth(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("RIGHTSIZE_CLUSTER", "wq hosts=2")
	bandwidth := func() place.Value {
		c, err := cluster.Find(context.Background(), cluster.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Bandwidth
	}
	SaveBandwidth("wq", transferred{bytes: 1000, took: time.Millisecond})
	if b := bandwidth(); !b.Assumed() {
		t.Errorf("a kilobyte measured the bandwidth: %+v", b)
	}
	SaveBandwidth("wq", transferred{bytes: 200 << 20, took: 2 * time.Second})
	if b := bandwidth(); b.V != 100<<20 || b.Source != "measured in a run" {
		t.Errorf("bandwidth %+v, want 100 MiB/s measured in a run", b)
	}
	// A driver that moves no data (a shared filesystem) says nothing.
	SaveBandwidth("slurm", struct{ batch.Driver }{})
}

// TestSaveDispatch: a Work Queue run's least dispatch is kept as the
// cluster's, which no probe job measures; a batch system's is the probe
// job's to measure, and nothing measured keeps nothing.
func TestSaveDispatch(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		least time.Duration
		want  place.Value // Source "" means still assumed
	}{
		{"wq", 12 * time.Millisecond, place.Value{V: 0.012, Source: "measured in a run"}},
		{"wq", 0, place.Value{V: 0.05}},
		{"sge", 3 * time.Second, place.Value{V: 5}},
	} {
		t.Run(tc.kind+" "+tc.least.String(), func(t *testing.T) {
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			t.Setenv("RIGHTSIZE_CLUSTER", tc.kind+" hosts=2")
			f := Flags{BatchType: tc.kind}
			f.SaveDispatch(tc.least)
			c, err := cluster.Find(context.Background(), cluster.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Dispatch; got.V != tc.want.V || got.Source != tc.want.Source {
				t.Errorf("dispatch %v (%q), want %v (%q)", got.V, got.Source, tc.want.V, tc.want.Source)
			}
		})
	}
}

// TestSaveJobCostPerTool: a run's job cost is kept as its tool's, which
// that tool's next decision reads; another tool borrows it and says so.
func TestSaveJobCostPerTool(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("RIGHTSIZE_CLUSTER", "wq hosts=8")
	f := Flags{Tool: "wavefront", BatchType: "wq", Cluster: &place.Cluster{Kind: "wq"}}
	// Blocks of 4 cells of 50 ms took 215 ms on average: 15 ms a block.
	f.SaveJobCost(215*time.Millisecond, 4, 0.05)
	for _, tc := range []struct {
		tool, source string
	}{
		{"wavefront", "measured in a run of wavefront"},
		{"allpairs", "measured in a run of wavefront (allpairs has none of its own yet)"},
	} {
		c, err := cluster.Find(context.Background(), cluster.Options{Tool: tc.tool})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.JobCost; math.Abs(got.V-0.015) > 1e-9 || got.Source != tc.source {
			t.Errorf("%s: job cost %v (%q), want 0.015 (%q)", tc.tool, got.V, got.Source, tc.source)
		}
	}
}
