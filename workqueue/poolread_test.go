package workqueue

import (
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// TestPoolDecisionReadWithinBound: a master that advertises every minute
// (the default) and is served by two workers of pool "tp" takes a new
// decision of the pool (one worker, not two) within poolReadInterval of
// its reaching the catalog, not at its next record a minute later: one
// worker is released.
func TestPoolDecisionReadWithinBound(t *testing.T) {
	cat := testutil.StartCatalog(t)
	a := startMaster(t, Config{Project: projectName(t), Catalogs: []string{cat}, AdvertiseInterval: time.Minute})
	publishPool(t, cat, poolShare{a, 2})
	for range 2 {
		startWorker(t, a, worker.Config{Cores: 1, Pool: "tp"})
	}
	waitMinute(t, "both workers of the pool connected", func() bool { return len(a.Workers()) == 2 })
	start := time.Now()
	publishPool(t, cat, poolShare{a, 1})
	bound := poolReadInterval + 2*time.Second // a read's query, on a loaded machine
	testutil.WaitFor(t, "one worker released", bound, func() bool {
		return a.Stats().WorkersReleased >= 1
	})
	t.Logf("the new decision took effect %v after it reached the catalog (bound %v)", time.Since(start).Round(time.Millisecond), poolReadInterval)
}
