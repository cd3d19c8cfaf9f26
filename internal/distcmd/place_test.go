package distcmd

import (
	"context"
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
